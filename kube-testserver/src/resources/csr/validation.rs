//! What kube-apiserver refuses in a CertificateSigningRequest
//! (pkg/apis/certificates/validation/validation.go): a request that is not a signed PEM CSR,
//! bad usages or signer names, short durations, inconsistent conditions, a certificate that is
//! not PEM CERTIFICATE blocks, and updates that remove conditions or change a certificate.

use base64::Engine as _;
use serde_json::Value;
use x509_parser::prelude::{FromDer, X509Certificate, X509CertificationRequest};

use super::{Part, conditions};
use crate::{
    error::{ApiError, ApiResult},
    meta,
};

/// The Kubernetes `KeyUsage` values.
const USAGES: &[&str] = &[
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

const LEGACY_SIGNER: &str = "kubernetes.io/legacy-unknown";

type Causes = Vec<(String, String)>;

fn to_result(obj: &Value, causes: Causes) -> ApiResult<()> {
    if causes.is_empty() {
        return Ok(());
    }
    let name = meta::name(obj).unwrap_or_default();
    Err(ApiError::invalid(
        "CertificateSigningRequest.certificates.k8s.io",
        name,
        &causes,
    ))
}

/// The checks of every write: spec and status as they are.
pub fn validate(obj: &Value) -> ApiResult<()> {
    to_result(obj, object_causes(obj))
}

/// The checks of an update to `part`: [`validate`]'s, and what may not change.
pub fn validate_update(old: &Value, new: &Value, part: Part) -> ApiResult<()> {
    let mut causes = object_causes(new);
    causes.extend(transition_causes(old, new, part));
    to_result(new, causes)
}

fn object_causes(obj: &Value) -> Causes {
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let mut causes = Causes::new();
    if let Err(why) = check_request(&spec) {
        causes.push((
            "spec.request".into(),
            format!("Invalid value: \"<request>\": {why}"),
        ));
    }
    causes.extend(usage_causes(&spec));
    causes.extend(signer_causes(
        spec.get("signerName").and_then(Value::as_str).unwrap_or_default(),
    ));
    if let Some(secs) = spec.get("expirationSeconds").and_then(Value::as_i64)
        && secs < 600
    {
        causes.push((
            "spec.expirationSeconds".into(),
            format!("Invalid value: {secs}: may not specify a duration less than 600 seconds (10 minutes)"),
        ));
    }
    causes.extend(condition_causes(obj));
    if let Err(why) = check_certificate(certificate(obj).as_deref().unwrap_or_default()) {
        causes.push((
            "status.certificate".into(),
            format!("Invalid value: \"<certificate data>\": {why}"),
        ));
    }
    causes
}

fn decode_bytes(v: Option<&Value>) -> Result<Vec<u8>, String> {
    let text = v.and_then(Value::as_str).unwrap_or_default();
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("illegal base64 data: {e}"))
}

fn certificate(obj: &Value) -> Option<Vec<u8>> {
    decode_bytes(obj.pointer("/status/certificate")).ok()
}

/// `spec.request`: a PEM `CERTIFICATE REQUEST` whose self-signature verifies.
fn check_request(spec: &Value) -> Result<(), String> {
    const NOT_PEM: &str = "PEM block type must be CERTIFICATE REQUEST";
    let bytes = decode_bytes(spec.get("request"))?;
    let block = ::pem::parse_many(&bytes)
        .ok()
        .and_then(|blocks| blocks.into_iter().next())
        .filter(|b| b.tag() == "CERTIFICATE REQUEST")
        .ok_or(NOT_PEM)?;
    let (_, csr) = X509CertificationRequest::from_der(block.contents())
        .map_err(|e| format!("asn1: structure error: {e}"))?;
    csr.verify_signature()
        .map_err(|e| format!("x509: ECDSA/RSA verification failure: {e}"))
}

fn usage_causes(spec: &Value) -> Causes {
    let usages: Vec<String> = spec
        .get("usages")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|u| u.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default();
    if usages.is_empty() {
        return vec![("spec.usages".into(), "Required value".into())];
    }
    let supported: Vec<String> = USAGES.iter().map(|u| format!("\"{u}\"")).collect();
    let mut causes = Causes::new();
    for (i, usage) in usages.iter().enumerate() {
        if !USAGES.contains(&usage.as_str()) {
            causes.push((
                format!("spec.usages[{i}]"),
                format!(
                    "Unsupported value: \"{usage}\": supported values: {}",
                    supported.join(", ")
                ),
            ));
        }
    }
    for (i, usage) in usages.iter().enumerate() {
        if usages[..i].contains(usage) {
            causes.push((
                format!("spec.usages[{i}]"),
                format!("Duplicate value: \"{usage}\""),
            ));
        }
    }
    causes
}

