use super::*;

fn t0() -> Timestamp {
    "2026-11-27T10:00:00Z".parse().unwrap()
}

fn at(millis: i64) -> Timestamp {
    t0() + SignedDuration::from_millis(millis)
}

fn who(uid: &str, deadline_minutes: i64) -> Urgency {
    Urgency {
        deadline: t0() + SignedDuration::from_mins(deadline_minutes),
        created: t0(),
        uid: uid.into(),
    }
}

const FIVE: Settings = Settings {
    rate: Rate::per_second(5),
    burst: 1,
};

fn wait(place: usize, line: usize, after_ms: u64, first: bool) -> Turn {
    Turn::Wait(Wait {
        place,
        line,
        after: Duration::from_millis(after_ms),
        first,
    })
}

#[test]
fn rates_parse_and_print() {
    let ok = [
        ("5", 5000, "5"),
        ("0.5", 500, "0.5"),
        ("2.25", 2250, "2.25"),
        (" 100 ", 100_000, "100"),
    ];
    for (text, milli, printed) in ok {
        let rate: Rate = text.parse().unwrap();
        assert_eq!(
            (rate.milli(), rate.to_string().as_str()),
            (milli, printed),
            "{text}"
        );
    }
    let bad = [
        ("0", RateError::TooSmall("0".into())),
        ("0.0001", RateError::TooSmall("0.0001".into())),
        ("-1", RateError::NotANumber("-1".into())),
        ("five", RateError::NotANumber("five".into())),
        ("NaN", RateError::NotANumber("NaN".into())),
        ("1e7", RateError::NotANumber("1e7".into())),
        ("1000000.5", RateError::TooLarge("1000000.5".into())),
        (
            "99999999999999999999999",
            RateError::TooLarge("99999999999999999999999".into()),
        ),
        (".", RateError::NotANumber(".".into())),
    ];
    for (text, want) in bad {
        assert_eq!(text.parse::<Rate>(), Err(want), "{text}");
    }
}

/// The deadline: the renew-by, never before the creation time; the creation time without one.
#[test]
fn urgency_table() {
    let created = t0();
    let later = t0() + SignedDuration::from_hours(5);
    let earlier = t0() - SignedDuration::from_hours(5);
    // (created, renew_by, deadline)
    let cases = [
        (Some(created), None, created),
        (Some(created), Some(later), later),
        (Some(created), Some(earlier), created),
        (None, None, at(1)),
        (None, Some(later), later),
    ];
    for (made, by, deadline) in cases {
        assert_eq!(
            Urgency::of("u", made, by, at(1)).deadline,
            deadline,
            "{made:?} {by:?}"
        );
    }
    let annotations = |v: &str| [(RENEW_BY.to_string(), v.to_string())].into();
    assert_eq!(renew_by(Some(&annotations("2026-11-27T15:00:00Z"))), Some(later));
    assert_eq!(renew_by(Some(&annotations("soon"))), None);
    assert_eq!(renew_by(None), None);
}

/// 5 signs/s, burst 1: the first goes at once; each next token goes to the most urgent waiter
/// when it comes back, never to one behind it; tokens refill at 200 ms each.
#[test]
fn the_most_urgent_waiter_takes_each_token() {
    let (a, b, c) = (who("a", 60), who("b", 30), who("c", 10));
    let mut bucket = Bucket::full(FIVE, t0());
    // (who, at ms, turn, micro-tokens after, line after)
    let steps = [
        (&a, 0, Turn::Go, 0, 0),
        (&b, 0, wait(1, 1, 200, true), 0, 1),
        (&c, 0, wait(1, 2, 200, true), 0, 2),
        (&b, 100, wait(2, 2, 300, false), 500_000, 2),
        (&b, 200, wait(2, 2, 200, false), 1_000_000, 2),
        (&c, 200, Turn::Go, 0, 1),
        (&b, 300, wait(1, 1, 100, false), 500_000, 1),
        (&b, 400, Turn::Go, 0, 0),
        (&a, 400, wait(1, 1, 200, true), 0, 1),
        (&a, 5_000, Turn::Go, 0, 0),
    ];
    for (i, (w, ms, turn, tokens, line)) in steps.into_iter().enumerate() {
        assert_eq!(
            bucket.turn(FIVE, w, at(ms)),
            turn,
            "step {i}: {} at {ms} ms",
            w.uid
        );
        assert_eq!(bucket.state(), (tokens, line), "step {i}");
    }
}

/// A waiter that does not come back within LATE of its turn leaves the line, so the one behind
/// it is not held up for long.
#[test]
fn a_late_waiter_leaves_the_line() {
    let (a, b, c) = (who("a", 60), who("b", 30), who("c", 10));
    let mut bucket = Bucket::full(FIVE, t0());
    assert_eq!(bucket.turn(FIVE, &a, at(0)), Turn::Go);
    assert_eq!(bucket.turn(FIVE, &b, at(0)), wait(1, 1, 200, true));
    assert_eq!(bucket.turn(FIVE, &c, at(0)), wait(1, 2, 200, true));
    assert_eq!(
        bucket.turn(FIVE, &b, at(10_200)),
        wait(2, 2, 200, false),
        "c is due at 200 ms: not late yet"
    );
    assert_eq!(bucket.turn(FIVE, &b, at(10_201)), Turn::Go, "c left the line");
    assert_eq!(bucket.state(), (0, 0));
}

