//! The checks of cert-manager's trigger, readiness and temporary-certificate chains
//! (internal/controller/certificates/policies/checks.go), each a small pure function of an
//! [`Input`], with cert-manager's reasons and messages word for word.
//!
//! Each check after `secret_does_not_exist` passes when there is no Secret: the chains run it
//! first, as cert-manager's do.

use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use x509_parser::certificate::X509Certificate;
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::prelude::FromDer;

use super::{Violation, reason};
use crate::api::certmanager::{
    Certificate, CertificateRequest, issuer_group_or_default, issuer_kind_or_default,
};
use crate::certificates::decode::{self, DecodeError, KeyFacts};
use crate::certificates::go::{self, list as go_list, rfc1123};
use crate::certificates::keys::{annotation, data};
use crate::certificates::matching;
use crate::certificates::renewal::{self, Jitter, Planned, Renewal, RenewalError};

/// What the checks look at: the Certificate, its Secret (if it exists), the CertificateRequest
/// of the current revision and the one being issued (if any), the time now, and the renewal
/// jitter (`--renewal-jitter`).
#[derive(Clone)]
pub struct Input {
    pub certificate: Arc<Certificate>,
    pub secret: Option<Arc<Secret>>,
    pub current_request: Option<Arc<CertificateRequest>>,
    pub next_request: Option<Arc<CertificateRequest>>,
    pub now: Timestamp,
    pub renewal_jitter: Jitter,
}

/// The Secret by name and data keys only: its data holds the private key.
impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Input")
            .field("certificate", &self.certificate)
            .field("secret", &crate::redact::secret(self.secret.as_deref()))
            .field("current_request", &self.current_request)
            .field("next_request", &self.next_request)
            .field("now", &self.now)
            .field("renewal_jitter", &self.renewal_jitter)
            .finish()
    }
}

impl Input {
    /// The Secret's `data[key]`, if the Secret exists and has it.
    fn data(&self, key: &str) -> Option<&[u8]> {
        let data = self.secret.as_ref()?.data.as_ref()?;
        data.get(key).map(|ByteString(bytes)| bytes.as_slice())
    }

    /// What the Secret's `tls.key` says of itself; `None` when there is no Secret.
    fn private_key(&self) -> Option<Result<KeyFacts, Violation>> {
        self.secret.as_ref()?;
        Some(
            decode::private_key_facts(self.data(data::TLS_KEY).unwrap_or_default()).map_err(|err| {
                Violation::new(
                    reason::INVALID_KEY_PAIR,
                    format!("Issuing certificate as Secret contains invalid private key data: {err}"),
                )
            }),
        )
    }

    /// The DER of the Secret's leaf certificate; `None` when there is no Secret.
    fn certificate_der(&self) -> Option<Result<Vec<u8>, Violation>> {
        self.secret.as_ref()?;
        Some(
            decode::leaf_certificate(self.data(data::TLS_CRT).unwrap_or_default())
                .map_err(invalid_certificate),
        )
    }

    fn annotation(&self, key: &str) -> Option<&str> {
        let annotations = self.secret.as_ref()?.metadata.annotations.as_ref()?;
        annotations.get(key).map(String::as_str)
    }
}

fn invalid_certificate(err: DecodeError) -> Violation {
    Violation::new(
        reason::INVALID_CERTIFICATE,
        format!("Issuing certificate as Secret contains an invalid certificate: {err}"),
    )
}

