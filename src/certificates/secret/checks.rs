//! The post-issuance Secret chain (cert-manager's `NewSecretPostIssuancePolicyChain`): run while
//! a Certificate is not issuing, each violation means "re-apply the Secret's metadata and
//! output formats from what it holds", never a re-issuance. Reasons and messages are
//! cert-manager's (internal/controller/certificates/policies/checks.go).
//!
//! What the issuing controller's field manager owns is read from `managedFields`, so removed
//! template keys, output formats and owner references are noticed. A chain whose violation is
//! `InvalidCertificate` or `ManagedFieldsParseError` cannot be repaired by re-applying: the
//! caller logs it and stops, as cert-manager does.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Secret;
use serde_json::{Map, Value};

use super::details::certificate_details_annotations;
use super::managed_fields::{self, FieldSet, ManagedFieldsError, PathElement};
use super::{certificate_owner_reference, data_of, output_format_combined_pem, output_format_der};
use crate::api::certmanager::Certificate;
use crate::certificates::go;
use crate::certificates::keys::{annotation, data, label};
use crate::certificates::policy::{Chain, Check, Violation, reason};

/// What the post-issuance checks look at.
#[derive(Clone, Copy)]
pub struct Input<'a> {
    pub certificate: &'a Certificate,
    /// The Secret as read, with `metadata.managedFields`.
    pub secret: &'a Secret,
    /// The field manager the issuing controller applies the Secret with.
    pub field_manager: &'a str,
    /// `--enable-certificate-owner-ref`.
    pub owner_ref_enabled: bool,
}

/// The Secret by name and data keys only: its data holds the private key.
impl std::fmt::Debug for Input<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Input")
            .field("certificate", &self.certificate)
            .field("secret", &crate::redact::ShownSecret(self.secret))
            .field("field_manager", &self.field_manager)
            .field("owner_ref_enabled", &self.owner_ref_enabled)
            .finish()
    }
}

impl<'a> Input<'a> {
    pub const BASE_LABELS: Check<Input<'a>> = Check {
        name: "SecretBaseLabelsMismatch",
        run: base_labels,
    };
    pub const CERTIFICATE_DETAILS_ANNOTATIONS: Check<Input<'a>> = Check {
        name: "SecretCertificateDetailsAnnotationsMismatch",
        run: certificate_details,
    };
    pub const MANAGED_LABELS_AND_ANNOTATIONS: Check<Input<'a>> = Check {
        name: "SecretManagedLabelsAndAnnotationsManagedFieldsMismatch",
        run: managed_labels_and_annotations,
    };
    pub const SECRET_TEMPLATE: Check<Input<'a>> = Check {
        name: "SecretSecretTemplateMismatch",
        run: secret_template,
    };
    pub const SECRET_TEMPLATE_MANAGED_FIELDS: Check<Input<'a>> = Check {
        name: "SecretSecretTemplateManagedFieldsMismatch",
        run: secret_template_managed_fields,
    };
    pub const ADDITIONAL_OUTPUT_FORMATS: Check<Input<'a>> = Check {
        name: "SecretAdditionalOutputFormatsMismatch",
        run: additional_output_formats,
    };
    pub const ADDITIONAL_OUTPUT_FORMATS_MANAGED_FIELDS: Check<Input<'a>> = Check {
        name: "SecretAdditionalOutputFormatsManagedFieldsMismatch",
        run: additional_output_formats_managed_fields,
    };
    pub const OWNER_REFERENCE: Check<Input<'a>> = Check {
        name: "SecretOwnerReferenceMismatch",
        run: owner_reference,
    };
    pub const OWNER_REFERENCE_MANAGED_FIELD: Check<Input<'a>> = Check {
        name: "SecretOwnerReferenceManagedFieldMismatch",
        run: owner_reference_managed_field,
    };
    pub const KEYSTORE_FORMAT: Check<Input<'a>> = Check {
        name: "SecretKeystoreFormatMismatch",
        run: keystore_format,
    };

    /// The chain, in cert-manager's order; evaluate with `policy::evaluate`.
    pub const POST_ISSUANCE: &'a Chain<Input<'a>> = &[
        Self::BASE_LABELS,
        Self::CERTIFICATE_DETAILS_ANNOTATIONS,
        Self::MANAGED_LABELS_AND_ANNOTATIONS,
        Self::SECRET_TEMPLATE,
        Self::SECRET_TEMPLATE_MANAGED_FIELDS,
        Self::ADDITIONAL_OUTPUT_FORMATS,
        Self::ADDITIONAL_OUTPUT_FORMATS_MANAGED_FIELDS,
        Self::OWNER_REFERENCE,
        Self::OWNER_REFERENCE_MANAGED_FIELD,
        Self::KEYSTORE_FORMAT,
    ];
}

