//! Every branch of the CSR flow: issuer-lib's steps (ours? approved? done? issuer waiting?
//! sign) and the namespaced extension (review, refused), then the guard against signing twice.

use super::*;
use crate::controllers::signing::once::Held;

fn approved() -> CsrView {
    CsrView {
        approved: true,
        denied: false,
        failed: false,
        has_certificate: false,
        asks: Ok(Asks {
            duration: Duration::from_secs(3600),
            is_ca: false,
            usages: vec!["digital signature".into()],
        }),
    }
}

fn cluster() -> IssuerName {
    signer_name::parse("clusterissuers.cfssl-issuer.wikimedia.org/ca", true).unwrap()
}

fn namespaced() -> IssuerName {
    signer_name::parse("issuers.cfssl-issuer.wikimedia.org/team-a.ca", true).unwrap()
}

fn wait_ready(message: &str) -> Step {
    Step::Wait {
        reason: reason::WAITING_FOR_ISSUER_READY,
        message: message.into(),
    }
}

fn chain() -> Chain {
    Chain {
        certificates: "LEAF".into(),
        ca: None,
    }
}

#[test]
fn decide_table() {
    use Access::{Allowed, NotNeeded, Refused, Unknown};
    use Readiness::{Missing, Outdated, Ready, Unchecked};
    let bad_duration = Invalid {
        reason: reason::ERROR_PARSE_DURATION,
        message: "Failed to parse requested duration: x".into(),
    };
    let not_ready = Readiness::NotReady {
        reason: "CAUnreachable".into(),
        message: "connection refused".into(),
    };
    let denied_reference = Invalid {
        reason: reason::DENIED_REFERENCE,
        message: "Requester may not reference Namespaced Issuer team-a/ca: it needs verb \"reference\" on \
                  \"signers\" in API group \"cfssl-issuer.wikimedia.org\", resource name \"ca\" or all names, \
                  in namespace \"team-a\""
            .into(),
    };
    let (c, n) = (cluster(), namespaced());
    struct Case<'a> {
        name: &'static str,
        csr: CsrView,
        signer: &'a IssuerName,
        issuer: Readiness,
        access: Access,
        want: Step,
    }
    let cases = vec![
        Case {
            name: "unapproved",
            csr: CsrView { approved: false, ..approved() },
            signer: &c,
            issuer: Ready,
            access: NotNeeded,
            want: Step::Leave,
        },
        Case {
            name: "denied, no write",
            csr: CsrView { approved: false, denied: true, ..approved() },
            signer: &c,
            issuer: Ready,
            access: NotNeeded,
            want: Step::Leave,
        },
        Case {
            name: "approved and denied (a lax server)",
            csr: CsrView { denied: true, ..approved() },
            signer: &c,
            issuer: Ready,
            access: NotNeeded,
            want: Step::Leave,
        },
        Case {
            name: "failed",
            csr: CsrView { failed: true, ..approved() },
            signer: &c,
            issuer: Ready,
            access: NotNeeded,
            want: Step::Leave,
        },
        Case {
            name: "already signed",
            csr: CsrView { has_certificate: true, ..approved() },
            signer: &c,
            issuer: Ready,
            access: NotNeeded,
            want: Step::Leave,
        },
        Case {
            name: "issuer missing",
            csr: approved(),
            signer: &c,
            issuer: Missing,
            access: NotNeeded,
            want: Step::Wait {
                reason: reason::WAITING_FOR_ISSUER_EXIST,
                message: "clusterissuers.cfssl-issuer.wikimedia.org \"ca\" not found. Waiting for it to be created."
                    .into(),
            },
        },
        Case {
            name: "issuer unchecked",
            csr: approved(),
            signer: &c,
            issuer: Unchecked,
            access: NotNeeded,
            want: wait_ready("Waiting for issuer to become ready. Current issuer ready condition: <none>."),
        },
        Case {
            name: "issuer outdated",
            csr: approved(),
            signer: &c,
            issuer: Outdated,
            access: NotNeeded,
            want: wait_ready("Waiting for issuer to become ready. Current issuer ready condition is outdated."),
        },
        Case {
            name: "issuer not ready",
            csr: approved(),
            signer: &c,
            issuer: not_ready.clone(),
            access: NotNeeded,
            want: wait_ready(
                "Waiting for issuer to become ready. Current issuer ready condition is \"CAUnreachable\": connection refused.",
            ),
        },
        Case {
            name: "issuer ready",
            csr: approved(),
            signer: &c,
            issuer: Ready,
            access: NotNeeded,
            want: Step::Sign,
        },
        Case {
            name: "bad duration annotation fails at once, issuer ready or not",
            csr: CsrView { asks: Err(bad_duration.clone()), ..approved() },
            signer: &c,
            issuer: Missing,
            access: NotNeeded,
            want: Step::Fail(bad_duration.clone()),
        },
        Case {
            name: "namespaced, not reviewed yet",
            csr: approved(),
            signer: &n,
            issuer: Ready,
            access: Unknown,
            want: Step::Review,
        },
        Case {
            name: "namespaced, reviewed before the issuer is looked at",
            csr: approved(),
            signer: &n,
            issuer: Missing,
            access: Unknown,
            want: Step::Review,
        },
        Case {
            name: "namespaced, unapproved: no review",
            csr: CsrView { approved: false, ..approved() },
            signer: &n,
            issuer: Ready,
            access: Unknown,
            want: Step::Leave,
        },
        Case {
            name: "namespaced, allowed",
            csr: approved(),
            signer: &n,
            issuer: Ready,
            access: Allowed,
            want: Step::Sign,
        },
        Case {
            name: "namespaced, allowed, issuer missing",
            csr: approved(),
            signer: &n,
            issuer: Missing,
            access: Allowed,
            want: Step::Wait {
                reason: reason::WAITING_FOR_ISSUER_EXIST,
                message: "issuers.cfssl-issuer.wikimedia.org \"ca\" not found. Waiting for it to be created.".into(),
            },
        },
        Case {
            name: "namespaced, refused",
            csr: approved(),
            signer: &n,
            issuer: Ready,
            access: Refused,
            want: Step::Fail(denied_reference.clone()),
        },
        Case {
            name: "namespaced, refused wins over a bad duration",
            csr: CsrView { asks: Err(bad_duration), ..approved() },
            signer: &n,
            issuer: Ready,
            access: Refused,
            want: Step::Fail(denied_reference.clone()),
        },
    ];
    for Case {
        name: row,
        csr,
        signer,
        issuer,
        access,
        want,
    } in cases
    {
        assert_eq!(decide(&csr, signer, &issuer, &access), want, "{row}");
    }
}

