use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::certificates::fixtures::{self, at};
use crate::controllers::certificate::testing::{applied_condition, event, with_condition, with_status};

const HOUR: Duration = Duration::from_secs(3600);

fn facts(f: impl FnOnce(&mut Facts)) -> Facts {
    let mut facts = Facts {
        input: fixtures::input(),
        owns_secret: true,
        backoff: (HOUR, 32 * HOUR),
    };
    f(&mut facts);
    facts
}

fn failed_once(minutes_ago: i64) -> impl FnOnce(&mut Facts) {
    move |f| {
        let when = f.input.now - k8s_openapi::jiff::SignedDuration::from_mins(minutes_ago);
        f.input.certificate = Arc::new(with_status((*f.input.certificate).clone(), |s| {
            s.last_failure_time = Some(Time(when));
            s.failed_issuance_attempts = Some(1);
        }));
    }
}

#[test]
fn trigger_table() {
    let no_secret = |f: &mut Facts| f.input.secret = None;
    struct Case {
        name: &'static str,
        facts: Facts,
        condition: Option<(&'static str, &'static str)>,
        event_reason: Option<&'static str>,
        next: Next<()>,
    }
    let rows = vec![
        Case {
            name: "up to date, no renewal time yet",
            facts: facts(|_| {}),
            condition: None,
            event_reason: None,
            next: Next::AwaitChange,
        },
        Case {
            name: "up to date: look again at status.renewalTime",
            facts: facts(|f| {
                f.input.certificate = Arc::new(with_status((*f.input.certificate).clone(), |s| {
                    s.renewal_time = Some(Time(at("2026-03-02T00:00:00Z")));
                }));
            }),
            condition: None,
            event_reason: None,
            next: Next::After(Duration::from_secs(29 * 24 * 3600)),
        },
        Case {
            name: "already issuing",
            facts: facts(|f| {
                no_secret(f);
                f.input.certificate = Arc::new(with_condition(
                    (*f.input.certificate).clone(),
                    ISSUING,
                    "True",
                    "DoesNotExist",
                    "2026-02-01T00:00:00Z",
                ));
            }),
            condition: None,
            event_reason: None,
            next: Next::AwaitChange,
        },
        Case {
            name: "another Certificate owns the Secret",
            facts: facts(|f| {
                no_secret(f);
                f.owns_secret = false;
            }),
            condition: None,
            event_reason: None,
            next: Next::After(NOT_OWNER_RECHECK),
        },
        Case {
            name: "no Secret",
            facts: facts(no_secret),
            condition: Some(("DoesNotExist", "Issuing certificate as Secret does not exist")),
            event_reason: Some("Issuing"),
            next: Next::AwaitChange,
        },
        Case {
            name: "renewal due",
            facts: facts(|f| f.input.now = at("2026-03-03T00:00:00Z")),
            condition: Some((
                "Renewing",
                "Renewing certificate as renewal was scheduled at <nil>",
            )),
            event_reason: Some("Issuing"),
            next: Next::AwaitChange,
        },
        Case {
            name: "failed 10 minutes ago, next request matches: back off 50 more minutes",
            facts: facts(|f| {
                no_secret(f);
                f.input.next_request = f.input.current_request.clone();
                failed_once(10)(f);
            }),
            condition: None,
            event_reason: None,
            next: Next::After(Duration::from_secs(50 * 60)),
        },
        Case {
            name: "failed 10 minutes ago, no next request: back off too",
            facts: facts(|f| {
                no_secret(f);
                failed_once(10)(f);
            }),
            condition: None,
            event_reason: None,
            next: Next::After(Duration::from_secs(50 * 60)),
        },
        Case {
            name: "failed 2 hours ago: the back-off is over",
            facts: facts(|f| {
                no_secret(f);
                failed_once(120)(f);
            }),
            condition: Some(("DoesNotExist", "Issuing certificate as Secret does not exist")),
            event_reason: Some("Issuing"),
            next: Next::AwaitChange,
        },
        Case {
            name: "failed 10 minutes ago but the spec changed since the request: no back-off",
            facts: facts(|f| {
                no_secret(f);
                f.input.next_request = f.input.current_request.clone();
                Arc::make_mut(&mut f.input.certificate)
                    .spec
                    .dns_names
                    .push("www.example.com".into());
                failed_once(10)(f);
            }),
            condition: Some(("DoesNotExist", "Issuing certificate as Secret does not exist")),
            event_reason: Some("Issuing"),
            next: Next::AwaitChange,
        },
    ];
    for Case {
        name,
        facts,
        condition,
        event_reason,
        next,
    } in rows
    {
        let plan = decide(&facts);
        let issuing = applied_condition(&plan, ISSUING);
        assert_eq!(
            issuing
                .as_ref()
                .map(|(s, r, m)| (s.as_str(), r.as_str(), m.as_str())),
            condition.map(|(r, m)| ("True", r, m)),
            "{name}"
        );
        assert_eq!(event(&plan).map(|e| e.1).as_deref(), event_reason, "{name}");
        assert_eq!(plan.next, next, "{name}");
    }
}

