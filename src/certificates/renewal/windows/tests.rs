//! Renewal windows, row by row. 2024-01-20 is a Saturday.

use super::*;

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn w(cron: &str, timezone: &str, duration: &str) -> RenewalWindow {
    RenewalWindow {
        cron: cron.into(),
        timezone: timezone.into(),
        window_duration: duration.into(),
        ..RenewalWindow::default()
    }
}

const NOT_BEFORE: &str = "2024-01-01T00:00:00Z";
const NOT_AFTER: &str = "2024-01-31T00:00:00Z";

#[rustfmt::skip]
#[test]
fn the_renewal_time_moves_into_a_window() {
    let daily = [w("0 10 * * *", "", "2h")];
    let week_and_weekend = [w("0 23 * * 1-5", "", "2h"), w("0 10 * * 6,0", "", "4h")];
    // (row, windows, desired, renewal time)
    let table: [(&str, &[RenewalWindow], &str, &str); 9] = [
        ("no windows: as desired", &[], "2024-01-21T13:00:00Z", "2024-01-21T13:00:00Z"),
        ("inside a window: as desired", &daily, "2024-01-21T10:30:00Z", "2024-01-21T10:30:00Z"),
        ("at a window's end: still inside", &daily, "2024-01-21T12:00:00Z", "2024-01-21T12:00:00Z"),
        ("after a window: the next start", &daily, "2024-01-21T13:00:00Z", "2024-01-22T10:00:00Z"),
        ("just before a window: its start", &daily, "2024-01-21T09:59:59Z", "2024-01-21T10:00:00Z"),
        ("two windows: the earliest start after", &week_and_weekend, "2024-01-20T05:00:00Z", "2024-01-20T10:00:00Z"),
        ("two windows: inside the second", &week_and_weekend, "2024-01-19T23:30:00Z", "2024-01-19T23:30:00Z"),
        ("a zone: 10:00 in Denver is 17:00 UTC", &[w("0 10 * * *", "America/Denver", "2h")],
            "2024-01-21T12:00:00Z", "2024-01-21T17:00:00Z"),
        ("a window may open after expiry", &[w("0 1 31 1 *", "", "2h")], "2024-01-21T00:00:00Z", "2024-01-31T01:00:00Z"),
    ];
    for (row, windows, desired, want) in table {
        let got = within_windows(at(NOT_BEFORE), at(NOT_AFTER), at(desired), windows);
        assert_eq!(got, Ok(at(want)), "{row}");
    }
}

#[test]
fn windows_that_cannot_place_the_renewal_say_why() {
    let table = [
        (
            w("0 10 1 * *", "", "2h"),
            "cannot find a time with the given windows between 2024-01-01 00:00:00 +0000 UTC and \
             2024-01-31 00:00:00 +0000 UTC for: 2024-01-21 00:00:00 +0000 UTC",
        ),
        (
            w("0 10 * * *", "Mars/Olympus", "2h"),
            "error parsing timezone in window unknown time zone Mars/Olympus",
        ),
        (
            w("61 * * * *", "", "2h"),
            "error parsing cron in window failed to parse cron spec '61 * * * *': end of range (61) above \
             maximum (59): 61",
        ),
        (
            w("0 10 * * *", "", "0s"),
            "windowDuration must be a positive duration in window {0 10 * * *  0s}",
        ),
    ];
    for (window, message) in table {
        let error = within_windows(
            at(NOT_BEFORE),
            at(NOT_AFTER),
            at("2024-01-21T00:00:00Z"),
            &[window],
        )
        .unwrap_err();
        assert_eq!(error.to_string(), message);
    }
}
