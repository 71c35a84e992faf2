//! The CSR controller's decisions never panic: `decide`, `guard`, `for_step` and `for_outcome`
//! over any CSR, signer, issuer, access, hold and clock.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;

use super::{Access, Asks, CsrView, Invalid, decide, guard};
use crate::api::IssuerKind;
use crate::controllers::csr::plan::{for_outcome, for_step};
use crate::controllers::signing::IssuerName;
use crate::controllers::signing::testing::strategies::{held, outcome, readiness};

fn asks() -> impl Strategy<Value = Result<Asks, Invalid>> {
    prop_oneof![
        (
            any::<u64>(),
            any::<bool>(),
            proptest::collection::vec(".{0,20}", 0..3)
        )
            .prop_map(|(seconds, is_ca, usages)| Ok(Asks {
                duration: Duration::from_secs(seconds),
                is_ca,
                usages,
            })),
        ".{0,40}".prop_map(|message| Err(Invalid {
            reason: "Failed",
            message,
        })),
    ]
}

fn signer() -> impl Strategy<Value = IssuerName> {
    prop_oneof![
        ".{0,20}".prop_map(|name| IssuerName {
            kind: IssuerKind::ClusterIssuer,
            namespace: None,
            name,
        }),
        (".{0,20}", ".{0,20}").prop_map(|(namespace, name)| IssuerName {
            kind: IssuerKind::Issuer,
            namespace: Some(namespace),
            name,
        }),
    ]
}

fn access() -> impl Strategy<Value = Access> {
    proptest::sample::select(vec![
        Access::NotNeeded,
        Access::Unknown,
        Access::Allowed,
        Access::Refused,
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn decisions_never_panic(
        flags in any::<(bool, bool, bool, bool)>(),
        asks in asks(),
        signer in signer(),
        issuer in readiness(),
        access in access(),
        held in held(),
        outcome in outcome(),
        now in 0i64..4_000_000_000,
    ) {
        let (approved, denied, failed, has_certificate) = flags;
        let csr = CsrView { approved, denied, failed, has_certificate, asks };
        let now = Timestamp::new(now, 0).unwrap_or(Timestamp::UNIX_EPOCH);
        let step = guard(decide(&csr, &signer, &issuer, &access), &held);
        let _ = for_step(step, now);
        let _ = for_outcome(outcome, now);
    }
}
