//! The CSR controller's plans: from a [`Step`] (or a signing [`Outcome`]) to the exact status
//! apply, Event, next move and what to remember.

use base64::Engine;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::decide::{Invalid, Step, reason};
use crate::controllers::certificaterequest::decide::Outcome;
use crate::controllers::events::{Notice, reason as common};
use crate::controllers::kept::Window;
use crate::controllers::plan::{Next, Plan};
use crate::controllers::status::document;
use crate::pki::Chain;

/// The CSR controller's own next moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// Ask whether the requester may reference the namespaced Issuer, then decide again.
    Review,
    Sign,
    /// The CA blamed the issuer: check it again now; look at the CSR again after its backoff.
    RecheckIssuer,
}

/// A plan plus what the controller remembers of the CSR once it is carried out.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub plan: Plan<Work>,
    pub memo: Memo,
}

/// Memory updates, by CSR UID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Memo {
    pub window: Window,
    /// The status written ends a sign this process made: hold its resourceVersion until the
    /// cache shows it, so a stale cache never sends the CSR to the CA again.
    pub hold_written: bool,
}

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
            hold_written: false,
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
        "message": invalid.message,
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
        },
    }
}

fn status(status: Value) -> Value {
    document::<CertificateSigningRequest>(status)
}

#[cfg(test)]
mod tests;