#[test]
fn the_issuing_condition_records_the_generation_and_time() {
    let mut facts = facts(|f| f.input.secret = None);
    Arc::make_mut(&mut facts.input.certificate).metadata.generation = Some(4);
    let plan = decide(&facts);
    let body = plan.status.expect("a status apply");
    assert_eq!(
        body,
        serde_json::json!({
            "apiVersion": "cert-manager.io/v1",
            "kind": "Certificate",
            "status": { "conditions": [{
                "type": "Issuing", "status": "True", "reason": "DoesNotExist",
                "message": "Issuing certificate as Secret does not exist",
                "lastTransitionTime": "2026-02-01T00:00:00Z", "observedGeneration": 4,
            }]},
        })
    );
}

fn named(name: &str, secret: &str, created: &str) -> Arc<Certificate> {
    let mut crt = fixtures::certificate(name, fixtures::spec());
    crt.spec.secret_name = secret.to_string();
    crt.metadata.namespace = Some("ns".into());
    crt.metadata.creation_timestamp = Some(Time(at(created)));
    Arc::new(crt)
}

#[test]
fn secret_ownership_table() {
    let all = vec![
        named("b", "tls", "2026-01-01T00:00:00Z"),
        named("a", "tls", "2026-01-01T00:00:00Z"),
        named("old", "tls", "2025-01-01T00:00:00Z"),
        named("alone", "own", "2026-01-01T00:00:00Z"),
    ];
    let annotated = fixtures::secret(
        &[],
        &[(crate::certificates::keys::annotation::CERTIFICATE_NAME, "b")],
    );
    let foreign = fixtures::secret(
        &[],
        &[(crate::certificates::keys::annotation::CERTIFICATE_NAME, "gone")],
    );
    let rows: [(&str, Option<&Secret>, bool); 7] = [
        ("alone", None, true),
        ("old", None, true),
        ("a", None, false),
        ("b", Some(&annotated), true),
        ("old", Some(&annotated), false),
        ("old", Some(&foreign), true),
        ("b", Some(&foreign), false),
    ];
    for (name, secret, owns) in rows {
        let crt = all.iter().find(|c| c.name_any() == name).expect("listed");
        assert_eq!(owns_secret(crt, &all, secret), owns, "{name} {secret:?}");
    }
}

/// Two requests for the current revision (one replaced, still in the cache): the current one
/// is the request whose certificate the Secret holds, so the trigger does not issue again.
#[test]
fn the_current_request_is_the_one_the_secret_holds() {
    use crate::certificates::keys::{annotation, data};
    use crate::pki::keys::KeySpec;
    let input = fixtures::input();
    let revision = |mut cr: crate::api::certmanager::CertificateRequest, name: &str| {
        cr.metadata.name = Some(name.into());
        cr.metadata.annotations =
            Some([(annotation::CERTIFICATE_REVISION.to_string(), "1".to_string())].into());
        cr
    };
    let replaced = revision(
        fixtures::request_for(&input.certificate.spec, fixtures::key(KeySpec::Ecdsa(256), true)),
        "old",
    );
    let mut current = revision(
        (*input.current_request.clone().expect("a request")).clone(),
        "new",
    );
    let held = input
        .secret
        .as_ref()
        .and_then(|s| s.data.as_ref())
        .and_then(|d| d.get(data::TLS_CRT))
        .cloned();
    current.status = Some(crate::api::certmanager::CertificateRequestStatus {
        certificate: held,
        ..Default::default()
    });
    let crt = Arc::new(with_status((*input.certificate).clone(), |s| {
        s.revision = Some(1);
    }));
    let requests = vec![Arc::new(replaced), Arc::new(current)];
    let chosen = crate::controllers::certificate::observe::chain_input(
        &crt,
        input.secret.clone(),
        &requests,
        input.now,
    );
    assert_eq!(
        chosen
            .current_request
            .clone()
            .and_then(|cr| cr.metadata.name.clone()),
        Some("new".to_string())
    );
    let facts = Facts {
        input: chosen,
        owns_secret: true,
        backoff: (HOUR, 32 * HOUR),
    };
    assert_eq!(decide(&facts).status, None, "nothing to issue");
    let without_secret =
        crate::controllers::certificate::observe::chain_input(&crt, None, &requests, input.now);
    assert_eq!(
        without_secret
            .current_request
            .and_then(|cr| cr.metadata.name.clone()),
        Some("old".to_string()),
        "no Secret: the first"
    );
}

