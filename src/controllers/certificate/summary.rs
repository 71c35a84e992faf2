//! What the standalone caches keep of an issued Secret: its name, namespace, UID,
//! resourceVersion and owners ([`secret_summary`]); its whole copy sits in `kit::recent`
//! beside the store. Keeping every one whole was most of what 10,000 Ready Certificates cost
//! (its data, annotations, labels and managedFields: 5.3 of its 6 KB).
//!
//! Next-key Secrets are kept whole in the store: they live for one issuance, and the key
//! manager and the request manager read their keys on every pass of it. Finished requests are
//! summarised by the request watch (`CertificateRequest::summary`).

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::certificates::next_key;

/// The summary the store keeps of `secret`; none for a next-key Secret, kept whole.
pub fn secret_summary(secret: &Secret) -> Option<Secret> {
    if next_key::labelled(secret) {
        return None;
    }
    let meta = &secret.metadata;
    Some(Secret {
        metadata: ObjectMeta {
            name: meta.name.clone(),
            namespace: meta.namespace.clone(),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            owner_references: meta.owner_references.clone(),
            ..ObjectMeta::default()
        },
        ..Secret::default()
    })
}

/// Whether a cached Secret may be a summary, to be had whole from the copies or read live. A
/// Secret that truly has no data is read live too: the same answer, one GET later.
pub fn is_summary(secret: &Secret) -> bool {
    secret.data.is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::kit::testing::labelled_secret;

    /// An issued Secret's summary is its name, namespace, UID, version and owners; a next-key
    /// Secret has none (the store keeps it whole).
    #[test]
    fn issued_secrets_are_summarised_and_next_key_ones_not() {
        let whole = labelled_secret("tls", "7", false, 1);
        let want = Secret {
            metadata: ObjectMeta {
                name: Some("tls".to_string()),
                namespace: Some("ns".to_string()),
                uid: Some("uid-tls".to_string()),
                resource_version: Some("7".to_string()),
                owner_references: whole.metadata.owner_references.clone(),
                ..ObjectMeta::default()
            },
            ..Secret::default()
        };
        let summary = secret_summary(&whole);
        assert_eq!(summary.as_ref(), Some(&want));
        assert!(summary.as_ref().is_some_and(is_summary));
        assert!(!is_summary(&whole));
        assert_eq!(secret_summary(&labelled_secret("tls", "7", true, 1)), None);
    }
}