#[test]
fn a_burst_goes_at_once_then_the_rate_holds() {
    let three = Settings { burst: 3, ..FIVE };
    let mut bucket = Bucket::full(three, t0());
    let turns: Vec<Turn> = ["a", "b", "c", "d"]
        .iter()
        .map(|uid| bucket.turn(three, &who(uid, 0), at(0)))
        .collect();
    assert_eq!(turns, [Turn::Go, Turn::Go, Turn::Go, wait(1, 1, 200, true)]);
    bucket.refund(three, at(0));
    assert_eq!(bucket.state(), (1_000_000, 1));
    bucket.refund(three, at(10_000));
    assert_eq!(bucket.state(), (3_000_000, 1), "never over the burst");
}

/// A waiter whose urgency changed moves in the line (and is not new).
#[test]
fn a_changed_urgency_moves_the_waiter() {
    let mut bucket = Bucket::full(FIVE, t0());
    assert_eq!(bucket.turn(FIVE, &who("x", 0), at(0)), Turn::Go);
    assert_eq!(bucket.turn(FIVE, &who("a", 10), at(0)), wait(1, 1, 200, true));
    assert_eq!(bucket.turn(FIVE, &who("b", 20), at(0)), wait(2, 2, 400, true));
    assert_eq!(bucket.turn(FIVE, &who("b", 5), at(0)), wait(1, 2, 200, false));
    bucket.leave("b");
    assert_eq!(bucket.state(), (0, 1));
}

/// Off, every turn goes and nothing is kept; on, idle buckets go.
#[test]
fn the_shared_budget_keeps_only_busy_buckets() {
    let issuer = |name: &str| IssuerName {
        kind: crate::api::IssuerKind::ClusterIssuer,
        namespace: None,
        name: name.into(),
    };
    let off = Budget::new(None);
    for _ in 0..3 {
        assert_eq!(off.turn(&issuer("ca"), &who("a", 0), t0()), Turn::Go);
    }
    let on = Budget::new(Some(FIVE));
    assert_eq!(on.turn(&issuer("ca"), &who("a", 0), at(0)), Turn::Go);
    assert_eq!(
        on.turn(&issuer("other"), &who("b", 0), at(0)),
        Turn::Go,
        "a bucket each"
    );
    assert_eq!(on.turn(&issuer("ca"), &who("c", 0), at(0)), wait(1, 1, 200, true));
    assert_eq!(on.waiting(), 1);
    on.leave(&issuer("other"), "c");
    assert_eq!(on.waiting(), 1, "in another issuer's line");
    on.leave(&issuer("ca"), "c");
    assert_eq!(on.waiting(), 0);
    assert_eq!(
        on.turn(&issuer("ca"), &who("c", 0), at(0)),
        wait(1, 1, 200, true),
        "joins anew"
    );
    on.forget("c");
    assert_eq!(on.waiting(), 0);
    assert_eq!(on.turn(&issuer("ca"), &who("d", 0), at(5_000)), Turn::Go);
    assert_eq!(lock(&on.buckets).len(), 1, "'other' refilled and went");
    on.refund(&issuer("ca"), at(5_000));
    assert_eq!(lock(&on.buckets).len(), 0, "full again and unused");
}

/// Forty waiters joining at once, each coming back when told (plus a little lag): the signs
/// never exceed the rate plus the burst in any second, and go in urgency order.
#[test]
fn a_mass_reissue_keeps_the_rate_and_the_order() {
    let mut bucket = Bucket::full(FIVE, t0());
    // Deadlines shuffled against the order they arrive in.
    let waiters: Vec<Urgency> = (0..40).map(|i| who(&format!("w{i:02}"), (i * 17) % 40)).collect();
    let mut due: Vec<(i64, usize)> = (0..40).map(|i| (0, i)).collect();
    let mut signed: Vec<(i64, usize)> = Vec::new();
    while let Some(&(ms, i)) = due.iter().min() {
        due.retain(|d| *d != (ms, i));
        match bucket.turn(FIVE, &waiters[i], at(ms)) {
            Turn::Go => signed.push((ms, i)),
            Turn::Wait(w) => due.push((ms + i64::try_from(w.after.as_millis()).unwrap() + 3, i)),
        }
    }
    assert_eq!(signed.len(), 40);
    for (k, (start, _)) in signed.iter().enumerate() {
        let within = signed[k..].iter().filter(|(ms, _)| *ms < start + 1000).count();
        assert!(within <= 6, "{within} signs in the second from {start} ms");
    }
    let deadlines: Vec<Timestamp> = signed[1..].iter().map(|(_, i)| waiters[*i].deadline).collect();
    let mut sorted = deadlines.clone();
    sorted.sort();
    assert_eq!(deadlines, sorted, "after the first, soonest deadline first");
    let (last_ms, _) = signed[39];
    assert!(
        (7_800..=8_200).contains(&last_ms),
        "40 signs at 5/s: {last_ms} ms"
    );
}
