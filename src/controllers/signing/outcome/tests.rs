use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::cfssl::{Attempt, Call, Failure, IssuerFault};
use crate::controllers::signing::testing::{refused, unreachable};
use crate::pki::CsrError;

fn kept() -> Chain {
    Chain {
        certificates: "leaf".into(),
        ca: None,
    }
}

#[test]
fn outcome_table() {
    let created: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let soon: Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
    let late: Timestamp = "2026-01-01T00:05:00Z".parse().unwrap();
    let max = Duration::from_secs(300);
    let down = unreachable(Call::AuthSign);
    let refused_csr = refused("bad request", Class::Permanent);
    let wrong_key = refused("invalid token", Class::Issuer(IssuerFault::Credentials));
    let bad_csr = CfsslError::Csr(CsrError::NotPem("x".into()));
    let other_key = Attempt::new(Call::AuthSign, "https://ca", "l")
        .failed(Failure::BadCertificate(crate::pki::ChainError::KeyMismatch));
    let cases: Vec<(&str, Result<Chain, &CfsslError>, Timestamp, Outcome)> = vec![
        ("signed", Ok(kept()), soon, Outcome::Issued(kept())),
        (
            "CA refused the CSR",
            Err(&refused_csr),
            soon,
            Outcome::Failed(format!("the CA will not sign this request: {refused_csr}")),
        ),
        (
            "garbage CSR is permanent, and the message does not blame the CA",
            Err(&bad_csr),
            soon,
            Outcome::Failed("the request cannot be signed: the CSR is not PEM: x".into()),
        ),
        (
            "a certificate for another key fails at once, not stored, and says the CA signed",
            Err(&other_key),
            soon,
            Outcome::Failed(
                "the CA signed, but its certificate is unusable and was not stored: authsign at \
                 https://ca (label \"l\"): unusable certificate: the certificate is for a different \
                 key than the CSR"
                    .into(),
            ),
        ),
        (
            "wrong key blames the issuer",
            Err(&wrong_key),
            soon,
            Outcome::IssuerFault {
                message: format!("the issuer is misconfigured: {wrong_key}"),
                reason: ReadyReason::InvalidCredentials,
            },
        ),
        (
            "CA down: retry",
            Err(&down),
            soon,
            Outcome::Retry(format!("signing failed, will retry: {down}")),
        ),
        (
            "CA down too long: fail",
            Err(&down),
            late,
            give_up_after(&down, "5m"),
        ),
    ];
    for (row, result, now, want) in cases {
        assert_eq!(outcome(result, Some(created), now, max), want, "{row}");
    }
}

#[test]
fn retry_window_starts_at_the_first_failed_sign() {
    let at = |s: &str| -> Timestamp { s.parse().unwrap() };
    let down = unreachable(Call::AuthSign);
    let retry = Outcome::Retry(format!("signing failed, will retry: {down}"));
    let give_up = Outcome::Failed(format!("gave up after retrying for 5m: {down}"));
    let max = Duration::from_secs(300);
    // (row, first failure, now, want). The request was created at 09:00 and approved at 10:00.
    let cases = [
        (
            "first failure, an hour after creation",
            None,
            "2026-01-01T10:00:00Z",
            &retry,
        ),
        (
            "4m59s into the window",
            Some("2026-01-01T10:00:00Z"),
            "2026-01-01T10:04:59Z",
            &retry,
        ),
        (
            "window ends at exactly 5m",
            Some("2026-01-01T10:00:00Z"),
            "2026-01-01T10:05:00Z",
            &give_up,
        ),
        (
            "long after",
            Some("2026-01-01T10:00:00Z"),
            "2026-01-01T11:00:00Z",
            &give_up,
        ),
        (
            "a later first failure moves the end",
            Some("2026-01-01T10:30:00Z"),
            "2026-01-01T10:34:00Z",
            &retry,
        ),
    ];
    for (row, first, now, want) in cases {
        let got = outcome(Err(&down), first.map(at), at(now), max);
        assert_eq!(&got, want, "{row}");
    }
    assert_eq!(
        outcome(Err(&down), None, at("2026-01-01T10:00:00Z"), Duration::ZERO),
        give_up_after(&down, "0s"),
        "no window at all fails at the first failure"
    );
}

fn give_up_after(err: &CfsslError, window: &str) -> Outcome {
    Outcome::Failed(format!("gave up after retrying for {window}: {err}"))
}