/// Runs `f` on the Secret's parsed leaf certificate.
fn with_certificate(
    input: &Input,
    f: impl FnOnce(&X509Certificate<'_>) -> Option<Violation>,
) -> Option<Violation> {
    let der = match input.certificate_der()? {
        Ok(der) => der,
        Err(violation) => return Some(violation),
    };
    // `decode::certificates` has parsed it once already.
    let (_, cert) = X509Certificate::from_der(&der).ok()?;
    f(&cert)
}

/// Unwraps a decoded value or returns its violation from the check.
macro_rules! decoded {
    ($value:expr) => {
        match $value? {
            Ok(value) => value,
            Err(violation) => return Some(violation),
        }
    };
}

pub fn secret_does_not_exist(input: &Input) -> Option<Violation> {
    input.secret.is_none().then(|| {
        Violation::new(
            reason::DOES_NOT_EXIST,
            "Issuing certificate as Secret does not exist",
        )
    })
}

pub fn secret_is_missing_data(input: &Input) -> Option<Violation> {
    let secret = input.secret.as_ref()?;
    let message = if secret.data.is_none() {
        "Issuing certificate as Secret does not contain any data"
    } else if input.data(data::TLS_KEY).is_none_or(<[u8]>::is_empty) {
        "Issuing certificate as Secret does not contain a private key"
    } else if input.data(data::TLS_CRT).is_none_or(<[u8]>::is_empty) {
        "Issuing certificate as Secret does not contain a certificate"
    } else {
        return None;
    };
    Some(Violation::new(reason::MISSING_DATA, message))
}

pub fn secret_public_keys_differ(input: &Input) -> Option<Violation> {
    let key = decoded!(input.private_key());
    with_certificate(input, |cert| {
        match decode::public_key_is(cert.public_key(), &key) {
            Err(err) => Some(Violation::new(
                reason::INVALID_KEY_PAIR,
                format!("Secret contains an invalid key-pair: {err}"),
            )),
            Ok(false) => Some(Violation::new(
                reason::INVALID_KEY_PAIR,
                "Issuing certificate as Secret contains a private key that does not match the certificate",
            )),
            Ok(true) => None,
        }
    })
}

pub fn secret_issuer_annotations_mismatch(input: &Input) -> Option<Violation> {
    let secret = input.secret.as_ref()?;
    if matching::secret_issuer_annotations_match(secret, &input.certificate.spec.issuer_ref) {
        return None;
    }
    let get = |key| input.annotation(key).unwrap_or_default();
    let (name, kind, group) = (
        get(annotation::ISSUER_NAME),
        get(annotation::ISSUER_KIND),
        get(annotation::ISSUER_GROUP),
    );
    let (kind, group) = (issuer_kind_or_default(kind), issuer_group_or_default(group));
    Some(Violation::new(
        reason::INCORRECT_ISSUER,
        format!("Issuing certificate as Secret was previously issued by \"{kind}.{group}/{name}\""),
    ))
}

pub fn secret_certificate_name_annotations_mismatch(input: &Input) -> Option<Violation> {
    let name = input.annotation(annotation::CERTIFICATE_NAME)?;
    let own = input.certificate.metadata.name.as_deref().unwrap_or_default();
    (name != own).then(|| {
        Violation::new(
            reason::INCORRECT_CERTIFICATE,
            format!(
                "Secret was issued for \"{name}\". If this message is not transient, you might have two conflicting Certificates pointing to the same secret."
            ),
        )
    })
}

pub fn secret_private_key_mismatches_spec(input: &Input) -> Option<Violation> {
    let key = decoded!(input.private_key());
    let violations = matching::private_key_matches_spec(key.spec, &input.certificate.spec);
    (!violations.is_empty()).then(|| {
        Violation::new(
            reason::SECRET_MISMATCH,
            format!(
                "Existing private key is not up to date for spec: {}",
                go_list(&violations)
            ),
        )
    })
}

pub fn secret_public_key_differs_from_current_certificate_request(input: &Input) -> Option<Violation> {
    let request = input.current_request.as_ref()?;
    let key = decoded!(input.private_key());
    let invalid_request =
        |message: String| Some(Violation::new(reason::INVALID_CERTIFICATE_REQUEST, message));
    let der = match decode::csr(&request.spec.request.0) {
        Ok(der) => der,
        Err(err) => return invalid_request(format!("Failed to decode current CertificateRequest: {err}")),
    };
    let csr = match X509CertificationRequest::from_der(&der) {
        Ok((_, csr)) => csr,
        Err(err) => {
            let err = DecodeError::Csr(err.to_string());
            return invalid_request(format!("Failed to decode current CertificateRequest: {err}"));
        }
    };
    match decode::public_key_is(&csr.certification_request_info.subject_pki, &key) {
        Err(err) => invalid_request(format!("CertificateRequest's public key is invalid: {err}")),
        Ok(false) => Some(Violation::new(
            reason::SECRET_MISMATCH,
            "Secret contains a private key that does not match the current CertificateRequest",
        )),
        Ok(true) => None,
    }
}

/// With no current CertificateRequest (deleted), the issued certificate's names are compared
/// loosely instead. A request that cannot be read is not a reason to re-issue.
pub fn current_certificate_request_mismatches_spec(input: &Input) -> Option<Violation> {
    let spec = &input.certificate.spec;
    let Some(request) = input.current_request.as_ref() else {
        let violations = match matching::secret_matches_spec(input.secret.as_ref()?, spec) {
            Ok(violations) => violations,
            Err(err) => return Some(invalid_certificate(err)),
        };
        return (!violations.is_empty()).then(|| {
            Violation::new(
                reason::SECRET_MISMATCH,
                format!(
                    "Issuing certificate as Existing issued Secret is not up to date for spec: {}",
                    go_list(&violations)
                ),
            )
        });
    };
    let violations = matching::request_matches_spec(request, spec).ok()?;
    (!violations.is_empty()).then(|| {
        Violation::new(
            reason::REQUEST_CHANGED,
            format!(
                "Fields on existing CertificateRequest resource not up to date: {}",
                go_list(&violations)
            ),
        )
    })
}

/// Renewing once the renewal time has come; never with `renewal.policy: Disabled`. A window
/// error (`WindowError`) renews at the time the windows could not place, as cert-manager does.
pub fn current_certificate_nearing_expiry(input: &Input) -> Option<Violation> {
    with_certificate(input, |cert| {
        let spec = &input.certificate.spec;
        let policy = spec.renewal.as_ref().map(|r| r.policy.as_str());
        if policy == Some("Disabled") {
            return None;
        }
        let validity = cert.validity();
        let not_before = Timestamp::from_second(validity.not_before.timestamp()).ok()?;
        let not_after = Timestamp::from_second(validity.not_after.timestamp()).ok()?;
        let planned = renewal_time_for(input, not_before, not_after);
        let scheduled = input
            .certificate
            .status
            .as_ref()
            .and_then(|s| s.renewal_time.as_ref());
        due_violation(&planned, not_after, input.now, scheduled)
    })
}

/// The renewal time of the Secret's certificate, valid `not_before..not_after`, under the
/// Certificate's spec, the jitter for its UID, and the guard from the issuance of the current
/// request ([`issued_at`]); on an error, the time to renew anyway (the desired time a window
/// could not place) beside it. Readiness writes the same time as `renewalTime`.
pub fn renewal_time_for(input: &Input, not_before: Timestamp, not_after: Timestamp) -> Planned {
    let spec = &input.certificate.spec;
    let renewal = Renewal {
        renew_before: spec.renew_before.as_deref().and_then(go_duration),
        renew_before_percentage: spec.renew_before_percentage,
    };
    let uid = input.certificate.metadata.uid.as_deref().unwrap_or_default();
    renewal::planned(&renewal::Inputs {
        not_before,
        not_after,
        renewal,
        policy: spec.renewal.as_ref().map(|r| r.policy.as_str()),
        windows: spec.renewal.as_ref().map_or(&[][..], |r| r.windows.as_slice()),
        jitter: input.renewal_jitter,
        spread: renewal::spread_of(uid),
        issued_at: issued_at(input),
    })
}

/// When the Secret's certificate was issued: the creation of the current revision's request.
/// Recorded by the API server, so it survives restarts and reads the same in every replica.
/// Without that request (deleted, or the Secret came from elsewhere) it is unknown and the
/// guard is off: the next issuance makes a request, so that costs one issuance at most.
pub fn issued_at(input: &Input) -> Option<Timestamp> {
    let request = input.current_request.as_ref()?;
    request.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

/// The violation for a computed renewal time: none before it is due.
fn due_violation(
    planned: &Planned,
    not_after: Timestamp,
    now: Timestamp,
    scheduled: Option<&Time>,
) -> Option<Violation> {
    match (&planned.error, planned.at) {
        // No lifetime: cert-manager's arithmetic puts the renewal at notAfter.
        (Some(RenewalError::NoLifetime), _) if not_after <= now => Some(renewing(scheduled)),
        (Some(RenewalError::NoLifetime), _) => None,
        (None, Some(at)) if at <= now => Some(renewing(scheduled)),
        (Some(err), due) if due.is_none_or(|due| due <= now) => {
            Some(Violation::new(reason::WINDOW_ERROR, err.to_string()))
        }
        _ => None,
    }
}

fn renewing(scheduled: Option<&Time>) -> Violation {
    Violation::new(
        reason::RENEWING,
        format!(
            "Renewing certificate as renewal was scheduled at {}",
            go_time(scheduled)
        ),
    )
}

/// Readiness's last step: the certificate is past its `notAfter`.
pub fn current_certificate_has_expired(input: &Input) -> Option<Violation> {
    with_certificate(input, |cert| {
        let not_after = Timestamp::from_second(cert.validity().not_after.timestamp()).ok()?;
        (input.now > not_after).then(|| {
            Violation::new(
                reason::EXPIRED,
                format!("Certificate expired on {}", rfc1123(not_after)),
            )
        })
    })
}

/// A Go duration (`renewBefore`), non-negative.
fn go_duration(text: &str) -> Option<std::time::Duration> {
    let signed = go::parse_go_duration(text).ok()?;
    std::time::Duration::try_from(signed).ok()
}

/// A `*metav1.Time` as Go's `%s` prints it, or `<nil>`.
pub fn go_time(time: Option<&Time>) -> String {
    time.map_or_else(|| "<nil>".to_string(), |Time(at)| go::time_string(*at))
}

#[cfg(test)]
mod tests;
