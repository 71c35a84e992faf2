use jiff::Timestamp;

use super::*;

fn ts(text: &str) -> Timestamp {
    text.parse().unwrap()
}

#[test]
fn next_activation_follows_robfig() {
    // (spec, after, next): 2024-01-01 is a Monday.
    let table = [
        // 02:30 does not exist in New York on 2024-03-10 (clocks go from 02:00 to 03:00): that
        // day is skipped, as robfig skips it.
        (
            "CRON_TZ=America/New_York 30 2 * * *",
            "2024-03-09T12:00:00Z",
            Some("2024-03-11T06:30:00Z"),
        ),
        // 01:30 happens twice on 2024-11-03: the first one (EDT, UTC-4) fires.
        (
            "CRON_TZ=America/New_York 30 1 * * *",
            "2024-11-03T00:00:00Z",
            Some("2024-11-03T05:30:00Z"),
        ),
        // Asked between the two 01:30s, the second one (EST, UTC-5) is the next: never a time
        // before the one asked about.
        (
            "CRON_TZ=America/New_York 30 1 * * *",
            "2024-11-03T06:00:00Z",
            Some("2024-11-03T06:30:00Z"),
        ),
        // After the second 01:30, the next day's.
        (
            "CRON_TZ=America/New_York 30 1 * * *",
            "2024-11-03T06:30:00Z",
            Some("2024-11-04T06:30:00Z"),
        ),
        // Found by the property below: London repeats 01:00-02:00 on 2024-10-27; asked at the
        // second 01:40 (GMT), the next :45 is the second 01:45, not the first (00:45Z).
        (
            "CRON_TZ=Europe/London 45 */1 * * *",
            "2024-10-27T01:40:00Z",
            Some("2024-10-27T01:45:00Z"),
        ),
        (
            "CRON_TZ=Europe/London 45 */1 * * *",
            "2024-10-27T00:40:00Z",
            Some("2024-10-27T00:45:00Z"),
        ),
        // Sao Paulo skipped midnight to 01:00 on 2005-10-16: 00:01 never happened.
        (
            "CRON_TZ=America/Sao_Paulo 1 */2 * * 0",
            "2005-10-10T01:01:00Z",
            Some("2005-10-16T04:01:00Z"),
        ),
        ("0 2 * * *", "2024-01-01T00:00:00Z", Some("2024-01-01T02:00:00Z")),
        // Strictly after: a time on an activation moves to the next one.
        ("0 2 * * *", "2024-01-01T02:00:00Z", Some("2024-01-02T02:00:00Z")),
        (
            "0 2 * * *",
            "2024-01-01T01:59:59.9Z",
            Some("2024-01-01T02:00:00Z"),
        ),
        (
            "*/15 * * * *",
            "2024-01-01T00:07:30Z",
            Some("2024-01-01T00:15:00Z"),
        ),
        (
            "30 9-17/4 * * *",
            "2024-01-01T10:00:00Z",
            Some("2024-01-01T13:30:00Z"),
        ),
        ("0 0 * * 0", "2024-01-01T00:00:00Z", Some("2024-01-07T00:00:00Z")),
        (
            "0 0 * * SUN",
            "2024-01-01T00:00:00Z",
            Some("2024-01-07T00:00:00Z"),
        ),
        (
            "0 0 * FEB-mar *",
            "2024-01-10T00:00:00Z",
            Some("2024-02-01T00:00:00Z"),
        ),
        // Day of month OR day of week when neither is `*`.
        (
            "0 0 1 * mon",
            "2024-01-01T00:00:00Z",
            Some("2024-01-08T00:00:00Z"),
        ),
        ("0 0 13 * 5", "2024-01-01T00:00:00Z", Some("2024-01-05T00:00:00Z")),
        // AND when one is `*` (a stepped `*/2` is not a star).
        (
            "0 0 */1 * 5",
            "2024-01-01T00:00:00Z",
            Some("2024-01-05T00:00:00Z"),
        ),
        (
            "0 0 */2 * 5",
            "2024-01-01T00:00:00Z",
            Some("2024-01-03T00:00:00Z"),
        ),
        ("0 0 29 2 *", "2024-03-01T00:00:00Z", Some("2028-02-29T00:00:00Z")),
        ("0 0 30 2 *", "2024-01-01T00:00:00Z", None),
        ("@daily", "2024-02-28T12:00:00Z", Some("2024-02-29T00:00:00Z")),
        ("@midnight", "2024-02-28T12:00:00Z", Some("2024-02-29T00:00:00Z")),
        ("@hourly", "2024-02-28T12:00:00Z", Some("2024-02-28T13:00:00Z")),
        ("@weekly", "2024-01-01T00:00:00Z", Some("2024-01-07T00:00:00Z")),
        ("@monthly", "2024-01-01T00:00:00Z", Some("2024-02-01T00:00:00Z")),
        ("@annually", "2024-01-01T00:00:00Z", Some("2025-01-01T00:00:00Z")),
        (
            "@every 1h30m",
            "2024-01-01T00:00:00.5Z",
            Some("2024-01-01T01:30:00Z"),
        ),
        (
            "@every 10ms",
            "2024-01-01T00:00:00Z",
            Some("2024-01-01T00:00:01Z"),
        ),
        (
            "CRON_TZ=America/New_York 0 9 * * *",
            "2024-01-01T00:00:00Z",
            Some("2024-01-01T14:00:00Z"),
        ),
        (
            "TZ=Asia/Kolkata 0 9 * * *",
            "2024-01-01T00:00:00Z",
            Some("2024-01-01T03:30:00Z"),
        ),
    ];
    for (spec, after, next) in table {
        let schedule = Schedule::parse(spec).unwrap();
        assert_eq!(schedule.next(ts(after)), next.map(ts), "{spec} after {after}");
    }
}

