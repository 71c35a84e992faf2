//! What cert-manager's admission webhook (and the API server's schema check of cert-manager's
//! CRD) would refuse in a Certificate, and what its defaulting sets. In standalone mode no
//! webhook runs, so the controllers run these and report the result on the Certificate.
//!
//! Every error is a [`FieldError`] whose `Display` is what k8s.io/apimachinery's
//! `field.Error.Error()` prints (`spec.commonName: Too long: may not be more than 64 bytes`);
//! [`message`] joins several as `ErrorList.ToAggregate().Error()` does.
//!
//! Two layers, as on a real cluster:
//! - [`validate_schema`]: the enums and patterns of cert-manager's CRD, checked by the API server
//!   before any webhook runs (our types keep enumerated values as strings);
//! - [`validate_webhook`]: cert-manager's `ValidateCertificateSpec`, rule by rule in its order.
//!
//! [`validate`] runs the second only when the first passes, as the API server does.
//!
//! Where Go iterates a map (secretTemplate labels and annotations) the errors come in key order;
//! Go's order is random.

mod durations;

mod mail;
pub(crate) mod names;
mod outputs;
mod renewal;
mod schema;
mod spec;

use std::fmt;

use k8s_openapi::jiff::SignedDuration;

use crate::api::certmanager::{CertificateSpec, PrivateKey};
use crate::certificates::go;

pub use crate::certificates::go::{GoDurationError, format_go_duration, parse_go_duration};
pub use schema::validate_schema;
pub use spec::validate_webhook;

/// The kind of a field error, as apimachinery's `field.ErrorType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Required,
    Invalid,
    NotSupported,
    Forbidden,
    TooLong,
    Duplicate,
}

impl ErrorKind {
    /// apimachinery's `ErrorType.String()`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Required => "Required value",
            Self::Invalid => "Invalid value",
            Self::NotSupported => "Unsupported value",
            Self::Forbidden => "Forbidden",
            Self::TooLong => "Too long",
            Self::Duplicate => "Duplicate value",
        }
    }

    /// Whether the bad value is printed (Go prints it for these kinds only).
    fn shows_value(self) -> bool {
        matches!(self, Self::Invalid | Self::NotSupported | Self::Duplicate)
    }
}

/// The bad value of a field error, rendered the way `ErrorBody` renders Go values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// No value (Required, Forbidden, TooLong).
    None,
    /// A Go `string`: printed with `%q`.
    Str(String),
    /// A Go integer (or a value whose JSON is a bare number, e.g. a `time.Duration`).
    Int(i64),
    /// Any other Go value, already rendered as Go's `json.Marshal` renders it.
    Json(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => Ok(()),
            Self::Str(s) => f.write_str(&go::strconv_quote(s)),
            Self::Int(n) => write!(f, "{n}"),
            Self::Json(json) => f.write_str(json),
        }
    }
}

/// One field-level validation error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field path, e.g. `spec.privateKey.size` or `spec.otherNames[0].oid`.
    pub field: String,
    pub kind: ErrorKind,
    pub value: Value,
    pub detail: String,
}

impl FieldError {
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(field, ErrorKind::Required, Value::None, detail)
    }

    pub fn invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        Self::new(field, ErrorKind::Invalid, value, detail)
    }

    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(field, ErrorKind::Forbidden, Value::None, detail)
    }

    /// apimachinery's `TooLong` with a non-negative maximum.
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        let unit = if max == 1 { "byte" } else { "bytes" };
        let detail = format!("may not be more than {max} {unit}");
        Self::new(field, ErrorKind::TooLong, Value::None, detail)
    }

    pub fn duplicate(field: impl Into<String>, value: Value) -> Self {
        Self::new(field, ErrorKind::Duplicate, value, "")
    }

    /// apimachinery's `NotSupported`: the supported values quoted and listed.
    pub fn not_supported(field: impl Into<String>, value: Value, supported: &[&str]) -> Self {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported.iter().map(|s| go::strconv_quote(s)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(field, ErrorKind::NotSupported, value, detail)
    }

    fn new(field: impl Into<String>, kind: ErrorKind, value: Value, detail: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            kind,
            value,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.kind.as_str())?;
        if self.kind.shows_value() {
            write!(f, ": {}", self.value)?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

impl std::error::Error for FieldError {}

/// Several errors as one message, as `ErrorList.ToAggregate().Error()` reads: repeated
/// messages once, one message alone, several as `[a, b]`; empty for no errors.
pub fn message(errors: &[FieldError]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for error in errors {
        let text = error.to_string();
        if !seen.contains(&text) {
            seen.push(text);
        }
    }
    match seen.len() {
        0 => String::new(),
        1 => seen.remove(0),
        _ => format!("[{}]", seen.join(", ")),
    }
}

/// Everything a real cluster with cert-manager would refuse in `spec`: the CRD schema's errors
/// if there are any (the webhook is then never called), otherwise the webhook's.
pub fn validate(spec: &CertificateSpec) -> Vec<FieldError> {
    let schema = validate_schema(spec);
    if !schema.is_empty() {
        return schema;
    }
    validate_webhook(spec)
}

/// The Certificate as cert-manager's defaulting leaves it: `privateKey.rotationPolicy`
/// `Always` when unset (`SetRuntimeDefaults_Certificate`, applied by its key manager; an absent
/// `privateKey` becomes one holding only that).
///
/// Deliberately not defaulted: `issuerRef.kind` and `issuerRef.group`. cert-manager's
/// `SetObjectDefaults_Certificate` fills them in, which made every Certificate look changed to
/// comparisons and re-issued after upgrades (cert-manager #8158); an empty value keeps meaning
/// `Issuer` / `cert-manager.io` where it is read. Nothing else of a Certificate is defaulted by
/// cert-manager's API: `duration`, key algorithm and size, `revisionHistoryLimit` and the like
/// are defaults applied where they are used, and the object keeps them unset.
pub fn defaults(spec: &CertificateSpec) -> CertificateSpec {
    let mut out = spec.clone();
    let key = out.private_key.get_or_insert_with(PrivateKey::default);
    if key.rotation_policy.is_empty() {
        key.rotation_policy = "Always".to_string();
    }
    out
}

/// cert-manager's check of `--certificate-request-minimum-backoff-duration` and
/// `--certificate-request-maximum-backoff-duration` (its controller configuration validation):
/// negatives are refused, and a maximum below the minimum when both are positive. The error
/// reads as cert-manager's start-up error does, without its `error validating flags: ` prefix.
pub fn validate_backoff(min: SignedDuration, max: SignedDuration) -> Result<(), String> {
    let nanos = |d: SignedDuration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
    let (min_ns, max_ns) = (nanos(min), nanos(max));
    let min_field = "certificateRequestMinimumBackoffDuration";
    let max_field = "certificateRequestMaximumBackoffDuration";
    let mut errors = Vec::new();
    if min_ns < 0 {
        let value = Value::Str(format_go_duration(min_ns));
        errors.push(FieldError::invalid(min_field, value, "must not be negative"));
    }
    if max_ns < 0 {
        let value = Value::Str(format_go_duration(max_ns));
        errors.push(FieldError::invalid(max_field, value, "must not be negative"));
    }
    if min_ns > 0 && max_ns > 0 && max_ns < min_ns {
        let value = Value::Str(format_go_duration(max_ns));
        let detail = "must be greater than or equal to certificateRequestMinimumBackoffDuration";
        errors.push(FieldError::invalid(max_field, value, detail));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(message(&errors))
    }
}

#[cfg(test)]
mod tests;
