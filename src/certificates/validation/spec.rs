//! cert-manager's `ValidateCertificateSpec` for a Certificate, rule by rule and in its order.
//! Its feature gates (LiteralCertificateSubject, OtherNames, NameConstraints) are on by
//! default and taken as on.

use super::go::{format_go_duration, json_string, json_strings, parse_go_duration};
use super::{FieldError, Value, literal_subject, mail, names};
use crate::api::certmanager::{
    CertificateSpec, JksKeystore, NameConstraintItem, Pkcs12Keystore, X509Subject,
};

const MIN_DURATION_NS: i64 = 3_600_000_000_000;
const DEFAULT_DURATION_NS: i64 = 90 * 24 * MIN_DURATION_NS;
const MIN_RENEW_BEFORE_NS: i64 = 300_000_000_000;

/// Every error cert-manager's webhook reports for `spec`, paths under `spec`.
pub fn validate_webhook(spec: &CertificateSpec) -> Vec<FieldError> {
    let mut el = Vec::new();
    secret_name(spec, &mut el);
    issuer_ref(spec, &mut el);
    let common_name = subject_and_common_name(spec, &mut el);
    let has_san = !spec.dns_names.is_empty()
        || !spec.uris.is_empty()
        || !spec.email_addresses.is_empty()
        || !spec.ip_addresses.is_empty()
        || !spec.other_names.is_empty();
    if common_name.is_empty() && !has_san {
        el.push(FieldError::invalid(
            "spec",
            Value::Str(String::new()),
            "at least one of commonName (from the commonName field or from a literalSubject), dnsNames, emailSANs, ipAddresses, otherNames, or uriSANs must be set",
        ));
    }
    if common_name.len() > 64 {
        el.push(FieldError::too_long("spec.commonName", 64));
    }
    addresses(spec, &mut el);
    other_names(spec, &mut el);
    private_key(spec, &mut el);
    signature_algorithm(spec, &mut el);
    if spec.duration.is_some() || spec.renew_before.is_some() {
        durations(spec, &mut el);
    }
    usages(spec, &mut el);
    if let Some(limit) = spec.revision_history_limit.filter(|l| *l < 1) {
        el.push(FieldError::invalid(
            "spec.revisionHistoryLimit",
            Value::Int(limit.into()),
            "must not be less than 1",
        ));
    }
    secret_template(spec, &mut el);
    name_constraints(spec, &mut el);
    additional_output_formats(spec, &mut el);
    keystores(spec, &mut el);
    super::renewal::renewal(spec, &mut el);
    el
}

fn secret_name(spec: &CertificateSpec, el: &mut Vec<FieldError>) {
    if spec.secret_name.is_empty() {
        el.push(FieldError::required("spec.secretName", "must be specified"));
        return;
    }
    for msg in names::dns1123_subdomain(&spec.secret_name) {
        el.push(FieldError::invalid(
            "spec.secretName",
            Value::Str(spec.secret_name.clone()),
            msg,
        ));
    }
}

fn issuer_ref(spec: &CertificateSpec, el: &mut Vec<FieldError>) {
    let issuer = &spec.issuer_ref;
    if issuer.name.is_empty() {
        el.push(FieldError::required("spec.issuerRef.name", "must be specified"));
    }
    let builtin_group = issuer.group.is_empty() || issuer.group == "cert-manager.io";
    if builtin_group && !matches!(issuer.kind.as_str(), "" | "Issuer" | "ClusterIssuer") {
        let mut msg = "must be one of Issuer or ClusterIssuer".to_string();
        if issuer.group.is_empty() {
            msg.push_str(" (did you forget to set spec.issuerRef.kind.group?)");
        }
        el.push(FieldError::invalid(
            "spec.issuerRef.kind",
            Value::Str(issuer.kind.clone()),
            msg,
        ));
    }
}

/// The literalSubject rules; returns the common name the rest of the rules see.
fn subject_and_common_name(spec: &CertificateSpec, el: &mut Vec<FieldError>) -> String {
    let mut common_name = spec.common_name.clone();
    if spec.literal_subject.is_empty() {
        return common_name;
    }
    if !common_name.is_empty() {
        el.push(FieldError::invalid(
            "spec.commonName",
            Value::Str(common_name.clone()),
            "When providing a `LiteralSubject` no `commonName` may be provided.",
        ));
    }
    if let Some(subject) = spec.subject.as_ref().filter(|s| has_subject_fields(s)) {
        el.push(FieldError::invalid(
            "spec.subject",
            Value::Json(subject_json(subject)),
            "When providing a `LiteralSubject` no `Subject` properties may be provided.",
        ));
    }
    let literal = Value::Str(spec.literal_subject.clone());
    let rdns = match literal_subject::parse(&spec.literal_subject) {
        Ok(rdns) => rdns,
        Err(e) => {
            el.push(FieldError::invalid("spec.literalSubject", literal.clone(), e));
            Vec::new()
        }
    };
    // cert-manager walks the RDN sequence reversed (last written first), the last CN it meets
    // winning: the last CN of the first written RDN that has one.
    let reversed = || rdns.iter().rev().flatten();
    if let Some(cn) = reversed().filter(|a| a.is_common_name()).last() {
        common_name = cn.value.clone();
    }
    for attribute in reversed().filter(|a| a.oid.is_none()) {
        let msg = format!(
            "Literal subject contains unrecognized key with value [{}]",
            attribute.value
        );
        el.push(FieldError::invalid("spec.literalSubject", literal.clone(), msg));
    }
    common_name
}

