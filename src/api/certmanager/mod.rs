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

/// `status == "True"` for a condition status string.
fn is_true(status: &str) -> bool {
    status == "True"
}
