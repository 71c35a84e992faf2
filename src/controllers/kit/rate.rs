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

    /// A decimal number of signs per second, down to thousandths.
    fn from_str(text: &str) -> Result<Rate, RateError> {
        let value: f64 = text
            .trim()
            .parse()
            .map_err(|_| RateError::NotANumber(text.to_string()))?;
        if !value.is_finite() || value < 0.0 {
            return Err(RateError::NotANumber(text.to_string()));
        }
        if value > 1_000_000.0 {
            return Err(RateError::TooLarge(text.to_string()));
        }
        // Bounded above, so the cast is exact enough and cannot overflow.
        let milli = (value * 1000.0).round() as u64;
        if milli == 0 {
            return Err(RateError::TooSmall(text.to_string()));
        }
        Ok(Rate(milli))
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
