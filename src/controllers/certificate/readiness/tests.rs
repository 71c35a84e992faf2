use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::certificates::fixtures::{self, at};
use crate::controllers::certificate::testing::{applied_condition, with_status};

const DAY: u64 = 24 * 3600;

/// The fixture's certificate: valid 2026-01-01 to 2026-04-01, renewal due 2026-03-02.
fn input(f: impl FnOnce(&mut Input)) -> Input {
    let mut input = fixtures::input();
    f(&mut input);
    input
}

#[test]
fn readiness_table() {
    let up_to_date = (
        "True",
        "Ready",
        "Certificate is up to date and has not expired".to_string(),
    );
    struct Case {
        name: &'static str,
        input: Input,
        condition: (&'static str, &'static str, String),
        has_times: bool,
        next: Next<()>,
    }
    let rows = vec![
        Case {
            name: "up to date: look again at the renewal time",
            input: input(|_| {}),
            condition: up_to_date.clone(),
            has_times: true,
            next: Next::After(Duration::from_secs(29 * DAY)),
        },
        Case {
            name: "renewal passed: look again just after expiry",
            input: input(|i| i.now = at("2026-03-31T00:00:00Z")),
            condition: up_to_date.clone(),
            has_times: true,
            next: Next::After(Duration::from_secs(DAY + 1)),
        },
        Case {
            name: "expired",
            input: input(|i| i.now = at("2026-04-01T00:00:01Z")),
            condition: (
                "False",
                "Expired",
                "Certificate expired on Wed, 01 Apr 2026 00:00:00 UTC".to_string(),
            ),
            has_times: true,
            next: Next::AwaitChange,
        },
        Case {
            name: "no Secret: no times",
            input: input(|i| i.secret = None),
            condition: (
                "False",
                "DoesNotExist",
                "Issuing certificate as Secret does not exist".to_string(),
            ),
            has_times: false,
            next: Next::AwaitChange,
        },
        Case {
            name: "a spec the webhook refuses",
            input: input(|i| {
                if let Some(k) = Arc::make_mut(&mut i.certificate).spec.private_key.as_mut() {
                    k.size = 100;
                }
            }),
            condition: (
                "False",
                REASON_INVALID,
                "spec.privateKey.size: Unsupported value: 100: supported values: \"256\", \"384\", \"521\""
                    .to_string(),
            ),
            has_times: true,
            next: Next::After(Duration::from_secs(29 * DAY)),
        },
    ];
    for Case {
        name,
        input,
        condition: (status, why, message),
        has_times,
        next,
    } in rows
    {
        let plan = decide(&input);
        let ready = applied_condition(&plan, READY);
        assert_eq!(
            ready,
            Some((status.to_string(), why.to_string(), message)),
            "{name}"
        );
        let doc = plan
            .status
            .as_ref()
            .map(|d| d["status"].clone())
            .unwrap_or_default();
        assert_eq!(doc.get("notAfter").is_some(), has_times, "{name}");
        assert_eq!(plan.next, next, "{name}");
    }
}

#[test]
fn the_times_come_from_the_certificate() {
    let plan = decide(&fixtures::input());
    let doc = plan.status.expect("a status apply");
    assert_eq!(doc["status"]["notBefore"], "2026-01-01T00:00:00Z");
    assert_eq!(doc["status"]["notAfter"], "2026-04-01T00:00:00Z");
    assert_eq!(doc["status"]["renewalTime"], "2026-03-02T00:00:00Z");
}

#[test]
fn nothing_is_written_when_the_status_already_says_it() {
    let first = decide(&fixtures::input());
    let written: crate::api::certmanager::CertificateStatus =
        serde_json::from_value(first.status.expect("written")["status"].clone()).expect("a status");
    let mut input = fixtures::input();
    Arc::make_mut(&mut input.certificate).status = Some(written);
    input.now = at("2026-02-02T00:00:00Z");
    let again = decide(&input);
    assert_eq!(again.status, None);
    assert_eq!(again.next, Next::After(Duration::from_secs(28 * DAY)));
    // A renewal time someone else wrote is corrected.
    input.certificate = Arc::new(with_status((*input.certificate).clone(), |s| {
        s.renewal_time = Some(Time(at("2026-01-15T00:00:00Z")));
    }));
    assert!(decide(&input).status.is_some());
}

#[test]
fn disabled_renewal_has_no_renewal_time_and_looks_again_at_expiry() {
    let plan = decide(&input(|i| {
        Arc::make_mut(&mut i.certificate).spec.renewal = Some(Box::new(crate::api::certmanager::Renewal {
            policy: "Disabled".into(),
            ..Default::default()
        }));
    }));
    let doc = plan.status.expect("a status apply");
    assert_eq!(doc["status"].get("renewalTime"), None);
    assert_eq!(plan.next, Next::After(Duration::from_secs(59 * DAY + 1)));
}

