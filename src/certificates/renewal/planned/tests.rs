//! The renewal pipeline row by row: cert-manager's time with the jitter off, the jitter's
//! bounds and determinism, the windows after the jitter, and the guard.

use jiff::Timestamp;

use super::*;
use crate::certificates::renewal::{WindowError, renewal_time_in_windows, spread_of};

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// 30 days from 2026-01-01; cert-manager renews on 2026-01-21 (a third before expiry).
const NB: &str = "2026-01-01T00:00:00Z";
const NA: &str = "2026-01-31T00:00:00Z";

fn inputs() -> Inputs<'static> {
    Inputs {
        not_before: at(NB),
        not_after: at(NA),
        renewal: Renewal::default(),
        policy: None,
        windows: &[],
        jitter: Jitter::OFF,
        spread: u32::MAX,
        issued_at: None,
    }
}

fn jitter(fraction: f64) -> Jitter {
    Jitter::from_fraction(fraction).unwrap()
}

fn window(cron: &str) -> RenewalWindow {
    RenewalWindow {
        cron: cron.into(),
        window_duration: "2h".into(),
        ..Default::default()
    }
}

#[rustfmt::skip]
#[test]
fn with_the_jitter_off_and_no_issuance_it_is_cert_managers_time() {
    let windows = [window("0 10 * * *")];
    let missed = [window("0 10 1 * *")];
    let day = std::time::Duration::from_secs(24 * 3600);
    let rows: [(&str, Renewal, Option<&str>, &[RenewalWindow]); 6] = [
        ("a third", Renewal::default(), None, &[]),
        ("renewBefore", Renewal { renew_before: Some(day), ..Renewal::default() }, None, &[]),
        ("percentage", Renewal { renew_before_percentage: Some(10), ..Renewal::default() }, None, &[]),
        ("disabled", Renewal::default(), Some("Disabled"), &[]),
        ("a window", Renewal::default(), Some("RenewBefore"), &windows),
        ("a missed window", Renewal::default(), None, &missed),
    ];
    for (row, renewal, policy, windows) in rows {
        let got = planned(&Inputs {
            renewal,
            policy,
            windows,
            ..inputs()
        });
        let parsed = Policy::parse(policy).unwrap();
        let want = renewal_time_in_windows(at(NB), at(NA), renewal, parsed, windows);
        let want_at = want.clone().unwrap_or_else(|e| e.fallback());
        assert_eq!(got.at, want_at, "{row}");
        assert_eq!(got.error, want.err(), "{row}");
        assert_eq!(got.guarded, None, "{row}");
    }
}

/// One jittered renewal: the fraction, the object's spread, the renewal settings, and the
/// time wanted.
struct JitterRow {
    name: &'static str,
    fraction: f64,
    spread: u32,
    renewal: Renewal,
    want: &'static str,
}

#[rustfmt::skip]
#[test]
fn the_jitter_moves_earlier_by_its_share_of_the_lifetime_never_before_not_before() {
    let days = |d: u64| Renewal {
        renew_before: Some(std::time::Duration::from_secs(d * 24 * 3600)),
        ..Renewal::default()
    };
    let rows = [
        JitterRow { name: "spread 0: no move", fraction: 0.1, spread: 0, renewal: Renewal::default(),
            want: "2026-01-21T00:00:00Z" },
        JitterRow { name: "half the spread: half of 10 % of 30 days", fraction: 0.1, spread: 1 << 31,
            renewal: Renewal::default(), want: "2026-01-19T12:00:00Z" },
        JitterRow { name: "the whole spread: 3 days less 60 µs, truncated to the second", fraction: 0.1,
            spread: u32::MAX, renewal: Renewal::default(), want: "2026-01-18T00:00:00Z" },
        JitterRow { name: "the largest fraction", fraction: 0.5, spread: 1 << 31, renewal: Renewal::default(),
            want: "2026-01-13T12:00:00Z" },
        JitterRow { name: "never before notBefore", fraction: 0.5, spread: u32::MAX, renewal: days(29),
            want: NB },
        JitterRow { name: "off: cert-manager's time whatever the spread", fraction: 0.0, spread: u32::MAX,
            renewal: Renewal::default(), want: "2026-01-21T00:00:00Z" },
    ];
    for JitterRow { name, fraction, spread, renewal, want } in rows {
        let got = planned(&Inputs {
            jitter: jitter(fraction),
            spread,
            renewal,
            ..inputs()
        });
        assert_eq!(got.at, Some(at(want)), "{name}");
        assert!(got.at.unwrap() < at(NA), "{name}: before notAfter");
    }
}

#[test]
fn the_spread_is_the_sha256_of_the_uid_so_the_same_uid_renews_at_the_same_time() {
    let uid = "6d1f1a52-5f8e-4c2b-9a77-0c3e2f1b8d41";
    // The first four bytes of sha256(uid), big-endian, as `sha256sum` gives them.
    assert_eq!(spread_of(uid), 3_500_197_394);
    assert_eq!(spread_of("00000000-0000-0000-0000-000000000000"), 314_128_252);
    let of = |uid: &str| {
        planned(&Inputs {
            jitter: jitter(0.1),
            spread: spread_of(uid),
            ..inputs()
        })
        .at
    };
    assert_eq!(of(uid), of(uid), "deterministic");
    // 10 % of 30 days x 3500197394 / 2^32 = 211235.87... s earlier, truncated.
    assert_eq!(of(uid), Some(at("2026-01-18T13:19:24Z")));
}