#[test]
fn access_starts_by_kind() {
    assert_eq!(Access::for_signer(&cluster()), Access::NotNeeded);
    assert_eq!(Access::for_signer(&namespaced()), Access::Unknown);
}

#[test]
fn guard_table() {
    let fail = Step::Fail(Invalid {
        reason: reason::FAILED,
        message: "m".into(),
    });
    // (row, step, held, want)
    let cases = [
        (
            "nothing held: the step stands",
            Step::Sign,
            Held::Nothing,
            Step::Sign,
        ),
        (
            "leave stays leave",
            Step::Leave,
            Held::Unsaved(chain()),
            Step::Leave,
        ),
        ("a sign in flight", Step::Sign, Held::InFlight, Step::Leave),
        (
            "a write not yet in the cache",
            Step::Sign,
            Held::Saved,
            Step::Leave,
        ),
        (
            "signed, write lost: write it",
            Step::Sign,
            Held::Unsaved(chain()),
            Step::WriteIssued(chain()),
        ),
        (
            "signed, never fail it after",
            fail.clone(),
            Held::Unsaved(chain()),
            Step::WriteIssued(chain()),
        ),
        (
            "review after a sign in flight",
            Step::Review,
            Held::InFlight,
            Step::Leave,
        ),
        ("fail with nothing held", fail.clone(), Held::Nothing, fail),
    ];
    for (row, step, held, want) in cases {
        assert_eq!(guard(step, &held), want, "{row}");
    }
}
