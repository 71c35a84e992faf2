//! When a volume's certificate is issued again, and how long a failed renewal waits: pure, by
//! the rules a Certificate follows (`certificates::renewal`), so a volume and a Certificate
//! with the same CA and settings renew alike.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use crate::certificates::renewal::{Inputs, Jitter, Renewal, backoff_delay, planned};

/// The share of the lifetime a volume's renewal may move earlier: on by default here (a
/// Certificate's is `--renewal-jitter`, off by default), as the pods of a Deployment start
/// together and would otherwise all renew in the same second.
pub const JITTER_MILLIONTHS: u32 = 100_000;

/// The first wait after a failed renewal; it doubles with each failure in a row.
pub const RETRY_MIN: Duration = Duration::from_secs(30);
/// The longest wait between two attempts: a certificate near its end must still be tried
/// often enough to be renewed before it expires.
pub const RETRY_MAX: Duration = Duration::from_secs(10 * 60);

fn jitter() -> Jitter {
    // 0.1 is within Jitter's range; OFF is never used.
    Jitter::from_fraction(f64::from(JITTER_MILLIONTHS) / 1e6).unwrap_or(Jitter::OFF)
}

/// When to issue again a certificate valid `not_before..not_after`, issued at `issued_at`:
/// `renew_before` ahead of the end when it is shorter than the lifetime the CA really gave
/// (the CFSSL profile decides it, not the volume's duration), else a third of it ahead
/// (two thirds through); moved earlier by the volume's `spread` of the jitter; and, when
/// that has passed at issuance (a CA that backdates notBefore), guarded as a Certificate's.
pub fn next_issuance(
    not_before: Timestamp,
    not_after: Timestamp,
    renew_before: Option<SignedDuration>,
    issued_at: Timestamp,
    spread: u32,
) -> Timestamp {
    let renewal = Renewal {
        renew_before: renew_before.and_then(|d| Duration::try_from(d).ok()),
        renew_before_percentage: None,
    };
    let inputs = Inputs {
        not_before,
        not_after,
        renewal,
        policy: None,
        windows: &[],
        jitter: jitter(),
        spread,
        issued_at: Some(issued_at),
    };
    // No time only for a certificate without a lifetime, which the guard's floor retries.
    planned(&inputs)
        .at
        .unwrap_or_else(|| crate::certificates::renewal::guarded(issued_at, issued_at, not_after))
}

/// How long to wait after the `failures`-th failed renewal in a row: the Certificates'
/// back-off from [`RETRY_MIN`] to [`RETRY_MAX`], lengthened by up to a quarter by `spread`
/// (a random share) so volumes that failed together (the CA down) do not retry together.
pub fn retry_delay(failures: u32, spread: u32) -> Duration {
    let base = backoff_delay(Some(i64::from(failures)), RETRY_MIN, RETRY_MAX).unwrap_or(RETRY_MIN);
    let extra = base.as_millis() * u128::from(spread) / (4u128 << 32);
    base + Duration::from_millis(u64::try_from(extra).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn next_issuance_follows_the_certificates_rules() {
        let (start, end) = (at("2026-01-01T00:00:00Z"), at("2026-01-31T00:00:00Z"));
        let day = SignedDuration::from_hours(24);
        let hour_end = at("2026-01-01T01:00:00Z");
        let five_minutes_on = at("2026-01-01T00:05:00Z");
        type Row = (
            &'static str,
            Timestamp,
            Option<SignedDuration>,
            Timestamp,
            u32,
            Timestamp,
        );
        let cases: [Row; 9] = [
            ("two thirds", end, None, start, 0, at("2026-01-21T00:00:00Z")),
            (
                "renew before fits",
                end,
                Some(day),
                start,
                0,
                at("2026-01-30T00:00:00Z"),
            ),
            (
                "renew before too long",
                end,
                Some(day * 40),
                start,
                0,
                at("2026-01-21T00:00:00Z"),
            ),
            (
                "renew before the whole life",
                end,
                Some(day * 30),
                start,
                0,
                at("2026-01-21T00:00:00Z"),
            ),
            (
                "renew before zero",
                end,
                Some(SignedDuration::ZERO),
                start,
                0,
                at("2026-01-21T00:00:00Z"),
            ),
            // Jitter: a tenth of 30 days at most, times spread / 2^32, truncated to the second.
            (
                "half the jitter",
                end,
                None,
                start,
                1 << 31,
                at("2026-01-19T12:00:00Z"),
            ),
            (
                "nearly all the jitter",
                end,
                None,
                start,
                u32::MAX,
                at("2026-01-18T00:00:00Z"),
            ),
            // multirootca backdates notBefore by 5 minutes: a 1h certificate with a renew
            // before of 59m58s is due before it arrives, so two thirds of what is left.
            (
                "backdated, due before issuance",
                hour_end,
                Some(SignedDuration::from_secs(3598)),
                five_minutes_on,
                0,
                at("2026-01-01T00:41:40Z"),
            ),
            (
                "backdated, two thirds still ahead",
                hour_end,
                None,
                five_minutes_on,
                0,
                at("2026-01-01T00:40:00Z"),
            ),
        ];
        for (row, not_after, before, issued_at, spread, want) in cases {
            assert_eq!(
                next_issuance(start, not_after, before, issued_at, spread),
                want,
                "{row}"
            );
        }
    }

    #[test]
    fn the_jitter_stays_within_a_tenth_of_the_lifetime() {
        let (start, end) = (at("2026-01-01T00:00:00Z"), at("2026-01-31T00:00:00Z"));
        let exact = at("2026-01-21T00:00:00Z");
        let earliest = at("2026-01-18T00:00:00Z");
        for spread in [0, 1, 12345, 1 << 20, 1 << 31, u32::MAX - 1, u32::MAX] {
            let due = next_issuance(start, end, None, start, spread);
            assert!(due <= exact && due >= earliest, "{spread}: {due}");
        }
    }

    #[test]
    fn failed_renewals_back_off_with_a_bounded_jitter() {
        let s = Duration::from_secs;
        let cases = [
            (1, 0, s(30)),
            (2, 0, s(60)),
            (3, 0, s(120)),
            (5, 0, s(480)),
            (6, 0, s(600)),
            (40, 0, s(600)),
            (0, 0, s(30)),
            (1, 1 << 31, Duration::from_millis(33_750)),
            (1, u32::MAX, Duration::from_millis(37_499)),
            (40, u32::MAX, Duration::from_millis(749_999)),
        ];
        for (failures, spread, want) in cases {
            assert_eq!(retry_delay(failures, spread), want, "{failures} {spread}");
        }
    }
}
