//! `CertificateRequest`: one CSR for one issuer, signed at most once.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

use super::{CertificateRequestCondition as Condition, IssuerRef, Unknown, bytes, usages};

/// What is asked of the issuer. Immutable after creation (cert-manager's webhook enforces it).
// Clippy reads the repeated `type_ = "string"` of the printer columns as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cert-manager.io",
    version = "v1",
    kind = "CertificateRequest",
    namespaced,
    status = "CertificateRequestStatus",
    derive = "PartialEq",
    shortname = "cr",
    shortname = "crs",
    category = "cert-manager",
    schema = "manual",
    printcolumn(
        name = "Approved",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type == "Approved")].status"#
    ),
    printcolumn(
        name = "Denied",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type == "Denied")].status"#
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type == "Ready")].status"#
    ),
    printcolumn(name = "Issuer", type_ = "string", json_path = ".spec.issuerRef.name"),
    printcolumn(name = "Requester", type_ = "string", json_path = ".spec.username"),
    printcolumn(
        name = "Status",
        type_ = "string",
        priority = 1,
        json_path = r#".status.conditions[?(@.type == "Ready")].message"#
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    selectable = ".spec.issuerRef.group",
    selectable = ".spec.issuerRef.kind",
    selectable = ".spec.issuerRef.name"
)]
// `remote = "Self"` turns the derives into inherent functions, wrapped by `optional_spec!` so
// that an absent `spec` reads as an empty one.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", remote = "Self")]
pub struct CertificateRequestSpec {
    /// The PEM `CERTIFICATE REQUEST`, decoded from the base64 of the JSON.
    #[schemars(schema_with = "bytes")]
    pub request: ByteString,
    pub issuer_ref: IssuerRef,
    /// Requested lifetime as a Go duration (`2160h0m0s`); absent means cert-manager's 90 days.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// Ask for a CA certificate; must agree with the CSR's basic constraints, if it has them.
    #[serde(default, rename = "isCA", skip_serializing_if = "std::ops::Not::not")]
    pub is_ca: bool,
    /// Key usages; cert-manager means `digital signature` and `key encipherment` when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "usages")]
    pub usages: Vec<String>,
    /// Who created the request; set by cert-manager's webhook, never by clients.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub username: String,
    /// UID of the user who created the request; set like `username`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Groups of the user who created the request; set like `username`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Extra attributes of the user who created the request; set like `username`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: Unknown,
    /// Set only on the summary a cache keeps of a finished request ([`CertificateRequest::summary`]);
    /// never read from the API nor written to it, so no one but this process can set it.
    #[serde(skip)]
    #[schemars(skip)]
    pub summarised: Option<Box<Summarised>>,
}

crate::api::crd::optional_spec!(CertificateRequestSpec);

/// What a cached summary keeps of a finished request beside its identity: boxed, and not as
/// annotations, since a map's first node alone is 544 bytes (most of a summary's memory, at
/// thousands of requests).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summarised {
    /// The revision it was made for, parsed from its annotation.
    pub revision: Option<i64>,
    /// The SHA-256 of its chain; None when it holds none.
    pub chain_sha256: Option<[u8; 32]>,
}

/// What the issuer (and the approver) answered.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertificateRequestStatus {
    /// `Ready` (ours to write), `Approved`/`Denied` (the approver's), `InvalidRequest`; one
    /// per type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// PEM leaf certificate followed by its chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "bytes")]
    pub certificate: Option<ByteString>,
    /// PEM CA certificate, best effort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "bytes")]
    pub ca: Option<ByteString>,
    /// When the request failed or was denied; cert-manager backs off from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_time: Option<Time>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: Unknown,
}

impl JsonSchema for CertificateRequest {
    fn schema_name() -> Cow<'static, str> {
        "CertificateRequest".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut schema = super::root_schema::<CertificateRequestSpec, CertificateRequestStatus>(
            generator,
            "One request for a signed certificate from one issuer (cert-manager.io/v1); \
             its spec is immutable and it succeeds or fails once.",
        );
        // What an approver approved must be what is signed. cert-manager's webhook refuses a
        // changed spec; standalone mode runs without it, so the API server does (the signer
        // also refuses a request whose generation says its spec changed).
        if let Some(spec) = schema.get_mut("properties").and_then(|p| p.get_mut("spec")) {
            spec["x-kubernetes-validations"] = serde_json::json!([{
                "rule": "self == oldSelf",
                "message": "spec is immutable: create a new CertificateRequest",
            }]);
        }
        schema
    }
}

