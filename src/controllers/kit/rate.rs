//! The issuance budget's settings (`--issuance-budget`, `--issuance-budget-burst`): a rate in
//! thousandths of a sign per second and a burst, with the integer token arithmetic the
//! signing layer's buckets count in.

use std::time::Duration;

/// Micro-tokens per token: the bucket counts in integers, so a table asserts exact values.
pub const UNIT: u64 = 1_000_000;

/// Signs per second, in thousandths (`--issuance-budget=0.5` is 500).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate(u64);

/// A rate that does not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RateError {
    #[error("{0:?} is not a number of signs per second")]
    NotANumber(String),
    #[error("{0:?} signs per second: the budget must be at least 0.001")]
    TooSmall(String),
    #[error("{0:?} signs per second: the budget must be at most 1000000")]
    TooLarge(String),
}

impl Rate {
    /// `per_second` signs per second.
    pub const fn per_second(per_second: u64) -> Rate {
        Rate(per_second * 1000)
    }

    /// Thousandths of a sign per second.
    pub fn milli(self) -> u64 {
        self.0
    }
}

impl std::str::FromStr for Rate {
    type Err = RateError;

    /// A decimal number of signs per second (`5`, `0.5`); digits past the thousandths are
    /// dropped.
    fn from_str(text: &str) -> Result<Rate, RateError> {
        let not_a_number = || RateError::NotANumber(text.to_string());
        let trimmed = text.trim();
        let (whole, fraction) = trimmed.split_once('.').unwrap_or((trimmed, ""));
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if (whole.is_empty() && fraction.is_empty()) || !digits(whole) || !digits(fraction) {
            return Err(not_a_number());
        }
        let whole: u64 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| RateError::TooLarge(text.to_string()))?
        };
        if whole > 1_000_000 {
            return Err(RateError::TooLarge(text.to_string()));
        }
        let thousandths = format!("{fraction:0<3}");
        let milli: u64 = thousandths[..3].parse().map_err(|_| not_a_number())?;
        let rate = whole * 1000 + milli;
        if rate == 0 {
            return Err(RateError::TooSmall(text.to_string()));
        }
        if rate > 1_000_000_000 {
            return Err(RateError::TooLarge(text.to_string()));
        }
        Ok(Rate(rate))
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (whole, milli) = (self.0 / 1000, self.0 % 1000);
        if milli == 0 {
            write!(f, "{whole}")
        } else {
            let fraction = format!("{milli:03}");
            write!(f, "{whole}.{}", fraction.trim_end_matches('0'))
        }
    }
}

/// `--issuance-budget` and `--issuance-budget-burst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub rate: Rate,
    /// Tokens a bucket holds at most: signs that may go at once after a quiet spell.
    pub burst: u32,
}

impl Settings {
    pub fn capacity(self) -> u64 {
        u64::from(self.burst.max(1)) * UNIT
    }

    /// Micro-tokens earned in `elapsed`.
    pub fn earned(self, elapsed: Duration) -> u64 {
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        micros.saturating_mul(self.rate.0) / 1000
    }

    /// How long until `micro` micro-tokens are earned (rounded up to the microsecond).
    pub fn time_for(self, micro: u64) -> Duration {
        let rate = self.rate.0.max(1);
        Duration::from_micros(micro.saturating_mul(1000).div_ceil(rate))
    }
}
