//! The request controller's plans, row by row.

use std::time::Duration;

use kube::runtime::events::EventType;

use super::super::decide::{Ready, WaitReason};
use super::*;
use crate::api::IssuerKind;
use crate::api::ReadyReason;

const NOW: &str = "2026-11-22T10:00:00Z";
const EARLIER: &str = "2026-11-22T09:00:00Z";

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn chain(ca: Option<&str>) -> Chain {
    Chain {
        certificates: "LEAF".into(),
        ca: ca.map(str::to_string),
    }
}

fn pending(message: &str) -> RequestView {
    RequestView {
        ready: Some(Ready {
            status: ConditionStatus::False,
            reason: RequestReason::Pending,
            message: message.into(),
            since: Some(Time(at(EARLIER))),
        }),
        approved: true,
        ..RequestView::default()
    }
}

/// The apply document with Ready as given and the other status fields as `extra`.
fn apply(status: &str, reason: &str, message: &str, since: &str, extra: Value) -> Option<Value> {
    let mut status = json!({"conditions": [{
        "type": "Ready", "status": status, "reason": reason, "message": message,
        "lastTransitionTime": since,
    }]});
    for (k, v) in extra.as_object().into_iter().flatten() {
        status[k] = v.clone();
    }
    Some(json!({"apiVersion": "cert-manager.io/v1", "kind": "CertificateRequest", "status": status}))
}

fn notice(type_: EventType, reason: &'static str, note: &str) -> Option<Notice> {
    Some(Notice {
        type_,
        reason: reason.into(),
        note: note.into(),
        action: "Sign",
    })
}

fn decision(status: Option<Value>, event: Option<Notice>, next: Next<Work>, memo: Memo) -> Decision {
    Decision {
        plan: Plan { status, event, next },
        memo,
    }
}

fn memo(waiting: Waiting, window: Window, hold_written: bool) -> Memo {
    Memo {
        waiting,
        window,
        hold_written,
    }
}