impl CertificateRequestStatus {
    /// The condition of `type_`, if present.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes).into()
}

impl CertificateRequest {
    /// Whether the request was issued exactly `chain`: by its chain, or by the digest a summary
    /// keeps in its place.
    pub fn issued_chain(&self, chain: &[u8]) -> bool {
        if let Some(summarised) = &self.spec.summarised {
            return summarised.chain_sha256 == Some(sha256(chain));
        }
        self.status
            .as_ref()
            .and_then(|s| s.certificate.as_ref())
            .is_some_and(|c| c.0 == chain)
    }

    /// The revision it was made for: a summary's, or the one its annotation `annotation`
    /// (cert-manager's revision annotation) gives.
    pub fn revision(&self, annotation: &str) -> Option<i64> {
        match &self.spec.summarised {
            Some(summarised) => summarised.revision,
            None => self.metadata.annotations.as_ref()?.get(annotation)?.parse().ok(),
        }
    }

    /// What a cache keeps of a finished request to tell which one a Certificate's revision
    /// and Secret pick: its name, namespace, UID, resourceVersion, creation time, owners, and
    /// [`Summarised`] (its revision, read from `annotation`, and its chain's digest). No other
    /// annotation, spec or status: whoever reads more reads it whole ([`Self::is_summary`]).
    pub fn summary(&self, annotation: &str) -> CertificateRequest {
        let meta = &self.metadata;
        let chain = self.status.as_ref().and_then(|s| s.certificate.as_ref());
        let spec = CertificateRequestSpec {
            summarised: Some(Box::new(Summarised {
                revision: self.revision(annotation),
                chain_sha256: chain.map(|chain| sha256(&chain.0)),
            })),
            ..CertificateRequestSpec::default()
        };
        let mut summary = CertificateRequest::new(&meta.name.clone().unwrap_or_default(), spec);
        summary.metadata = ObjectMeta {
            name: meta.name.clone(),
            namespace: meta.namespace.clone(),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            creation_timestamp: meta.creation_timestamp.clone(),
            owner_references: meta.owner_references.clone(),
            ..ObjectMeta::default()
        };
        summary
    }

    /// Whether a cached request is a summary, to be had whole from the copies or read live.
    pub fn is_summary(&self) -> bool {
        self.spec.summarised.is_some()
    }

    /// The condition of `type_`, if there is a status and it has one.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.status.as_ref().and_then(|s| s.condition(type_))
    }

    /// Whether the condition of `type_` is present with status `True`.
    pub fn has_true(&self, type_: &str) -> bool {
        self.condition(type_).is_some_and(Condition::is_true)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Only this process makes a summary: a `summarised` field written to the API is an
    /// unknown field, never the summary's, and a summary writes nothing of it back.
    #[test]
    fn a_summary_is_never_read_from_nor_written_to_the_api() {
        let claimed: CertificateRequest = serde_json::from_value(json!({
            "metadata": { "name": "web-1", "namespace": "apps",
                "annotations": { "cert-manager.io/certificate-revision": "3" } },
            "spec": { "request": "", "issuerRef": { "name": "ca" },
                "summarised": { "revision": 9, "chainSha256": null } },
            "status": { "certificate": "Q0VSVA==" },
        }))
        .unwrap();
        assert!(!claimed.is_summary());
        assert_eq!(claimed.revision("cert-manager.io/certificate-revision"), Some(3));
        assert!(claimed.issued_chain(b"CERT"));

        let summary = claimed.summary("cert-manager.io/certificate-revision");
        assert!(summary.is_summary());
        assert_eq!(summary.revision("cert-manager.io/certificate-revision"), Some(3));
        assert_eq!(summary.metadata.annotations, None);
        assert!(summary.issued_chain(b"CERT"));
        assert!(!summary.issued_chain(b"CERT2"));
        let written = serde_json::to_value(&summary).unwrap();
        assert_eq!(
            written["spec"],
            json!({ "request": "", "issuerRef": { "name": "" } })
        );
    }
}
