//! What a request may bring into the cache. Tenants write requests, and the cache keeps ours
//! whole, so a request over a budget is kept as its name, issuer and conditions only, with
//! [`TRIMMED`] saying what it held; the controller fails it with that, never reading its body.

use std::collections::BTreeMap;

use crate::api::certmanager::{CertificateRequest, CertificateRequestSpec};
use crate::controllers::kit::size::json_len;
use crate::pki::{CsrError, MAX_CSR_BYTES};

/// The annotation the request watch sets on a trimmed request (and removes from every other):
/// `csr:<bytes>` or `rest:<bytes>`. It lives only in this process's cache: the controller
/// applies status alone, so it is never written back.
pub const TRIMMED: &str = "cfssl-issuer.wikimedia.org/trimmed";

/// The most a request may hold besides its CSR (labels, annotations, owner references, the
/// requester's user info, the rest of its spec). cert-manager's requests carry a few hundred
/// bytes of these; 64 KiB leaves room for long annotation values copied from a Certificate.
pub const MAX_REST_BYTES: usize = 64 * 1024;

/// The longest object name Kubernetes accepts.
const MAX_NAME: usize = 253;

/// Why a request was trimmed, with the size it had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Oversize {
    /// `spec.request` over [`MAX_CSR_BYTES`].
    Csr(usize),
    /// Everything else over [`MAX_REST_BYTES`].
    Rest(usize),
}

impl std::fmt::Display for Oversize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Oversize::Csr(size) => CsrError::TooLarge { size }.fmt(f),
            Oversize::Rest(size) => write!(
                f,
                "its metadata and spec besides the CSR are {size} bytes, over the {} KiB limit",
                MAX_REST_BYTES / 1024
            ),
        }
    }
}

impl Oversize {
    /// The [`TRIMMED`] annotation's value.
    fn marker(self) -> String {
        match self {
            Oversize::Csr(size) => format!("csr:{size}"),
            Oversize::Rest(size) => format!("rest:{size}"),
        }
    }

    /// Pure: what the [`TRIMMED`] annotation of a cached request says, if anything.
    pub fn of(cr: &CertificateRequest) -> Option<Oversize> {
        let marker = cr.metadata.annotations.as_ref()?.get(TRIMMED)?;
        let (what, size) = marker.split_once(':')?;
        let size = size.parse().ok()?;
        match what {
            "csr" => Some(Oversize::Csr(size)),
            "rest" => Some(Oversize::Rest(size)),
            _ => None,
        }
    }
}

/// Pure: whether `cr` (its managedFields already dropped) is over a budget. The rest is
/// measured as its JSON, counted without being kept.
pub fn measure(cr: &CertificateRequest) -> Option<Oversize> {
    let csr = cr.spec.request.0.len();
    if csr > MAX_CSR_BYTES {
        return Some(Oversize::Csr(csr));
    }
    // `spec.request` is written as base64 in the spec's JSON.
    let rest = (json_len(&cr.metadata) + json_len(&cr.spec)).saturating_sub(csr.div_ceil(3) * 4);
    (rest > MAX_REST_BYTES).then_some(Oversize::Rest(rest))
}