#[test]
fn step_table() {
    use EventType::{Normal, Warning};
    use Waiting::{Announced, Over, Unchanged};
    let fresh = RequestView {
        approved: true,
        ..RequestView::default()
    };
    let failed_before = RequestView {
        failure_time: Some(Time(at(EARLIER))),
        ..fresh.clone()
    };
    let observed = RequestView {
        certificate: Some(chain(None)),
        ..fresh.clone()
    };
    let none = Window::Unchanged;
    let issuer = IssuerKind::ClusterIssuer;
    let wait = |message: &str| Step::WaitForIssuer {
        event: WaitReason::IssuerNotFound,
        message: message.into(),
    };
    struct Case {
        name: &'static str,
        step: Step,
        request: RequestView,
        held: Held,
        announced: bool,
        want: Decision,
    }
    let cases = vec![
        Case {
            name: "leave",
            step: Step::Leave,
            request: fresh.clone(),
            held: Held::Nothing,
            announced: false,
            want: decision(None, None, Next::AwaitChange, memo(Over, none, false)),
        },
        Case {
            name: "waiting since an unknown time: one Event, no write",
            step: Step::WaitForApproval,
            request: fresh.clone(),
            held: Held::Nothing,
            announced: false,
            want: decision(
                None,
                notice(Normal, "WaitingForApproval", WAITING),
                Next::AwaitChange,
                memo(Announced, none, false),
            ),
        },
        Case {
            name: "waiting 2 s: no Event yet, look again when it has waited 5 s",
            step: Step::WaitForApproval,
            request: RequestView {
                created: Some(at("2026-11-22T09:59:58Z")),
                ..fresh.clone()
            },
            held: Held::Nothing,
            announced: false,
            want: decision(
                None,
                None,
                Next::After(Duration::from_secs(3)),
                memo(Unchanged, none, false),
            ),
        },
        Case {
            name: "waited 5 s: one Event, no write",
            step: Step::WaitForApproval,
            request: RequestView {
                created: Some(at("2026-11-22T09:59:55Z")),
                ..fresh.clone()
            },
            held: Held::Nothing,
            announced: false,
            want: decision(
                None,
                notice(Normal, "WaitingForApproval", WAITING),
                Next::AwaitChange,
                memo(Announced, none, false),
            ),
        },
        Case {
            name: "still waiting: nothing",
            step: Step::WaitForApproval,
            request: fresh.clone(),
            held: Held::Nothing,
            announced: true,
            want: decision(None, None, Next::AwaitChange, memo(Unchanged, none, false)),
        },
        Case {
            name: "denied",
            step: Step::Deny,
            request: fresh.clone(),
            held: Held::Nothing,
            announced: false,
            want: decision(
                apply("False", "Denied", DENIED, NOW, json!({"failureTime": NOW})),
                notice(Warning, "Denied", DENIED),
                Next::AwaitChange,
                memo(Over, none, false),
            ),
        },
        Case {
            name: "denied again: the first failure time stays",
            step: Step::Deny,
            request: failed_before,
            held: Held::Nothing,
            announced: false,
            want: decision(
                apply("False", "Denied", DENIED, NOW, json!({"failureTime": EARLIER})),
                notice(Warning, "Denied", DENIED),
                Next::AwaitChange,
                memo(Over, none, false),
            ),
        },
        Case {
            name: "rejected while pending: still False since earlier",
            step: Step::Reject("bad".into()),
            request: pending("p"),
            held: Held::Nothing,
            announced: false,
            want: decision(
                apply("False", "Failed", "bad", EARLIER, json!({"failureTime": NOW})),
                notice(Warning, "PermanentError", "bad"),
                Next::AwaitChange,
                memo(Over, none, false),
            ),
        },
        Case {
            name: "write lost: the kept chain, held once written",
            step: Step::ConfirmIssued,
            request: pending("p"),
            held: Held::Unsaved(chain(Some("ROOT"))),
            announced: false,
            want: decision(
                apply(
                    "True",
                    "Issued",
                    FETCHED,
                    NOW,
                    json!({"certificate": "TEVBRg==", "ca": "Uk9PVA=="}),
                ),
                notice(Normal, "Issued", FETCHED),
                Next::AwaitChange,
                memo(Over, none, true),
            ),
        },
        Case {
            name: "certificate seen without Ready: the observed chain",
            step: Step::ConfirmIssued,
            request: observed,
            held: Held::Nothing,
            announced: false,
            want: decision(
                apply("True", "Issued", FETCHED, NOW, json!({"certificate": "TEVBRg=="})),
                notice(Normal, "Issued", FETCHED),
                Next::AwaitChange,
                memo(Over, none, false),
            ),
        },
        Case {
            name: "waiting for the issuer, said already: nothing",
            step: wait("gone"),
            request: pending("gone"),
            held: Held::Nothing,
            announced: false,
            want: decision(None, None, Next::AwaitChange, memo(Over, none, false)),
        },
        Case {
            name: "waiting for the issuer, news",
            step: wait("gone"),
            request: pending("p"),
            held: Held::Nothing,
            announced: false,
            want: decision(
                apply("False", "Pending", "gone", EARLIER, json!({})),
                notice(Normal, "IssuerNotFound", "gone"),
                Next::AwaitChange,
                memo(Over, none, false),
            ),
        },
        Case {
            name: "sign",
            step: Step::Sign(issuer),
            request: fresh,
            held: Held::Nothing,
            announced: false,
            want: decision(None, None, Next::Work(Work::Sign), memo(Over, none, false)),
        },
    ];
    for Case {
        name: row,
        step,
        request,
        held,
        announced,
        want,
    } in cases
    {
        assert_eq!(for_step(step, &request, &held, announced, at(NOW)), want, "{row}");
    }
}