#[test]
fn the_windows_place_the_jittered_time() {
    let windows = [window("0 10 * * *")];
    let got = planned(&Inputs {
        not_before: at("2024-01-01T00:00:00Z"),
        not_after: at("2024-01-31T00:00:00Z"),
        windows: &windows,
        jitter: jitter(0.1),
        // A quarter: 18 hours earlier, 2024-01-20T06:00, then the next window's start.
        spread: 1 << 30,
        ..inputs()
    });
    assert_eq!(got.at, Some(at("2024-01-20T10:00:00Z")));
    let missed = [window("0 10 1 * *")];
    let got = planned(&Inputs {
        not_before: at("2024-01-01T00:00:00Z"),
        not_after: at("2024-01-31T00:00:00Z"),
        windows: &missed,
        jitter: jitter(0.1),
        spread: 1 << 30,
        ..inputs()
    });
    assert_eq!(
        got.at,
        Some(at("2024-01-20T06:00:00Z")),
        "no window: the jittered time"
    );
    assert!(matches!(
        got.error,
        Some(RenewalError::Window(WindowError::NoWindow { .. }))
    ));
}

#[test]
fn a_renewal_due_at_issuance_moves_to_two_thirds_of_the_validity_left() {
    // cert-manager#5838: cfssl backdates notBefore by 5 minutes, the profile gives 600 s, and
    // renewBefore 9m30s puts cert-manager's renewal 4m30s before the issuance.
    let issued = at("2026-01-01T10:00:00Z");
    let inputs = Inputs {
        not_before: at("2026-01-01T09:55:00Z"),
        not_after: at("2026-01-01T10:05:00Z"),
        renewal: Renewal {
            renew_before: Some(std::time::Duration::from_secs(570)),
            ..Renewal::default()
        },
        issued_at: Some(issued),
        ..inputs()
    };
    let got = planned(&inputs);
    assert_eq!(
        got,
        Planned {
            at: Some(at("2026-01-01T10:03:20Z")),
            error: None,
            guarded: Some(Guarded {
                computed: at("2026-01-01T09:55:30Z"),
                issued_at: issued,
            }),
        }
    );
    let unknown = planned(&Inputs {
        issued_at: None,
        ..inputs
    });
    assert_eq!(
        unknown.at,
        Some(at("2026-01-01T09:55:30Z")),
        "no issuance known: no guard"
    );
    let later = planned(&Inputs {
        issued_at: Some(at("2026-01-01T09:55:00Z")),
        ..inputs
    });
    assert_eq!(
        later.at,
        Some(at("2026-01-01T09:55:30Z")),
        "due after issuance: as computed"
    );
    assert_eq!(later.guarded, None);
    let disabled = planned(&Inputs {
        policy: Some("Disabled"),
        ..inputs
    });
    assert_eq!(disabled, Planned::default(), "disabled: never");
}

#[test]
fn no_lifetime_and_unknown_policies_report_why() {
    let flipped = Inputs {
        not_before: at(NA),
        not_after: at(NB),
        ..inputs()
    };
    assert_eq!(planned(&flipped).error, Some(RenewalError::NoLifetime));
    assert_eq!(planned(&flipped).at, None);
    let odd = planned(&Inputs {
        policy: Some("Sometimes"),
        ..flipped
    });
    assert_eq!(odd.error, Some(RenewalError::UnknownPolicy("Sometimes".into())));
    let odd = planned(&Inputs {
        policy: Some("Sometimes"),
        ..inputs()
    });
    assert_eq!(
        odd.at,
        Some(at("2026-01-21T00:00:00Z")),
        "renews at the plain time anyway"
    );
}

#[test]
fn jitter_flags_parse_or_say_why() {
    let ok = |text: &str| text.parse::<Jitter>().map(|j| j.to_string());
    assert_eq!(ok("0"), Ok("0".to_string()));
    assert_eq!(ok("0.1"), Ok("0.1".to_string()));
    assert_eq!(ok(" 0.5 "), Ok("0.5".to_string()));
    assert!("0".parse::<Jitter>().unwrap().is_off());
    let refused = |text: &str| text.parse::<Jitter>().unwrap_err().to_string();
    assert_eq!(
        refused("0.6"),
        "0.6 is out of range: the renewal jitter is a fraction of the certificate's lifetime from 0 (off) to 0.5"
    );
    assert_eq!(
        refused("-0.1"),
        "-0.1 is out of range: the renewal jitter is a fraction of the certificate's lifetime from 0 (off) to 0.5"
    );
    assert!(refused("NaN").contains("out of range"));
    assert_eq!(
        refused("10%"),
        "\"10%\" is not a number (a fraction of the lifetime, such as 0.1)"
    );
}
