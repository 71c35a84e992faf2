//! cert-manager's `CertificateRequest` and `Certificate` (`cert-manager.io/v1`), written by
//! hand from cert-manager's CRDs. They are not our CRDs: [`crate::api::crds`] never prints them;
//! [`crate::api::cert_manager_crds`] (`crd --cert-manager`) prints CRDs generated from them that
//! accept everything cert-manager's accept (`tests/api_cert_manager_crds.rs`).
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
//! - The schema mirrors cert-manager's: its enums, patterns and list types where its CRD has them
//!   (never more), no `unknown` in the schema (the API server prunes unknown fields, as with
//!   cert-manager's CRD), and no default for `issuerRef.kind`/`group` (cert-manager #8158).

mod certificate;
mod certificaterequest;

use std::collections::BTreeMap;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

pub use certificate::*;
pub use certificaterequest::*;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResourceExt;

use crate::api::{ConditionLike, WritableCondition};

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

/// The fields every cert-manager condition has, in one place for both kinds below.
macro_rules! cert_manager_condition {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* pub $field:ident: $ty:ty,)* }) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            #[serde(rename = "type")]
            pub type_: String,
            /// `True`, `False` or `Unknown`; a string, so no value a newer cert-manager writes
            /// makes an object unreadable (the CRD's enum is cert-manager's).
            #[schemars(extend("enum" = ["True", "False", "Unknown"]))]
            pub status: String,
            #[serde(default, skip_serializing_if = "String::is_empty")]
            pub reason: String,
            #[serde(default, skip_serializing_if = "String::is_empty")]
            pub message: String,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub last_transition_time: Option<Time>,
            $($(#[$fdoc])* pub $field: $ty,)*
            #[serde(flatten)]
            #[schemars(skip)]
            pub unknown: Unknown,
        }

        impl $name {
            pub fn is_true(&self) -> bool {
                self.status == "True"
            }
        }

        impl ConditionLike for $name {
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
    };
}

cert_manager_condition! {
    /// A CertificateRequest condition. cert-manager's schema has no `observedGeneration` here.
    CertificateRequestCondition {}
}

cert_manager_condition! {
    /// A Certificate condition; `observedGeneration` is the generation it was computed for.
    CertificateCondition {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub observed_generation: Option<i64>,
    }
}

impl WritableCondition for CertificateRequestCondition {
    fn set_last_transition_time(&mut self, time: Option<Time>) {
        self.last_transition_time = time;
    }
    /// No such field in cert-manager's schema: nothing to set.
    fn set_observed_generation(&mut self, _: Option<i64>) {}
}

impl WritableCondition for CertificateCondition {
    fn set_last_transition_time(&mut self, time: Option<Time>) {
        self.last_transition_time = time;
    }
    fn set_observed_generation(&mut self, generation: Option<i64>) {
        self.observed_generation = generation;
    }
}

/// cert-manager's `Certificate` and `CertificateRequest` CRDs, generated from these types, for a
/// cluster without cert-manager (standalone mode; `crd --cert-manager`). Certificate first.
pub fn cert_manager_crds() -> Vec<CustomResourceDefinition> {
    vec![Certificate::crd(), CertificateRequest::crd()]
}

/// [`cert_manager_crds`] as one multi-document YAML stream, each document opened by `---`.
pub fn cert_manager_crds_yaml() -> Result<String, serde_saphyr::SerializeError> {
    super::crd::yaml_stream(&cert_manager_crds())
}

/// The root schema of a cert-manager kind: `crd::root_schema` without `null` in
/// any field's type, so no `nullable` reaches the CRD. cert-manager's CRDs have none: an explicit
/// `null` is pruned by the API server, never stored, and reads as absent.
fn root_schema<Spec: JsonSchema, Status: JsonSchema>(
    generator: &mut SchemaGenerator,
    description: &str,
) -> Schema {
    let mut schema = super::crd::root_schema::<Spec, Status>(generator, description);
    if let Some(object) = schema.as_object_mut() {
        drop_null(object);
    }
    schema
}

/// Takes `null` out of the type of `node` and of every schema below it.
fn drop_null(node: &mut serde_json::Map<String, serde_json::Value>) {
    use serde_json::Value;
    node.remove("nullable");
    if let Some(Value::Array(types)) = node.get_mut("type") {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            node.insert("type".into(), only);
        }
    }
    let properties = node.get_mut("properties").and_then(Value::as_object_mut);
    for child in properties.into_iter().flat_map(|p| p.values_mut()) {
        if let Some(child) = child.as_object_mut() {
            drop_null(child);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(Value::Object(child)) = node.get_mut(key) {
            drop_null(child);
        }
    }
}

/// Fields of an object that these types do not model, kept verbatim.
pub type Unknown = BTreeMap<String, serde_json::Value>;

/// The issuer a CertificateRequest or Certificate names. Empty `kind` means `Issuer`, empty
/// `group` means `cert-manager.io`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct IssuerRef {
    /// Name of the issuer.
    pub name: String,
    /// Kind of the issuer; `Issuer` when empty. Never defaulted in the CRD: a stored default
    /// would be indistinguishable from a kind the user chose (cert-manager #8158).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// API group of the issuer; `cert-manager.io` when empty. Never defaulted in the CRD.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: Unknown,
}

/// An issuer kind as cert-manager reads it: empty means `Issuer`.
pub fn issuer_kind_or_default(kind: &str) -> &str {
    if kind.is_empty() { "Issuer" } else { kind }
}

/// An issuer group as cert-manager reads it: empty means `cert-manager.io`.
pub fn issuer_group_or_default(group: &str) -> &str {
    if group.is_empty() { GROUP } else { group }
}

/// Schema of a base64 byte field: `ByteString` has no `JsonSchema` of its own.
fn bytes(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "string", "format": "byte"})
}

/// Schema of an integer cert-manager declares without a format (Go `int`).
fn integer(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "integer"})
}

/// The signature algorithms cert-manager's CRD allows in `signatureAlgorithm`, in its order.
pub const SIGNATURE_ALGORITHMS: [&str; 7] = [
    "SHA256WithRSA",
    "SHA384WithRSA",
    "SHA512WithRSA",
    "ECDSAWithSHA256",
    "ECDSAWithSHA384",
    "ECDSAWithSHA512",
    "PureEd25519",
];

/// The key usages cert-manager's CRDs allow in `usages`, in its order.
pub const KEY_USAGES: [&str; 23] = [
    "signing",
    "digital signature",
    "content commitment",
    "key encipherment",
    "key agreement",
    "data encipherment",
    "cert sign",
    "crl sign",
    "encipher only",
    "decipher only",
    "any",
    "server auth",
    "client auth",
    "code signing",
    "email protection",
    "s/mime",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "timestamping",
    "ocsp signing",
    "microsoft sgc",
    "netscape sgc",
];

/// Schema of `usages`: a list of [`KEY_USAGES`].
fn usages(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {"type": "string", "enum": KEY_USAGES},
    })
}
