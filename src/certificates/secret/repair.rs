//! What cert-manager's issuing controller does with a Secret while the Certificate is not
//! issuing (`ensureSecretData`): nothing when the Secret lacks `tls.crt` or `tls.key` (the
//! trigger chain will re-issue), otherwise run the post-issuance chain and, on a violation,
//! re-apply the Secret from what it already holds, never re-issuing. A violation re-applying
//! cannot fix (the certificate does not decode, managedFields do not parse) is only logged.

use k8s_openapi::api::core::v1::Secret;

use super::checks::Input;
use super::{SecretData, data_of};
use crate::certificates::keys::{annotation, data};
use crate::certificates::policy::{Violation, evaluate, reason};

/// The decision for one Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repair<'a> {
    /// Nothing to do: the Secret is as it should be, or has no certificate or key yet.
    Nothing,
    /// Apply `secret_body` with this data (taken from the Secret itself).
    Reapply {
        check: &'static str,
        violation: Violation,
        data: SecretData<'a>,
    },
    /// Log and stop: re-applying would not fix it.
    Unrepairable {
        check: &'static str,
        violation: Violation,
    },
}

/// The data a re-apply writes: the Secret's own key, chain and CA, and the Certificate and
/// issuer names its annotations record.
pub fn secret_data_of(secret: &Secret) -> SecretData<'_> {
    let annotation_of = |key: &str| {
        secret
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .map_or("", String::as_str)
    };
    SecretData {
        private_key: data_of(secret, data::TLS_KEY),
        certificate: data_of(secret, data::TLS_CRT),
        ca: data_of(secret, data::CA_CRT),
        certificate_name: annotation_of(annotation::CERTIFICATE_NAME),
        issuer_name: annotation_of(annotation::ISSUER_NAME),
        issuer_kind: annotation_of(annotation::ISSUER_KIND),
        issuer_group: annotation_of(annotation::ISSUER_GROUP),
    }
}

/// cert-manager's `ensureSecretData` decision for `input`.
pub fn decide<'a>(input: &Input<'a>) -> Repair<'a> {
    let secret: &'a Secret = input.secret;
    if data_of(secret, data::TLS_CRT).is_empty() || data_of(secret, data::TLS_KEY).is_empty() {
        return Repair::Nothing;
    }
    let Some((check, violation)) = evaluate(Input::POST_ISSUANCE, input) else {
        return Repair::Nothing;
    };
    if [reason::INVALID_CERTIFICATE, reason::MANAGED_FIELDS_PARSE_ERROR].contains(&violation.reason) {
        return Repair::Unrepairable { check, violation };
    }
    Repair::Reapply {
        check,
        violation,
        data: secret_data_of(secret),
    }
}
