//! What a CA's answer means, classified once: for the object signed ([`Outcome`], with its
//! retry window) and for the issuer that asked ([`blame`]).

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::api::ReadyReason;
use crate::cfssl::{Class, Error as CfsslError, Failure, IssuerFault};
use crate::pki::Chain;

/// What a signing attempt leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Issued(Chain),
    /// Terminal: Ready=False/Failed with a failure time.
    Failed(String),
    /// Ready=False/Pending; try again after the request's backoff.
    Retry(String),
    /// The issuer is misconfigured: Pending, and the issuer is re-checked at once. The issuer's
    /// watch brings the request back when it is Ready again.
    IssuerFault {
        message: String,
        reason: ReadyReason,
    },
}

/// Contract step 6: classifies a signing result. A retryable error `max_retry` or more after the
/// request's first failed sign (`first_failure`; `None` when this is the first) becomes a
/// failure, so cert-manager's own back-off takes over. The window starts at the first failure,
/// not at creation: time spent waiting for approval or for the issuer does not count. The
/// first failure is remembered in memory only (see `controllers::memory`): a restart restarts
/// the window, which gives a request more time, never less.
pub fn outcome(
    result: Result<Chain, &CfsslError>,
    first_failure: Option<Timestamp>,
    now: Timestamp,
    max_retry: Duration,
) -> Outcome {
    let err = match result {
        Ok(chain) => return Outcome::Issued(chain),
        Err(err) => err,
    };
    match err.class() {
        // Refused here, before any CA call: the CA never saw it.
        Class::Permanent if matches!(err, CfsslError::Csr(_)) => {
            Outcome::Failed(format!("the request cannot be signed: {err}"))
        }
        // The CA signed, but what it sent back is not a certificate for this request.
        Class::Permanent if matches!(err.failure(), Some(Failure::BadCertificate(_))) => Outcome::Failed(
            format!("the CA signed, but its certificate is unusable and was not stored: {err}"),
        ),
        Class::Permanent => Outcome::Failed(format!("the CA will not sign this request: {err}")),
        Class::Issuer(_) => Outcome::IssuerFault {
            message: format!("the issuer is misconfigured: {err}"),
            reason: blame(err),
        },
        Class::Retryable if retried_too_long(first_failure.unwrap_or(now), now, max_retry) => {
            Outcome::Failed(format!(
                "gave up after retrying for {}: {err}",
                humantime(max_retry)
            ))
        }
        Class::Retryable => Outcome::Retry(format!("signing failed, will retry: {err}")),
    }
}

fn retried_too_long(since: Timestamp, now: Timestamp, max_retry: Duration) -> bool {
    let max = k8s_openapi::jiff::SignedDuration::try_from(max_retry)
        .unwrap_or(k8s_openapi::jiff::SignedDuration::MAX);
    now.duration_since(since) >= max
}

fn humantime(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        s if s % 3600 == 0 && s > 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 && s > 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests;

/// The issuer's `Ready` reason for a CFSSL error.
pub fn blame(err: &CfsslError) -> ReadyReason {
    match err.class() {
        Class::Issuer(IssuerFault::Credentials) => ReadyReason::InvalidCredentials,
        Class::Issuer(IssuerFault::Config) => ReadyReason::InvalidConfig,
        Class::Issuer(IssuerFault::Tls) => ReadyReason::TlsError,
        Class::Retryable => ReadyReason::CaUnreachable,
        // A check refused for a reason that is neither ours nor the network's.
        Class::Permanent => ReadyReason::InvalidConfig,
    }
}
