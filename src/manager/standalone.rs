//! The flags of standalone mode: cert-manager's Certificate controllers run in this manager.

use std::time::Duration;

use clap::Args;

use super::parse_duration;
use crate::certificates::renewal::Jitter;
use crate::controllers::certificate::Settings;

/// cert-manager's default `--copied-annotation-prefixes`: every annotation but kubectl's,
/// Flux's and Argo CD's.
const COPIED_ANNOTATION_PREFIXES: [&str; 4] = [
    "*",
    "-kubectl.kubernetes.io/",
    "-fluxcd.io/",
    "-argocd.argoproj.io/",
];

#[derive(Debug, Args)]
pub struct StandaloneArgs {
    /// Standalone mode: run cert-manager's Certificate controllers (trigger, keys, requests,
    /// issuing, readiness, revisions) for Certificates whose issuerRef.group is ours. Refused
    /// while cert-manager's controller holds its Lease.
    #[arg(long)]
    pub certificate_controllers: bool,
    /// Approve the CertificateRequests the Certificate controllers create for our issuers
    /// [default: on in standalone mode].
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub approve_own_requests: Option<bool>,
    /// Back-off after the first failed issuance; it doubles per failure up to the maximum.
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub certificate_request_minimum_backoff_duration: Duration,
    /// The longest back-off between failed issuances.
    #[arg(long, default_value = "32h", value_parser = parse_duration)]
    pub certificate_request_maximum_backoff_duration: Duration,
    /// Namespace of cert-manager's leader Lease `cert-manager-controller`.
    #[arg(long, default_value = "kube-system")]
    pub cert_manager_lease_namespace: String,
    /// Make each Certificate the controlling owner of its Secret (deleted with it).
    #[arg(long)]
    pub enable_certificate_owner_ref: bool,
    /// Annotation prefixes copied from a Certificate to its CertificateRequests; `*` is all,
    /// a leading `-` excludes.
    #[arg(long, value_delimiter = ',', default_values_t = COPIED_ANNOTATION_PREFIXES.map(String::from))]
    pub copied_annotation_prefixes: Vec<String>,
    /// Renew each Certificate earlier than cert-manager would by up to this fraction of its
    /// lifetime (0 to 0.5), a fixed share per Certificate from its UID, so certificates
    /// issued together do not renew together. 0 is cert-manager's exact times.
    #[arg(long, default_value = "0")]
    pub renewal_jitter: Jitter,
}

impl StandaloneArgs {
    /// The controllers' settings, or `None` outside standalone mode; an error for back-off
    /// flags cert-manager would refuse.
    pub fn settings(&self) -> Result<Option<Settings>, String> {
        if !self.certificate_controllers {
            return Ok(None);
        }
        let (min, max) = (
            self.certificate_request_minimum_backoff_duration,
            self.certificate_request_maximum_backoff_duration,
        );
        let signed = |d: Duration| k8s_openapi::jiff::SignedDuration::try_from(d).unwrap_or_default();
        crate::certificates::validation::validate_backoff(signed(min), signed(max))?;
        Ok(Some(Settings {
            approve_own_requests: self.approve_own_requests.unwrap_or(true),
            minimum_backoff: min,
            maximum_backoff: max,
            cert_manager_lease_namespace: self.cert_manager_lease_namespace.clone(),
            owner_reference: self.enable_certificate_owner_ref,
            copied_annotation_prefixes: self.copied_annotation_prefixes.clone(),
            renewal_jitter: self.renewal_jitter,
        }))
    }
}
