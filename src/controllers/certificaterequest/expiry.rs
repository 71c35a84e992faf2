//! The expiry series of the Certificates whose requests this controller signed
//! (`cfssl_issuer_certificate_expiry_seconds`), and which request each series stands for.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use kube::ResourceExt;

use super::RequestContext;
use super::observe::request_key;
use crate::api::certmanager::CertificateRequest;
use crate::certificates::validation::names;
use crate::clock::lock;
use crate::telemetry::metrics::CertificateLabels;

/// Sets the expiry series of `cr`, signed by `issuer`, to `not_after`.
pub fn record(ctx: &RequestContext, cr: &CertificateRequest, issuer: &str, not_after: i64) {
    let labels = expiry_labels(cr, issuer);
    ctx.core
        .shared
        .metrics
        .certificate_expiry
        .get_or_create(&labels)
        .set(not_after as f64);
    ctx.expiry.set(labels, &request_key(cr));
}

/// The expiry series of a request signed by `issuer`. Keyed by Certificate, so the series
/// count follows Certificates, not requests.
///
/// The `name` label is [`series_name`]: never the `cert-manager.io/certificate-name`
/// annotation, which whoever creates the request writes freely and at any length.
pub fn expiry_labels(cr: &CertificateRequest, issuer: &str) -> CertificateLabels {
    CertificateLabels {
        namespace: cr.namespace().unwrap_or_default(),
        name: series_name(cr),
        issuer: issuer.into(),
    }
}

/// The name an expiry series goes by: the Certificate named by the request's controller owner
/// reference (cert-manager's requests have one), or else the request's own name. Both are
/// Kubernetes object names, at most 253 bytes: the API server checks the request's, and an
/// owner reference's name, which it does not check, is used only when it is a DNS-1123
/// subdomain. Whoever writes the request can still pick the name, but only among names in its
/// own namespace, which the `namespace` label keeps apart from everyone else's.
pub fn series_name(cr: &CertificateRequest) -> String {
    let certificate = cr.owner_references().iter().find(|r| {
        r.controller == Some(true)
            && r.kind == "Certificate"
            && r.api_version.split('/').next() == Some("cert-manager.io")
            && names::dns1123_subdomain(&r.name).is_empty()
    });
    certificate.map_or_else(|| cr.name_any(), |r| r.name.clone())
}

/// Which request's signature each Certificate's expiry series shows. The series goes when that
/// request is deleted, or when a relist no longer brings it, without signed requests being kept
/// in the cache to tell.
#[derive(Debug, Default)]
pub struct ExpiryOwners {
    by_series: Mutex<HashMap<CertificateLabels, String>>,
}

impl ExpiryOwners {
    /// The request `uid` has just set the series `labels`.
    pub fn set(&self, labels: CertificateLabels, uid: &str) {
        lock(&self.by_series).insert(labels, uid.to_string());
    }

    /// Whether the series `labels` showed the request `uid`, which was deleted: if so, the
    /// series has no request left and the caller removes it.
    pub fn release(&self, labels: &CertificateLabels, uid: &str) -> bool {
        let mut owners = lock(&self.by_series);
        if owners.get(labels).is_some_and(|owner| owner == uid) {
            owners.remove(labels);
            return true;
        }
        false
    }

    /// Keeps the series whose request is in `live`; returns the others, for removal.
    pub fn retain(&self, live: &HashSet<String>) -> Vec<CertificateLabels> {
        let mut gone = Vec::new();
        lock(&self.by_series).retain(|labels, uid| {
            let keep = live.contains(uid);
            if !keep {
                gone.push(labels.clone());
            }
            keep
        });
        gone
    }

    pub fn len(&self) -> usize {
        lock(&self.by_series).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;
    use crate::api::certmanager::CertificateRequestSpec;

    /// The request `web-1` in `apps`, annotated with `annotation` and owned by `owner`.
    fn request(annotation: Option<&str>, owner: Option<OwnerReference>) -> CertificateRequest {
        let mut cr = CertificateRequest::new("web-1", CertificateRequestSpec::default());
        cr.metadata.namespace = Some("apps".into());
        cr.metadata.annotations =
            annotation.map(|a| [("cert-manager.io/certificate-name".to_string(), a.to_string())].into());
        cr.metadata.owner_references = owner.map(|o| vec![o]);
        cr
    }

    fn owner(api_version: &str, kind: &str, name: &str, controller: bool) -> Option<OwnerReference> {
        Some(OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: "uid-web".into(),
            controller: Some(controller),
            block_owner_deletion: None,
        })
    }

    #[test]
    fn the_series_name_is_an_object_name_never_the_annotation() {
        let mib = "x".repeat(1 << 20);
        let v1 = "cert-manager.io/v1";
        // (row, certificate-name annotation, owner reference, name label)
        let rows = [
            ("no owner: the request's name", None, None, "web-1"),
            ("the annotation alone is not trusted", Some("api"), None, "web-1"),
            ("a 1 MiB annotation", Some(mib.as_str()), None, "web-1"),
            (
                "the controlling Certificate",
                Some("api"),
                owner(v1, "Certificate", "web", true),
                "web",
            ),
            (
                "an owner that is not the controller",
                None,
                owner(v1, "Certificate", "web", false),
                "web-1",
            ),
            (
                "an owner of another kind",
                None,
                owner(v1, "Issuer", "web", true),
                "web-1",
            ),
            (
                "a Certificate of another group",
                None,
                owner("example.com/v1", "Certificate", "web", true),
                "web-1",
            ),
            (
                "a 1 MiB owner name",
                None,
                owner(v1, "Certificate", &mib, true),
                "web-1",
            ),
            (
                "an owner name that is no object name",
                None,
                owner(v1, "Certificate", "Web/x", true),
                "web-1",
            ),
        ];
        for (row, annotation, owner, want) in rows {
            let labels = expiry_labels(&request(annotation, owner), "Issuer/apps/ca");
            let want = CertificateLabels {
                namespace: "apps".into(),
                name: want.into(),
                issuer: "Issuer/apps/ca".into(),
            };
            assert_eq!(labels, want, "{row}");
        }
    }

    #[test]
    fn an_expiry_series_goes_with_the_request_it_shows() {
        let web = |issuer: &str| CertificateLabels {
            namespace: "apps".into(),
            name: "web".into(),
            issuer: issuer.into(),
        };
        let owners = ExpiryOwners::default();
        owners.set(web("Issuer/apps/ca"), "r1");
        owners.set(web("Issuer/apps/ca"), "r2");
        owners.set(web("ClusterIssuer/ca"), "r3");
        // (row, series, deleted request, removed)
        let cases = [
            (
                "an older request of the Certificate",
                web("Issuer/apps/ca"),
                "r1",
                false,
            ),
            ("another issuer's series", web("Issuer/apps/ca"), "r3", false),
            ("the request the series shows", web("Issuer/apps/ca"), "r2", true),
            ("already released", web("Issuer/apps/ca"), "r2", false),
        ];
        for (row, labels, uid, want) in cases {
            assert_eq!(owners.release(&labels, uid), want, "{row}");
        }
        assert_eq!(owners.len(), 1);
        owners.set(web("Issuer/apps/ca"), "r4");
        let gone = owners.retain(&["r4".to_string()].into());
        assert_eq!(gone, [web("ClusterIssuer/ca")], "a relist without r3");
        assert_eq!(owners.len(), 1);
    }
}
