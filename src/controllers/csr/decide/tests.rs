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
    // (row, csr, signer, issuer, access, want)
    let cases: Vec<(&str, CsrView, &IssuerName, Readiness, Access, Step)> = vec![
        ("unapproved", CsrView { approved: false, ..approved() }, &c, Ready, NotNeeded, Step::Leave),
        (
            "denied, no write",
            CsrView { approved: false, denied: true, ..approved() },
            &c,
            Ready,
            NotNeeded,
            Step::Leave,
        ),
        (
            "approved and denied (a lax server)",
            CsrView { denied: true, ..approved() },
            &c,
            Ready,
            NotNeeded,
            Step::Leave,
        ),
        ("failed", CsrView { failed: true, ..approved() }, &c, Ready, NotNeeded, Step::Leave),
        (
            "already signed",
            CsrView { has_certificate: true, ..approved() },
            &c,
            Ready,
            NotNeeded,
            Step::Leave,
        ),
        (
            "issuer missing",
            approved(),
            &c,
            Missing,
            NotNeeded,
            Step::Wait {
                reason: reason::WAITING_FOR_ISSUER_EXIST,
                message: "clusterissuers.cfssl-issuer.wikimedia.org \"ca\" not found. Waiting for it to be created."
                    .into(),
            },
        ),
        (
            "issuer unchecked",
            approved(),
            &c,
            Unchecked,
            NotNeeded,
            wait_ready("Waiting for issuer to become ready. Current issuer ready condition: <none>."),
        ),
        (
            "issuer outdated",
            approved(),
            &c,
            Outdated,
            NotNeeded,
            wait_ready("Waiting for issuer to become ready. Current issuer ready condition is outdated."),
        ),
        (
            "issuer not ready",
            approved(),
            &c,
            not_ready.clone(),
            NotNeeded,
            wait_ready(
                "Waiting for issuer to become ready. Current issuer ready condition is \"CAUnreachable\": connection refused.",
            ),
        ),
        ("issuer ready", approved(), &c, Ready, NotNeeded, Step::Sign),
        (
            "bad duration annotation fails at once, issuer ready or not",
            CsrView { asks: Err(bad_duration.clone()), ..approved() },
            &c,
            Missing,
            NotNeeded,
            Step::Fail(bad_duration.clone()),
        ),
        ("namespaced, not reviewed yet", approved(), &n, Ready, Unknown, Step::Review),
        ("namespaced, reviewed before the issuer is looked at", approved(), &n, Missing, Unknown, Step::Review),
        ("namespaced, unapproved: no review", CsrView { approved: false, ..approved() }, &n, Ready, Unknown, Step::Leave),
        ("namespaced, allowed", approved(), &n, Ready, Allowed, Step::Sign),
        (
            "namespaced, allowed, issuer missing",
            approved(),
            &n,
            Missing,
            Allowed,
            Step::Wait {
                reason: reason::WAITING_FOR_ISSUER_EXIST,
                message: "issuers.cfssl-issuer.wikimedia.org \"ca\" not found. Waiting for it to be created.".into(),
            },
        ),
        (
            "namespaced, refused",
            approved(),
            &n,
            Ready,
            Refused,
            Step::Fail(denied_reference.clone()),
        ),
        (
            "namespaced, refused wins over a bad duration",
            CsrView { asks: Err(bad_duration), ..approved() },
            &n,
            Ready,
            Refused,
            Step::Fail(denied_reference.clone()),
        ),
    ];
    for (row, csr, signer, issuer, access, want) in cases {
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
