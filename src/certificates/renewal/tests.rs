//! Renewal times and back-off, row by row.

use super::*;

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn hours(h: u64) -> Duration {
    Duration::from_secs(h * 3600)
}

#[rustfmt::skip]
#[test]
fn renewal_time_table() {
    let nb = "2026-01-01T00:00:00Z";
    let na = "2026-01-31T00:00:00Z"; // 30 days
    let r = |before: Option<Duration>, pct: Option<i32>| Renewal { renew_before: before, renew_before_percentage: pct };
    // (row, notBefore, notAfter, renewal, policy, want)
    type Row<'a> = (&'a str, &'a str, &'a str, Renewal, Policy, Option<&'a str>);
    let cases: Vec<Row> = vec![
        ("a third of the lifetime by default", nb, na, r(None, None), Policy::RenewBefore, Some("2026-01-21T00:00:00Z")),
        ("renewBefore", nb, na, r(Some(hours(24)), None), Policy::RenewBefore, Some("2026-01-30T00:00:00Z")),
        ("renewBefore wins over the percentage", nb, na, r(Some(hours(24)), Some(50)), Policy::RenewBefore, Some("2026-01-30T00:00:00Z")),
        ("renewBefore as long as the lifetime falls through to the percentage",
            nb, na, r(Some(hours(720)), Some(50)), Policy::RenewBefore, Some("2026-01-16T00:00:00Z")),
        ("and then to a third", nb, na, r(Some(hours(721)), None), Policy::RenewBefore, Some("2026-01-21T00:00:00Z")),
        ("percentage", nb, na, r(None, Some(10)), Policy::RenewBefore, Some("2026-01-28T00:00:00Z")),
        ("percentage 100 is ignored", nb, na, r(None, Some(100)), Policy::RenewBefore, Some("2026-01-21T00:00:00Z")),
        ("percentage 0 is ignored", nb, na, r(None, Some(0)), Policy::RenewBefore, Some("2026-01-21T00:00:00Z")),
        ("zero renewBefore is ignored", nb, na, r(Some(Duration::ZERO), None), Policy::RenewBefore, Some("2026-01-21T00:00:00Z")),
        ("truncated to the second", "2026-01-01T00:00:00Z", "2026-01-01T00:00:10Z", r(None, None),
            Policy::RenewBefore, Some("2026-01-01T00:00:06Z")),
        ("disabled never renews", nb, na, r(None, None), Policy::Disabled, None),
    ];
    for (row, nb, na, renewal, policy, want) in cases {
        let got = renewal_time(at(nb), at(na), renewal, policy).unwrap();
        assert_eq!(got, want.map(at), "{row}");
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

#[rustfmt::skip]
#[test]
fn backoff_delay_table() {
    let (min, max) = (hours(1), hours(32));
    // (row, attempts, min, max, want)
    type Row<'a> = (&'a str, Option<i64>, Duration, Duration, Option<Duration>);
    let cases: Vec<Row> = vec![
        ("no attempts recorded: min", None, min, max, Some(min)),
        ("zero attempts: min", Some(0), min, max, Some(min)),
        ("negative attempts: min", Some(-3), min, max, Some(min)),
        ("first failure: min", Some(1), min, max, Some(min)),
        ("second: doubled", Some(2), min, max, Some(hours(2))),
        ("sixth: 32h", Some(6), min, max, Some(hours(32))),
        ("seventh: capped at max", Some(7), min, max, Some(max)),
        ("overflowing shift: max", Some(64), min, max, Some(max)),
        ("i64::MAX attempts: max", Some(i64::MAX), min, max, Some(max)),
        ("max below min: min", Some(5), min, Duration::from_secs(60), Some(min)),
        ("min zero: no back-off", Some(5), Duration::ZERO, max, None),
    ];
    for (row, attempts, min, max, want) in cases {
        assert_eq!(backoff_delay(attempts, min, max), want, "{row}");
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
            "short-lived: half the validity left",
            computed,
            na,
            at("2026-01-01T10:00:30Z"),
        ),
        (
            "an hour of validity: five minutes after issuance",
            at("2026-01-01T09:59:00Z"),
            at("2026-01-01T11:00:00Z"),
            at("2026-01-01T10:05:00Z"),
        ),
        (
            "a renewal time after the floor stays",
            at("2026-01-20T00:00:00Z"),
            at("2026-01-31T00:00:00Z"),
            at("2026-01-20T00:00:00Z"),
        ),
        (
            "already expired at issuance: issuance time",
            computed,
            at("2026-01-01T09:00:00Z"),
            issued,
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
