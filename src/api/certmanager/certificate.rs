//! `Certificate`: the desired X.509 certificate and the Secret it is kept in.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

use super::{CertificateCondition as Condition, IssuerRef, Unknown, integer, usages};

/// The certificate wanted, where to keep it, and when to renew it.
// Clippy reads the repeated `type_ = "string"` of the printer columns as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cert-manager.io",
    version = "v1",
    kind = "Certificate",
    namespaced,
    status = "CertificateStatus",
    derive = "PartialEq",
    shortname = "cert",
    shortname = "certs",
    category = "cert-manager",
    schema = "manual",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type == "Ready")].status"#
    ),
    printcolumn(name = "Secret", type_ = "string", json_path = ".spec.secretName"),
    printcolumn(
        name = "Issuer",
        type_ = "string",
        priority = 1,
        json_path = ".spec.issuerRef.name"
    ),
    printcolumn(
        name = "Status",
        type_ = "string",
        priority = 1,
        json_path = r#".status.conditions[?(@.type == "Ready")].message"#
    ),
    printcolumn(
        name = "Expiration",
        type_ = "string",
        priority = 1,
        json_path = ".status.notAfter"
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
pub struct CertificateSpec {
    /// The Secret that receives `tls.crt`, `tls.key` and `ca.crt`.
    pub secret_name: String,
    pub issuer_ref: IssuerRef,
    /// Subject common name (CN).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub common_name: String,
    /// RFC 4514 subject, used instead of `commonName` and `subject`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub literal_subject: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Box<X509Subject>>,
    /// DNS subject alternative names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dns_names: Vec<String>,
    /// IP address subject alternative names (IPv4 or IPv6).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_addresses: Vec<String>,
    /// URI subject alternative names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uris: Vec<String>,
    /// Email address subject alternative names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub email_addresses: Vec<String>,
    /// `otherName` subject alternative names (OID and UTF-8 value).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_names: Vec<OtherName>,
    /// Go duration; cert-manager's default is 90 days.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// Go duration before expiry at which to renew.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renew_before: Option<String>,
    /// Renew when this percentage of the lifetime is left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renew_before_percentage: Option<i32>,
    /// Renewal policy and the time windows renewals may start in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renewal: Option<Box<Renewal>>,
    /// Ask for a CA certificate (basic constraints `CA:TRUE`; adds `cert sign`).
    #[serde(default, rename = "isCA", skip_serializing_if = "std::ops::Not::not")]
    pub is_ca: bool,
    /// Key usages and extended key usages; `digital signature` and `key encipherment`
    /// when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "usages")]
    pub usages: Vec<String>,
    /// Whether usages go into the CSR; cert-manager means `true` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encode_usages_in_request: Option<bool>,
    /// The private key: algorithm, size, encoding and when to rotate it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_key: Option<PrivateKey>,
    /// Signature algorithm the issuer is asked to use; from the key when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(extend("enum" = super::SIGNATURE_ALGORITHMS))]
    pub signature_algorithm: String,
    /// Annotations and labels to put on the Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_template: Option<Box<SecretTemplate>>,
    /// Extra keystores (JKS, PKCS#12) to write into the Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keystores: Option<Box<Keystores>>,
    /// CertificateRequests kept per Certificate; 1 when absent (cert-manager ≥ 1.18).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    /// Extra encodings of the key and certificate to write into the Secret.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_output_formats: Vec<AdditionalOutputFormat>,
    /// X.509 name constraints, for a CA certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_constraints: Option<Box<NameConstraints>>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: Unknown,
}

crate::api::crd::optional_spec!(CertificateSpec);

/// Subject fields besides the common name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct X509Subject {
    /// Organizations (O).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub organizations: Vec<String>,
    /// Countries (C).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub countries: Vec<String>,
    /// Organizational units (OU).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub organizational_units: Vec<String>,
    /// Localities or cities (L).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub localities: Vec<String>,
    /// States or provinces (ST).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provinces: Vec<String>,
    /// Street addresses (STREET).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub street_addresses: Vec<String>,
    /// Postal codes (POSTALCODE).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub postal_codes: Vec<String>,
    /// Subject serial number (SERIALNUMBER), not the certificate's serial.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub serial_number: String,
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: Unknown,
}

/// A SAN `otherName`: an OID and its UTF-8 value.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OtherName {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub oid: String,
    #[serde(default, rename = "utf8Value", skip_serializing_if = "String::is_empty")]
    pub utf8_value: String,
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: Unknown,
}

/// Renewal policy (`RenewBefore` or `Disabled`) and optional cron windows.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Renewal {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(extend("enum" = ["RenewBefore", "Disabled"]))]
    pub policy: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<RenewalWindow>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: Unknown,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RenewalWindow {
    #[schemars(extend("minLength" = 1))]
    pub cron: String,
    /// IANA time zone of `cron`; UTC when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(extend("minLength" = 1))]
    pub timezone: String,
    /// Go duration of the window.
    #[schemars(extend("pattern" = r"^([0-9]+(\.[0-9]+)?(s|m|h))+$"))]
    pub window_duration: String,
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: Unknown,
}