fn parse_error(err: &ManagedFieldsError) -> Violation {
    Violation::new(
        reason::MANAGED_FIELDS_PARSE_ERROR,
        format!("failed to decode managed fields on Secret: {err}"),
    )
}

fn has_data(secret: &Secret, key: &str) -> bool {
    !data_of(secret, key).is_empty()
}

fn secret_labels(secret: &Secret) -> Option<&BTreeMap<String, String>> {
    secret.metadata.labels.as_ref()
}

fn secret_annotations(secret: &Secret) -> BTreeMap<String, String> {
    secret.metadata.annotations.clone().unwrap_or_default()
}

/// The first key, in order, present in both maps with different values.
fn first_differing_key(
    expected: &BTreeMap<String, String>,
    actual: &BTreeMap<String, String>,
) -> Option<String> {
    expected
        .iter()
        .find(|(k, v)| actual.get(*k).is_some_and(|a| a != *v))
        .map(|(k, _)| k.clone())
}

fn is_cert_manager_key(key: &str) -> bool {
    key.starts_with("cert-manager.io/") || key.starts_with("controller.cert-manager.io/")
}

fn base_labels(input: &Input<'_>) -> Option<Violation> {
    let value = secret_labels(input.secret)?.get(label::PART_OF_CERT_MANAGER)?;
    (value != "true").then(|| {
        Violation::new(
            reason::SECRET_MANAGED_METADATA_MISMATCH,
            format!(
                "wrong base label {} value {value:?}, expected \"true\"",
                label::PART_OF_CERT_MANAGER
            ),
        )
    })
}

fn details_of(secret: &Secret) -> Result<BTreeMap<String, String>, Violation> {
    certificate_details_annotations(data_of(secret, data::TLS_CRT)).map_err(|err| {
        Violation::new(
            reason::INVALID_CERTIFICATE,
            format!("Failed getting secret annotations: {err}"),
        )
    })
}

fn certificate_details(input: &Input<'_>) -> Option<Violation> {
    let expected = match details_of(input.secret) {
        Ok(expected) => expected,
        Err(violation) => return Some(violation),
    };
    let actual = secret_annotations(input.secret);
    let key = first_differing_key(&expected, &actual)?;
    Some(Violation::new(
        reason::SECRET_TEMPLATE_MISMATCH,
        format!(
            "Secret metadata {} does not match certificate metadata {}",
            actual[&key], expected[&key]
        ),
    ))
}

/// The message for owned keys that differ from the expected ones: missing first, then extra.
fn key_set_mismatch(
    owned: &BTreeSet<String>,
    expected: &BTreeSet<String>,
    missing_what: &str,
    extra_what: &str,
) -> Option<String> {
    if owned == expected {
        return None;
    }
    let missing: BTreeSet<String> = expected.difference(owned).cloned().collect();
    if !missing.is_empty() {
        return Some(format!(
            "Secret is missing these {missing_what}: {}",
            go::list(&missing)
        ));
    }
    let extra: BTreeSet<String> = owned.difference(expected).cloned().collect();
    Some(format!(
        "Secret has these extra {extra_what}: {}",
        go::list(&extra)
    ))
}

