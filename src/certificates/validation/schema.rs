//! The checks the API server makes with cert-manager's CRD schema before any webhook runs:
//! enumerated values (reported as `Unsupported value`) and the patterns and lengths of renewal
//! windows (reported as `Invalid value` with kube-openapi's text).

use super::{FieldError, Value};
use crate::api::certmanager::{CertificateSpec, KEY_USAGES as USAGES, Renewal, SIGNATURE_ALGORITHMS};

const ALGORITHMS: &[&str] = &["RSA", "ECDSA", "Ed25519"];
const ENCODINGS: &[&str] = &["PKCS1", "PKCS8"];
const ROTATION_POLICIES: &[&str] = &["Never", "Always"];
const PROFILES: &[&str] = &["LegacyRC2", "LegacyDES", "Modern2023", "Modern2026"];
const OUTPUT_FORMATS: &[&str] = &["DER", "CombinedPEM"];
const POLICIES: &[&str] = &["RenewBefore", "Disabled"];
const WINDOW_DURATION_PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(s|m|h))+$";

/// An enum check: absent (empty) values pass, as the CRD's fields are optional.
fn one_of(field: &str, value: &str, allowed: &[&str], el: &mut Vec<FieldError>) {
    if !value.is_empty() && !allowed.contains(&value) {
        el.push(FieldError::not_supported(
            field,
            Value::Str(value.to_string()),
            allowed,
        ));
    }
}

/// The CRD schema's errors for `spec`.
pub fn validate_schema(spec: &CertificateSpec) -> Vec<FieldError> {
    let mut el = Vec::new();
    for (i, format) in spec.additional_output_formats.iter().enumerate() {
        let field = format!("spec.additionalOutputFormats[{i}].type");
        if !OUTPUT_FORMATS.contains(&format.type_.as_str()) {
            el.push(FieldError::not_supported(
                field,
                Value::Str(format.type_.clone()),
                OUTPUT_FORMATS,
            ));
        }
    }
    if let Some(pkcs12) = spec.keystores.as_ref().and_then(|k| k.pkcs12.as_ref()) {
        one_of(
            "spec.keystores.pkcs12.profile",
            &pkcs12.profile,
            PROFILES,
            &mut el,
        );
    }
    if let Some(key) = &spec.private_key {
        one_of("spec.privateKey.algorithm", &key.algorithm, ALGORITHMS, &mut el);
        one_of("spec.privateKey.encoding", &key.encoding, ENCODINGS, &mut el);
        one_of(
            "spec.privateKey.rotationPolicy",
            &key.rotation_policy,
            ROTATION_POLICIES,
            &mut el,
        );
    }
    if let Some(renewal) = &spec.renewal {
        renewal_schema(renewal, &mut el);
    }
    one_of(
        "spec.signatureAlgorithm",
        &spec.signature_algorithm,
        &SIGNATURE_ALGORITHMS,
        &mut el,
    );
    for (i, usage) in spec.usages.iter().enumerate() {
        if !USAGES.contains(&usage.as_str()) {
            el.push(FieldError::not_supported(
                format!("spec.usages[{i}]"),
                Value::Str(usage.clone()),
                &USAGES,
            ));
        }
    }
    el
}

/// The renewal policy's enum and each window's `cron` length and `windowDuration` pattern.
fn renewal_schema(renewal: &Renewal, el: &mut Vec<FieldError>) {
    one_of("spec.renewal.policy", &renewal.policy, POLICIES, el);
    for (i, window) in renewal.windows.iter().enumerate() {
        let path = format!("spec.renewal.windows[{i}]");
        if window.cron.is_empty() {
            min_length(&format!("{path}.cron"), el);
        }
        if !is_window_duration(&window.window_duration) {
            let field = format!("{path}.windowDuration");
            let msg = format!("{field} in body should match '{WINDOW_DURATION_PATTERN}'");
            el.push(FieldError::invalid(
                field,
                Value::Str(window.window_duration.clone()),
                msg,
            ));
        }
    }
}

fn min_length(field: &str, el: &mut Vec<FieldError>) {
    let msg = format!("{field} in body should be at least 1 chars long");
    el.push(FieldError::invalid(field, Value::Str(String::new()), msg));
}

/// `^([0-9]+(\.[0-9]+)?(s|m|h))+$`.
fn is_window_duration(text: &str) -> bool {
    let mut rest = text.as_bytes();
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return false;
        }
        rest = &rest[digits..];
        if let Some(after) = rest.strip_prefix(b".") {
            let frac = after.iter().take_while(|b| b.is_ascii_digit()).count();
            if frac == 0 {
                return false;
            }
            rest = &after[frac..];
        }
        match rest.split_first() {
            Some((b's' | b'm' | b'h', after)) => rest = after,
            _ => return false,
        }
    }
    true
}
