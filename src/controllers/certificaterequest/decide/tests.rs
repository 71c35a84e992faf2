use super::*;
use crate::api::GROUP;
use crate::cfssl::{Attempt, Call, Failure, IssuerFault};
use crate::controllers::testing::{refused, unreachable};
use crate::pki::CsrError;

fn request(ready: Option<(ConditionStatus, RequestReason)>, approved: bool, denied: bool) -> RequestView {
    RequestView {
        ready: ready.map(|(status, reason)| Ready {
            status,
            reason,
            message: "m".into(),
            since: None,
        }),
        approved,
        denied,
        ..RequestView::default()
    }
}

fn issuer(state: IssuerState) -> IssuerView {
    IssuerView::Known {
        kind: IssuerKind::Issuer,
        name: "ca".into(),
        state,
    }
}

fn not_ready() -> IssuerState {
    IssuerState::NotReady {
        reason: "InvalidCredentials".into(),
        message: "invalid token".into(),
    }
}

/// A chain this process signed and holds.
fn kept() -> Chain {
    Chain {
        certificates: "leaf".into(),
        ca: None,
    }
}

fn wait(event: WaitReason, message: &str) -> Step {
    Step::WaitForIssuer {
        event,
        message: message.into(),
    }
}

#[rustfmt::skip]
#[test]
fn contract_table() {
    use ConditionStatus::{False, True};
    use IssuerState::{Missing, Unchecked};
    use RequestReason::{Denied, Failed, Issued, Other, Pending};
    let ready = || issuer(IssuerState::Ready);
    let approved = request(None, true, false);
    let signed_unsaved = RequestView { certificate: Some(kept()), ..approved.clone() };
    let invalid = RequestView { invalid_request: true, ..approved.clone() };
    let sign = Step::Sign(IssuerKind::Issuer);
    let cluster_issuer_not_ready =
        IssuerView::Known { kind: IssuerKind::ClusterIssuer, name: "ca1".into(), state: not_ready() };
    // (row, request, issuer, approval required, want)
    let cases: Vec<(&str, RequestView, IssuerView, bool, Step)> = vec![
        ("ready is terminal", request(Some((True, Issued)), true, false), ready(), true, Step::Leave),
        ("failed is terminal", request(Some((False, Failed)), true, false), ready(), true, Step::Leave),
        ("denied reason is terminal", request(Some((False, Denied)), false, true), ready(), true, Step::Leave),
        ("denied condition is honoured", request(None, false, true), ready(), true, Step::Deny),
        ("denied while pending", request(Some((False, Pending)), false, true), ready(), true, Step::Deny),
        ("unapproved waits without a write", request(None, false, false), ready(), true, Step::WaitForApproval),
        ("unapproved with the issuer missing still waits for approval first",
            request(None, false, false), issuer(Missing), true, Step::WaitForApproval),
        ("unapproved but terminal is left alone",
            request(Some((False, Failed)), false, false), ready(), true, Step::Leave),
        ("someone else's reason is not terminal",
            request(Some((False, Other)), true, false), ready(), true, sign.clone()),
        ("approval check disabled", request(None, false, false), ready(), false, sign.clone()),
        ("marked invalid by someone else", invalid, ready(), true, Step::Leave),
        ("approved and issuer ready signs", approved.clone(), ready(), true, sign.clone()),
        ("pending retry signs again", request(Some((False, Pending)), true, false), ready(), true, sign.clone()),
        ("issuer missing", approved.clone(), issuer(Missing), true,
            wait(WaitReason::IssuerNotFound, "Issuer \"ca\" not found; waiting for it to be created")),
        ("issuer unchecked or stale", approved.clone(), issuer(Unchecked), true,
            wait(WaitReason::IssuerNotReady, "Issuer \"ca\" has not been checked yet")),
        ("issuer not ready", approved.clone(), issuer(not_ready()), true,
            wait(WaitReason::IssuerNotReady, "Issuer \"ca\" is not ready (InvalidCredentials): invalid token")),
        ("the message names the kind", approved.clone(), cluster_issuer_not_ready, true,
            wait(WaitReason::IssuerNotReady, "ClusterIssuer \"ca1\" is not ready (InvalidCredentials): invalid token")),
        ("unknown kind of our group", approved.clone(), IssuerView::UnknownKind("Foo".into()), true,
            Step::Reject(format!("issuerRef.kind \"Foo\" is not a kind of {GROUP}; use Issuer or ClusterIssuer"))),
        ("signed before: never twice", signed_unsaved, ready(), true, Step::ConfirmIssued),
    ];
    for (row, req, issuer, approval, want) in cases {
        assert_eq!(decide(&req, &issuer, approval), want, "{row}");
    }
}

