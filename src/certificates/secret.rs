//! The Secret a Certificate's issuance writes, as cert-manager's issuing controller builds it
//! for its server-side apply (pkg/controller/certificates/issuing/internal/secret.go): the
//! signed chain, the private key and the CA when known; the additional output formats and
//! keystores the Certificate asks for; the `secretTemplate` labels and annotations, then
//! cert-manager's own on top; and, when asked, the Certificate as controlling owner.
//!
//! Pure: the caller reads the existing Secret, encodes keystores and applies the result with
//! its field manager and `force`.

mod checks;
mod details;
mod keystores;
mod managed_fields;
mod repair;

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::api::certmanager::Certificate;
use crate::certificates::decode::{DecodeError, MAX_PRIVATE_KEY_PEM};
use crate::certificates::keys::{annotation, data, label};

pub use checks::Input;
pub use details::{annotations_for_certificate, certificate_details_annotations, join_csv};
pub use keystores::{
    EncodeError, Kind, PasswordError, Passwords, REASON_PASSWORD_SECRET_NOT_FOUND, encode_keystores,
    keystore_password, password_secret_name,
};
pub use managed_fields::{FieldSet, ManagedFieldsError, PathElement, compact_fields_v1};
pub use repair::{Repair, decide as decide_repair, secret_data_of};

/// The field managers cert-manager applies a Certificate's Secret under (`cert-manager-` and
/// its issuing controller's name): what a Secret it wrote holds is owned by these.
pub const CERT_MANAGER_SECRET_MANAGERS: &[&str] = &["cert-manager-certificates-issuing"];

/// The Secret type cert-manager gives a Secret it creates.
pub const SECRET_TYPE_TLS: &str = "kubernetes.io/tls";

/// What one issuance stores: PEM bytes exactly as the CertificateRequest and key Secret hold
/// them, and the names cert-manager records in annotations.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct SecretData<'a> {
    /// The private key PEM (`tls.key`), in the encoding the Certificate asks for.
    pub private_key: &'a [u8],
    /// The signed chain PEM (`tls.crt`), leaf first.
    pub certificate: &'a [u8],
    /// The CA PEM (`ca.crt`); empty when not known.
    pub ca: &'a [u8],
    /// The Certificate's name; no annotation when empty.
    pub certificate_name: &'a str,
    /// The request's issuerRef; the three annotations are written when any is set.
    pub issuer_name: &'a str,
    pub issuer_kind: &'a str,
    pub issuer_group: &'a str,
}

/// One encoded keystore and, when the CA is known, its truststore.
#[derive(Clone, PartialEq, Eq)]
pub struct Store {
    pub keystore: Vec<u8>,
    pub truststore: Option<Vec<u8>>,
}

/// The keystores encoded for this issuance, for those the Certificate asks to create.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeystoreData {
    pub pkcs12: Option<Store>,
    pub jks: Option<Store>,
}

/// How to build the body besides the data.
#[derive(Debug, Clone, Copy, Default)]
pub struct BodyOptions<'a> {
    /// The type of the Secret already there (it is immutable, so it is kept); `None` when the
    /// Secret does not exist yet, which gives `kubernetes.io/tls`.
    pub existing_type: Option<&'a str>,
    /// `--enable-certificate-owner-ref`: make the Certificate the Secret's controlling owner.
    pub owner_reference: bool,
}

/// Why no body can be built (cert-manager's wording where it has one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    #[error("failed to add keystores to Secret: the {0} keystore was asked for but not encoded")]
    KeystoreMissing(&'static str),
    #[error("failed to add additional output formats to Secret: unknown additional output format {0}")]
    UnknownOutputFormat(String),
    #[error(
        "failed to add additional output formats to Secret: the private key is not PEM or is larger than 13000 bytes"
    )]
    KeyNotPem,
    #[error(transparent)]
    Certificate(#[from] DecodeError),
}

/// `additionalOutputFormats: DER`: the DER of the first PEM block of `tls.key`, as stored (so
/// PKCS#1 or SEC1 under the default encoding); `None` when it is not PEM or too large.
pub fn output_format_der(private_key: &[u8]) -> Option<Vec<u8>> {
    if private_key.len() > MAX_PRIVATE_KEY_PEM {
        return None;
    }
    pem::parse(private_key).ok().map(pem::Pem::into_contents)
}

/// `additionalOutputFormats: CombinedPEM`: `tls.key`, a newline, then `tls.crt`.
pub fn output_format_combined_pem(private_key: &[u8], certificate: &[u8]) -> Vec<u8> {
    [private_key, b"\n", certificate].concat()
}

