//! The CSR controller's plans: from a [`Step`] (or a signing [`Outcome`]) to the exact status
//! apply, Event, next move and what to remember.

use base64::Engine;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::decide::{Invalid, Step, reason};
use crate::controllers::kit::events::{Notice, reason as common};
use crate::controllers::kit::plan::{Next, Plan};
use crate::controllers::kit::status::document;
use crate::controllers::signing::budget::WAITING_FOR_BUDGET;
use crate::controllers::signing::ledger::{Memo, Window};
use crate::controllers::signing::{BudgetWait, Decision, Outcome, Work};
use crate::pki::Chain;

const ISSUED: &str = "Succeeded signing the CertificateSigningRequest";
const ACTION: &str = "Sign";

/// The decision for a step.
pub fn for_step(step: Step, now: Timestamp) -> Decision {
    let idle = |next| Decision {
        plan: Plan::idle(next),
        memo: Memo::default(),
    };
    match step {
        Step::Leave => idle(Next::AwaitChange),
        Step::Review => idle(Next::Work(Work::Review)),
        Step::Sign => idle(Next::Work(Work::Sign)),
        Step::Wait { reason, message } => Decision {
            plan: Plan {
                status: None,
                event: Some(Notice::normal(reason, ACTION, &message)),
                next: Next::AwaitChange,
            },
            memo: Memo::default(),
        },
        Step::Fail(invalid) => failed(&invalid, now, false),
        Step::WriteIssued(chain) => issued(&chain),
    }
}

/// The decision while the CSR waits for its issuer's issuance budget: one Normal Event when it
/// joins the line (a CSR has no Pending condition), then only the requeue for its turn.
pub fn for_budget(waiting: &BudgetWait) -> Decision {
    let event = waiting
        .wait
        .first
        .then(|| Notice::normal(WAITING_FOR_BUDGET, ACTION, &waiting.message));
    Decision {
        plan: Plan {
            status: None,
            event,
            next: Next::After(waiting.wait.after),
        },
        memo: Memo::default(),
    }
}

/// The decision after a sign.
pub fn for_outcome(outcome: Outcome, now: Timestamp) -> Decision {
    let retry = |message: &str, next| Decision {
        plan: Plan {
            status: None,
            event: Some(Notice::warning(
                common::RETRYABLE_ERROR,
                ACTION,
                &format!("Failed to sign CertificateSigningRequest, will retry: {message}"),
            )),
            next,
        },
        memo: Memo {
            window: Window::Open,
            ..Memo::default()
        },
    };
    match outcome {
        Outcome::Issued(chain) => issued(&chain),
        Outcome::Failed(message) => {
            let invalid = Invalid {
                reason: reason::FAILED,
                message: format!("CertificateSigningRequest has failed permanently: {message}"),
            };
            failed(&invalid, now, true)
        }
        Outcome::Retry(message) => retry(&message, Next::Backoff),
        Outcome::IssuerFault { message, .. } => retry(&message, Next::Work(Work::RecheckIssuer)),
    }
}

/// The SubjectAccessReview could not be made (the manager lacks RBAC for it, the API server
/// is down): said on the CSR, tried again after its backoff.
pub fn review_failed(error: &str) -> Decision {
    let note = format!(
        "Cannot check whether the requester may reference the Issuer (a SubjectAccessReview), will retry: {error}"
    );
    Decision {
        plan: Plan {
            status: None,
            event: Some(Notice::warning(common::RETRYABLE_ERROR, ACTION, &note)),
            next: Next::Backoff,
        },
        memo: Memo::default(),
    }
}

fn issued(chain: &Chain) -> Decision {
    let certificate = base64::engine::general_purpose::STANDARD.encode(&chain.certificates);
    Decision {
        plan: Plan {
            status: Some(status(json!({ "certificate": certificate }))),
            event: Some(Notice::normal(common::ISSUED, ACTION, ISSUED)),
            next: Next::AwaitChange,
        },
        memo: Memo {
            window: Window::Close,
            hold_written: true,
            ..Memo::default()
        },
    }
}

/// `Failed=True`; `signed`: after a call to the CA (whose outcome is held until seen).
fn failed(invalid: &Invalid, now: Timestamp, signed: bool) -> Decision {
    let now = serde_json::to_value(Time(now)).unwrap_or_default();
    let condition = json!({
        "type": "Failed",
        "status": "True",
        "reason": invalid.reason,
        "message": crate::api::bounded(invalid.message.as_str()),
        "lastUpdateTime": now,
        "lastTransitionTime": now,
    });
    let event_reason = match invalid.reason {
        reason::FAILED => common::PERMANENT_ERROR,
        other => other,
    };
    Decision {
        plan: Plan {
            status: Some(status(json!({ "conditions": [condition] }))),
            event: Some(Notice::warning(event_reason, ACTION, &invalid.message)),
            next: Next::AwaitChange,
        },
        memo: Memo {
            window: Window::Close,
            hold_written: signed,
            ..Memo::default()
        },
    }
}

fn status(status: Value) -> Value {
    document::<CertificateSigningRequest>(status)
}

#[cfg(test)]
mod tests;
