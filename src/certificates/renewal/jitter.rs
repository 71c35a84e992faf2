//! Renewal jitter (`--renewal-jitter`): each certificate renews earlier than cert-manager's
//! time by its own share of up to `fraction x lifetime`, so certificates issued together
//! (a new cluster, a restored backup, a CA rotation) do not all renew in the same second.
//!
//! The share comes from a SHA-256 of the object's UID: the same object always moves by the
//! same amount (no restart, Rust release or replica changes it), different objects spread
//! evenly. The maths is integer-only, so every build computes the same second.

use std::str::FromStr;

use jiff::{SignedDuration, Timestamp};

/// Millionths in a whole lifetime.
const MILLION: u32 = 1_000_000;

/// The jitter fraction, in millionths of a certificate's lifetime; [`Jitter::OFF`] is
/// cert-manager's exact time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Jitter {
    millionths: u32,
}

/// Why a `--renewal-jitter` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JitterError {
    #[error("{0:?} is not a number (a fraction of the lifetime, such as 0.1)")]
    NotANumber(String),
    #[error(
        "{0} is out of range: the renewal jitter is a fraction of the certificate's lifetime from 0 (off) to {max}",
        max = Jitter::MAX_FRACTION
    )]
    OutOfRange(String),
}

impl Jitter {
    /// No jitter: cert-manager's renewal times.
    pub const OFF: Jitter = Jitter { millionths: 0 };

    /// The largest fraction accepted: beyond half the lifetime a certificate with the default
    /// renewal (a third of the lifetime before expiry) could renew right after issuance.
    pub const MAX_FRACTION: f64 = 0.5;

    /// The jitter of `fraction` (0 to [`Jitter::MAX_FRACTION`]), to the millionth.
    pub fn from_fraction(fraction: f64) -> Result<Self, JitterError> {
        if !(0.0..=Self::MAX_FRACTION).contains(&fraction) {
            return Err(JitterError::OutOfRange(fraction.to_string()));
        }
        // In range, so the product lies in 0..=500000.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let millionths = (fraction * f64::from(MILLION)).round() as u32;
        Ok(Jitter { millionths })
    }

    pub fn is_off(self) -> bool {
        self.millionths == 0
    }

    /// How much earlier than `desired` a certificate valid `not_before..not_after` renews,
    /// for the object whose [`spread_of`] is `spread`: `fraction x spread/2^32 x lifetime`,
    /// truncated to the second, and never before `not_before`.
    pub fn apply(
        self,
        desired: Timestamp,
        not_before: Timestamp,
        not_after: Timestamp,
        spread: u32,
    ) -> Timestamp {
        let lifetime = not_after.duration_since(not_before).as_nanos().max(0);
        let shift = lifetime * i128::from(self.millionths) * i128::from(spread) / (i128::from(MILLION) << 32);
        // At most half a lifetime, which fits a SignedDuration.
        let shift = SignedDuration::from_nanos(i64::try_from(shift).unwrap_or(i64::MAX));
        let moved = desired.checked_sub(shift).unwrap_or(not_before).max(not_before);
        if moved == desired {
            return desired;
        }
        Timestamp::from_second(moved.as_second())
            .unwrap_or(moved)
            .max(not_before)
    }
}

impl std::fmt::Display for Jitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", f64::from(self.millionths) / f64::from(MILLION))
    }
}

impl FromStr for Jitter {
    type Err = JitterError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let fraction: f64 = text
            .trim()
            .parse()
            .map_err(|_| JitterError::NotANumber(text.to_string()))?;
        Jitter::from_fraction(fraction).map_err(|_| JitterError::OutOfRange(text.to_string()))
    }
}

/// An object's place in the jitter's spread: the first four bytes of the SHA-256 of its UID,
/// big-endian (`0..2^32`, uniform over UIDs).
pub fn spread_of(uid: &str) -> u32 {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, uid.as_bytes());
    let mut first = [0u8; 4];
    first.copy_from_slice(&digest.as_ref()[..4]);
    u32::from_be_bytes(first)
}
