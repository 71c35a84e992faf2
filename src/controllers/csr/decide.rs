//! What to do with one Kubernetes CertificateSigningRequest, as pure functions from what was
//! observed to a step: issuer-lib's CSR flow (unapproved, denied, failed or signed ones are
//! left alone; waiting is said by Events only), plus namespaced Issuers behind a
//! SubjectAccessReview, as cert-manager's own signer does.

use std::time::Duration;

use super::signer_name;
use crate::api::IssuerKind;
use crate::controllers::signing::once::Held;
use crate::controllers::signing::{IssuerName, Readiness};
use crate::pki::Chain;

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;

/// The parts of a CSR the decision looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsrView {
    pub approved: bool,
    pub denied: bool,
    pub failed: bool,
    /// `status.certificate` is set.
    pub has_certificate: bool,
    /// What the request asks for, or why that cannot be read.
    pub asks: Result<Asks, Invalid>,
}

/// What a CSR asks for. CFSSL's profile decides all three, so they are read and checked, never
/// sent: the README says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asks {
    pub duration: Duration,
    pub is_ca: bool,
    pub usages: Vec<String>,
}

/// A request that can never be signed as written: the `Failed` condition's reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub reason: &'static str,
    pub message: String,
}

/// Whether the requester may use the namespaced Issuer it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// A ClusterIssuer: anyone who may create the CSR and get it approved.
    NotNeeded,
    /// An Issuer, not asked yet.
    Unknown,
    Allowed,
    /// The SubjectAccessReviews said no.
    Refused,
}

impl Access {
    /// What a CSR for `signer` starts with.
    pub fn for_signer(signer: &IssuerName) -> Self {
        match signer.kind {
            IssuerKind::ClusterIssuer => Access::NotNeeded,
            IssuerKind::Issuer => Access::Unknown,
        }
    }
}

/// What the reconciler does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing to write: not approved yet, denied, failed, or signed.
    Leave,
    /// Ask the API server whether the requester may reference the namespaced Issuer.
    Review,
    /// `Failed` at once, before any call to the CA.
    Fail(Invalid),
    /// Wait for the issuer: an Event only; its watch brings the CSR back.
    Wait {
        reason: &'static str,
        message: String,
    },
    Sign,
    /// Signed earlier by this process, the write was lost: write this chain, never sign again.
    WriteIssued(Chain),
}

/// Event reasons of the CSR controller (issuer-lib's names).
pub mod reason {
    pub const WAITING_FOR_ISSUER_EXIST: &str = "WaitingForIssuerExist";
    pub const WAITING_FOR_ISSUER_READY: &str = "WaitingForIssuerReady";
    pub const DENIED_REFERENCE: &str = "DeniedReference";
    pub const ERROR_PARSE_DURATION: &str = "ErrorParseDuration";
    pub const INVALID_DURATION: &str = "InvalidDuration";
    pub const FAILED: &str = "Failed";
}

/// Pure: the step for a CSR of ours.
pub fn decide(csr: &CsrView, signer: &IssuerName, issuer: &Readiness, access: &Access) -> Step {
    if !csr.approved || csr.denied || csr.failed || csr.has_certificate {
        return Step::Leave;
    }
    match access {
        Access::Unknown => return Step::Review,
        Access::Refused => return Step::Fail(refused(signer)),
        Access::NotNeeded | Access::Allowed => {}
    }
    if let Err(invalid) = &csr.asks {
        return Step::Fail(invalid.clone());
    }
    const READY: &str = "Waiting for issuer to become ready. Current issuer ready condition";
    let ready = |message: String| Step::Wait {
        reason: reason::WAITING_FOR_ISSUER_READY,
        message,
    };
    match issuer {
        Readiness::Missing => Step::Wait {
            reason: reason::WAITING_FOR_ISSUER_EXIST,
            message: format!(
                "{}. Waiting for it to be created.",
                signer_name::not_found(signer)
            ),
        },
        Readiness::Unchecked => ready(format!("{READY}: <none>.")),
        Readiness::Outdated => ready(format!("{READY} is outdated.")),
        Readiness::NotReady { reason, message } => ready(format!("{READY} is {reason:?}: {message}.")),
        Readiness::Ready => Step::Sign,
    }
}

/// Pure: the step after [`decide`], given what this process holds: a CSR is never sent to the
/// CA twice, and a chain whose write was lost is written, not signed again.
pub fn guard(step: Step, held: &Held) -> Step {
    match (held, step) {
        (_, Step::Leave) => Step::Leave,
        (Held::InFlight | Held::Saved, _) => Step::Leave,
        (Held::Unsaved(chain), _) => Step::WriteIssued(chain.clone()),
        (Held::Nothing, step) => step,
    }
}

/// The `Failed` of a requester who may not reference the namespaced Issuer: names the
/// permission that is missing.
fn refused(signer: &IssuerName) -> Invalid {
    let namespace = signer.namespace.as_deref().unwrap_or_default();
    Invalid {
        reason: reason::DENIED_REFERENCE,
        message: format!(
            "Requester may not reference Namespaced Issuer {namespace}/{name}: it needs verb \
             \"reference\" on \"signers\" in API group \"{group}\", resource name {name:?} or \
             all names, in namespace {namespace:?}",
            name = signer.name,
            group = crate::api::GROUP,
        ),
    }
}
