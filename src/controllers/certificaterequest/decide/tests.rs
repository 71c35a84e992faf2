use super::*;
use crate::api::GROUP;

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

fn issuer(state: Readiness) -> IssuerView {
    IssuerView::Known {
        kind: IssuerKind::Issuer,
        name: "ca".into(),
        state,
    }
}

fn not_ready() -> Readiness {
    Readiness::NotReady {
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
    use Readiness::{Missing, Unchecked};
    use RequestReason::{Denied, Failed, Issued, Other, Pending};
    let ready = || issuer(Readiness::Ready);
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