/// Key algorithm (`RSA`, `ECDSA`, `Ed25519`), size, encoding (`PKCS1`, `PKCS8`) and rotation
/// (`Always`, `Never`); empty means cert-manager's default.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrivateKey {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(extend("enum" = ["Never", "Always"]))]
    pub rotation_policy: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(extend("enum" = ["PKCS1", "PKCS8"]))]
    pub encoding: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(extend("enum" = ["RSA", "ECDSA", "Ed25519"]))]
    pub algorithm: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(schema_with = "integer")]
    pub size: i64,
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: Unknown,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde passes a reference
fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// Labels and annotations copied onto the certificate's Secret.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretTemplate {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: Unknown,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Keystores {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jks: Option<JksKeystore>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pkcs12: Option<Pkcs12Keystore>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: Unknown,
}

#[derive(Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JksKeystore {
    pub create: bool,
    /// Alias of the key entry; `certificate` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_secret_ref: Option<SecretKeySelector>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: Unknown,
}

#[derive(Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Pkcs12Keystore {
    pub create: bool,
    /// `LegacyRC2` (default), `LegacyDES`, `Modern2023` or `Modern2026`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(extend("enum" = ["LegacyRC2", "LegacyDES", "Modern2023", "Modern2026"]))]
    pub profile: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_secret_ref: Option<SecretKeySelector>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: Unknown,
}

/// A key of a Secret in the Certificate's namespace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeySelector {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: Unknown,
}

/// An extra file in the Secret: `DER` (`key.der`) or `CombinedPEM` (`tls-combined.pem`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdditionalOutputFormat {
    #[serde(rename = "type")]
    #[schemars(extend("enum" = ["DER", "CombinedPEM"]))]
    pub type_: String,
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: Unknown,
}

/// X.509 name constraints for a CA certificate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NameConstraints {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub critical: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permitted: Option<NameConstraintItem>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded: Option<NameConstraintItem>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: Unknown,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NameConstraintItem {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dns_domains: Vec<String>,
    /// CIDR ranges.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_ranges: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub email_addresses: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uri_domains: Vec<String>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: Unknown,
}

/// What the certificates controllers last recorded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertificateStatus {
    /// `Ready` and `Issuing`, one per type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_after: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renewal_time: Option<Time>,
    /// Revision of the certificate now in the Secret; each issuance adds one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "integer")]
    pub revision: Option<i64>,
    /// The Secret holding the private key for the next issuance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_private_key_secret_name: Option<String>,
    /// Consecutive failed issuances, for back-off; cleared on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "integer")]
    pub failed_issuance_attempts: Option<i64>,
    /// What the ACME issuer recorded; kept for fidelity, no CFSSL issuer writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acme: Option<Box<AcmeStatus>>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: Unknown,
}

/// `status.acme` (cert-manager's ACME issuer).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AcmeStatus {
    /// ACME Renewal Information (RFC 9773), when the ACME server gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ari: Option<AcmeAriStatus>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: Unknown,
}

/// What an ACME server last said about renewing this certificate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AcmeAriStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggested_window: Option<AcmeRenewalWindow>,
    #[serde(default, rename = "explanationURL", skip_serializing_if = "String::is_empty")]
    pub explanation_url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_checked: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_check: Option<Time>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_error: String,
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: Unknown,
}

/// The renewal window an ACME server suggests.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AcmeRenewalWindow {
    pub start: Time,
    pub end: Time,
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: Unknown,
}

impl JsonSchema for Certificate {
    fn schema_name() -> Cow<'static, str> {
        "Certificate".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        super::root_schema::<CertificateSpec, CertificateStatus>(
            generator,
            "A certificate cert-manager keeps issued and renewed in a Secret (cert-manager.io/v1).",
        )
    }
}

impl Certificate {
    /// The condition of `type_`, if there is a status and it has one.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
    }

    /// Whether the condition of `type_` is present with status `True`.
    pub fn has_true(&self, type_: &str) -> bool {
        self.condition(type_).is_some_and(Condition::is_true)
    }
}

/// Without the literal password, which `Debug` output must never carry.
impl std::fmt::Debug for JksKeystore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JksKeystore")
            .field("create", &self.create)
            .field("alias", &self.alias)
            .field("password", &crate::redact::option(&self.password))
            .field("password_secret_ref", &self.password_secret_ref)
            .field("unknown", &self.unknown)
            .finish()
    }
}

/// Without the literal password, which `Debug` output must never carry.
impl std::fmt::Debug for Pkcs12Keystore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pkcs12Keystore")
            .field("create", &self.create)
            .field("profile", &self.profile)
            .field("password", &crate::redact::option(&self.password))
            .field("password_secret_ref", &self.password_secret_ref)
            .field("unknown", &self.unknown)
            .finish()
    }
}

#[cfg(test)]
mod size {
    /// The cache holds one of these per Certificate (10,000 on a large cluster): parts that
    /// most Certificates leave out are boxed, so they cost a pointer rather than their whole
    /// size when absent (2,296 bytes inline before, 1,168 after).
    #[test]
    fn a_cached_certificate_stays_small() {
        let size = std::mem::size_of::<super::Certificate>();
        assert!(size <= 1_200, "a Certificate is {size} bytes inline");
    }
}
