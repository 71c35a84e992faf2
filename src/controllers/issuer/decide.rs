//! Issuer health as pure functions: from the credential Secret and the CA check to the `Ready`
//! condition, the Event and when to look again.

use std::convert::Infallible;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::api::{AnyIssuer, Condition, READY, ReadyReason, WritableCondition, find_condition};
use crate::cfssl::Error as CfsslError;
use crate::controllers::kit::events::{Notice, reason as event_reason};
use crate::controllers::kit::plan::{Next, Plan};
use crate::controllers::kit::status::document;
use crate::controllers::kit::status::schema::{ObservedGeneration, writes_observed_generation};
use crate::controllers::signing::{blame, signer::SecretProblem};

/// What one health check found.
#[derive(Debug)]
pub enum Observation<'a> {
    Secret(&'a SecretProblem),
    /// The issuer's own spec cannot make a client (bad URL, bad CA bundle).
    Client(&'a CfsslError),
    Check(Result<(), &'a CfsslError>),
}

/// The `Ready` condition to write and how to follow up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub ready: bool,
    pub reason: ReadyReason,
    pub message: String,
    /// Healthy issuers are re-checked at the health-check interval; the rest with backoff.
    pub retry: Retry,
    /// Ready, but over plain `http://`: its Event is a Warning (see [`transport`]).
    pub insecure: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    Interval,
    Backoff,
}

pub fn verdict(observation: Observation<'_>) -> Verdict {
    let failed = |reason, message: String| Verdict {
        ready: false,
        reason,
        message,
        retry: Retry::Backoff,
        insecure: false,
    };
    match observation {
        Observation::Check(Ok(())) => Verdict {
            ready: true,
            reason: ReadyReason::Checked,
            message: "the CA accepted the label, profile and key".into(),
            retry: Retry::Interval,
            insecure: false,
        },
        Observation::Secret(problem) => failed(problem.reason(), problem.to_string()),
        Observation::Client(err) | Observation::Check(Err(err)) => failed(blame(err), err.to_string()),
    }
}

/// A key the CA refused while the Secret also holds `additional_data`: the message says that
/// the CA must be configured with the same data, which a stock multirootca never is (it
/// builds its keys without any), so the entry is the likely cause.
pub fn additional_data(mut verdict: Verdict, in_secret: bool) -> Verdict {
    if in_secret && verdict.reason == ReadyReason::InvalidCredentials {
        verdict.message = format!(
            "{}; the Secret also has additional_data, which only a CA configured with the same data accepts (a stock multirootca never is)",
            verdict.message
        );
    }
    verdict
}

/// A Ready verdict for an issuer reached over plain `http://` (the `plaintext` URLs) says so
/// in its message, and its Event becomes a Warning: anyone on the path can read and change
/// the tokens, CSRs and certificates, or pose as the CA. Other verdicts are unchanged.
pub fn transport(mut verdict: Verdict, plaintext: &[String]) -> Verdict {
    if verdict.ready && !plaintext.is_empty() {
        verdict.message = format!(
            "{}; but {} is plain http://: the connection is not authenticated or encrypted, use https://",
            verdict.message,
            plaintext.join(", ")
        );
        verdict.insecure = true;
    }
    verdict
}

/// The plan for an issuer after a check: apply `Ready` (only what the installed schema
/// declares: the Go CRDs have no `observedGeneration`) with an Event when it changed, then look
/// again at `interval` or with backoff.
pub fn plan<K: AnyIssuer>(
    issuer: &K,
    verdict: &Verdict,
    schema: ObservedGeneration,
    now: Timestamp,
    interval: Duration,
) -> Plan<Infallible> {
    let previous = find_condition(issuer.conditions(), READY);
    let generation = issuer
        .meta()
        .generation
        .filter(|_| writes_observed_generation(schema));
    let condition = Condition::ready(verdict.reason, &verdict.message, now, None)
        .for_generation(generation)
        .with_transition_from(previous);
    let next = match verdict.retry {
        Retry::Interval => Next::After(interval),
        Retry::Backoff => Next::Backoff,
    };
    if previous == Some(&condition) {
        return Plan::idle(next);
    }
    let reason = verdict.reason.as_str();
    let event = if verdict.insecure {
        Notice::warning(event_reason::INSECURE_TRANSPORT, "Check", &verdict.message)
    } else if verdict.ready {
        Notice::normal(reason, "Check", &verdict.message)
    } else {
        Notice::warning(reason, "Check", &verdict.message)
    };
    Plan {
        status: Some(document::<K>(serde_json::json!({ "conditions": [condition] }))),
        event: Some(event),
        next,
    }
}

#[cfg(test)]
mod properties;

#[cfg(test)]
mod tests {
    use kube::runtime::events::EventType;
    use serde_json::json;

    use super::*;
    use crate::api::{Issuer, IssuerSpec};
    use crate::cfssl::{Call, Class, IssuerFault};
    use crate::controllers::signing::testing::{refused, unreachable};

    #[test]
    fn verdict_table() {
        let secret = |problem: fn(String, String) -> SecretProblem| problem("ns".into(), "creds".into());
        let missing = secret(|namespace, name| SecretProblem::NotFound { namespace, name });
        let no_key = secret(|namespace, name| SecretProblem::MissingKey {
            namespace,
            name,
            key: "key",
        });
        let not_hex = secret(|namespace, name| SecretProblem::InvalidKey {
            namespace,
            name,
            what: "not hex".into(),
        });
        let forbidden = secret(|namespace, name| SecretProblem::Unreadable {
            namespace,
            name,
            source: kube::Error::LinesCodecMaxLineLengthExceeded,
        });
        let wrong_key = refused("invalid token", Class::Issuer(IssuerFault::Credentials));
        let bad_profile = refused("invalid profile", Class::Issuer(IssuerFault::Config));
        let tls = crate::controllers::signing::testing::tls("unknown issuer");
        let down = unreachable(Call::Info);
        let bad_bundle = CfsslError::CaBundle("no PEM certificate in it".into());
        use ReadyReason::*;
        use Retry::{Backoff, Interval};
        struct Case<'a> {
            name: &'static str,
            observation: Observation<'a>,
            ready: bool,
            reason: ReadyReason,
            message: &'static str,
            retry: Retry,
        }
        let cases = vec![
            Case {
                name: "healthy",
                observation: Observation::Check(Ok(())),
                ready: true,
                reason: Checked,
                message: "the CA accepted the label, profile and key",
                retry: Interval,
            },
            Case {
                name: "secret missing",
                observation: Observation::Secret(&missing),
                ready: false,
                reason: SecretNotFound,
                message: "Secret ns/creds not found",
                retry: Backoff,
            },
            Case {
                name: "secret without key",
                observation: Observation::Secret(&no_key),
                ready: false,
                reason: InvalidCredentials,
                message: "Secret ns/creds has no \"key\" entry",
                retry: Backoff,
            },
            Case {
                name: "key not hex",
                observation: Observation::Secret(&not_hex),
                ready: false,
                reason: InvalidCredentials,
                message: "Secret ns/creds: not hex",
                retry: Backoff,
            },
            Case {
                name: "secret unreadable",
                observation: Observation::Secret(&forbidden),
                ready: false,
                reason: Pending,
                message: "cannot read Secret ns/creds: Error finding newline character",
                retry: Backoff,
            },
            Case {
                name: "wrong key",
                observation: Observation::Check(Err(&wrong_key)),
                ready: false,
                reason: InvalidCredentials,
                message: "authsign at http://ca (label \"l\") refused: invalid token (HTTP 400, code 1)",
                retry: Backoff,
            },
            Case {
                name: "unknown profile",
                observation: Observation::Check(Err(&bad_profile)),
                ready: false,
                reason: InvalidConfig,
                message: "authsign at http://ca (label \"l\") refused: invalid profile (HTTP 400, code 1)",
                retry: Backoff,
            },
            Case {
                name: "TLS trust",
                observation: Observation::Check(Err(&tls)),
                ready: false,
                reason: TlsError,
                message: "info at https://ca (label \"l\"): TLS failure: unknown issuer",
                retry: Backoff,
            },
            Case {
                name: "CA down",
                observation: Observation::Check(Err(&down)),
                ready: false,
                reason: CaUnreachable,
                message: "info at http://ca (label \"l\"): cannot reach the CA: connection refused",
                retry: Backoff,
            },
            Case {
                name: "bad CA bundle",
                observation: Observation::Client(&bad_bundle),
                ready: false,
                reason: TlsError,
                message: "invalid CA bundle: no PEM certificate in it",
                retry: Backoff,
            },
        ];
        for Case {
            name: row,
            observation,
            ready,
            reason,
            message,
            retry,
        } in cases
        {
            let want = Verdict {
                ready,
                reason,
                message: message.into(),
                retry,
                insecure: false,
            };
            assert_eq!(verdict(observation), want, "{row}");
        }
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn issuer(generation: i64, ready: Option<Condition>) -> Issuer {
        let mut issuer = Issuer::new("ca", IssuerSpec::default());
        issuer.metadata.namespace = Some("apps".into());
        issuer.metadata.generation = Some(generation);
        issuer.status = ready.map(|c| crate::api::IssuerStatus { conditions: vec![c] });
        issuer
    }

    fn checked(message: &str) -> Verdict {
        Verdict {
            ready: true,
            reason: ReadyReason::Checked,
            message: message.into(),
            retry: Retry::Interval,
            insecure: false,
        }
    }

    fn down(message: &str) -> Verdict {
        Verdict {
            ready: false,
            reason: ReadyReason::CaUnreachable,
            message: message.into(),
            retry: Retry::Backoff,
            insecure: false,
        }
    }

    /// additional_data is named only when the key was refused.
    #[test]
    fn additional_data_table() {
        let refused = Verdict {
            ready: false,
            reason: ReadyReason::InvalidCredentials,
            message: "invalid token".into(),
            retry: Retry::Backoff,
            insecure: false,
        };
        let hinted = Verdict {
            message: "invalid token; the Secret also has additional_data, which only a CA configured with the same data accepts (a stock multirootca never is)".into(),
            ..refused.clone()
        };
        // (row, verdict, additional_data in the Secret, want)
        let cases = [
            ("refused, with additional_data", refused.clone(), true, hinted),
            ("refused, without", refused.clone(), false, refused),
            (
                "healthy, with additional_data",
                checked("ok"),
                true,
                checked("ok"),
            ),
            (
                "CA down, with additional_data",
                down("refused"),
                true,
                down("refused"),
            ),
        ];
        for (row, verdict, in_secret, want) in cases {
            assert_eq!(additional_data(verdict, in_secret), want, "{row}");
        }
    }

    /// Plain http:// changes only a Ready verdict: its message says so and it is marked for
    /// a Warning Event.
    #[test]
    fn transport_table() {
        let ok = "the CA accepted the label, profile and key";
        let warned = |urls: &str| Verdict {
            message: format!(
                "{ok}; but {urls} is plain http://: the connection is not authenticated or encrypted, use https://"
            ),
            insecure: true,
            ..checked(ok)
        };
        let plain = vec!["http://ca:8888".to_string()];
        let two = vec!["http://a".to_string(), "http://***@b".to_string()];
        // (row, verdict, plaintext URLs, want)
        let cases: Vec<(&str, Verdict, &[String], Verdict)> = vec![
            ("https only: unchanged", checked(ok), &[], checked(ok)),
            ("ready over http", checked(ok), &plain, warned("http://ca:8888")),
            (
                "two plain URLs named",
                checked(ok),
                &two,
                warned("http://a, http://***@b"),
            ),
            ("not ready: unchanged", down("refused"), &plain, down("refused")),
        ];
        for (row, verdict, plaintext, want) in cases {
            assert_eq!(transport(verdict, plaintext), want, "{row}");
        }
    }

    fn apply(condition: serde_json::Value) -> Option<serde_json::Value> {
        Some(json!({
            "apiVersion": "cfssl-issuer.wikimedia.org/v1alpha1",
            "kind": "Issuer",
            "status": {"conditions": [condition]},
        }))
    }

    #[test]
    fn plan_table() {
        use ObservedGeneration::{Declared, NotDeclared};
        let interval = Duration::from_secs(60);
        let now = at("2026-11-22T10:00:00Z");
        let earlier = at("2026-11-22T09:00:00Z");
        let ready_before = Condition::ready(ReadyReason::Checked, "ok", earlier, Some(2));
        let down_before = Condition::ready(ReadyReason::CaUnreachable, "down", earlier, Some(2));
        let normal = |note: &str| {
            Some(Notice {
                type_: EventType::Normal,
                reason: "Checked".into(),
                note: note.into(),
                action: "Check",
            })
        };
        let warning = |note: &str| {
            Some(Notice {
                type_: EventType::Warning,
                reason: "CAUnreachable".into(),
                note: note.into(),
                action: "Check",
            })
        };
        struct Case {
            name: &'static str,
            issuer: Issuer,
            verdict: Verdict,
            schema: ObservedGeneration,
            want: Plan<Infallible>,
        }
        let cases = vec![
            Case {
                name: "first check, healthy",
                issuer: issuer(2, None),
                verdict: checked("ok"),
                schema: Declared,
                want: Plan {
                    status: apply(json!({"type": "Ready", "status": "True", "reason": "Checked",
                    "message": "ok", "lastTransitionTime": "2026-11-22T10:00:00Z", "observedGeneration": 2})),
                    event: normal("ok"),
                    next: Next::After(interval),
                },
            },
            Case {
                name: "unchanged: nothing written",
                issuer: issuer(2, Some(ready_before.clone())),
                verdict: checked("ok"),
                schema: Declared,
                want: Plan::idle(Next::After(interval)),
            },
            Case {
                name: "new generation: rewritten, transition time kept",
                issuer: issuer(3, Some(ready_before.clone())),
                verdict: checked("ok"),
                schema: Declared,
                want: Plan {
                    status: apply(json!({"type": "Ready", "status": "True", "reason": "Checked",
                    "message": "ok", "lastTransitionTime": "2026-11-22T09:00:00Z", "observedGeneration": 3})),
                    event: normal("ok"),
                    next: Next::After(interval),
                },
            },
            Case {
                name: "goes down: transition now, backoff",
                issuer: issuer(2, Some(ready_before)),
                verdict: down("refused"),
                schema: Declared,
                want: Plan {
                    status: apply(
                        json!({"type": "Ready", "status": "False", "reason": "CAUnreachable",
                    "message": "refused", "lastTransitionTime": "2026-11-22T10:00:00Z", "observedGeneration": 2}),
                    ),
                    event: warning("refused"),
                    next: Next::Backoff,
                },
            },
            Case {
                name: "still down, same words: nothing written",
                issuer: issuer(2, Some(down_before.clone())),
                verdict: down("down"),
                schema: Declared,
                want: Plan::idle(Next::Backoff),
            },
            Case {
                name: "ready over http: the Event is a Warning",
                issuer: issuer(2, None),
                verdict: Verdict {
                    insecure: true,
                    ..checked("ok; but http://ca is plain http://")
                },
                schema: Declared,
                want: Plan {
                    status: apply(json!({"type": "Ready", "status": "True", "reason": "Checked",
                    "message": "ok; but http://ca is plain http://", "lastTransitionTime": "2026-11-22T10:00:00Z",
                    "observedGeneration": 2})),
                    event: Some(Notice {
                        type_: EventType::Warning,
                        reason: "InsecureTransport".into(),
                        note: "ok; but http://ca is plain http://".into(),
                        action: "Check",
                    }),
                    next: Next::After(interval),
                },
            },
            Case {
                name: "Go CRD: no observedGeneration",
                issuer: issuer(2, None),
                verdict: down("x"),
                schema: NotDeclared,
                want: Plan {
                    status: apply(
                        json!({"type": "Ready", "status": "False", "reason": "CAUnreachable",
                    "message": "x", "lastTransitionTime": "2026-11-22T10:00:00Z"}),
                    ),
                    event: warning("x"),
                    next: Next::Backoff,
                },
            },
        ];
        for Case {
            name: row,
            issuer,
            verdict,
            schema,
            want,
        } in cases
        {
            assert_eq!(plan(&issuer, &verdict, schema, now, interval), want, "{row}");
        }
    }
}