fn has_subject_fields(s: &X509Subject) -> bool {
    !(s.organizations.is_empty()
        && s.countries.is_empty()
        && s.organizational_units.is_empty()
        && s.localities.is_empty()
        && s.provinces.is_empty()
        && s.street_addresses.is_empty()
        && s.postal_codes.is_empty()
        && s.serial_number.is_empty())
}

/// Go's JSON of cert-manager's internal `X509Subject` (no JSON tags: Go field names).
fn subject_json(s: &X509Subject) -> String {
    format!(
        "{{\"Organizations\":{},\"Countries\":{},\"OrganizationalUnits\":{},\"Localities\":{},\"Provinces\":{},\"StreetAddresses\":{},\"PostalCodes\":{},\"SerialNumber\":{}}}",
        json_strings(&s.organizations),
        json_strings(&s.countries),
        json_strings(&s.organizational_units),
        json_strings(&s.localities),
        json_strings(&s.provinces),
        json_strings(&s.street_addresses),
        json_strings(&s.postal_codes),
        json_string(&s.serial_number),
    )
}

fn addresses(spec: &CertificateSpec, el: &mut Vec<FieldError>) {
    for (i, ip) in spec.ip_addresses.iter().enumerate() {
        if !names::is_ip(ip) {
            el.push(FieldError::invalid(
                format!("spec.ipAddresses[{i}]"),
                Value::Str(ip.clone()),
                "invalid IP address",
            ));
        }
    }
    for (i, email) in spec.email_addresses.iter().enumerate() {
        let field = format!("spec.emailAddresses[{i}]");
        match mail::parse_address(email) {
            Err(e) => el.push(FieldError::invalid(
                field,
                Value::Str(email.clone()),
                format!("invalid email address: {e}"),
            )),
            Ok(address) if address != *email => el.push(FieldError::invalid(
                field,
                Value::Str(email.clone()),
                "invalid email address: make sure the supplied value only contains the email address itself",
            )),
            Ok(_) => {}
        }
    }
}

fn other_names(spec: &CertificateSpec, el: &mut Vec<FieldError>) {
    for (i, other) in spec.other_names.iter().enumerate() {
        let path = format!("spec.otherNames[{i}]");
        if other.oid.is_empty() {
            el.push(FieldError::required(format!("{path}.oid"), "must be specified"));
        }
        if !names::is_oid(&other.oid) {
            el.push(FieldError::invalid(
                format!("{path}.oid"),
                Value::Str(other.oid.clone()),
                "invalid oid syntax",
            ));
        }
        if other.utf8_value.is_empty() {
            el.push(FieldError::required(
                format!("{path}.utf8Value"),
                "must be set to a valid non-empty UTF8 string",
            ));
        }
    }
}

fn private_key(spec: &CertificateSpec, el: &mut Vec<FieldError>) {
    let Some(key) = &spec.private_key else { return };
    let size = key.size;
    match key.algorithm.as_str() {
        "" | "RSA" if size > 0 && !(2048..=8192).contains(&size) => el.push(FieldError::invalid(
            "spec.privateKey.size",
            Value::Int(size),
            "must be between 2048 and 8192 for rsa keyAlgorithm",
        )),
        "ECDSA" if size > 0 && ![256, 384, 521].contains(&size) => el.push(FieldError::not_supported(
            "spec.privateKey.size",
            Value::Int(size),
            &["256", "384", "521"],
        )),
        "" | "RSA" | "ECDSA" | "Ed25519" => {}
        other => el.push(FieldError::invalid(
            "spec.privateKey.algorithm",
            Value::Json(json_string(other)),
            "must be either empty or one of rsa, ecdsa or ed25519",
        )),
    }
}

fn signature_algorithm(spec: &CertificateSpec, el: &mut Vec<FieldError>) {
    if spec.signature_algorithm.is_empty() {
        return;
    }
    let key_algorithm = match spec.private_key.as_ref().map(|k| k.algorithm.as_str()) {
        None | Some("") => "RSA",
        Some(other) => other,
    };
    let allowed: &[&str] = match key_algorithm {
        "RSA" => &["SHA256WithRSA", "SHA384WithRSA", "SHA512WithRSA"],
        "ECDSA" => &["ECDSAWithSHA256", "ECDSAWithSHA384", "ECDSAWithSHA512"],
        "Ed25519" => &["PureEd25519"],
        _ => return,
    };
    if !allowed.contains(&spec.signature_algorithm.as_str()) {
        el.push(FieldError::invalid(
            "spec.signatureAlgorithm",
            Value::Json(json_string(&spec.signature_algorithm)),
            format!(
                "for key algorithm {key_algorithm} the allowed signature algorithms are [{}]",
                allowed.join(" ")
            ),
        ));
    }
}