fn managed_labels_and_annotations(input: &Input<'_>) -> Option<Violation> {
    let (labels, annotations) =
        match managed_fields::labels_and_annotations(input.secret, input.field_manager) {
            Ok(owned) => owned,
            Err(err) => return Some(parse_error(&err)),
        };
    let not_checked_here = [
        annotation::CERTIFICATE_NAME,
        annotation::ISSUER_NAME,
        annotation::ISSUER_KIND,
        annotation::ISSUER_GROUP,
    ];
    let annotations: BTreeSet<String> = annotations
        .into_iter()
        .filter(|k| is_cert_manager_key(k) && !not_checked_here.contains(&k.as_str()))
        .collect();
    let labels: BTreeSet<String> = labels.into_iter().filter(|k| is_cert_manager_key(k)).collect();
    let expected_annotations: BTreeSet<String> = match details_of(input.secret) {
        Ok(details) => details.into_keys().collect(),
        Err(violation) => return Some(violation),
    };
    let expected_labels = BTreeSet::from([label::PART_OF_CERT_MANAGER.to_string()]);
    key_set_mismatch(&labels, &expected_labels, "Managed Labels", "Labels")
        .or_else(|| {
            key_set_mismatch(
                &annotations,
                &expected_annotations,
                "Managed Annotations",
                "Annotations",
            )
        })
        .map(|message| Violation::new(reason::SECRET_MANAGED_METADATA_MISMATCH, message))
}

fn secret_template(input: &Input<'_>) -> Option<Violation> {
    let template = input.certificate.spec.secret_template.as_ref()?;
    let mismatch = |expected: &BTreeMap<String, String>, actual: Option<&BTreeMap<_, _>>| {
        first_differing_key(expected, actual.unwrap_or(&BTreeMap::new())).is_some()
    };
    let message = if mismatch(&template.annotations, input.secret.metadata.annotations.as_ref()) {
        "Certificate's SecretTemplate Annotations missing or incorrect value on Secret"
    } else if mismatch(&template.labels, input.secret.metadata.labels.as_ref()) {
        "Certificate's SecretTemplate Labels missing or incorrect value on Secret"
    } else {
        return None;
    };
    Some(Violation::new(reason::SECRET_TEMPLATE_MISMATCH, message))
}

fn secret_template_managed_fields(input: &Input<'_>) -> Option<Violation> {
    let (labels, annotations) =
        match managed_fields::labels_and_annotations(input.secret, input.field_manager) {
            Ok(owned) => owned,
            Err(err) => return Some(parse_error(&err)),
        };
    let user_keys = |keys: BTreeSet<String>| -> BTreeSet<String> {
        keys.into_iter().filter(|k| !is_cert_manager_key(k)).collect()
    };
    let (labels, annotations) = (user_keys(labels), user_keys(annotations));
    let template = input.certificate.spec.secret_template.as_ref();
    let expected_labels: BTreeSet<String> = template
        .map(|t| t.labels.keys().cloned().collect())
        .unwrap_or_default();
    let expected_annotations: BTreeSet<String> = template
        .map(|t| t.annotations.keys().cloned().collect())
        .unwrap_or_default();
    key_set_mismatch(&labels, &expected_labels, "Template Labels", "Labels")
        .or_else(|| {
            key_set_mismatch(
                &annotations,
                &expected_annotations,
                "Template Annotations",
                "Annotations",
            )
        })
        .map(|message| Violation::new(reason::SECRET_TEMPLATE_MISMATCH, message))
}

const OUTPUT_FORMATS_DATA_MESSAGE: &str = "Certificate's AdditionalOutputFormats doesn't match Secret Data";
const OUTPUT_FORMATS_MANAGED_MESSAGE: &str =
    "Certificate's AdditionalOutputFormats doesn't match Secret ManagedFields";

fn additional_output_formats(input: &Input<'_>) -> Option<Violation> {
    let secret = input.secret;
    let key = data_of(secret, data::TLS_KEY);
    let stored = |name: &str| secret.data.as_ref().and_then(|d| d.get(name)).map(|v| &v.0);
    let mismatch = input
        .certificate
        .spec
        .additional_output_formats
        .iter()
        .any(|format| match format.type_.as_str() {
            "CombinedPEM" => {
                let expected = output_format_combined_pem(key, data_of(secret, data::TLS_CRT));
                stored(data::COMBINED_PEM) != Some(&expected)
            }
            "DER" => {
                let expected = output_format_der(key);
                expected.is_none() || stored(data::KEY_DER) != expected.as_ref()
            }
            _ => false,
        });
    mismatch.then(|| {
        Violation::new(
            reason::ADDITIONAL_OUTPUT_FORMATS_MISMATCH,
            OUTPUT_FORMATS_DATA_MESSAGE,
        )
    })
}

