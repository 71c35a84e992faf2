//! The request controller's decisions never panic: `decide`, `guard`, `for_step` and
//! `for_outcome` over any request, issuer, hold and clock.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;

use super::{IssuerView, Ready, RequestView, decide, guard};
use crate::api::ConditionStatus;
use crate::api::IssuerKind;
use crate::api::certmanager::RequestReason;
use crate::controllers::certificaterequest::plan::{for_outcome, for_step};
use crate::controllers::signing::testing::strategies::{chain, held, outcome, readiness};

fn at(seconds: i64) -> Timestamp {
    Timestamp::new(seconds, 0).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn ready() -> impl Strategy<Value = Ready> {
    let status = proptest::sample::select(vec![
        ConditionStatus::True,
        ConditionStatus::False,
        ConditionStatus::Unknown,
    ]);
    let reason = proptest::sample::select(vec![
        RequestReason::Issued,
        RequestReason::Pending,
        RequestReason::Failed,
        RequestReason::Denied,
        RequestReason::Other,
    ]);
    (
        status,
        reason,
        ".{0,40}",
        proptest::option::of(0i64..4_000_000_000),
    )
        .prop_map(|(status, reason, message, since)| Ready {
            status,
            reason,
            message,
            since: since.map(|s| Time(at(s))),
        })
}

fn request() -> impl Strategy<Value = RequestView> {
    (
        proptest::option::of(ready()),
        any::<(bool, bool, bool)>(),
        proptest::option::of(chain()),
        proptest::option::of(0i64..4_000_000_000),
        proptest::option::of(0i64..4_000_000_000),
        proptest::option::of(2i64..5),
    )
        .prop_map(
            |(ready, (approved, denied, invalid_request), certificate, failed, created, edited)| {
                RequestView {
                    ready,
                    approved,
                    denied,
                    invalid_request,
                    certificate,
                    failure_time: failed.map(|s| Time(at(s))),
                    created: created.map(at),
                    oversize: None,
                    edited,
                }
            },
        )
}

fn issuer() -> impl Strategy<Value = IssuerView> {
    let kind = proptest::sample::select(vec![IssuerKind::Issuer, IssuerKind::ClusterIssuer]);
    prop_oneof![
        ".{0,20}".prop_map(IssuerView::UnknownKind),
        (kind, ".{0,20}", readiness()).prop_map(|(kind, name, state)| IssuerView::Known {
            kind,
            name,
            state
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn decisions_never_panic(
        request in request(),
        issuer in issuer(),
        approval in any::<bool>(),
        held in held(),
        announced in any::<bool>(),
        outcome in outcome(),
        now in 0i64..4_000_000_000,
    ) {
        let step = guard(decide(&request, &issuer, approval), request.has_certificate(), &held);
        let _ = for_step(step, &request, &held, announced, at(now));
        let _ = for_outcome(outcome, &request, at(now));
    }

    #[test]
    fn a_request_edited_after_creation_is_never_signed(
        request in request(),
        issuer in issuer(),
        approval in any::<bool>(),
        held in held(),
    ) {
        let step = guard(decide(&request, &issuer, approval), request.has_certificate(), &held);
        prop_assert!(request.edited.is_none() || !matches!(step, super::Step::Sign(_)), "{step:?}");
    }
}