/// The trigger acts on the guarded time readiness writes: a renewal cert-manager would make
/// due at issuance (renewBefore nearly the whole lifetime) waits for two thirds of the
/// validity left at issuance, and is due once that has come.
#[test]
fn a_renewal_due_at_issuance_waits_for_the_guarded_time() {
    let guarded = |now: &str, created: Option<&str>| {
        facts(|f| {
            Arc::make_mut(&mut f.input.certificate).spec.renew_before = Some("2150h".into());
            f.input.now = at(now);
            if let Some(request) = f.input.current_request.as_mut().map(Arc::make_mut) {
                request.metadata.creation_timestamp = created.map(|c| Time(at(c)));
            }
        })
    };
    let issued = Some("2026-01-01T12:00:00Z");
    // cert-manager's time 2026-01-01T10:00; the guard's 2026-03-02T04:00.
    let rows = [
        (
            "just after issuance: not due",
            "2026-01-01T12:00:05Z",
            issued,
            None,
        ),
        (
            "a second before the guarded time",
            "2026-03-02T03:59:59Z",
            issued,
            None,
        ),
        (
            "at the guarded time: renewing",
            "2026-03-02T04:00:00Z",
            issued,
            Some("Renewing"),
        ),
        (
            "no request: cert-manager's time",
            "2026-01-01T12:00:05Z",
            None,
            Some("Renewing"),
        ),
    ];
    for (row, now, created, want) in rows {
        let plan = decide(&guarded(now, created));
        let reason = applied_condition(&plan, "Issuing").map(|(_, r, _)| r);
        assert_eq!(reason.as_deref(), want, "{row}");
    }
}

fn unplaceable_window(f: &mut Facts) {
    Arc::make_mut(&mut f.input.certificate).spec.renewal = Some(Box::new(
        crate::controllers::certificate::testing::unplaceable_renewal(),
    ));
    f.input.now = at("2026-03-02T00:00:00Z");
}

/// cert-manager's trigger records the `WindowError` Warning, then, once `Issuing` is written,
/// the Normal `Issuing` Event with the condition's message.
#[test]
fn a_window_error_warns_then_posts_issuing() {
    let (warning, plan) = decide_warned(&facts(unplaceable_window));
    let window = "cannot find a time with the given windows between 2026-01-01 00:00:00 +0000 UTC and \
                  2026-04-01 00:00:00 +0000 UTC for: 2026-03-02 00:00:00 +0000 UTC";
    let message = "Renewing certificate without satisfying renewal windows at: <nil>";
    assert_eq!(
        warning.map(|w| (format!("{:?}", w.type_), w.reason.to_string(), w.note)),
        Some((
            "Warning".to_string(),
            "WindowError".to_string(),
            format!("Renewing certificate without satisfying renewal windows due to {window}"),
        ))
    );
    assert_eq!(
        event(&plan),
        Some(("Normal".to_string(), "Issuing".to_string(), message.to_string()))
    );
    assert_eq!(
        applied_condition(&plan, ISSUING),
        Some(("True".to_string(), "Renewing".to_string(), message.to_string()))
    );
}

#[test]
fn other_reasons_carry_no_warning() {
    let (warning, plan) = decide_warned(&facts(|f| f.input.secret = None));
    assert_eq!(warning, None);
    assert_eq!(event(&plan).map(|e| e.1), Some("Issuing".to_string()));
}
