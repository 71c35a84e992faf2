//! The pieces of a Certificate's status the controllers write: conditions (one transition
//! rule), the apply document, and the times read from the Secret's certificate.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::api::certmanager::{Certificate, CertificateCondition};
use crate::api::{ConditionStatus, WritableCondition};
use crate::certificates::decode;
use crate::certificates::keys::data;
use crate::certificates::policy::checks::{Input, renewal_time_for};
use crate::certificates::renewal::{Guarded, Planned, RenewalError};

/// A condition of `type_` for `crt`, keeping the previous transition time when the status
/// did not change, for the generation observed.
pub fn condition(
    crt: &Certificate,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> CertificateCondition {
    CertificateCondition {
        type_: type_.to_string(),
        status: ConditionStatus::from_bool(status).as_str().to_string(),
        reason: reason.to_string(),
        message: crate::api::bounded(message),
        last_transition_time: Some(Time(now)),
        ..CertificateCondition::default()
    }
    .with_transition_from(crt.condition(type_))
    .for_generation(crt.metadata.generation)
}

/// The apply document for a Certificate's status.
pub fn document(status: Value) -> Value {
    crate::controllers::kit::status::document::<Certificate>(status)
}

/// A time as the status holds it (RFC 3339, seconds).
pub fn time(at: Timestamp) -> Value {
    serde_json::to_value(Time(at)).unwrap_or(Value::Null)
}

/// What the Secret's certificate says about time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Times {
    pub not_before: Timestamp,
    pub not_after: Timestamp,
    /// `None` with `renewal.policy: Disabled`.
    pub renewal: Option<Timestamp>,
    /// Why the renewal windows could not place the renewal (it falls back to the plain time).
    pub window_error: Option<String>,
    /// Set when the guard moved the renewal off the issuance.
    pub guarded: Option<Guarded>,
}

/// The times of the leaf in the Secret's `tls.crt`, or `None` when there is none that decodes.
pub fn times(input: &Input) -> Option<Times> {
    let bytes = &input.secret.as_ref()?.data.as_ref()?.get(data::TLS_CRT)?.0;
    let der = decode::leaf_certificate(bytes).ok()?;
    let (_, leaf) = X509Certificate::from_der(&der).ok()?;
    let not_before = Timestamp::from_second(leaf.validity().not_before.timestamp()).ok()?;
    let not_after = Timestamp::from_second(leaf.validity().not_after.timestamp()).ok()?;
    let planned = renewal_time_for(input, not_before, not_after);
    let (renewal, window_error) = renewal_of(&planned, not_after);
    Some(Times {
        not_before,
        not_after,
        renewal,
        window_error,
        guarded: planned.guarded,
    })
}

/// The renewal time to write (the trigger chain's own computation), and why the spec could
/// not place it, if so.
fn renewal_of(planned: &Planned, not_after: Timestamp) -> (Option<Timestamp>, Option<String>) {
    match &planned.error {
        None => (planned.at, None),
        // No lifetime: cert-manager's arithmetic puts the renewal at notAfter.
        Some(err @ RenewalError::NoLifetime) => (Some(not_after), Some(err.to_string())),
        Some(err) => (planned.at, Some(err.to_string())),
    }
}
