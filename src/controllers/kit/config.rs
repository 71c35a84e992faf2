//! The controllers' settings, from the command line: plain data every layer may read.

use std::sync::Arc;
use std::time::Duration;

use super::scope::Scope;
use crate::cfssl::AllowList;

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
    /// The longest one sign or health check may take, every URL of the issuer tried included.
    pub sign_deadline: Duration,
    /// Standalone mode (the Certificate controllers), when on.
    pub standalone: Option<StandaloneSettings>,
    /// Signing Kubernetes CertificateSigningRequests, when on.
    pub kubernetes_csr: Option<CsrSettings>,
    /// The only CA hosts namespaced Issuers may reach, when set; ClusterIssuers reach any.
    pub namespaced_issuer_allowed_hosts: Option<Arc<AllowList>>,
    /// The namespaces whose Issuers, requests, Secrets (and standalone, Certificates) are
    /// served: all of them, or those `--namespace` names.
    pub scope: Scope,
    /// The most signs per second each issuer sends its CA (`--issuance-budget`); `None`:
    /// unlimited.
    pub issuance_budget: Option<super::rate::Settings>,
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
            sign_deadline: Duration::from_secs(45),
            standalone: None,
            kubernetes_csr: Some(CsrSettings {
                namespaced_signers: true,
            }),
            namespaced_issuer_allowed_hosts: None,
            scope: Scope::Cluster,
            issuance_budget: None,
        }
    }
}

/// What standalone mode was started with (`manager::standalone::StandaloneArgs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandaloneSettings {
    /// Approve the requests the controllers create for our issuers.
    pub approve_own_requests: bool,
    /// Back-off after the first failed issuance (doubling per failure).
    pub minimum_backoff: Duration,
    /// The longest back-off between failed issuances.
    pub maximum_backoff: Duration,
    /// Where cert-manager's `cert-manager-controller` Lease lives.
    pub cert_manager_lease_namespace: String,
    /// Make the Certificate the controlling owner of its Secret.
    pub owner_reference: bool,
    /// Annotation prefixes copied from a Certificate to its requests.
    pub copied_annotation_prefixes: Vec<String>,
    /// How much earlier than cert-manager's time each Certificate renews, at most, as a
    /// fraction of its lifetime (off: cert-manager's exact times).
    pub renewal_jitter: crate::certificates::renewal::Jitter,
}
