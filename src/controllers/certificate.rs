//! Standalone mode: cert-manager's Certificate lifecycle controllers, run in this manager for
//! Certificates whose `issuerRef.group` is ours. Each controller is its own module (observe,
//! a pure `decide` with its table, a thin act) under its own field manager; they cooperate only
//! through the Certificate's status, as cert-manager's do.

use std::time::Duration;

/// What standalone mode was started with (`manager::standalone::StandaloneArgs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
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
}
