//! The cert-manager external issuer contract for one CertificateRequest, as pure functions from
//! what was observed (and `now`) to what to do. The reconciler only gathers and applies.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::budget::Oversize;
use crate::api::certmanager::RequestReason;
use crate::api::{ConditionLike, ConditionStatus, IssuerKind, READY};
use crate::controllers::signing::Readiness;
use crate::controllers::signing::once::Held;
use crate::pki::Chain;

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;

/// The parts of a CertificateRequest the contract looks at.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestView {
    /// Our `Ready` condition.
    pub ready: Option<Ready>,
    pub approved: bool,
    pub denied: bool,
    pub invalid_request: bool,
    /// `status.certificate` (and `ca`), when set: it was signed before (a lost write, a
    /// restart).
    pub certificate: Option<Chain>,
    /// `status.failureTime`: set once, kept.
    pub failure_time: Option<Time>,
    /// `metadata.creationTimestamp`: when the wait for approval began.
    pub created: Option<Timestamp>,
    /// Over a budget: the cache kept it without its body.
    pub oversize: Option<Oversize>,
    /// `metadata.generation` when it says the spec changed after the request was made.
    pub edited: Option<i64>,
}

impl RequestView {
    pub fn has_certificate(&self) -> bool {
        self.certificate.is_some()
    }
}

/// A request's `Ready` condition, typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ready {
    pub status: ConditionStatus,
    pub reason: RequestReason,
    pub message: String,
    pub since: Option<Time>,
}

impl ConditionLike for Ready {
    fn type_(&self) -> &str {
        READY
    }
    fn status(&self) -> &str {
        self.status.as_str()
    }
    fn last_transition_time(&self) -> Option<&Time> {
        self.since.as_ref()
    }
}

/// The issuer a request names, as found in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IssuerView {
    /// `issuerRef.kind` names no kind of ours.
    UnknownKind(String),
    Known {
        kind: IssuerKind,
        name: String,
        state: Readiness,
    },
}

/// What the reconciler does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing to write: terminal, or marked invalid by someone else.
    Leave,
    /// Not approved yet: nothing to write; one Normal `WaitingForApproval` Event says so once
    /// the request has waited [`super::plan::APPROVAL_NOTICE_AFTER`].
    WaitForApproval,
    /// Denied by an approver: Ready=False/Denied with a failure time, once.
    Deny,
    /// Signed earlier but the Ready write was lost: write Issued, never sign again.
    ConfirmIssued,
    /// Wait for the issuer; its watch re-triggers this request, so no requeue.
    WaitForIssuer { event: WaitReason, message: String },
    /// Sign with the issuer of this kind the request names.
    Sign(IssuerKind),
    /// The request can never be signed as written: Ready=False/Failed with a failure time.
    Reject(String),
}

/// Event reasons for a request waiting on its issuer (cert-manager's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitReason {
    IssuerNotFound,
    IssuerNotReady,
}

impl WaitReason {
    pub fn as_str(self) -> &'static str {
        match self {
            WaitReason::IssuerNotFound => "IssuerNotFound",
            WaitReason::IssuerNotReady => "IssuerNotReady",
        }
    }
}

/// Contract steps 2-5 (step 1, "is it ours", is decided by [`crate::api::IssuerKind::for_ref`]).
pub fn decide(request: &RequestView, issuer: &IssuerView, approval_required: bool) -> Step {
    if is_terminal(request) {
        return Step::Leave;
    }
    if request.denied {
        return Step::Deny;
    }
    if request.invalid_request {
        return Step::Leave;
    }
    if approval_required && !request.approved {
        return Step::WaitForApproval;
    }
    if request.has_certificate() {
        return Step::ConfirmIssued;
    }
    if let Some(generation) = request.edited {
        return Step::Reject(format!(
            "the request cannot be signed: its spec changed after it was created (generation \
             {generation}), so an approval may not cover it; create a new CertificateRequest"
        ));
    }
    if let Some(oversize) = request.oversize {
        return Step::Reject(format!("the request cannot be signed: {oversize}"));
    }
    let (kind, name, state) = match issuer {
        IssuerView::UnknownKind(other) => {
            return Step::Reject(format!(
                "issuerRef.kind {other:?} is not a kind of {}; use Issuer or ClusterIssuer",
                crate::api::GROUP
            ));
        }
        IssuerView::Known { kind, name, state } => (*kind, name, state),
    };
    let not_ready = |message: String| Step::WaitForIssuer {
        event: WaitReason::IssuerNotReady,
        message,
    };
    match state {
        Readiness::Missing => Step::WaitForIssuer {
            event: WaitReason::IssuerNotFound,
            message: format!("{kind} {name:?} not found; waiting for it to be created"),
        },
        Readiness::Unchecked | Readiness::Outdated => {
            not_ready(format!("{kind} {name:?} has not been checked yet"))
        }
        Readiness::NotReady { reason, message } => {
            not_ready(format!("{kind} {name:?} is not ready ({reason}): {message}"))
        }
        Readiness::Ready => Step::Sign(kind),
    }
}

/// Ready=True, or Ready=False with reason Failed or Denied: cert-manager makes a new request.
pub fn is_terminal(request: &RequestView) -> bool {
    request.ready.as_ref().is_some_and(|ready| {
        ready.status == ConditionStatus::True
            || (ready.status == ConditionStatus::False
                && matches!(ready.reason, RequestReason::Failed | RequestReason::Denied))
    })
}

/// Pure: the step after [`decide`], given what this process holds. A request is never sent to
/// the CA twice, and no status that lacks the certificate is applied to a request that has one
/// (server-side apply would remove it) or whose Issued write may not be in the cache yet.
pub fn guard(step: Step, has_certificate: bool, held: &Held) -> Step {
    match (held, step) {
        (_, Step::Leave) => Step::Leave,
        // The sign in flight writes its outcome; that write brings the request back.
        (Held::InFlight, _) => Step::Leave,
        // The Issued write landed; the cache catches up and brings the request back.
        (Held::Saved, _) => Step::Leave,
        (Held::Unsaved(_), _) => Step::ConfirmIssued,
        (Held::Nothing, _) if has_certificate => Step::ConfirmIssued,
        (Held::Nothing, step) => step,
    }
}
