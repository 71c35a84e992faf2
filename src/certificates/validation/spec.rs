//! cert-manager's `ValidateCertificateSpec` for a Certificate, rule by rule and in its order.
//! Its feature gates (LiteralCertificateSubject, OtherNames, NameConstraints) are on by
//! default and taken as on.

use super::{FieldError, Value, mail, names};
use crate::api::certmanager::{CertificateSpec, GROUP, KEY_USAGES, X509Subject, issuer_group_or_default};
use crate::certificates::go::{json_string, json_strings};
use crate::pki::subject::{COMMON_NAME, literal_attributes};

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
    if spec.duration.is_some() || spec.renew_before.is_some() || spec.renew_before_percentage.is_some() {
        super::durations::durations(spec, &mut el);
    }
    usages(spec, &mut el);
    if let Some(limit) = spec.revision_history_limit.filter(|l| *l < 1) {
        el.push(FieldError::invalid(
            "spec.revisionHistoryLimit",
            Value::Int(limit.into()),
            "must not be less than 1",
        ));
    }
    super::outputs::secret_template(spec, &mut el);
    super::outputs::name_constraints(spec, &mut el);
    super::outputs::additional_output_formats(spec, &mut el);
    super::outputs::keystores(spec, &mut el);
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
    let builtin_group = issuer_group_or_default(&issuer.group) == GROUP;
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
    // In cert-manager's order: most significant first, the reverse of the string.
    let rdns = match literal_attributes(&spec.literal_subject) {
        Ok(rdns) => rdns,
        Err(e) => {
            el.push(FieldError::invalid(
                "spec.literalSubject",
                literal.clone(),
                e.to_string(),
            ));
            Vec::new()
        }
    };
    // cert-manager walks that sequence, the last CN it meets winning: the last CN of the first
    // written RDN that has one.
    let first_rdn_cn = rdns
        .iter()
        .rev()
        .find_map(|rdn| rdn.iter().rev().find(|a| a.oid.as_deref() == Some(COMMON_NAME)));
    if let Some(cn) = first_rdn_cn {
        common_name = String::from_utf8_lossy(&cn.value).into_owned();
    }
    for attribute in rdns.iter().flatten().filter(|a| a.oid.is_none()) {
        let msg = format!(
            "Literal subject contains unrecognized key with value [{}]",
            String::from_utf8_lossy(&attribute.value)
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

fn usages(spec: &CertificateSpec, el: &mut Vec<FieldError>) {
    for (i, usage) in spec.usages.iter().enumerate() {
        if !KEY_USAGES.contains(&usage.as_str()) {
            el.push(FieldError::invalid(
                format!("spec.usages[{i}]"),
                Value::Json(json_string(usage)),
                "unknown keyusage",
            ));
        }
    }
}
