//! Renewal times and back-off, row by row.

use super::*;

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn hours(h: u64) -> Duration {
    Duration::from_secs(h * 3600)
}

/// One renewal time: a certificate's validity, its renewal settings and policy, and when it
/// renews (`None`: never).
struct RenewalRow {
    name: &'static str,
    not_before: &'static str,
    not_after: &'static str,
    renewal: Renewal,
    policy: Policy,
    want: Option<&'static str>,
}

#[rustfmt::skip]
#[test]
fn renewal_time_table() {
    let nb = "2026-01-01T00:00:00Z";
    let na = "2026-01-31T00:00:00Z"; // 30 days
    let r = |before: Option<Duration>, pct: Option<i32>| Renewal { renew_before: before, renew_before_percentage: pct };
    let cases = [
        RenewalRow { name: "a third of the lifetime by default", not_before: nb, not_after: na,
            renewal: r(None, None), policy: Policy::RenewBefore, want: Some("2026-01-21T00:00:00Z") },
        RenewalRow { name: "renewBefore", not_before: nb, not_after: na,
            renewal: r(Some(hours(24)), None), policy: Policy::RenewBefore, want: Some("2026-01-30T00:00:00Z") },
        RenewalRow { name: "renewBefore wins over the percentage", not_before: nb, not_after: na,
            renewal: r(Some(hours(24)), Some(50)), policy: Policy::RenewBefore, want: Some("2026-01-30T00:00:00Z") },
        RenewalRow { name: "renewBefore as long as the lifetime falls through to the percentage",
            not_before: nb, not_after: na,
            renewal: r(Some(hours(720)), Some(50)), policy: Policy::RenewBefore, want: Some("2026-01-16T00:00:00Z") },
        RenewalRow { name: "and then to a third", not_before: nb, not_after: na,
            renewal: r(Some(hours(721)), None), policy: Policy::RenewBefore, want: Some("2026-01-21T00:00:00Z") },
        RenewalRow { name: "percentage", not_before: nb, not_after: na,
            renewal: r(None, Some(10)), policy: Policy::RenewBefore, want: Some("2026-01-28T00:00:00Z") },
        RenewalRow { name: "percentage 100 is ignored", not_before: nb, not_after: na,
            renewal: r(None, Some(100)), policy: Policy::RenewBefore, want: Some("2026-01-21T00:00:00Z") },
        RenewalRow { name: "percentage 0 is ignored", not_before: nb, not_after: na,
            renewal: r(None, Some(0)), policy: Policy::RenewBefore, want: Some("2026-01-21T00:00:00Z") },
        RenewalRow { name: "zero renewBefore is ignored", not_before: nb, not_after: na,
            renewal: r(Some(Duration::ZERO), None), policy: Policy::RenewBefore, want: Some("2026-01-21T00:00:00Z") },
        RenewalRow { name: "truncated to the second", not_before: "2026-01-01T00:00:00Z", not_after: "2026-01-01T00:00:10Z",
            renewal: r(None, None), policy: Policy::RenewBefore, want: Some("2026-01-01T00:00:06Z") },
        RenewalRow { name: "disabled never renews", not_before: nb, not_after: na,
            renewal: r(None, None), policy: Policy::Disabled, want: None },
    ];
    for RenewalRow { name, not_before, not_after, renewal, policy, want } in cases {
        let got = renewal_time(at(not_before), at(not_after), renewal, policy).unwrap();
        assert_eq!(got, want.map(at), "{name}");
    }
    assert_eq!(
        renewal_time(at(na), at(nb), Renewal::default(), Policy::RenewBefore),
        Err(RenewalError::NoLifetime)
    );
}

#[test]
fn policy_table() {
    let cases = [
        (None, Ok(Policy::RenewBefore)),
        (Some(""), Ok(Policy::RenewBefore)),
        (Some("RenewBefore"), Ok(Policy::RenewBefore)),
        (Some("Disabled"), Ok(Policy::Disabled)),
        (Some("Never"), Err(RenewalError::UnknownPolicy("Never".into()))),
    ];
    for (policy, want) in cases {
        assert_eq!(Policy::parse(policy), want, "{policy:?}");
    }
}

/// One back-off: failed attempts, the bounds, and the delay (`None`: no back-off).
struct BackoffRow {
    name: &'static str,
    attempts: Option<i64>,
    min: Duration,
    max: Duration,
    want: Option<Duration>,
}

#[rustfmt::skip]
#[test]
fn backoff_delay_table() {
    let (min, max) = (hours(1), hours(32));
    let cases = [
        BackoffRow { name: "no attempts recorded: min", attempts: None, min, max, want: Some(min) },
        BackoffRow { name: "zero attempts: min", attempts: Some(0), min, max, want: Some(min) },
        BackoffRow { name: "negative attempts: min", attempts: Some(-3), min, max, want: Some(min) },
        BackoffRow { name: "first failure: min", attempts: Some(1), min, max, want: Some(min) },
        BackoffRow { name: "second: doubled", attempts: Some(2), min, max, want: Some(hours(2)) },
        BackoffRow { name: "sixth: 32h", attempts: Some(6), min, max, want: Some(hours(32)) },
        BackoffRow { name: "seventh: capped at max", attempts: Some(7), min, max, want: Some(max) },
        BackoffRow { name: "overflowing shift: max", attempts: Some(64), min, max, want: Some(max) },
        BackoffRow { name: "i64::MAX attempts: max", attempts: Some(i64::MAX), min, max, want: Some(max) },
        BackoffRow { name: "max below min: min", attempts: Some(5), min, max: Duration::from_secs(60), want: Some(min) },
        BackoffRow { name: "min zero: no back-off", attempts: Some(5), min: Duration::ZERO, max, want: None },
    ];
    for BackoffRow { name, attempts, min, max, want } in cases {
        assert_eq!(backoff_delay(attempts, min, max), want, "{name}");
    }
}

