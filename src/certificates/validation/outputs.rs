//! cert-manager's rules for what a Certificate writes besides the certificate: the Secret's
//! template, name constraints, additional output formats and keystores.

use super::{FieldError, Value, names};
use crate::api::certmanager::{CertificateSpec, JksKeystore, NameConstraintItem, Pkcs12Keystore};
use crate::certificates::go::json_strings;

pub(super) fn secret_template(spec: &CertificateSpec, el: &mut Vec<FieldError>) {
    let Some(template) = &spec.secret_template else {
        return;
    };
    let labels = "spec.secretTemplate.labels";
    for (key, value) in &template.labels {
        for msg in names::qualified_name(key) {
            el.push(FieldError::invalid(labels, Value::Str(key.clone()), msg));
        }
        for msg in names::label_value(value) {
            el.push(FieldError::invalid(labels, Value::Str(value.clone()), msg));
        }
    }
    let annotations = "spec.secretTemplate.annotations";
    for key in template.annotations.keys() {
        if key.starts_with("cert-manager.io/") && key != "cert-manager.io/allow-direct-injection" {
            el.push(FieldError::invalid(
                annotations,
                Value::Str(key.clone()),
                "cert-manager.io/* annotations are not allowed",
            ));
        }
    }
    for key in template.annotations.keys() {
        for msg in names::qualified_name(&key.to_lowercase()) {
            el.push(FieldError::invalid(annotations, Value::Str(key.clone()), msg));
        }
    }
    let size: usize = template.annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > 256 * 1024 {
        el.push(FieldError::too_long(annotations, 256 * 1024));
    }
}

pub(super) fn name_constraints(spec: &CertificateSpec, el: &mut Vec<FieldError>) {
    let Some(nc) = &spec.name_constraints else { return };
    let path = "spec.nameConstraints";
    let json = format!(
        "{{\"Critical\":{},\"Permitted\":{},\"Excluded\":{}}}",
        nc.critical,
        constraint_item_json(nc.permitted.as_ref()),
        constraint_item_json(nc.excluded.as_ref()),
    );
    if !spec.is_ca {
        el.push(FieldError::invalid(
            path,
            Value::Json(json.clone()),
            "isCA should be true when nameConstraints is set",
        ));
    }
    if nc.permitted.is_none() && nc.excluded.is_none() {
        el.push(FieldError::invalid(
            path,
            Value::Json(json),
            "either permitted or excluded must be set",
        ));
    }
    for (name, item) in [("permitted", &nc.permitted), ("excluded", &nc.excluded)] {
        let Some(item) = item else { continue };
        for (i, cidr) in item.ip_ranges.iter().enumerate() {
            if !names::is_cidr(cidr) {
                el.push(FieldError::invalid(
                    format!("{path}.{name}.ipRanges[{i}]"),
                    Value::Str(cidr.clone()),
                    "invalid CIDR address",
                ));
            }
        }
    }
}

fn constraint_item_json(item: Option<&NameConstraintItem>) -> String {
    let Some(item) = item else {
        return "null".to_string();
    };
    format!(
        "{{\"DNSDomains\":{},\"IPRanges\":{},\"EmailAddresses\":{},\"URIDomains\":{}}}",
        json_strings(&item.dns_domains),
        json_strings(&item.ip_ranges),
        json_strings(&item.email_addresses),
        json_strings(&item.uri_domains),
    )
}

pub(super) fn additional_output_formats(spec: &CertificateSpec, el: &mut Vec<FieldError>) {
    let mut seen: Vec<&str> = Vec::new();
    for format in &spec.additional_output_formats {
        if seen.contains(&format.type_.as_str()) {
            el.push(FieldError::duplicate(
                "spec.additionalOutputFormats[type]",
                Value::Str(format.type_.clone()),
            ));
            continue;
        }
        seen.push(&format.type_);
    }
}

pub(super) fn keystores(spec: &CertificateSpec, el: &mut Vec<FieldError>) {
    let Some(keystores) = &spec.keystores else { return };
    if let Some(JksKeystore {
        password,
        password_secret_ref,
        ..
    }) = &keystores.jks
    {
        let has_ref = password_secret_ref.as_ref().is_some_and(|r| !r.name.is_empty());
        keystore_password("jks", "JKS", password.as_deref(), has_ref, el);
    }
    if let Some(Pkcs12Keystore {
        password,
        password_secret_ref,
        ..
    }) = &keystores.pkcs12
    {
        let has_ref = password_secret_ref.as_ref().is_some_and(|r| !r.name.is_empty());
        keystore_password("pkcs12", "PKCS#12", password.as_deref(), has_ref, el);
    }
}

fn keystore_password(key: &str, kind: &str, password: Option<&str>, has_ref: bool, el: &mut Vec<FieldError>) {
    let path = format!("spec.keystores.{key}");
    if password.is_some() && has_ref {
        let msg = format!(
            "exactly one of passwordSecretRef and password must be provided for {kind} keystores; cannot set both"
        );
        el.push(FieldError::forbidden(path.clone(), msg));
    }
    if password.is_none() && !has_ref {
        let msg = format!("must set exactly one of passwordSecretRef and password must for {kind} keystores");
        el.push(FieldError::forbidden(path.clone(), msg));
    }
    if password.is_some_and(str::is_empty) {
        let msg = format!("literal password cannot be empty if set on {kind} keystores");
        el.push(FieldError::forbidden(format!("{path}.password"), msg));
    }
}