/// A duration field's nanoseconds, or its parse error. A value Go cannot decode never reaches
/// cert-manager's rules (the webhook refuses to decode the object); it is reported here on its
/// field with Go's `time.ParseDuration` error.
pub(super) fn duration_field(field: &str, text: &str, el: &mut Vec<FieldError>) -> Option<i64> {
    match parse_go_duration(text) {
        Ok(d) => Some(d.as_nanos() as i64),
        Err(e) => {
            el.push(FieldError::invalid(
                field,
                Value::Str(text.to_string()),
                e.to_string(),
            ));
            None
        }
    }
}

/// cert-manager's `ValidateDuration`, except `renewBeforePercentage`: cert-manager checks the
/// complement `duration * (100 - pct) / 100` (a bug fixed upstream later); this checks the
/// renewBefore the percentage really gives, `duration * pct / 100`, against `[5m, duration)`,
/// with cert-manager's messages.
fn durations(spec: &CertificateSpec, el: &mut Vec<FieldError>) {
    let duration = match &spec.duration {
        None => Some(DEFAULT_DURATION_NS),
        Some(text) => duration_field("spec.duration", text, el),
    };
    let renew_before = match &spec.renew_before {
        None => None,
        Some(text) => match duration_field("spec.renewBefore", text, el) {
            Some(ns) => Some(ns),
            None => return,
        },
    };
    let Some(duration) = duration else { return };
    if duration < MIN_DURATION_NS {
        let msg = format!(
            "certificate duration must be greater than {}",
            format_go_duration(MIN_DURATION_NS)
        );
        el.push(FieldError::invalid("spec.duration", Value::Int(duration), msg));
    }
    let pct = spec.renew_before_percentage;
    if let (Some(rb), Some(pct)) = (renew_before, pct) {
        let msg = "renewBefore and renewBeforePercentage are mutually exclusive and cannot both be set";
        el.push(FieldError::invalid("spec.renewBefore", Value::Int(rb), msg));
        el.push(FieldError::invalid(
            "spec.renewBeforePercentage",
            Value::Int(pct.into()),
            msg,
        ));
    }
    if let Some(rb) = renew_before {
        if rb < MIN_RENEW_BEFORE_NS {
            let msg = format!(
                "certificate renewBefore must be greater than {}",
                format_go_duration(MIN_RENEW_BEFORE_NS)
            );
            el.push(FieldError::invalid("spec.renewBefore", Value::Int(rb), msg));
        }
        if rb >= duration {
            let msg = format!(
                "certificate duration {} must be greater than renewBefore {}",
                format_go_duration(duration),
                format_go_duration(rb)
            );
            el.push(FieldError::invalid("spec.renewBefore", Value::Int(rb), msg));
        }
    }
    if let Some(pct) = pct {
        let effective = (duration as f64 * f64::from(pct) / 100.0) as i64;
        let value = Value::Int(pct.into());
        if effective < MIN_RENEW_BEFORE_NS {
            let msg = format!(
                "certificate renewBeforePercentage must result in a renewBefore greater than {}",
                format_go_duration(MIN_RENEW_BEFORE_NS)
            );
            el.push(FieldError::invalid(
                "spec.renewBeforePercentage",
                value.clone(),
                msg,
            ));
        }
        if effective >= duration {
            let msg = "certificate renewBeforePercentage must result in a renewBefore less than duration";
            el.push(FieldError::invalid("spec.renewBeforePercentage", value, msg));
        }
    }
}

/// cert-manager's usage names (`util.KeyUsageType` / `ExtKeyUsageType`).
pub const USAGES: &[&str] = &[
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

fn usages(spec: &CertificateSpec, el: &mut Vec<FieldError>) {
    for (i, usage) in spec.usages.iter().enumerate() {
        if !USAGES.contains(&usage.as_str()) {
            el.push(FieldError::invalid(
                format!("spec.usages[{i}]"),
                Value::Json(json_string(usage)),
                "unknown keyusage",
            ));
        }
    }
}

fn secret_template(spec: &CertificateSpec, el: &mut Vec<FieldError>) {
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

fn name_constraints(spec: &CertificateSpec, el: &mut Vec<FieldError>) {
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

fn additional_output_formats(spec: &CertificateSpec, el: &mut Vec<FieldError>) {
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

fn keystores(spec: &CertificateSpec, el: &mut Vec<FieldError>) {
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
