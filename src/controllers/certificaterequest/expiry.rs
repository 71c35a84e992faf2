//! The expiry series of the Certificates whose requests this controller signed
//! (`cfssl_issuer_certificate_expiry_seconds`), and which request each series stands for.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use kube::ResourceExt;

use super::RequestContext;
use super::observe::request_key;
use crate::api::certmanager::CertificateRequest;
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
pub fn expiry_labels(cr: &CertificateRequest, issuer: &str) -> CertificateLabels {
    let name = cr
        .annotations()
        .get("cert-manager.io/certificate-name")
        .cloned()
        .unwrap_or_else(|| cr.name_any());
    CertificateLabels {
        namespace: cr.namespace().unwrap_or_default(),
        name,
        issuer: issuer.into(),
    }
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
    use super::*;

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