#[test]
fn backoff_remaining_table() {
    let bounds = (hours(1), hours(32));
    let failed = at("2026-01-01T10:00:00Z");
    // (row, now, attempts, want)
    let cases = [
        ("just failed", "2026-01-01T10:00:00Z", Some(2), Some(hours(2))),
        ("half way", "2026-01-01T11:00:00Z", Some(2), Some(hours(1))),
        ("done waiting", "2026-01-01T12:00:00Z", Some(2), None),
        ("long after", "2026-01-02T12:00:00Z", Some(2), None),
    ];
    for (row, now, attempts, want) in cases {
        assert_eq!(
            backoff_remaining(failed, at(now), attempts, bounds),
            want,
            "{row}"
        );
    }
    assert_eq!(
        backoff_remaining(failed, failed, Some(3), (Duration::ZERO, hours(32))),
        None,
        "min zero: never waits"
    );
}

#[test]
fn renewal_is_never_right_after_issuance() {
    // multirootca backdates notBefore by 5 minutes; the profile gives one minute of validity.
    let issued = at("2026-01-01T10:00:00Z");
    let nb = at("2026-01-01T09:55:00Z");
    let na = at("2026-01-01T10:01:00Z");
    let computed = renewal_time(nb, na, Renewal::default(), Policy::RenewBefore)
        .unwrap()
        .unwrap();
    assert_eq!(
        computed,
        at("2026-01-01T09:59:00Z"),
        "the default point is already past"
    );
    // (row, computed renewal, notAfter, want)
    let cases = [
        (
            "one minute left: the floor, a minute after issuance",
            computed,
            na,
            at("2026-01-01T10:01:00Z"),
        ),
        (
            "cert-manager#5838, 600 s and renewBefore 9m30s: two thirds of the 5 minutes left",
            at("2026-01-01T09:55:30Z"),
            at("2026-01-01T10:05:00Z"),
            at("2026-01-01T10:03:20Z"),
        ),
        (
            "an hour left: two thirds of it",
            at("2026-01-01T09:59:00Z"),
            at("2026-01-01T11:00:00Z"),
            at("2026-01-01T10:40:00Z"),
        ),
        (
            "due exactly at issuance is guarded too",
            issued,
            at("2026-01-01T10:30:00Z"),
            at("2026-01-01T10:20:00Z"),
        ),
        (
            "a renewal after issuance stays, however soon",
            at("2026-01-01T10:00:01Z"),
            at("2026-01-01T10:30:00Z"),
            at("2026-01-01T10:00:01Z"),
        ),
        (
            "a renewal time long after stays",
            at("2026-01-20T00:00:00Z"),
            at("2026-01-31T00:00:00Z"),
            at("2026-01-20T00:00:00Z"),
        ),
        (
            "already expired at issuance: the floor",
            computed,
            at("2026-01-01T09:00:00Z"),
            at("2026-01-01T10:01:00Z"),
        ),
        (
            "truncated to the second",
            at("2026-01-01T09:00:00Z"),
            at("2026-01-01T10:00:01Z") + SignedDuration::from_secs(100),
            at("2026-01-01T10:01:07Z"),
        ),
    ];
    for (row, renewal, not_after, want) in cases {
        assert_eq!(guarded(renewal, issued, not_after), want, "{row}");
    }
}

#[test]
fn windows_apply_after_the_policy_and_a_missed_window_still_renews() {
    let nb = at("2024-01-01T00:00:00Z");
    let na = at("2024-01-31T00:00:00Z");
    let window = |cron: &str| crate::api::certmanager::RenewalWindow {
        cron: cron.into(),
        window_duration: "2h".into(),
        ..Default::default()
    };
    let placed = renewal_time_in_windows(
        nb,
        na,
        Renewal::default(),
        Policy::RenewBefore,
        &[window("0 10 * * *")],
    );
    assert_eq!(placed, Ok(Some(at("2024-01-21T10:00:00Z"))));
    let disabled = renewal_time_in_windows(
        nb,
        na,
        Renewal::default(),
        Policy::Disabled,
        &[window("0 10 * * *")],
    );
    assert_eq!(disabled, Ok(None));
    let missed = renewal_time_in_windows(
        nb,
        na,
        Renewal::default(),
        Policy::RenewBefore,
        &[window("0 10 1 * *")],
    );
    assert_eq!(missed.unwrap_err().fallback(), Some(at("2024-01-21T00:00:00Z")));
}
