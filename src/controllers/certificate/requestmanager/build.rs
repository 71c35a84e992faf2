//! The CertificateRequest for a Certificate's next revision, as cert-manager's request
//! manager builds it: the CSR from the spec and key; duration, issuerRef, isCA and usages
//! from the spec; the Certificate's labels; its annotations filtered by the copied prefixes,
//! plus the revision, key Secret and Certificate name (and, renewing, the current notAfter as
//! the issuance budget's renew-by); the Certificate as controlling owner.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use sha2::{Digest, Sha256};

use crate::api::certmanager::{Certificate, CertificateRequest, CertificateRequestSpec};
use crate::certificates::go::{format_go_duration, parse_go_duration};
use crate::certificates::keys::annotation;
use crate::certificates::secret::certificate_owner_reference;
use crate::controllers::signing::budget::RENEW_BY;
use crate::pki::keys::Key;
use crate::pki::request::{RequestError, build_csr};

/// The longest request name before the revision suffix (cert-manager's 233).
const MAX_NAME: usize = 233;

/// `<certificate>-<revision>`; a Certificate name over 233 characters becomes its first
/// DNS-safe characters, a dash and the SHA-256 of the whole name.
/// `text` as cert-manager writes a request's `spec.duration`: its `metav1.Duration` printed by
/// Go's `time.Duration.String` (`2160h` -> `2160h0m0s`). Text Go cannot parse is kept as is
/// (validation reports it on the Certificate).
pub fn go_duration_string(text: &str) -> String {
    parse_go_duration(text)
        .ok()
        .and_then(|d| i64::try_from(d.as_nanos()).ok())
        .map_or_else(|| text.to_string(), format_go_duration)
}

pub fn request_name(certificate: &str, revision: i64) -> String {
    format!("{}-{revision}", shortened(certificate, MAX_NAME))
}

fn shortened(name: &str, max: usize) -> String {
    if name.len() <= max {
        return name.to_string();
    }
    let digest = hex::encode(Sha256::digest(name.as_bytes()));
    let prefix = dns_safe_prefix(name, max - digest.len() - 1);
    if prefix.is_empty() {
        digest
    } else {
        format!("{prefix}-{digest}")
    }
}

/// The first `n` bytes of a DNS subdomain, cut back to end in a letter or digit.
fn dns_safe_prefix(name: &str, n: usize) -> &str {
    let cut = &name[..n.min(name.len())];
    cut.trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
}

/// The annotations cert-manager copies by `prefixes`, in order: `*` copies all, a prefix
/// copies those it starts, a `-prefix` removes those copied so far that it starts.
pub fn annotations_to_copy(all: &BTreeMap<String, String>, prefixes: &[String]) -> BTreeMap<String, String> {
    let everything = prefixes.iter().any(|p| p == "*");
    let mut out = BTreeMap::new();
    for prefix in prefixes {
        if let Some(excluded) = prefix.strip_prefix('-') {
            out.retain(|k: &String, _| !k.starts_with(excluded));
            continue;
        }
        for (k, v) in all {
            if everything || k.starts_with(prefix.as_str()) {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out
}

/// The request for `revision` of `crt`, signed by `key` (kept in the Secret `key_secret`).
pub fn request(
    crt: &Certificate,
    key: &Key,
    revision: i64,
    key_secret: &str,
    prefixes: &[String],
) -> Result<CertificateRequest, RequestError> {
    let csr = build_csr(&crt.spec, key)?;
    let mut annotations = annotations_to_copy(crt.annotations(), prefixes);
    annotations.insert(annotation::CERTIFICATE_REVISION.to_string(), revision.to_string());
    annotations.insert(
        annotation::PRIVATE_KEY_SECRET_NAME.to_string(),
        key_secret.to_string(),
    );
    annotations.insert(annotation::CERTIFICATE_NAME.to_string(), crt.name_any());
    // A renewal's place in its issuer's issuance budget line: soonest expiry first.
    if let Some(not_after) = crt.status.as_ref().and_then(|s| s.not_after.as_ref()) {
        annotations.insert(RENEW_BY.to_string(), not_after.0.to_string());
    }
    let spec = CertificateRequestSpec {
        request: ByteString(csr.into_bytes()),
        issuer_ref: crt.spec.issuer_ref.clone(),
        duration: crt.spec.duration.as_deref().map(go_duration_string),
        is_ca: crt.spec.is_ca,
        usages: crt.spec.usages.clone(),
        ..CertificateRequestSpec::default()
    };
    let mut cr = CertificateRequest::new(&request_name(&crt.name_any(), revision), spec);
    cr.metadata = ObjectMeta {
        namespace: crt.namespace(),
        labels: Some(crt.labels().clone()).filter(|l| !l.is_empty()),
        annotations: Some(annotations),
        owner_references: Some(vec![certificate_owner_reference(crt)]),
        ..cr.metadata
    };
    Ok(cr)
}