#[test]
fn a_window_zone_reads_the_fields_in_local_time() {
    // Berlin is UTC+2 in July and UTC+1 in January.
    let table = [
        ("Europe/Berlin", "2024-07-01T00:00:00Z", "2024-07-01T07:00:00Z"),
        ("Europe/Berlin", "2024-01-01T00:00:00Z", "2024-01-01T08:00:00Z"),
        ("", "2024-07-01T00:00:00Z", "2024-07-01T09:00:00Z"),
    ];
    for (zone, after, next) in table {
        let schedule = Schedule::for_window("0 9 * * *", zone).unwrap();
        assert_eq!(schedule.next(ts(after)), Some(ts(next)), "{zone:?} after {after}");
    }
}

#[test]
fn bad_specs_are_refused_with_robfigs_words() {
    let table = [
        ("", "empty spec string"),
        ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
        ("0 * * * * *", "expected exactly 5 fields, found 6: [0 * * * * *]"),
        ("60 * * * *", "end of range (60) above maximum (59): 60"),
        ("* * * * 7", "end of range (7) above maximum (6): 7"),
        ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
        (
            "5-1 * * * *",
            "beginning of range (5) beyond end of range (1): 5-1",
        ),
        ("*/0 * * * *", "step of range should be a positive number: */0"),
        ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
        ("1/2/3 * * * *", "too many slashes: 1/2/3"),
        (
            "x * * * *",
            "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax",
        ),
        (
            "-1 * * * *",
            "failed to parse int from : strconv.Atoi: parsing \"\": invalid syntax",
        ),
        ("@fortnightly", "unrecognized descriptor: @fortnightly"),
        (
            "@every soon",
            "failed to parse duration @every soon: time: invalid duration \"soon\"",
        ),
        (
            "CRON_TZ=Mars/Olympus * * * * *",
            "provided bad location Mars/Olympus: unknown time zone Mars/Olympus",
        ),
    ];
    for (spec, message) in table {
        let error = Schedule::parse(spec).unwrap_err();
        assert_eq!(error.to_string(), message, "{spec:?}");
    }
}

proptest::proptest! {
    /// Every activation is strictly after the time asked about, on a whole minute, and is
    /// itself what the search finds from just before it.
    #[test]
    fn next_is_strictly_later_on_a_minute_and_stable(
        minute in 0u32..60,
        hour_step in 1u32..24,
        day in proptest::sample::select(vec!["*", "1", "15,30", "*/3"]),
        weekday in proptest::sample::select(vec!["*", "0", "1-5", "sat"]),
        zone in proptest::sample::select(vec!["", "Europe/London", "America/Sao_Paulo", "Australia/Lord_Howe"]),
        after in 0i64..4_000_000_000,
    ) {
        let spec = format!("{minute} */{hour_step} {day} * {weekday}");
        let schedule = Schedule::for_window(&spec, zone).unwrap();
        let after = Timestamp::from_second(after).unwrap();
        let next = schedule.next(after).unwrap();
        proptest::prop_assert!(next > after, "{spec} in {zone:?}");
        proptest::prop_assert_eq!(next.as_second() % 60, 0);
        let again = schedule.next(next.checked_sub(jiff::SignedDuration::from_secs(1)).unwrap());
        proptest::prop_assert_eq!(again, Some(next));
    }
}
