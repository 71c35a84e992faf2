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
    struct Case {
        name: &'static str,
        req: RequestView,
        issuer: IssuerView,
        approval: bool,
        want: Step,
    }
    let cases = vec![
        Case {
            name: "ready is terminal",
            req: request(Some((True, Issued)), true, false),
            issuer: ready(),
            approval: true,
            want: Step::Leave,
        },
        Case {
            name: "failed is terminal",
            req: request(Some((False, Failed)), true, false),
            issuer: ready(),
            approval: true,
            want: Step::Leave,
        },
        Case {
            name: "denied reason is terminal",
            req: request(Some((False, Denied)), false, true),
            issuer: ready(),
            approval: true,
            want: Step::Leave,
        },
        Case {
            name: "denied condition is honoured",
            req: request(None, false, true),
            issuer: ready(),
            approval: true,
            want: Step::Deny,
        },
        Case {
            name: "denied while pending",
            req: request(Some((False, Pending)), false, true),
            issuer: ready(),
            approval: true,
            want: Step::Deny,
        },
        Case {
            name: "unapproved waits without a write",
            req: request(None, false, false),
            issuer: ready(),
            approval: true,
            want: Step::WaitForApproval,
        },
        Case {
            name: "unapproved with the issuer missing still waits for approval first",
            req: request(None, false, false),
            issuer: issuer(Missing),
            approval: true,
            want: Step::WaitForApproval,
        },
        Case {
            name: "unapproved but terminal is left alone",
            req: request(Some((False, Failed)), false, false),
            issuer: ready(),
            approval: true,
            want: Step::Leave,
        },
        Case {
            name: "someone else's reason is not terminal",
            req: request(Some((False, Other)), true, false),
            issuer: ready(),
            approval: true,
            want: sign.clone(),
        },
        Case {
            name: "approval check disabled",
            req: request(None, false, false),
            issuer: ready(),
            approval: false,
            want: sign.clone(),
        },
        Case {
            name: "marked invalid by someone else",
            req: invalid,
            issuer: ready(),
            approval: true,
            want: Step::Leave,
        },
        Case {
            name: "approved and issuer ready signs",
            req: approved.clone(),
            issuer: ready(),
            approval: true,
            want: sign.clone(),
        },
        Case {
            name: "pending retry signs again",
            req: request(Some((False, Pending)), true, false),
            issuer: ready(),
            approval: true,
            want: sign.clone(),
        },
        Case {
            name: "issuer missing",
            req: approved.clone(),
            issuer: issuer(Missing),
            approval: true,
            want: wait(WaitReason::IssuerNotFound, "Issuer \"ca\" not found; waiting for it to be created"),
        },
        Case {
            name: "issuer unchecked or stale",
            req: approved.clone(),
            issuer: issuer(Unchecked),
            approval: true,
            want: wait(WaitReason::IssuerNotReady, "Issuer \"ca\" has not been checked yet"),
        },
        Case {
            name: "issuer not ready",
            req: approved.clone(),
            issuer: issuer(not_ready()),
            approval: true,
            want: wait(WaitReason::IssuerNotReady, "Issuer \"ca\" is not ready (InvalidCredentials): invalid token"),
        },
        Case {
            name: "the message names the kind",
            req: approved.clone(),
            issuer: cluster_issuer_not_ready,
            approval: true,
            want: wait(WaitReason::IssuerNotReady, "ClusterIssuer \"ca1\" is not ready (InvalidCredentials): invalid token"),
        },
        Case {
            name: "unknown kind of our group",
            req: approved.clone(),
            issuer: IssuerView::UnknownKind("Foo".into()),
            approval: true,
            want: Step::Reject(format!("issuerRef.kind \"Foo\" is not a kind of {GROUP}; use Issuer or ClusterIssuer")),
        },
        Case {
            name: "over budget: failed from what the cache kept, whatever the issuer",
            req: RequestView {
                oversize: Some(Oversize::Csr(1_048_576)),
                ..approved.clone()
            },
            issuer: issuer(Readiness::Missing),
            approval: true,
            want: Step::Reject("the request cannot be signed: the CSR is 1048576 bytes, over the 64 KiB limit".into()),
        },
        Case {
            name: "spec changed after it was made: failed, whatever the issuer",
            req: RequestView {
                edited: Some(2),
                ..approved.clone()
            },
            issuer: ready(),
            approval: true,
            want: Step::Reject(
                "the request cannot be signed: its spec changed after it was created (generation 2), so an \
                 approval may not cover it; create a new CertificateRequest"
                    .into(),
            ),
        },
        Case {
            name: "spec changed but signed already: the certificate stays",
            req: RequestView {
                edited: Some(3),
                certificate: Some(Chain {
                    certificates: "c".into(),
                    ca: None,
                }),
                ..approved.clone()
            },
            issuer: ready(),
            approval: true,
            want: Step::ConfirmIssued,
        },
        Case {
            name: "spec changed, not approved: waits like any other",
            req: RequestView {
                edited: Some(2),
                ..request(None, false, false)
            },
            issuer: ready(),
            approval: true,
            want: Step::WaitForApproval,
        },
        Case {
            name: "over budget but not approved: waits like any other",
            req: RequestView {
                oversize: Some(Oversize::Rest(70_000)),
                ..request(None, false, false)
            },
            issuer: ready(),
            approval: true,
            want: Step::WaitForApproval,
        },
        Case {
            name: "signed before: never twice",
            req: signed_unsaved,
            issuer: ready(),
            approval: true,
            want: Step::ConfirmIssued,
        },
    ];
    for Case { name: row, req, issuer, approval, want } in cases {
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
    struct Case {
        name: &'static str,
        step: Step,
        has_certificate: bool,
        held: Held,
        want: Step,
    }
    let cases = vec![
        Case {
            name: "plain sign",
            step: Step::Sign(IssuerKind::Issuer),
            has_certificate: false,
            held: Held::Nothing,
            want: Step::Sign(IssuerKind::Issuer),
        },
        Case {
            name: "plain wait",
            step: wait.clone(),
            has_certificate: false,
            held: Held::Nothing,
            want: wait.clone(),
        },
        Case {
            name: "plain deny",
            step: Step::Deny,
            has_certificate: false,
            held: Held::Nothing,
            want: Step::Deny,
        },
        Case {
            name: "leave stays leave",
            step: Step::Leave,
            has_certificate: true,
            held: Held::Unsaved(kept()),
            want: Step::Leave,
        },
        Case {
            name: "sign in flight: no second sign",
            step: Step::Sign(IssuerKind::Issuer),
            has_certificate: false,
            held: Held::InFlight,
            want: Step::Leave,
        },
        Case {
            name: "wait while in flight: no pending write",
            step: wait.clone(),
            has_certificate: false,
            held: Held::InFlight,
            want: Step::Leave,
        },
        Case {
            name: "stale replay after the write: no second sign",
            step: Step::Sign(IssuerKind::Issuer),
            has_certificate: false,
            held: Held::Saved,
            want: Step::Leave,
        },
        Case {
            name: "stale replay after the write: no pending",
            step: wait.clone(),
            has_certificate: false,
            held: Held::Saved,
            want: Step::Leave,
        },
        Case {
            name: "stale replay after the write: no failure",
            step: reject.clone(),
            has_certificate: false,
            held: Held::Saved,
            want: Step::Leave,
        },
        Case {
            name: "write lost: write the kept chain",
            step: Step::Sign(IssuerKind::Issuer),
            has_certificate: false,
            held: Held::Unsaved(kept()),
            want: Step::ConfirmIssued,
        },
        Case {
            name: "write lost, issuer not ready: still the chain",
            step: wait.clone(),
            has_certificate: false,
            held: Held::Unsaved(kept()),
            want: Step::ConfirmIssued,
        },
        Case {
            name: "write lost, denied since: still the chain",
            step: Step::Deny,
            has_certificate: false,
            held: Held::Unsaved(kept()),
            want: Step::ConfirmIssued,
        },
        Case {
            name: "has certificate, issuer not ready",
            step: wait,
            has_certificate: true,
            held: Held::Nothing,
            want: Step::ConfirmIssued,
        },
        Case {
            name: "has certificate, denied",
            step: Step::Deny,
            has_certificate: true,
            held: Held::Nothing,
            want: Step::ConfirmIssued,
        },
        Case {
            name: "has certificate, rejected",
            step: reject,
            has_certificate: true,
            held: Held::Nothing,
            want: Step::ConfirmIssued,
        },
        Case {
            name: "has certificate, confirm",
            step: Step::ConfirmIssued,
            has_certificate: true,
            held: Held::Nothing,
            want: Step::ConfirmIssued,
        },
    ];
    for Case {
        name: row,
        step,
        has_certificate,
        held,
        want,
    } in cases
    {
        assert_eq!(guard(step, has_certificate, &held), want, "{row}");
    }
}

#[test]
fn a_spec_changed_after_creation_is_read_from_the_generation() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    let meta = |generation: Option<i64>, deleting: bool| ObjectMeta {
        generation,
        deletion_timestamp: deleting.then_some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
        ..ObjectMeta::default()
    };
    let rows = [
        ("as created", meta(Some(1), false), None),
        (
            "no generation (an API server that keeps none)",
            meta(None, false),
            None,
        ),
        ("spec changed once", meta(Some(2), false), Some(2)),
        ("being deleted with finalizers", meta(Some(2), true), None),
        ("changed, then deleted", meta(Some(3), true), Some(3)),
    ];
    for (name, meta, want) in rows {
        assert_eq!(super::super::observe::edited(&meta), want, "{name}");
    }
}
