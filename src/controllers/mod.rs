//! The controllers, and the pieces they share.
//!
//! Every controller has the same shape (see ARCHITECTURE.md): observe (caches, one Secret),
//! decide (a pure function in its `decide` module returning a whole [`plan::Plan`]) and act
//! ([`plan::execute`]: one server-side apply of status under the controller's own
//! [`status::FieldManager`], an Event, the requeue it returns).

pub mod backoff;
pub mod certificate;
pub mod certificaterequest;
pub mod context;
pub mod csr;
pub mod events;
pub mod issuer;
pub mod kept;
pub mod memory;
pub mod plan;
mod run;
pub mod signer;
pub mod signings;
pub mod status;
pub mod watches;
pub mod wiring;

use std::time::Duration;

pub use self::context::{Contexts, Shared};
pub use self::run::{RunError, run};
pub use crate::clock::{Clock, system_clock};

/// Settings shared by the controllers, from the command line.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where a ClusterIssuer's credential Secret lives.
    pub cluster_resource_namespace: String,
    /// How often a Ready issuer is checked again.
    pub health_check_interval: Duration,
    /// How long a request is retried after retryable errors before it fails, counted from its
    /// first failed sign (remembered in memory: a restart starts the window again).
    pub max_retry_duration: Duration,
    /// Sign only approved requests (cert-manager >= 1.3); off for older cert-manager.
    pub approval_required: bool,
    /// Reconciles in flight per controller.
    pub concurrency: u16,
    /// Per-request timeout towards the CA.
    pub cfssl_timeout: Duration,
    /// Standalone mode (the Certificate controllers), when on.
    pub standalone: Option<certificate::Settings>,
    /// Signing Kubernetes CertificateSigningRequests, when on.
    pub kubernetes_csr: Option<CsrSettings>,
}

/// How Kubernetes CertificateSigningRequests are signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CsrSettings {
    /// Whether namespaced Issuers sign CSRs (`issuers.<group>/<namespace>.<name>`), for
    /// requesters a SubjectAccessReview lets `reference` them.
    pub namespaced_signers: bool,
}

impl Config {
    pub fn new(cluster_resource_namespace: impl Into<String>) -> Self {
        Self {
            cluster_resource_namespace: cluster_resource_namespace.into(),
            health_check_interval: Duration::from_secs(60),
            max_retry_duration: Duration::from_secs(300),
            approval_required: true,
            concurrency: 8,
            cfssl_timeout: crate::cfssl::ClientConfig::DEFAULT_TIMEOUT,
            standalone: None,
            kubernetes_csr: Some(CsrSettings {
                namespaced_signers: true,
            }),
        }
    }
}

/// A request to check an issuer again now, sent by the request controller when the CA blames
/// the issuer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recheck {
    pub kind: crate::api::IssuerKind,
    pub namespace: Option<String>,
    pub name: String,
}

impl Recheck {
    pub fn of<K: crate::api::AnyIssuer>(issuer: &K) -> Self {
        use kube::ResourceExt;
        Recheck {
            kind: K::KIND,
            namespace: issuer.namespace(),
            name: issuer.name_any(),
        }
    }
}

/// What went wrong in a reconcile that the returned `Action` does not already cover: the API
/// server refused a status write. Outcomes of signing and checking are never errors here;
/// they are conditions.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("writing status of {object}: {source}")]
    WriteStatus {
        object: String,
        #[source]
        source: kube::Error,
    },
}

/// Per-object backoff: 1 s doubling to 5 min.
fn default_backoff() -> backoff::Backoff<String> {
    backoff::Backoff::new(Duration::from_secs(1), Duration::from_secs(300))
}

/// CFSSL errors for the decide tables.
#[cfg(test)]
pub(crate) mod testing {
    use crate::cfssl::{Attempt, Call, Class, Error, Failure};

    pub fn refused(message: &str, class: Class) -> Error {
        Attempt::new(Call::AuthSign, "http://ca", "l").failed(Failure::Refused {
            status: 400,
            code: 1,
            message: message.into(),
            class,
        })
    }

    pub fn unreachable(call: Call) -> Error {
        Attempt::new(call, "http://ca", "l").failed(Failure::Unreachable("connection refused".into()))
    }

    pub fn tls(cause: &str) -> Error {
        Attempt::new(Call::Info, "https://ca", "l").failed(Failure::Tls(cause.into()))
    }
}
