//! When a certificate is renewed, and how long a Certificate whose issuance failed waits before
//! the next attempt, as cert-manager computes them.

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

pub use jitter::{Jitter, JitterError, spread_of};
pub use planned::{Guarded, Inputs, Planned, planned};
pub use windows::{WindowError, within_windows};

use crate::api::certmanager::RenewalWindow;

pub mod cron;
mod jitter;
mod planned;
mod windows;

/// `spec.renewal.policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Renew `renewBefore` (or `renewBeforePercentage`, or a third of the lifetime) before
    /// expiry. Also what an unset policy means.
    RenewBefore,
    /// Never renew, not even after expiry.
    Disabled,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenewalError {
    #[error("unsupported renewal policy: {0}")]
    UnknownPolicy(String),
    #[error("the certificate's notAfter is not after its notBefore")]
    NoLifetime,
    #[error(transparent)]
    Window(#[from] WindowError),
}

impl RenewalError {
    /// The renewal time to use anyway: cert-manager still renews at the desired time when no
    /// window fits it.
    pub fn fallback(&self) -> Option<Timestamp> {
        match self {
            RenewalError::Window(WindowError::NoWindow { desired, .. }) => Some(*desired),
            _ => None,
        }
    }
}

impl Policy {
    pub fn parse(policy: Option<&str>) -> Result<Self, RenewalError> {
        match policy.unwrap_or_default() {
            "" | "RenewBefore" => Ok(Policy::RenewBefore),
            "Disabled" => Ok(Policy::Disabled),
            other => Err(RenewalError::UnknownPolicy(other.to_string())),
        }
    }
}

/// What a Certificate says about renewal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Renewal {
    pub renew_before: Option<Duration>,
    pub renew_before_percentage: Option<i32>,
}

/// The renewal time of a certificate valid from `not_before` to `not_after`, truncated to the
/// second; `None` when the policy is `Disabled`.
///
/// `renewBefore` counts when it is positive and shorter than the lifetime; otherwise
/// `renewBeforePercentage` when it is between 0 and 100 exclusive; otherwise a third of the
/// lifetime (a `renewBefore` as long as the certificate silently falls through).
pub fn renewal_time(
    not_before: Timestamp,
    not_after: Timestamp,
    renewal: Renewal,
    policy: Policy,
) -> Result<Option<Timestamp>, RenewalError> {
    if policy == Policy::Disabled {
        return Ok(None);
    }
    let lifetime = not_after.duration_since(not_before);
    if !lifetime.is_positive() {
        return Err(RenewalError::NoLifetime);
    }
    let before = renewal
        .renew_before
        .and_then(|d| SignedDuration::try_from(d).ok())
        .filter(|d| d.is_positive() && *d < lifetime)
        .or_else(|| {
            renewal
                .renew_before_percentage
                .filter(|p| (1..100).contains(p))
                .map(|p| percent_of(lifetime, p))
        })
        .unwrap_or(lifetime / 3);
    let at = not_after
        .checked_sub(before)
        .map_err(|_| RenewalError::NoLifetime)?;
    // Truncated to the second, as cert-manager does.
    Ok(Some(Timestamp::from_second(at.as_second()).unwrap_or(at)))
}

/// `p` percent of `lifetime` as Go computes it: the nanoseconds as a float, truncated back.
#[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
fn percent_of(lifetime: SignedDuration, p: i32) -> SignedDuration {
    let nanos = lifetime.as_nanos() as f64 * f64::from(p) / 100.0;
    SignedDuration::from_nanos(nanos as i64)
}

/// [`renewal_time`] moved into the renewal `windows` (cert-manager's `RenewalTime` with a
/// renewal spec). With no window fitting, the error carries the desired time as
/// [`RenewalError::fallback`].
pub fn renewal_time_in_windows(
    not_before: Timestamp,
    not_after: Timestamp,
    renewal: Renewal,
    policy: Policy,
    windows: &[RenewalWindow],
) -> Result<Option<Timestamp>, RenewalError> {
    let Some(desired) = renewal_time(not_before, not_after, renewal, policy)? else {
        return Ok(None);
    };
    Ok(Some(within_windows(not_before, not_after, desired, windows)?))
}

/// The least time after issuance before a renewal the guard moved: a certificate whose CA
/// hands it out nearly (or already) expired is renewed at most once a minute, not in a loop.
/// It can put the renewal after `notAfter`, by less than a minute: such a certificate had
/// less than 90 s of validity when it arrived.
pub const RENEWAL_FLOOR: Duration = Duration::from_secs(60);

/// `renewal_time`, unless it is at or before `issued_at`: a renewal due the moment the
/// certificate arrives would re-issue in a loop (cfssl backdates `notBefore` by five minutes,
/// so a `renewBefore` of nearly the whole lifetime has passed at issuance). Such a renewal
/// moves to two thirds of the validity left at issuance, and at least [`RENEWAL_FLOOR`]
/// after it; truncated to the second.
pub fn guarded(renewal_time: Timestamp, issued_at: Timestamp, not_after: Timestamp) -> Timestamp {
    if renewal_time > issued_at {
        return renewal_time;
    }
    let left = not_after.duration_since(issued_at);
    let floor = SignedDuration::try_from(RENEWAL_FLOOR).unwrap_or(SignedDuration::MAX);
    let wait = (left / 3 * 2).max(floor);
    let at = issued_at.checked_add(wait).unwrap_or(issued_at);
    Timestamp::from_second(at.as_second()).unwrap_or(at)
}

/// Back-off after failed issuances: `min * 2^(attempts-1)`, at least `min` and at most `max`
/// (`max` below `min` gives `min`); `None` when back-off is off (`min` zero).
pub fn backoff_delay(attempts: Option<i64>, min: Duration, max: Duration) -> Option<Duration> {
    if min.is_zero() {
        return None;
    }
    let attempts = attempts.filter(|a| *a > 0).unwrap_or(1);
    let doubled = u32::try_from(attempts - 1)
        .ok()
        .and_then(|shift| 2u32.checked_pow(shift))
        .and_then(|factor| min.checked_mul(factor));
    let delay = match doubled {
        Some(d) if d <= max => d,
        // Overflow or beyond the ceiling.
        _ => max,
    };
    Some(delay.max(min))
}

/// How much longer a Certificate that last failed at `last_failure` waits before the next
/// issuance; `None` when it need not wait.
pub fn backoff_remaining(
    last_failure: Timestamp,
    now: Timestamp,
    attempts: Option<i64>,
    (min, max): (Duration, Duration),
) -> Option<Duration> {
    let delay = SignedDuration::try_from(backoff_delay(attempts, min, max)?).ok()?;
    let waited = now.duration_since(last_failure);
    let left = delay.checked_sub(waited)?;
    left.is_positive()
        .then(|| Duration::try_from(left).ok())
        .flatten()
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod properties;
