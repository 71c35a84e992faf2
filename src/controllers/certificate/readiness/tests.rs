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
                if let Some(k) = i.certificate.spec.private_key.as_mut() {
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
    input.certificate.status = Some(written);
    input.now = at("2026-02-02T00:00:00Z");
    let again = decide(&input);
    assert_eq!(again.status, None);
    assert_eq!(again.next, Next::After(Duration::from_secs(28 * DAY)));
    // A renewal time someone else wrote is corrected.
    input.certificate = with_status(input.certificate, |s| {
        s.renewal_time = Some(Time(at("2026-01-15T00:00:00Z")));
    });
    assert!(decide(&input).status.is_some());
}

#[test]
fn disabled_renewal_has_no_renewal_time_and_looks_again_at_expiry() {
    let plan = decide(&input(|i| {
        i.certificate.spec.renewal = Some(crate::api::certmanager::Renewal {
            policy: "Disabled".into(),
            ..Default::default()
        });
    }));
    let doc = plan.status.expect("a status apply");
    assert_eq!(doc["status"].get("renewalTime"), None);
    assert_eq!(plan.next, Next::After(Duration::from_secs(59 * DAY + 1)));
}