/// Pure: the request as the cache keeps it. An over-budget one keeps its identity, issuer
/// reference (its name only when of a sane length) and status, and says why in [`TRIMMED`];
/// every other loses any [`TRIMMED`] annotation a tenant wrote.
pub fn within_budget(mut cr: CertificateRequest) -> CertificateRequest {
    if let Some(annotations) = cr.metadata.annotations.as_mut() {
        annotations.remove(TRIMMED);
    }
    let Some(oversize) = measure(&cr) else {
        return cr;
    };
    let meta = &mut cr.metadata;
    meta.labels = None;
    meta.annotations = Some(BTreeMap::from([(TRIMMED.to_string(), oversize.marker())]));
    meta.owner_references = None;
    meta.finalizers = None;
    let mut issuer_ref = std::mem::take(&mut cr.spec.issuer_ref);
    if issuer_ref.name.len() > MAX_NAME {
        issuer_ref.name.clear();
    }
    cr.spec = CertificateRequestSpec {
        issuer_ref,
        ..Default::default()
    };
    cr
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request(csr_bytes: usize, annotation_bytes: usize) -> CertificateRequest {
        serde_json::from_value(json!({
            "apiVersion": "cert-manager.io/v1", "kind": "CertificateRequest",
            "metadata": {
                "name": "r", "namespace": "apps", "uid": "u1", "resourceVersion": "7",
                "labels": {"app": "web"},
                "annotations": {"note": "n".repeat(annotation_bytes), TRIMMED: "csr:1"},
                "ownerReferences": [{"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
                    "name": "web", "uid": "c1", "controller": true}],
            },
            "spec": {
                "request": base64::Engine::encode(
                    &base64::engine::general_purpose::STANDARD, vec![b'C'; csr_bytes]),
                "issuerRef": {"group": crate::api::GROUP, "kind": "Issuer", "name": "ca"},
                "usages": ["digital signature"],
            },
            "status": {"conditions": [
                {"type": "Ready", "status": "False", "reason": "Pending", "message": "m"},
            ]},
        }))
        .unwrap()
    }

    /// Kept whole within the budget (a tenant's marker removed); otherwise only identity,
    /// issuer reference and status, with the marker saying why.
    #[test]
    fn budget_table() {
        let cases = [
            ("small", 3_000, 100, None),
            ("the largest CSR", MAX_CSR_BYTES, 100, None),
            (
                "a CSR a byte over",
                MAX_CSR_BYTES + 1,
                100,
                Some(Oversize::Csr(65_537)),
            ),
            ("1 MiB CSR", 1 << 20, 100, Some(Oversize::Csr(1_048_576))),
            ("annotations over", 3_000, 70_000, Some(Oversize::Rest(70_356))),
        ];
        for (row, csr, notes, want) in cases {
            let kept = within_budget(request(csr, notes));
            assert_eq!(Oversize::of(&kept), want, "{row}");
            let annotations = kept.metadata.annotations.clone().unwrap_or_default();
            match want {
                None => {
                    assert_eq!(kept.spec.request.0.len(), csr, "{row}");
                    assert_eq!(annotations.get(TRIMMED), None, "{row}");
                    assert!(kept.metadata.owner_references.is_some(), "{row}");
                }
                Some(oversize) => {
                    assert_eq!(annotations.len(), 1, "{row}");
                    assert_eq!(annotations.get(TRIMMED), Some(&oversize.marker()), "{row}");
                    assert_eq!(kept.spec.request.0.len(), 0, "{row}");
                    assert_eq!(kept.spec.issuer_ref.name, "ca", "{row}");
                    assert_eq!(kept.metadata.labels, None, "{row}");
                    assert_eq!(kept.metadata.owner_references, None, "{row}");
                    assert_eq!(kept.metadata.uid.as_deref(), Some("u1"), "{row}");
                    assert_eq!(kept.status.as_ref().map(|s| s.conditions.len()), Some(1), "{row}");
                }
            }
        }
    }

    #[test]
    fn messages_and_markers() {
        let cases = [
            (
                Oversize::Csr(70_000),
                "csr:70000",
                "the CSR is 70000 bytes, over the 64 KiB limit",
            ),
            (
                Oversize::Rest(70_356),
                "rest:70356",
                "its metadata and spec besides the CSR are 70356 bytes, over the 64 KiB limit",
            ),
        ];
        for (oversize, marker, message) in cases {
            assert_eq!(
                (oversize.marker(), oversize.to_string()),
                (marker.to_string(), message.to_string())
            );
        }
        let mut cr = request(10, 10);
        for (written, want) in [
            ("csr:12", Some(Oversize::Csr(12))),
            ("csr:x", None),
            ("other:1", None),
        ] {
            cr.metadata
                .annotations
                .as_mut()
                .unwrap()
                .insert(TRIMMED.into(), written.into());
            assert_eq!(Oversize::of(&cr), want, "{written}");
        }
    }

    /// An issuer name longer than any object's is not kept.
    #[test]
    fn an_absurd_issuer_name_is_dropped() {
        let mut cr = request(MAX_CSR_BYTES + 1, 10);
        cr.spec.issuer_ref.name = "x".repeat(MAX_NAME + 1);
        assert_eq!(within_budget(cr).spec.issuer_ref.name, "");
    }
}