/// The fixture's certificate (2026-01-01 to 2026-04-01) with `renewBefore: 2150h`, so
/// cert-manager's renewal (2026-01-01T10:00) comes before the request's creation at 12:00.
fn due_at_issuance() -> Input {
    input(|i| {
        Arc::make_mut(&mut i.certificate).spec.renew_before = Some("2150h".into());
        if let Some(request) = i.current_request.as_mut().map(Arc::make_mut) {
            request.metadata.creation_timestamp = Some(Time(at("2026-01-01T12:00:00Z")));
        }
    })
}

#[test]
fn a_renewal_due_at_issuance_is_moved_with_one_warning() {
    let plan = decide(&due_at_issuance());
    let doc = plan.status.as_ref().expect("a status apply");
    // Two thirds of the 2148 h left at issuance.
    assert_eq!(doc["status"]["renewalTime"], "2026-03-02T04:00:00Z");
    assert_eq!(
        crate::controllers::certificate::testing::event(&plan),
        Some((
            "Warning".to_string(),
            REASON_RENEWAL_ADJUSTED.to_string(),
            "Renewal time moved from 2026-01-01T10:00:00Z to 2026-03-02T04:00:00Z: the computed time is not \
             after the certificate's issuance at 2026-01-01T12:00:00Z (its notBefore 2026-01-01T00:00:00Z is \
             backdated by the CA and renewBefore covers nearly the whole lifetime), so the certificate would be \
             re-issued in a loop; it renews at two thirds of the validity left at issuance, and at least 60s after it"
                .to_string()
        ))
    );
    assert_eq!(plan.next, Next::After(Duration::from_secs(29 * DAY + 4 * 3600)));
    // Written once: the next reconcile neither writes nor warns again.
    let written: crate::api::certmanager::CertificateStatus =
        serde_json::from_value(doc["status"].clone()).expect("a status");
    let mut again = due_at_issuance();
    Arc::make_mut(&mut again.certificate).status = Some(written);
    let plan = decide(&again);
    assert_eq!((plan.status, plan.event.is_none()), (None, true));
    // Without the request's creation the issuance is unknown: cert-manager's time.
    let mut unknown = due_at_issuance();
    unknown.current_request = None;
    let doc = decide(&unknown).status.expect("a status apply");
    assert_eq!(doc["status"]["renewalTime"], "2026-01-01T10:00:00Z");
}

#[test]
fn the_jitter_moves_the_written_renewal_time() {
    let mut jittered = input(|i| {
        Arc::make_mut(&mut i.certificate).metadata.uid = Some("6d1f1a52-5f8e-4c2b-9a77-0c3e2f1b8d41".into());
        i.renewal_jitter = "0.1".parse().expect("a jitter");
    });
    // 10 % of 90 days x 3500197394 / 2^32 = 7d 8h 1m 47.6s before 2026-03-02, truncated.
    let doc = decide(&jittered).status.expect("a status apply");
    assert_eq!(doc["status"]["renewalTime"], "2026-02-22T15:58:12Z");
    jittered.renewal_jitter = crate::certificates::renewal::Jitter::OFF;
    let doc = decide(&jittered).status.expect("a status apply");
    assert_eq!(doc["status"]["renewalTime"], "2026-03-02T00:00:00Z");
}

fn unplaceable_window(i: &mut Input) {
    Arc::make_mut(&mut i.certificate).spec.renewal = Some(Box::new(
        crate::controllers::certificate::testing::unplaceable_renewal(),
    ));
}

/// As cert-manager's readiness: a renewal time the windows cannot place sets
/// `Ready=False/WindowError` over the chain's verdict (here `Expired`), with a Warning Event of
/// the same reason and message, on each sync that finds it.
#[test]
fn a_window_error_takes_precedence_and_warns() {
    let message = "Could not calculate renewal time: cannot find a time with the given windows between \
                   2026-01-01 00:00:00 +0000 UTC and 2026-04-01 00:00:00 +0000 UTC for: 2026-03-02 00:00:00 +0000 UTC";
    for now in ["2026-02-01T00:00:00Z", "2026-04-01T00:00:01Z"] {
        let plan = decide(&input(|i| {
            unplaceable_window(i);
            i.now = at(now);
        }));
        assert_eq!(
            applied_condition(&plan, READY),
            Some((
                "False".to_string(),
                "WindowError".to_string(),
                message.to_string()
            )),
            "{now}"
        );
        assert_eq!(
            crate::controllers::certificate::testing::event(&plan),
            Some((
                "Warning".to_string(),
                "WindowError".to_string(),
                message.to_string()
            )),
            "{now}"
        );
    }
}
