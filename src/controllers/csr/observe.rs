//! Observe: what the CSR controller reads before it decides: the CSR, the issuer caches and,
//! for a namespaced Issuer, the API server's SubjectAccessReview.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::certificates::v1::{CertificateSigningRequest, CertificateSigningRequestSpec};
use kube::api::PostParams;

use super::decide::{Access, Asks, CsrView, Invalid, reason};
use crate::api::certmanager::KEY_USAGES;
use crate::certificates::go::{format_go_duration, parse_go_duration};
use crate::controllers::signing::IssuerName;

/// cert-manager's annotations on a CSR (`experimental.cert-manager.io/...`).
pub const REQUEST_DURATION: &str = "experimental.cert-manager.io/request-duration";
pub const REQUEST_IS_CA: &str = "experimental.cert-manager.io/request-is-ca";

/// A certificate's lifetime when the CSR asks for none (cert-manager's default, 90 days).
const DEFAULT_DURATION: Duration = Duration::from_secs(2160 * 3600);
/// The shortest lifetime a CSR may ask for (what `spec.expirationSeconds` allows).
const MINIMUM_DURATION: Duration = Duration::from_secs(600);

/// The CSR's own state.
pub fn csr_view(csr: &CertificateSigningRequest) -> CsrView {
    CsrView {
        approved: has_true(csr, "Approved"),
        denied: has_true(csr, "Denied"),
        failed: has_true(csr, "Failed"),
        has_certificate: has_certificate(csr),
        asks: asks(csr.metadata.annotations.as_ref(), &csr.spec),
    }
}

/// Whether the CSR is done with for good: signed, failed or denied (what it asks is not read).
pub fn is_settled(csr: &CertificateSigningRequest) -> bool {
    has_certificate(csr) || has_true(csr, "Failed") || has_true(csr, "Denied")
}

fn has_true(csr: &CertificateSigningRequest, type_: &str) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

fn has_certificate(csr: &CertificateSigningRequest) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.certificate.as_ref())
        .is_some_and(|c| !c.0.is_empty())
}

/// Pure: what a CSR asks for, as cert-manager reads it: the duration annotation first, then
/// `spec.expirationSeconds`, then 90 days; usages (none means digital signature and key
/// encipherment).
pub fn asks(
    annotations: Option<&BTreeMap<String, String>>,
    spec: &CertificateSigningRequestSpec,
) -> Result<Asks, Invalid> {
    let annotation = |key: &str| annotations.and_then(|a| a.get(key));
    let duration = match annotation(REQUEST_DURATION) {
        Some(text) => parse_go_duration(text)
            .ok()
            .and_then(|d| Duration::try_from(d).ok())
            .ok_or_else(|| Invalid {
                reason: reason::ERROR_PARSE_DURATION,
                message: format!(
                    "Failed to parse requested duration: {REQUEST_DURATION} {text:?} is not a duration"
                ),
            })?,
        None => spec
            .expiration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map_or(DEFAULT_DURATION, Duration::from_secs),
    };
    if duration < MINIMUM_DURATION {
        return Err(Invalid {
            reason: reason::INVALID_DURATION,
            message: format!(
                "CertificateSigningRequest minimum allowed duration is {}, requested {}",
                go(MINIMUM_DURATION),
                go(duration)
            ),
        });
    }
    let mut usages = spec.usages.clone().unwrap_or_default();
    if usages.is_empty() {
        usages = vec!["digital signature".into(), "key encipherment".into()];
    }
    if let Some(unknown) = usages.iter().find(|u| !KEY_USAGES.contains(&u.as_str())) {
        return Err(Invalid {
            reason: reason::FAILED,
            message: format!("CertificateSigningRequest has failed permanently: unknown usage {unknown:?}"),
        });
    }
    Ok(Asks {
        duration,
        is_ca: annotation(REQUEST_IS_CA).is_some_and(|v| v == "true"),
        usages,
    })
}

fn go(d: Duration) -> String {
    format_go_duration(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// Pure: the SubjectAccessReview asking whether the CSR's requester may `reference` the
/// signer `name` (the issuer's, or `*`) in `namespace`.
pub fn review(spec: &CertificateSigningRequestSpec, namespace: &str, name: &str) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: spec.username.clone(),
            groups: spec.groups.clone(),
            uid: spec.uid.clone(),
            extra: spec.extra.clone(),
            resource_attributes: Some(ResourceAttributes {
                group: Some(crate::api::GROUP.into()),
                resource: Some("signers".into()),
                verb: Some("reference".into()),
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                version: Some("*".into()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    }
}

/// Asks the API server whether the requester may reference the namespaced Issuer: by its name,
/// then by `*`.
pub async fn access(
    client: &kube::Client,
    csr: &CertificateSigningRequest,
    signer: &IssuerName,
) -> Result<Access, kube::Error> {
    let api = kube::Api::<SubjectAccessReview>::all(client.clone());
    let namespace = signer.namespace.as_deref().unwrap_or_default();
    for name in [signer.name.as_str(), "*"] {
        let answer = api
            .create(&PostParams::default(), &review(&csr.spec, namespace, name))
            .await?;
        if answer.status.is_some_and(|s| s.allowed) {
            return Ok(Access::Allowed);
        }
    }
    Ok(Access::Refused)
}

#[cfg(test)]
mod tests;