/// What the field manager owns, or the parse-error violation.
fn owned_sets(input: &Input<'_>) -> Result<Vec<std::sync::Arc<FieldSet>>, Violation> {
    managed_fields::owned_by(input.secret, input.field_manager).map_err(|e| parse_error(&e))
}

fn additional_output_formats_managed_fields(input: &Input<'_>) -> Option<Violation> {
    let owned = match owned_sets(input) {
        Ok(owned) => owned,
        Err(violation) => return Some(violation),
    };
    let formats = &input.certificate.spec.additional_output_formats;
    let wants = |kind: &str| formats.iter().any(|f| f.type_ == kind);
    let owns = |key: &str| {
        let path = [PathElement::field("data"), PathElement::field(key)];
        owned.iter().any(|set| set.has(&path))
    };
    let matches = wants("CombinedPEM") == owns(data::COMBINED_PEM) && wants("DER") == owns(data::KEY_DER);
    (!matches).then(|| {
        Violation::new(
            reason::ADDITIONAL_OUTPUT_FORMATS_MISMATCH,
            OUTPUT_FORMATS_MANAGED_MESSAGE,
        )
    })
}

fn owner_reference(input: &Input<'_>) -> Option<Violation> {
    if !input.owner_ref_enabled {
        return None;
    }
    let expected = certificate_owner_reference(input.certificate);
    let found = input
        .secret
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.uid == expected.uid)
        .is_some_and(|r| *r == expected);
    (!found).then(|| {
        Violation::new(
            reason::SECRET_OWNER_REF_MISMATCH,
            "unexpected Secret Owner Reference value on Secret --enable-certificate-owner-ref=true",
        )
    })
}

fn owner_reference_managed_field(input: &Input<'_>) -> Option<Violation> {
    let owned = match owned_sets(input) {
        Ok(owned) => owned,
        Err(violation) => return Some(violation),
    };
    let uid = input.certificate.metadata.uid.clone().unwrap_or_default();
    let path = [
        PathElement::field("metadata"),
        PathElement::field("ownerReferences"),
        PathElement::key(&Map::from_iter([("uid".to_string(), Value::String(uid))])),
    ];
    let has = owned.iter().any(|set| set.has(&path));
    (has != input.owner_ref_enabled).then(|| {
        Violation::new(
            reason::SECRET_OWNER_REF_MISMATCH,
            format!(
                "unexpected managed Secret Owner Reference field on Secret --enable-certificate-owner-ref={}",
                input.owner_ref_enabled
            ),
        )
    })
}

/// One keystore kind against the Secret: (asked for?, create?), its data keys, its name.
fn keystore_mismatch(
    spec: Option<bool>,
    secret: &Secret,
    (keystore, truststore): (&str, &str),
    kind: &str,
) -> Option<String> {
    let any = has_data(secret, keystore) || has_data(secret, truststore);
    match spec {
        Some(true) => {
            let ca_known = secret.data.as_ref().is_some_and(|d| d.contains_key(data::CA_CRT));
            let incomplete = !has_data(secret, keystore) || (!has_data(secret, truststore) && ca_known);
            incomplete.then(|| format!("{kind} Keystore key does not contain data"))
        }
        Some(false) => any.then(|| format!("{kind} Keystore create disabled")),
        None => any.then(|| format!("{kind} Keystore not defined")),
    }
}

fn keystore_format(input: &Input<'_>) -> Option<Violation> {
    let secret = input.secret;
    let stores = [
        (data::JKS_KEYSTORE, data::JKS_TRUSTSTORE),
        (data::PKCS12_KEYSTORE, data::PKCS12_TRUSTSTORE),
    ];
    let message = match input.certificate.spec.keystores.as_ref() {
        None => stores
            .iter()
            .any(|(k, t)| has_data(secret, k) || has_data(secret, t))
            .then(|| "Keystore is not defined".to_string()),
        Some(keystores) => {
            keystore_mismatch(keystores.jks.as_ref().map(|k| k.create), secret, stores[0], "JKS").or_else(
                || {
                    keystore_mismatch(
                        keystores.pkcs12.as_ref().map(|k| k.create),
                        secret,
                        stores[1],
                        "PKCS12",
                    )
                },
            )
        }
    }?;
    Some(Violation::new(reason::SECRET_MISMATCH, message))
}

#[cfg(test)]
mod tests;