#[test]
fn outcome_table() {
    use EventType::{Normal, Warning};
    use Waiting::Unchanged;
    let request = pending("signing failed, will retry: down");
    let fault = Outcome::IssuerFault {
        message: "wrong key".into(),
        reason: ReadyReason::InvalidCredentials,
    };
    // (row, outcome, want)
    let cases: Vec<(&str, Outcome, Decision)> = vec![
        (
            "issued: held once written, window closed",
            Outcome::Issued(chain(None)),
            decision(
                apply("True", "Issued", FETCHED, NOW, json!({"certificate": "TEVBRg=="})),
                notice(Normal, "Issued", FETCHED),
                Next::AwaitChange,
                memo(Unchanged, Window::Close, true),
            ),
        ),
        (
            "failed for good",
            Outcome::Failed("no".into()),
            decision(
                apply("False", "Failed", "no", EARLIER, json!({"failureTime": NOW})),
                notice(Warning, "PermanentError", "no"),
                Next::AwaitChange,
                // A sign that failed for good is held like one that succeeded: a stale cache
                // must not send the request to the CA again (seen in the e2e catalogue: a
                // certificate for another key was signed twice).
                memo(Unchanged, Window::Close, true),
            ),
        ),
        (
            "retry, said already: no write, window open, backoff",
            Outcome::Retry("signing failed, will retry: down".into()),
            decision(None, None, Next::Backoff, memo(Unchanged, Window::Open, false)),
        ),
        (
            "retry, news",
            Outcome::Retry("later".into()),
            decision(
                apply("False", "Pending", "later", EARLIER, json!({})),
                notice(Warning, "RetryableError", "later"),
                Next::Backoff,
                memo(Unchanged, Window::Open, false),
            ),
        ),
        (
            "the issuer's fault: recheck it",
            fault,
            decision(
                apply("False", "Pending", "wrong key", EARLIER, json!({})),
                notice(Warning, "IssuerNotReady", "wrong key"),
                Next::Work(Work::RecheckIssuer),
                memo(Unchanged, Window::Unchanged, false),
            ),
        ),
    ];
    for (row, outcome, want) in cases {
        assert_eq!(for_outcome(outcome, &request, at(NOW)), want, "{row}");
    }
}

#[test]
fn approval_notice_table() {
    let ms = Duration::from_millis;
    // (row, created, want)
    let cases = [
        ("unknown creation", None, None),
        ("just created", Some(NOW), Some(ms(5000))),
        ("waited 4.5 s", Some("2026-11-22T09:59:55.5Z"), Some(ms(500))),
        ("waited exactly 5 s", Some("2026-11-22T09:59:55Z"), None),
        ("waited an hour", Some(EARLIER), None),
        (
            "created ahead of our clock",
            Some("2026-11-22T10:01:00Z"),
            Some(ms(5000)),
        ),
    ];
    for (row, created, want) in cases {
        assert_eq!(approval_notice_in(created.map(at), at(NOW)), want, "{row}");
    }
}

/// Waiting for the issuance budget: Pending with its place and one Event when it joins the
/// line; afterwards only the requeue, whatever place it has then.
#[test]
fn a_budget_wait_is_said_once() {
    use crate::controllers::signing::budget::Wait;
    let message = "Waiting for ClusterIssuer ca's issuance budget of 5 signs/s (burst 1): number 3 of 9 in line, soonest expiry first";
    let waiting = |first| BudgetWait {
        message: message.into(),
        wait: Wait {
            place: 3,
            line: 9,
            after: Duration::from_millis(600),
            first,
        },
    };
    let over = Memo {
        waiting: Waiting::Over,
        ..Memo::default()
    };
    let next = Next::After(Duration::from_millis(600));
    let approved = RequestView {
        approved: true,
        ..RequestView::default()
    };
    let cases = [
        (
            "joins the line",
            true,
            &approved,
            decision(
                apply("False", "Pending", message, NOW, json!({})),
                notice(EventType::Normal, "WaitingForIssuanceBudget", message),
                next.clone(),
                over,
            ),
        ),
        (
            "comes back",
            false,
            &approved,
            decision(None, None, next.clone(), over),
        ),
        (
            "joins again, already saying so",
            true,
            &pending(message),
            decision(None, None, next.clone(), over),
        ),
    ];
    for (row, first, request, want) in cases {
        assert_eq!(for_budget(&waiting(first), request, at(NOW)), want, "{row}");
    }
}
