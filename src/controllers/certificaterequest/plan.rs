//! The request controller's plans: from a [`Step`] (or a signing [`Outcome`]) and the observed
//! request to the exact status apply, Event, next move and what to remember.

use base64::Engine;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::decide::{RequestView, Step};
use crate::api::certmanager::{CertificateRequest, CertificateRequestCondition, RequestReason};
use crate::api::{ConditionStatus, READY, WritableCondition};
use crate::controllers::kit::events::{Notice, reason};
use crate::controllers::kit::plan::{Next, Plan};
use crate::controllers::kit::status::document;
use crate::controllers::signing::budget::WAITING_FOR_BUDGET;
use crate::controllers::signing::ledger::{Memo, Waiting, Window};
use crate::controllers::signing::once::Held;
use crate::controllers::signing::{BudgetWait, Decision, Outcome, Work};
use crate::pki::Chain;

/// How long a request waits for approval before its `WaitingForApproval` Event. cert-manager's
/// approver answers within milliseconds, so the Event marks a request that is stuck (no
/// approver, a policy that never decides) instead of costing every request a write.
pub const APPROVAL_NOTICE_AFTER: std::time::Duration = std::time::Duration::from_secs(5);

/// How long until a request created at `created` has waited [`APPROVAL_NOTICE_AFTER`]; `None`
/// when it has (or its creation time is unknown).
pub fn approval_notice_in(created: Option<Timestamp>, now: Timestamp) -> Option<std::time::Duration> {
    let waited = now.duration_since(created?);
    let left = jiff::SignedDuration::try_from(APPROVAL_NOTICE_AFTER).ok()? - waited;
    // A creation time ahead of our clock (skew) waits no longer than the delay.
    (left.is_positive()).then(|| left.unsigned_abs().min(APPROVAL_NOTICE_AFTER))
}

const DENIED: &str = "The CertificateRequest was denied by an approval controller";
const FETCHED: &str = "Certificate fetched from issuer successfully";
const WAITING: &str = "Not signing until the request is approved (cert-manager's Approved condition)";

/// The decision for a step of the contract. `announced`: the wait for approval already had
/// its Event.
pub fn for_step(step: Step, request: &RequestView, held: &Held, announced: bool, now: Timestamp) -> Decision {
    let over = Memo {
        waiting: Waiting::Over,
        ..Memo::default()
    };
    let written = |write: ReadyWrite, notice: Notice, memo: Memo| Decision {
        plan: write.plan(request, notice, Next::AwaitChange, now),
        memo,
    };
    match step {
        Step::Leave => idle(Next::AwaitChange, over),
        Step::WaitForApproval if announced => idle(Next::AwaitChange, Memo::default()),
        Step::WaitForApproval => match approval_notice_in(request.created, now) {
            Some(left) => idle(Next::After(left), Memo::default()),
            None => Decision {
                plan: Plan {
                    status: None,
                    event: Some(Notice::normal(reason::WAITING_FOR_APPROVAL, "Sign", WAITING)),
                    next: Next::AwaitChange,
                },
                memo: Memo {
                    waiting: Waiting::Announced,
                    ..Memo::default()
                },
            },
        },
        Step::Deny => written(
            ReadyWrite::failed(RequestReason::Denied, DENIED),
            Notice::warning(reason::DENIED, "Sign", DENIED),
            over,
        ),
        Step::Reject(message) => written(
            ReadyWrite::failed(RequestReason::Failed, &message),
            Notice::warning(reason::PERMANENT_ERROR, "Sign", &message),
            over,
        ),
        Step::ConfirmIssued => {
            let (chain, hold_written) = match held {
                Held::Unsaved(chain) => (chain.clone(), true),
                _ => (
                    request.certificate.clone().unwrap_or_else(|| Chain {
                        certificates: String::new(),
                        ca: None,
                    }),
                    false,
                ),
            };
            let memo = Memo { hold_written, ..over };
            written(
                ReadyWrite::issued(chain),
                Notice::normal(reason::ISSUED, "Sign", FETCHED),
                memo,
            )
        }
        Step::WaitForIssuer { event, message } => written(
            ReadyWrite::pending(&message),
            Notice::normal(event.as_str(), "Sign", &message),
            over,
        ),
        Step::Sign(_) => idle(Next::Work(Work::Sign), over),
    }
}

/// The decision while the request waits for its issuer's issuance budget: Ready=False/Pending
/// saying its place and one Normal Event, when it joins the line; then only the requeue for
/// when its turn may come (no write per requeue).
pub fn for_budget(waiting: &BudgetWait, request: &RequestView, now: Timestamp) -> Decision {
    let memo = Memo {
        waiting: Waiting::Over,
        ..Memo::default()
    };
    let next = Next::After(waiting.wait.after);
    if !waiting.wait.first {
        return idle(next, memo);
    }
    let notice = Notice::normal(WAITING_FOR_BUDGET, "Sign", &waiting.message);
    Decision {
        plan: ReadyWrite::pending(&waiting.message).plan(request, notice, next, now),
        memo,
    }
}