/// `signerName`: `<DNS subdomain>/<path>`, and not the legacy signer.
fn signer_causes(signer: &str) -> Causes {
    let field = "spec.signerName".to_string();
    if signer.is_empty() {
        return vec![(field, "Required value".into())];
    }
    if signer == LEGACY_SIGNER {
        return vec![(
            field,
            format!("Invalid value: \"{signer}\": the legacy signerName is not allowed via this API version"),
        )];
    }
    let malformed = || {
        vec![(
            field.clone(),
            format!(
                "Invalid value: \"{signer}\": must be a fully qualified domain and path of the form 'example.com/signer-name'"
            ),
        )]
    };
    let Some((domain, path)) = signer.split_once('/') else {
        return malformed();
    };
    if !meta::is_dns_subdomain(domain) || path.is_empty() {
        return malformed();
    }
    // The path may be a DNS subdomain plus a label value: 253 + 63 + 1 characters.
    if path.len() > 317 {
        return vec![(field, "Too long: may not be more than 317 bytes".into())];
    }
    Causes::new()
}

fn condition_causes(obj: &Value) -> Causes {
    let mut causes = Causes::new();
    let (mut approved, mut denied) = (false, false);
    let mut seen: Vec<String> = Vec::new();
    for (i, c) in conditions(obj).iter().enumerate() {
        let type_ = c.get("type").and_then(Value::as_str).unwrap_or_default();
        let status = c.get("status").and_then(Value::as_str).unwrap_or_default();
        if type_.is_empty() {
            causes.push((format!("status.conditions[{i}].type"), "Required value".into()));
        }
        let allowed: &[&str] = match type_ {
            "Approved" | "Denied" | "Failed" => &["True"],
            _ => &["False", "True", "Unknown"],
        };
        if status.is_empty() {
            causes.push((format!("status.conditions[{i}].status"), "Required value".into()));
        } else if !allowed.contains(&status) {
            let values: Vec<String> = allowed.iter().map(|s| format!("\"{s}\"")).collect();
            causes.push((
                format!("status.conditions[{i}].status"),
                format!(
                    "Unsupported value: \"{status}\": supported values: {}",
                    values.join(", ")
                ),
            ));
        }
        approved |= type_ == "Approved";
        denied |= type_ == "Denied";
        if approved && denied && matches!(type_, "Approved" | "Denied") {
            causes.push((
                "status.conditions".into(),
                format!("Invalid value: \"{type_}\": Approved and Denied conditions are mutually exclusive"),
            ));
        }
        if seen.iter().any(|t| t == type_) {
            causes.push((
                format!("status.conditions[{i}].type"),
                format!("Duplicate value: \"{type_}\""),
            ));
        }
        seen.push(type_.to_string());
    }
    causes
}

/// `status.certificate`: empty, or only `CERTIFICATE` PEM blocks without headers, each a
/// certificate.
fn check_certificate(pem_data: &[u8]) -> Result<(), String> {
    if pem_data.is_empty() {
        return Ok(());
    }
    let blocks = ::pem::parse_many(pem_data).unwrap_or_default();
    for block in &blocks {
        if block.tag() != "CERTIFICATE" {
            return Err(format!(
                "only CERTIFICATE PEM blocks are allowed, found \"{}\"",
                block.tag()
            ));
        }
        if block.headers().iter().next().is_some() {
            return Err("no PEM block headers are permitted".into());
        }
        X509Certificate::from_der(block.contents())
            .map_err(|e| format!("x509: malformed certificate: {e}"))?;
    }
    if blocks.is_empty() {
        return Err("must contain at least one CERTIFICATE PEM block".into());
    }
    Ok(())
}

fn count(list: &[Value], type_: &str) -> usize {
    list.iter()
        .filter(|c| c.get("type").and_then(Value::as_str) == Some(type_))
        .count()
}

fn transition_causes(old: &Value, new: &Value, part: Part) -> Causes {
    let (before, after) = (conditions(old), conditions(new));
    let mut causes = Causes::new();
    for type_ in ["Approved", "Denied", "Failed"] {
        if count(&after, type_) < count(&before, type_) {
            causes.push((
                "status.conditions".into(),
                format!("Forbidden: updates may not remove a condition of type \"{type_}\""),
            ));
        }
    }
    if part != Part::Approval {
        for type_ in ["Approved", "Denied"] {
            if count(&after, type_) > count(&before, type_) {
                causes.push((
                    "status.conditions".into(),
                    format!("Forbidden: updates may not add a condition of type \"{type_}\""),
                ));
            }
        }
    }
    let (was, is) = (
        certificate(old).unwrap_or_default(),
        certificate(new).unwrap_or_default(),
    );
    if part != Part::Status && was != is {
        causes.push((
            "status.certificate".into(),
            "Forbidden: updates may not set certificate content".into(),
        ));
    } else if !was.is_empty() && was != is {
        causes.push((
            "status.certificate".into(),
            "Invalid value: \"[omitted]\": updates may not modify existing certificate content".into(),
        ));
    }
    causes
}
