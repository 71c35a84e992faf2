//! cert-manager's `CertificateRequest` and `Certificate` (`cert-manager.io/v1`), written by
//! hand from cert-manager's CRDs. They are not our CRDs: [`crate::api::crds`] never prints them.
//!
//! Rules that keep us from damaging objects we do not own:
//! - Every object struct has `#[serde(flatten)] unknown`, so fields added by newer cert-manager
//!   versions survive a read-modify-write (`tests/api_certmanager_roundtrip.rs`).
//! - Go value fields tagged `omitempty` (strings, bools, lists, maps) are plain Rust values
//!   skipped when empty, exactly as Go writes them; Go pointers are `Option`s, so an explicit
//!   `false` or `0` there survives.
//! - Enumerated values (key algorithms, usages, rotation policies) stay `String`: a value added by
//!   a newer cert-manager must not make one object, and with it a whole watch, unreadable.
//! - Byte fields (`request`, `certificate`, `ca`) are [`ByteString`](k8s_openapi::ByteString):
//!   decoded once from the base64 of the JSON, handed to the code as PEM bytes.

mod certificate;
mod certificaterequest;

use std::collections::BTreeMap;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

pub use certificate::*;
pub use certificaterequest::*;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// cert-manager's API group; also the default of an empty `issuerRef.group`.
pub const GROUP: &str = "cert-manager.io";

/// Condition types.
pub const READY: &str = "Ready";
pub const APPROVED: &str = "Approved";
pub const DENIED: &str = "Denied";
pub const INVALID_REQUEST: &str = "InvalidRequest";
pub const ISSUING: &str = "Issuing";

/// `Ready` reasons of a CertificateRequest.
pub const REASON_ISSUED: &str = "Issued";
pub const REASON_PENDING: &str = "Pending";
pub const REASON_FAILED: &str = "Failed";
pub const REASON_DENIED: &str = "Denied";

/// The `Ready` reasons of a CertificateRequest, typed; anyone else's reason is `Other`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RequestReason {
    Issued,
    Pending,
    Failed,
    Denied,
    Other,
}

impl RequestReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Issued => REASON_ISSUED,
            Self::Pending => REASON_PENDING,
            Self::Failed => REASON_FAILED,
            Self::Denied => REASON_DENIED,
            Self::Other => "",
        }
    }

    pub fn parse(reason: &str) -> Self {
        [Self::Issued, Self::Pending, Self::Failed, Self::Denied]
            .into_iter()
            .find(|r| r.as_str() == reason)
            .unwrap_or(Self::Other)
    }
}

/// A condition on a CertificateRequest or Certificate, as cert-manager writes it. `status`
/// stays a string and unknown fields are kept, so no value a newer cert-manager writes makes
/// an object unreadable. CertificateRequest conditions never have `observedGeneration`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

impl Condition {
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

impl crate::api::ConditionLike for Condition {
    fn type_(&self) -> &str {
        &self.type_
    }
    fn status(&self) -> &str {
        &self.status
    }
    fn last_transition_time(&self) -> Option<&Time> {
        self.last_transition_time.as_ref()
    }
}

/// Fields of an object that these types do not model, kept verbatim.
pub type Unknown = BTreeMap<String, serde_json::Value>;

/// The issuer a CertificateRequest or Certificate names. Empty `kind` means `Issuer`, empty
/// `group` means `cert-manager.io`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct IssuerRef {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// Schema of a base64 byte field: `ByteString` has no `JsonSchema` of its own.
fn bytes(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "string", "format": "byte"})
}