#[test]
fn hold_table() {
    let chain = Chain {
        certificates: "leaf".into(),
        ca: None,
    };
    let unsaved = Signing::Unsaved(chain.clone());
    let saved = |rv: Option<&str>| Signing::Saved {
        resource_version: rv.map(str::to_string),
    };
    let saved_7 = saved(Some("7"));
    let saved_unknown = saved(None);
    // (row, entry, observed resourceVersion, observed has certificate, want)
    type Row<'a> = (&'a str, Option<&'a Signing>, Option<&'a str>, bool, (Held, bool));
    let cases: Vec<Row> = vec![
        ("nothing held", None, Some("5"), false, (Held::Nothing, false)),
        (
            "in flight stays",
            Some(&Signing::InFlight),
            Some("5"),
            true,
            (Held::InFlight, false),
        ),
        (
            "unsaved, stale cache",
            Some(&unsaved),
            Some("5"),
            false,
            (Held::Unsaved(chain.clone()), false),
        ),
        (
            "unsaved, but the write landed after all",
            Some(&unsaved),
            Some("8"),
            true,
            (Held::Nothing, true),
        ),
        (
            "saved, stale cache",
            Some(&saved_7),
            Some("5"),
            false,
            (Held::Saved, false),
        ),
        (
            "saved, stale cache without a version",
            Some(&saved_7),
            None,
            false,
            (Held::Saved, false),
        ),
        (
            "saved, cache shows the write",
            Some(&saved_7),
            Some("7"),
            false,
            (Held::Nothing, true),
        ),
        (
            "saved, cache shows a later write",
            Some(&saved_7),
            Some("9"),
            true,
            (Held::Nothing, true),
        ),
        (
            "saved, version unknown, stale",
            Some(&saved_unknown),
            None,
            false,
            (Held::Saved, false),
        ),
        (
            "saved, version unknown, certificate seen",
            Some(&saved_unknown),
            Some("3"),
            true,
            (Held::Nothing, true),
        ),
    ];
    for (row, entry, version, has_certificate, want) in cases {
        assert_eq!(hold(entry, version, has_certificate), want, "{row}");
    }
}

#[test]
fn guard_table() {
    let wait = Step::WaitForIssuer {
        event: WaitReason::IssuerNotReady,
        message: "m".into(),
    };
    let reject = Step::Reject("r".into());
    // (row, step from decide, observed has certificate, held, want)
    let cases: Vec<(&str, Step, bool, Held, Step)> = vec![
        (
            "plain sign",
            Step::Sign(IssuerKind::Issuer),
            false,
            Held::Nothing,
            Step::Sign(IssuerKind::Issuer),
        ),
        ("plain wait", wait.clone(), false, Held::Nothing, wait.clone()),
        ("plain deny", Step::Deny, false, Held::Nothing, Step::Deny),
        (
            "leave stays leave",
            Step::Leave,
            true,
            Held::Unsaved(kept()),
            Step::Leave,
        ),
        (
            "sign in flight: no second sign",
            Step::Sign(IssuerKind::Issuer),
            false,
            Held::InFlight,
            Step::Leave,
        ),
        (
            "wait while in flight: no pending write",
            wait.clone(),
            false,
            Held::InFlight,
            Step::Leave,
        ),
        (
            "stale replay after the write: no second sign",
            Step::Sign(IssuerKind::Issuer),
            false,
            Held::Saved,
            Step::Leave,
        ),
        (
            "stale replay after the write: no pending",
            wait.clone(),
            false,
            Held::Saved,
            Step::Leave,
        ),
        (
            "stale replay after the write: no failure",
            reject.clone(),
            false,
            Held::Saved,
            Step::Leave,
        ),
        (
            "write lost: write the kept chain",
            Step::Sign(IssuerKind::Issuer),
            false,
            Held::Unsaved(kept()),
            Step::ConfirmIssued,
        ),
        (
            "write lost, issuer not ready: still the chain",
            wait.clone(),
            false,
            Held::Unsaved(kept()),
            Step::ConfirmIssued,
        ),
        (
            "write lost, denied since: still the chain",
            Step::Deny,
            false,
            Held::Unsaved(kept()),
            Step::ConfirmIssued,
        ),
        (
            "has certificate, issuer not ready",
            wait,
            true,
            Held::Nothing,
            Step::ConfirmIssued,
        ),
        (
            "has certificate, denied",
            Step::Deny,
            true,
            Held::Nothing,
            Step::ConfirmIssued,
        ),
        (
            "has certificate, rejected",
            reject,
            true,
            Held::Nothing,
            Step::ConfirmIssued,
        ),
        (
            "has certificate, confirm",
            Step::ConfirmIssued,
            true,
            Held::Nothing,
            Step::ConfirmIssued,
        ),
    ];
    for (row, step, has_certificate, held, want) in cases {
        assert_eq!(guard(step, has_certificate, &held), want, "{row}");
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
