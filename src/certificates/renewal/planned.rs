//! The renewal time of one certificate from plain inputs, every step in order: cert-manager's
//! time from `renewBefore` (or the percentage, or a third), the jitter moving it earlier, the
//! renewal windows placing it, and the guard against renewing at issuance. No Certificate
//! type: a Certificate's controllers use it, and anything else holding a certificate with
//! the same settings (a CSI volume) can.

use jiff::Timestamp;

use super::{Jitter, Policy, Renewal, RenewalError, guarded, renewal_time, within_windows};
use crate::api::certmanager::RenewalWindow;

/// What decides a certificate's renewal time.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub not_before: Timestamp,
    pub not_after: Timestamp,
    pub renewal: Renewal,
    /// `spec.renewal.policy` as written; unset is `RenewBefore`.
    pub policy: Option<&'a str>,
    pub windows: &'a [RenewalWindow],
    pub jitter: Jitter,
    /// The object's [`super::spread_of`]; unused with the jitter off.
    pub spread: u32,
    /// When the certificate was issued, if known: the guard needs it.
    pub issued_at: Option<Timestamp>,
}

/// A renewal time and how it came about.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Planned {
    /// When to renew; `None` with `renewal.policy: Disabled`, or with no lifetime or an
    /// unknown policy on a certificate that has none.
    pub at: Option<Timestamp>,
    /// Why the spec could not place the time as asked (then `at` is the time before the
    /// windows, as cert-manager renews anyway).
    pub error: Option<RenewalError>,
    /// Set when the guard moved the time.
    pub guarded: Option<Guarded>,
}

/// The guard moved a renewal that was due at issuance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guarded {
    /// The time before the guard (cert-manager's, jittered and placed).
    pub computed: Timestamp,
    pub issued_at: Timestamp,
}

/// The renewal time of `inputs`: cert-manager's (exactly, with the jitter off and the guard
/// not needed), moved earlier by the jitter before the windows place it, then moved to two
/// thirds of the validity left at issuance when it is not after the issuance
/// ([`guarded`]).
pub fn planned(inputs: &Inputs<'_>) -> Planned {
    let Inputs {
        not_before,
        not_after,
        ..
    } = *inputs;
    let policy = Policy::parse(inputs.policy);
    if policy == Ok(Policy::Disabled) {
        return Planned::default();
    }
    let desired = match renewal_time(not_before, not_after, inputs.renewal, Policy::RenewBefore) {
        Ok(Some(at)) => inputs.jitter.apply(at, not_before, not_after, inputs.spread),
        Ok(None) | Err(_) => {
            // No lifetime; an unknown policy is reported first.
            let error = policy.err().unwrap_or(RenewalError::NoLifetime);
            return Planned {
                error: Some(error),
                ..Planned::default()
            };
        }
    };
    let (placed, error) = match policy {
        Err(err) => (desired, Some(err)),
        Ok(_) => match within_windows(not_before, not_after, desired, inputs.windows) {
            Ok(at) => (at, None),
            Err(err) => (desired, Some(err.into())),
        },
    };
    let at = inputs
        .issued_at
        .map_or(placed, |issued| guarded(placed, issued, not_after));
    Planned {
        at: Some(at),
        error,
        guarded: inputs
            .issued_at
            .filter(|_| at != placed)
            .map(|issued_at| Guarded {
                computed: placed,
                issued_at,
            }),
    }
}

#[cfg(test)]
mod tests;
