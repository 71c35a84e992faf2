//! `CertificateRequest`: one CSR for one issuer, signed at most once.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CertificateRequestCondition as Condition, IssuerRef, Unknown, bytes};

/// What is asked of the issuer. Immutable after creation (cert-manager's webhook enforces it).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cert-manager.io",
    version = "v1",
    kind = "CertificateRequest",
    namespaced,
    status = "CertificateRequestStatus",
    derive = "PartialEq",
    shortname = "cr",
    shortname = "crs"
)]
#[serde(rename_all = "camelCase")]
pub struct CertificateRequestSpec {
    /// The PEM `CERTIFICATE REQUEST`, decoded from the base64 of the JSON.
    #[schemars(schema_with = "bytes")]
    pub request: ByteString,
    pub issuer_ref: IssuerRef,
    /// Requested lifetime as a Go duration (`2160h0m0s`); absent means cert-manager's 90 days.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    #[serde(default, rename = "isCA", skip_serializing_if = "std::ops::Not::not")]
    pub is_ca: bool,
    /// Key usages; cert-manager means `digital signature` and `key encipherment` when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub usages: Vec<String>,
    /// Who created the request; set by cert-manager's webhook, never by clients.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub username: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// What the issuer (and the approver) answered.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertificateRequestStatus {
    /// `Ready` (ours to write), `Approved`/`Denied` (the approver's), `InvalidRequest`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
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
    pub unknown: Unknown,
}

impl CertificateRequestStatus {
    /// The condition of `type_`, if present.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}

impl CertificateRequest {
    /// The condition of `type_`, if there is a status and it has one.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.status.as_ref().and_then(|s| s.condition(type_))
    }

    /// Whether the condition of `type_` is present with status `True`.
    pub fn has_true(&self, type_: &str) -> bool {
        self.condition(type_).is_some_and(Condition::is_true)
    }
}
