//! Properties of the renewal and back-off maths over generated inputs (proptest).

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;

use super::{Policy, Renewal, backoff_delay, guarded, renewal_time};

const TEN_YEARS: i64 = 10 * 365 * 24 * 3600;

/// The renewal time written out independently, in nanoseconds: renewBefore when
/// `0 < renewBefore < lifetime`, else the percentage when in (0, 100), else a third; then
/// truncated to the second.
fn expected(not_before: i128, not_after: i128, before: Option<u64>, pct: Option<i32>) -> i128 {
    let lifetime = not_after - not_before;
    let by_before = before
        .map(|b| i128::from(b) * 1_000_000_000)
        .filter(|b| *b > 0 && *b < lifetime);
    #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
    let by_pct = || {
        pct.filter(|p| *p > 0 && *p < 100)
            .map(|p| (lifetime as f64 * f64::from(p) / 100.0) as i128)
    };
    let before = by_before.or_else(by_pct).unwrap_or(lifetime / 3);
    (not_after - before).div_euclid(1_000_000_000) * 1_000_000_000
}

proptest! {
    #[test]
    fn renewal_time_is_a_whole_second_before_not_after_and_follows_the_fallbacks(
        start in 0i64..4_000_000_000,
        start_nanos in 0i32..1_000_000_000,
        lifetime in 1i64..TEN_YEARS,
        before in proptest::option::of(0u64..(2 * TEN_YEARS as u64)),
        pct in proptest::option::of(-5i32..110),
    ) {
        let not_before = Timestamp::new(start, start_nanos).unwrap();
        let not_after = not_before.checked_add(SignedDuration::from_secs(lifetime)).unwrap();
        let renewal = Renewal { renew_before: before.map(Duration::from_secs), renew_before_percentage: pct };
        let got = renewal_time(not_before, not_after, renewal, Policy::RenewBefore).unwrap().unwrap();
        prop_assert_eq!(got.subsec_nanosecond(), 0);
        prop_assert!(got < not_after);
        prop_assert_eq!(got.as_nanosecond(), expected(not_before.as_nanosecond(), not_after.as_nanosecond(), before, pct));
        let disabled = renewal_time(not_before, not_after, renewal, Policy::Disabled).unwrap();
        prop_assert_eq!(disabled, None);
    }

    #[test]
    fn the_guard_never_moves_a_renewal_earlier(
        issued in 0i64..4_000_000_000,
        until_renewal in -TEN_YEARS..TEN_YEARS,
        lifetime in 1i64..TEN_YEARS,
    ) {
        let issued_at = Timestamp::from_second(issued).unwrap();
        let renewal = issued_at.checked_add(SignedDuration::from_secs(until_renewal)).unwrap();
        let not_after = issued_at.checked_add(SignedDuration::from_secs(lifetime)).unwrap();
        let got = guarded(renewal, issued_at, not_after);
        prop_assert!(got >= renewal);
        prop_assert!(got >= issued_at);
    }

    #[test]
    fn backoff_stays_between_min_and_max_and_never_overflows(
        attempts in proptest::option::of(any::<i64>()),
        min in 0u64..u64::MAX / 4,
        max in any::<u64>(),
    ) {
        let (min, max) = (Duration::from_secs(min), Duration::from_secs(max));
        match backoff_delay(attempts, min, max) {
            None => prop_assert!(min.is_zero()),
            Some(delay) => {
                prop_assert!(!min.is_zero());
                prop_assert!(delay >= min);
                prop_assert!(delay <= max.max(min));
            }
        }
    }

    #[test]
    fn backoff_grows_with_attempts(attempts in 1i64..200, min in 1u64..100_000, extra in 0u64..10_000_000) {
        let (min, max) = (Duration::from_secs(min), Duration::from_secs(min + extra));
        let this = backoff_delay(Some(attempts), min, max).unwrap();
        let next = backoff_delay(Some(attempts + 1), min, max).unwrap();
        prop_assert!(next >= this);
    }
}
