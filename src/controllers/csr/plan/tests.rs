//! The exact writes of every step and outcome.

use serde_json::json;

use super::*;
use crate::api::ReadyReason;
use kube::runtime::events::EventType;

fn at() -> Timestamp {
    "2026-11-24T10:00:00Z".parse().unwrap()
}

fn notice(type_: EventType, reason: &'static str, note: &str) -> Option<Notice> {
    Some(Notice {
        type_,
        reason: reason.into(),
        note: note.into(),
        action: "Sign",
    })
}

fn failed_status(reason: &str, message: &str) -> Option<Value> {
    Some(json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "status": {"conditions": [{
            "type": "Failed", "status": "True", "reason": reason, "message": message,
            "lastUpdateTime": "2026-11-24T10:00:00Z", "lastTransitionTime": "2026-11-24T10:00:00Z",
        }]},
    }))
}

fn issued_decision() -> Decision {
    Decision {
        plan: Plan {
            // base64("LEAF\nMID\n")
            status: Some(json!({
                "apiVersion": "certificates.k8s.io/v1",
                "kind": "CertificateSigningRequest",
                "status": {"certificate": "TEVBRgpNSUQK"},
            })),
            event: notice(
                EventType::Normal,
                "Issued",
                "Succeeded signing the CertificateSigningRequest",
            ),
            next: Next::AwaitChange,
        },
        memo: Memo {
            window: Window::Close,
            hold_written: true,
            ..Memo::default()
        },
    }
}

fn chain() -> Chain {
    Chain {
        certificates: "LEAF\nMID\n".into(),
        ca: Some("ROOT\n".into()),
    }
}

fn idle(next: Next<Work>) -> Decision {
    Decision {
        plan: Plan::idle(next),
        memo: Memo::default(),
    }
}

#[test]
fn for_step_table() {
    let denied = Invalid {
        reason: reason::DENIED_REFERENCE,
        message: "Requester may not reference".into(),
    };
    let cases = [
        ("leave", Step::Leave, idle(Next::AwaitChange)),
        ("review", Step::Review, idle(Next::Work(Work::Review))),
        ("sign", Step::Sign, idle(Next::Work(Work::Sign))),
        (
            "wait: an Event, no status, no requeue",
            Step::Wait {
                reason: reason::WAITING_FOR_ISSUER_EXIST,
                message: "not found. Waiting for it to be created.".into(),
            },
            Decision {
                plan: Plan {
                    status: None,
                    event: notice(
                        EventType::Normal,
                        "WaitingForIssuerExist",
                        "not found. Waiting for it to be created.",
                    ),
                    next: Next::AwaitChange,
                },
                memo: Memo::default(),
            },
        ),
        (
            "refused before any sign: Failed with its own reason, nothing held",
            Step::Fail(denied),
            Decision {
                plan: Plan {
                    status: failed_status("DeniedReference", "Requester may not reference"),
                    event: notice(
                        EventType::Warning,
                        "DeniedReference",
                        "Requester may not reference",
                    ),
                    next: Next::AwaitChange,
                },
                memo: Memo {
                    window: Window::Close,
                    hold_written: false,
                    ..Memo::default()
                },
            },
        ),
        (
            "a lost write: the held chain, no root",
            Step::WriteIssued(chain()),
            issued_decision(),
        ),
    ];
    for (row, step, want) in cases {
        assert_eq!(for_step(step, at()), want, "{row}");
    }
}

#[test]
fn for_outcome_table() {
    let retry_event = |m: &str| {
        notice(
            EventType::Warning,
            "RetryableError",
            &format!("Failed to sign CertificateSigningRequest, will retry: {m}"),
        )
    };
    let open = Memo {
        window: Window::Open,
        hold_written: false,
        ..Memo::default()
    };
    let cases = [
        ("issued", Outcome::Issued(chain()), issued_decision()),
        (
            "failed: Failed/Failed, PermanentError, held",
            Outcome::Failed("the CA will not sign this request: bad".into()),
            Decision {
                plan: Plan {
                    status: failed_status(
                        "Failed",
                        "CertificateSigningRequest has failed permanently: the CA will not sign this request: bad",
                    ),
                    event: notice(
                        EventType::Warning,
                        "PermanentError",
                        "CertificateSigningRequest has failed permanently: the CA will not sign this request: bad",
                    ),
                    next: Next::AwaitChange,
                },
                memo: Memo {
                    window: Window::Close,
                    hold_written: true,
                    ..Memo::default()
                },
            },
        ),
        (
            "retry: an Event, the window opens, backoff",
            Outcome::Retry("signing failed, will retry: down".into()),
            Decision {
                plan: Plan {
                    status: None,
                    event: retry_event("signing failed, will retry: down"),
                    next: Next::Backoff,
                },
                memo: open,
            },
        ),
        (
            "the issuer's fault: recheck it",
            Outcome::IssuerFault {
                message: "the issuer is misconfigured: bad key".into(),
                reason: ReadyReason::CaUnreachable,
            },
            Decision {
                plan: Plan {
                    status: None,
                    event: retry_event("the issuer is misconfigured: bad key"),
                    next: Next::Work(Work::RecheckIssuer),
                },
                memo: open,
            },
        ),
    ];
    for (row, outcome, want) in cases {
        assert_eq!(for_outcome(outcome, at()), want, "{row}");
    }
}

#[test]
fn a_failed_review_is_said_and_retried_after_backoff() {
    assert_eq!(
        review_failed("forbidden (HTTP 403 Forbidden)"),
        Decision {
            plan: Plan {
                status: None,
                event: notice(
                    EventType::Warning,
                    "RetryableError",
                    "Cannot check whether the requester may reference the Issuer (a SubjectAccessReview), \
                     will retry: forbidden (HTTP 403 Forbidden)",
                ),
                next: Next::Backoff,
            },
            memo: Memo::default(),
        }
    );
}

/// Waiting for the issuance budget: one Event when the CSR joins the line, then the requeue.
#[test]
fn a_budget_wait_is_an_event_once() {
    use crate::controllers::signing::budget::Wait;
    let waiting = |first| BudgetWait {
        message: "waits".into(),
        wait: Wait {
            place: 1,
            line: 2,
            after: std::time::Duration::from_millis(200),
            first,
        },
    };
    let next = Next::After(std::time::Duration::from_millis(200));
    let cases = [
        (
            true,
            notice(EventType::Normal, "WaitingForIssuanceBudget", "waits"),
        ),
        (false, None),
    ];
    for (first, event) in cases {
        let want = Decision {
            plan: Plan {
                status: None,
                event,
                next: next.clone(),
            },
            memo: Memo::default(),
        };
        assert_eq!(for_budget(&waiting(first)), want, "first: {first}");
    }
}