/// The decision after a signing attempt.
pub fn for_outcome(outcome: Outcome, request: &RequestView, now: Timestamp) -> Decision {
    let decision = |write: ReadyWrite, notice: Notice, next, memo| Decision {
        plan: write.plan(request, notice, next, now),
        memo,
    };
    let close = Memo {
        window: Window::Close,
        ..Memo::default()
    };
    match outcome {
        Outcome::Issued(chain) => decision(
            ReadyWrite::issued(chain),
            Notice::normal(reason::ISSUED, "Sign", FETCHED),
            Next::AwaitChange,
            Memo {
                hold_written: true,
                ..close
            },
        ),
        Outcome::Failed(message) => decision(
            ReadyWrite::failed(RequestReason::Failed, &message),
            Notice::warning(reason::PERMANENT_ERROR, "Sign", &message),
            Next::AwaitChange,
            Memo {
                hold_written: true,
                ..close
            },
        ),
        Outcome::Retry(message) => decision(
            ReadyWrite::pending(&message),
            Notice::warning(reason::RETRYABLE_ERROR, "Sign", &message),
            Next::Backoff,
            Memo {
                window: Window::Open,
                ..Memo::default()
            },
        ),
        Outcome::IssuerFault { message, .. } => decision(
            ReadyWrite::pending(&message),
            Notice::warning(reason::ISSUER_NOT_READY, "Sign", &message),
            Next::Work(Work::RecheckIssuer),
            Memo::default(),
        ),
    }
}

fn idle(next: Next<Work>, memo: Memo) -> Decision {
    Decision::idle(next, memo)
}

/// The status fields one write sets; applied with server-side apply so conditions owned by
/// others (`Approved`, `Denied`) stay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadyWrite {
    pub status: ConditionStatus,
    pub reason: RequestReason,
    pub message: String,
    pub chain: Option<Chain>,
    /// Terminal: `failureTime` is set (once).
    pub failed: bool,
}

impl ReadyWrite {
    pub fn issued(chain: Chain) -> Self {
        ReadyWrite {
            status: ConditionStatus::True,
            reason: RequestReason::Issued,
            message: FETCHED.into(),
            chain: Some(chain),
            failed: false,
        }
    }

    pub fn pending(message: &str) -> Self {
        ReadyWrite {
            status: ConditionStatus::False,
            reason: RequestReason::Pending,
            message: crate::api::bounded(message),
            chain: None,
            failed: false,
        }
    }

    pub fn failed(reason: RequestReason, message: &str) -> Self {
        ReadyWrite {
            status: ConditionStatus::False,
            reason,
            message: crate::api::bounded(message),
            chain: None,
            failed: true,
        }
    }

    /// The plan that applies this write with `notice`; neither when the request already says
    /// exactly this.
    fn plan(self, request: &RequestView, notice: Notice, next: Next<Work>, now: Timestamp) -> Plan<Work> {
        let status = ready_status(request, &self, now);
        Plan {
            event: status.is_some().then_some(notice),
            status,
            next,
        }
    }
}

/// Pure: the apply document for `write`, or `None` when the request already says exactly that.
pub fn ready_status(request: &RequestView, write: &ReadyWrite, now: Timestamp) -> Option<Value> {
    let previous = request.ready.as_ref();
    let unchanged = previous
        .is_some_and(|p| p.status == write.status && p.reason == write.reason && p.message == write.message);
    if unchanged && write.chain.is_none() && !write.failed {
        return None;
    }
    let condition = CertificateRequestCondition {
        type_: READY.into(),
        status: write.status.as_str().into(),
        reason: write.reason.as_str().into(),
        message: write.message.clone(),
        last_transition_time: Some(Time(now)),
        ..CertificateRequestCondition::default()
    }
    .with_transition_from(previous);
    let mut status = json!({ "conditions": [condition] });
    if let Some(chain) = &write.chain {
        let b64 = base64::engine::general_purpose::STANDARD;
        status["certificate"] = b64.encode(&chain.certificates).into();
        if let Some(ca) = &chain.ca {
            status["ca"] = b64.encode(ca).into();
        }
    }
    if write.failed {
        // Set once: keep the first failure time.
        let first = request.failure_time.clone().unwrap_or(Time(now));
        status["failureTime"] = json!(first);
    }
    Some(document::<CertificateRequest>(status))
}

#[cfg(test)]
mod tests;
