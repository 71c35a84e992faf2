//! Issuer health as pure functions: from the credential Secret and the CA check to the `Ready`
//! condition, the Event and when to look again.

use crate::api::ReadyReason;
use crate::cfssl::{Class, Error as CfsslError, IssuerFault};

/// Why the credential Secret cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretProblem {
    #[error("Secret {namespace}/{name} not found")]
    NotFound { namespace: String, name: String },
    #[error("Secret {namespace}/{name} has no {key:?} entry")]
    MissingKey {
        namespace: String,
        name: String,
        key: &'static str,
    },
    #[error("Secret {namespace}/{name}: {detail}")]
    InvalidKey {
        namespace: String,
        name: String,
        detail: String,
    },
    #[error("cannot read Secret {namespace}/{name}: {detail}")]
    Unreadable {
        namespace: String,
        name: String,
        detail: String,
    },
}

/// What one health check found.
#[derive(Debug)]
pub enum Observation<'a> {
    Secret(&'a SecretProblem),
    /// The issuer's own spec cannot make a client (bad URL, bad CA bundle).
    Client(&'a CfsslError),
    Check(Result<(), &'a CfsslError>),
}

/// The `Ready` condition to write and how to follow up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub ready: bool,
    pub reason: ReadyReason,
    pub message: String,
    /// Healthy issuers are re-checked at the health-check interval; the rest with backoff.
    pub retry: Retry,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    Interval,
    Backoff,
}

pub fn verdict(observation: Observation<'_>) -> Verdict {
    let failed = |reason, message: String| Verdict {
        ready: false,
        reason,
        message,
        retry: Retry::Backoff,
    };
    match observation {
        Observation::Check(Ok(())) => Verdict {
            ready: true,
            reason: ReadyReason::Checked,
            message: "the CA accepted the label, profile and key".into(),
            retry: Retry::Interval,
        },
        Observation::Secret(problem) => {
            let reason = match problem {
                SecretProblem::NotFound { .. } => ReadyReason::SecretNotFound,
                SecretProblem::MissingKey { .. } | SecretProblem::InvalidKey { .. } => {
                    ReadyReason::InvalidCredentials
                }
                // RBAC or the API server: our problem, not the issuer's, but it cannot sign.
                SecretProblem::Unreadable { .. } => ReadyReason::Pending,
            };
            failed(reason, problem.to_string())
        }
        Observation::Client(err) | Observation::Check(Err(err)) => failed(reason_for(err), err.to_string()),
    }
}

/// The `Ready` reason for a CFSSL error.
pub fn reason_for(err: &CfsslError) -> ReadyReason {
    match err.class() {
        Class::Issuer(IssuerFault::Credentials) => ReadyReason::InvalidCredentials,
        Class::Issuer(IssuerFault::Config) => ReadyReason::InvalidConfig,
        Class::Issuer(IssuerFault::Tls) => ReadyReason::TlsError,
        Class::Retryable => ReadyReason::CaUnreachable,
        // A check refused for a reason that is neither ours nor the network's.
        Class::Permanent => ReadyReason::InvalidConfig,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfssl::Call;

    fn refused(message: &str, class: Class) -> CfsslError {
        CfsslError::Refused {
            call: Call::AuthSign,
            url: "http://ca".into(),
            label: "l".into(),
            status: 400,
            code: 1,
            message: message.into(),
            class,
        }
    }

    #[test]
    fn verdict_table() {
        let missing = SecretProblem::NotFound {
            namespace: "ns".into(),
            name: "creds".into(),
        };
        let no_key = SecretProblem::MissingKey {
            namespace: "ns".into(),
            name: "creds".into(),
            key: "key",
        };
        let not_hex = SecretProblem::InvalidKey {
            namespace: "ns".into(),
            name: "creds".into(),
            detail: "not hex".into(),
        };
        let forbidden = SecretProblem::Unreadable {
            namespace: "ns".into(),
            name: "creds".into(),
            detail: "403".into(),
        };
        let wrong_key = refused("invalid token", Class::Issuer(IssuerFault::Credentials));
        let bad_profile = refused("invalid profile", Class::Issuer(IssuerFault::Config));
        let tls = CfsslError::Tls {
            call: Call::Info,
            url: "https://ca".into(),
            label: "l".into(),
            detail: "unknown issuer".into(),
        };
        let down = CfsslError::Unreachable {
            call: Call::Info,
            url: "http://ca".into(),
            label: "l".into(),
            detail: "refused".into(),
        };
        let bad_url = CfsslError::CaBundle("no PEM certificate in it".into());
        let cases: Vec<(&str, Observation, bool, ReadyReason, Retry)> = vec![
            (
                "healthy",
                Observation::Check(Ok(())),
                true,
                ReadyReason::Checked,
                Retry::Interval,
            ),
            (
                "secret missing",
                Observation::Secret(&missing),
                false,
                ReadyReason::SecretNotFound,
                Retry::Backoff,
            ),
            (
                "secret without key",
                Observation::Secret(&no_key),
                false,
                ReadyReason::InvalidCredentials,
                Retry::Backoff,
            ),
            (
                "key not hex",
                Observation::Secret(&not_hex),
                false,
                ReadyReason::InvalidCredentials,
                Retry::Backoff,
            ),
            (
                "secret unreadable",
                Observation::Secret(&forbidden),
                false,
                ReadyReason::Pending,
                Retry::Backoff,
            ),
            (
                "wrong key",
                Observation::Check(Err(&wrong_key)),
                false,
                ReadyReason::InvalidCredentials,
                Retry::Backoff,
            ),
            (
                "unknown profile",
                Observation::Check(Err(&bad_profile)),
                false,
                ReadyReason::InvalidConfig,
                Retry::Backoff,
            ),
            (
                "TLS trust",
                Observation::Check(Err(&tls)),
                false,
                ReadyReason::TlsError,
                Retry::Backoff,
            ),
            (
                "CA down",
                Observation::Check(Err(&down)),
                false,
                ReadyReason::CaUnreachable,
                Retry::Backoff,
            ),
            (
                "bad CA bundle",
                Observation::Client(&bad_url),
                false,
                ReadyReason::TlsError,
                Retry::Backoff,
            ),
        ];
        for (row, observation, ready, reason, retry) in cases {
            let v = verdict(observation);
            assert_eq!(
                (v.ready, v.reason, v.retry),
                (ready, reason, retry),
                "{row}: {}",
                v.message
            );
            assert!(!v.message.is_empty(), "{row}");
        }
    }
}