/// The owner reference cert-manager sets with `--enable-certificate-owner-ref`.
pub fn certificate_owner_reference(crt: &Certificate) -> OwnerReference {
    OwnerReference {
        api_version: "cert-manager.io/v1".to_string(),
        kind: "Certificate".to_string(),
        name: crt.metadata.name.clone().unwrap_or_default(),
        uid: crt.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The Secret cert-manager applies for `crt` after an issuance (or to repair its metadata).
pub fn secret_body(
    crt: &Certificate,
    secret_data: &SecretData<'_>,
    keystores: &KeystoreData,
    options: BodyOptions<'_>,
) -> Result<Secret, BodyError> {
    let mut out = BTreeMap::new();
    put_keystores(crt, secret_data, keystores, &mut out)?;
    put_output_formats(crt, secret_data, &mut out)?;
    out.insert(data::TLS_KEY.to_string(), bytes(secret_data.private_key));
    out.insert(data::TLS_CRT.to_string(), bytes(secret_data.certificate));
    if !secret_data.ca.is_empty() {
        out.insert(data::CA_CRT.to_string(), bytes(secret_data.ca));
    }
    let template = crt.spec.secret_template.as_ref();
    let mut labels = template.map(|t| t.labels.clone()).unwrap_or_default();
    labels.insert(label::PART_OF_CERT_MANAGER.to_string(), "true".to_string());
    Ok(Secret {
        metadata: ObjectMeta {
            name: Some(crt.spec.secret_name.clone()),
            namespace: crt.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: Some(annotations(crt, secret_data)?),
            owner_references: options
                .owner_reference
                .then(|| vec![certificate_owner_reference(crt)]),
            ..ObjectMeta::default()
        },
        data: Some(out),
        type_: Some(options.existing_type.unwrap_or(SECRET_TYPE_TLS).to_string()),
        ..Secret::default()
    })
}

/// The bytes under `key` in the Secret's data; empty when absent.
pub(crate) fn data_of<'s>(secret: &'s Secret, key: &str) -> &'s [u8] {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map_or(&[], |v| v.0.as_slice())
}

/// How many bytes the Secret's data holds, its keys' names included.
pub(crate) fn data_bytes(secret: &Secret) -> usize {
    secret
        .data
        .iter()
        .flatten()
        .map(|(key, value)| key.len() + value.0.len())
        .sum()
}

fn bytes(value: &[u8]) -> ByteString {
    ByteString(value.to_vec())
}

/// The template's annotations, then the certificate details, then the Certificate and issuer
/// names, each overriding what came before.
fn annotations(
    crt: &Certificate,
    secret_data: &SecretData<'_>,
) -> Result<BTreeMap<String, String>, BodyError> {
    let mut out = crt
        .spec
        .secret_template
        .as_ref()
        .map(|t| t.annotations.clone())
        .unwrap_or_default();
    out.extend(certificate_details_annotations(secret_data.certificate)?);
    if !secret_data.certificate_name.is_empty() {
        out.insert(
            annotation::CERTIFICATE_NAME.to_string(),
            secret_data.certificate_name.to_string(),
        );
    }
    let issuer = [
        (annotation::ISSUER_NAME, secret_data.issuer_name),
        (annotation::ISSUER_KIND, secret_data.issuer_kind),
        (annotation::ISSUER_GROUP, secret_data.issuer_group),
    ];
    if issuer.iter().any(|(_, value)| !value.is_empty()) {
        for (key, value) in issuer {
            out.insert(key.to_string(), value.to_string());
        }
    }
    Ok(out)
}

fn put_output_formats(
    crt: &Certificate,
    secret_data: &SecretData<'_>,
    out: &mut BTreeMap<String, ByteString>,
) -> Result<(), BodyError> {
    for format in &crt.spec.additional_output_formats {
        match format.type_.as_str() {
            "DER" => {
                let der = output_format_der(secret_data.private_key).ok_or(BodyError::KeyNotPem)?;
                out.insert(data::KEY_DER.to_string(), ByteString(der));
            }
            "CombinedPEM" => {
                let combined = output_format_combined_pem(secret_data.private_key, secret_data.certificate);
                out.insert(data::COMBINED_PEM.to_string(), ByteString(combined));
            }
            other => return Err(BodyError::UnknownOutputFormat(other.to_string())),
        }
    }
    Ok(())
}

/// The keystores the Certificate asks to create; a truststore only when the CA is known.
fn put_keystores(
    crt: &Certificate,
    secret_data: &SecretData<'_>,
    keystores: &KeystoreData,
    out: &mut BTreeMap<String, ByteString>,
) -> Result<(), BodyError> {
    let Some(asked) = crt.spec.keystores.as_ref() else {
        return Ok(());
    };
    let wanted = [
        (
            "PKCS12",
            asked.pkcs12.as_ref().is_some_and(|k| k.create),
            keystores.pkcs12.as_ref(),
            (data::PKCS12_KEYSTORE, data::PKCS12_TRUSTSTORE),
        ),
        (
            "JKS",
            asked.jks.as_ref().is_some_and(|k| k.create),
            keystores.jks.as_ref(),
            (data::JKS_KEYSTORE, data::JKS_TRUSTSTORE),
        ),
    ];
    for (kind, create, store, (keystore_key, truststore_key)) in wanted {
        if !create {
            continue;
        }
        let store = store.ok_or(BodyError::KeystoreMissing(kind))?;
        out.insert(keystore_key.to_string(), bytes(&store.keystore));
        if let Some(truststore) = store.truststore.as_ref().filter(|_| !secret_data.ca.is_empty()) {
            out.insert(truststore_key.to_string(), bytes(truststore));
        }
    }
    Ok(())
}

impl std::fmt::Debug for SecretData<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretData")
            .field("private_key", &crate::redact::Redacted)
            .field("certificate", &String::from_utf8_lossy(self.certificate))
            .field("ca", &String::from_utf8_lossy(self.ca))
            .field("certificate_name", &self.certificate_name)
            .field("issuer_name", &self.issuer_name)
            .field("issuer_kind", &self.issuer_kind)
            .field("issuer_group", &self.issuer_group)
            .finish()
    }
}

/// The keystore holds the private key (under a password that is often known): redacted.
impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("keystore", &crate::redact::Redacted)
            .field("truststore", &self.truststore)
            .finish()
    }
}

#[cfg(test)]
mod tests;
