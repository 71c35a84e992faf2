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
}

crate::api::crd::optional_spec!(CertificateRequestSpec);

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

/// Set on every request summary the request watch caches ([`CertificateRequest::summary`], and
/// removed from every other request it caches): the chain's SHA-256, hex, or empty when the
/// request holds no chain. Its presence is what marks a summary. It lives only in this
/// process's cache: the controllers apply a request's status alone, so it is never written
/// back.
pub const CACHED_CHAIN_SHA256: &str = "cfssl-issuer.wikimedia.org/cached-chain-sha256";

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(bytes))
}

impl CertificateRequest {
    /// Whether the request was issued exactly `chain`: by its chain, or by the digest the cache
    /// keeps in its place.
    pub fn issued_chain(&self, chain: &[u8]) -> bool {
        if let Some(digest) = self
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(CACHED_CHAIN_SHA256))
        {
            return !digest.is_empty() && *digest == sha256_hex(chain);
        }
        self.status
            .as_ref()
            .and_then(|s| s.certificate.as_ref())
            .is_some_and(|c| c.0 == chain)
    }

    /// What a cache keeps of a finished request to tell which one a Certificate's revision
    /// and Secret pick: its name, namespace, UID, resourceVersion, creation time, owners, the
    /// annotations named in `kept` and its chain's digest ([`CACHED_CHAIN_SHA256`], the mark
    /// of a summary). No spec and no status: whoever reads more reads it whole
    /// ([`Self::is_summary`]).
    pub fn summary(&self, kept: &[&str]) -> CertificateRequest {
        let meta = &self.metadata;
        let mut annotations: BTreeMap<String, String> = meta
            .annotations
            .iter()
            .flatten()
            .filter(|(key, _)| kept.contains(&key.as_str()))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        let chain = self.status.as_ref().and_then(|s| s.certificate.as_ref());
        let digest = chain.map(|chain| sha256_hex(&chain.0)).unwrap_or_default();
        annotations.insert(CACHED_CHAIN_SHA256.to_string(), digest);
        let mut summary = CertificateRequest::new(
            &meta.name.clone().unwrap_or_default(),
            CertificateRequestSpec::default(),
        );
        summary.metadata = ObjectMeta {
            name: meta.name.clone(),
            namespace: meta.namespace.clone(),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            creation_timestamp: meta.creation_timestamp.clone(),
            owner_references: meta.owner_references.clone(),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        };
        summary
    }

    /// Whether a cached request is a summary, to be had whole from the copies or read live.
    pub fn is_summary(&self) -> bool {
        self.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(CACHED_CHAIN_SHA256))
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
