//! The cert-manager external issuer contract for one CertificateRequest, as pure functions from
//! what was observed (and `now`) to what to do. The reconciler only gathers and applies.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::api::{IssuerKind, ReadyReason};
use crate::cfssl::{Class, Error as CfsslError};
use crate::pki::Chain;

/// The parts of a CertificateRequest the contract looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestView {
    /// Our `Ready` condition: `(status, reason)`.
    pub ready: Option<(String, String)>,
    pub approved: bool,
    pub denied: bool,
    pub invalid_request: bool,
    /// `status.certificate` is already set: it was signed before (a lost write, a restart).
    pub has_certificate: bool,
}

/// The issuer a request names, as found in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IssuerView {
    /// `issuerRef.kind` names no kind of ours.
    UnknownKind(String),
    Missing,
    /// No Ready condition yet, or one for an older generation.
    Unchecked,
    NotReady {
        reason: String,
        message: String,
    },
    Ready,
}

/// What the reconciler does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing to write: terminal, or marked invalid by someone else.
    Leave,
    /// Not approved yet: nothing to write; one Normal `WaitingForApproval` Event says so.
    WaitForApproval,
    /// Denied by an approver: Ready=False/Denied with a failure time, once.
    Deny,
    /// Signed earlier but the Ready write was lost: write Issued, never sign again.
    ConfirmIssued,
    /// Wait for the issuer; its watch re-triggers this request, so no requeue.
    WaitForIssuer {
        event: WaitReason,
        message: String,
    },
    Sign,
    /// The request can never be signed as written: Ready=False/Failed with a failure time.
    Reject(String),
}

/// Event reasons for a request waiting on its issuer (cert-manager's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitReason {
    IssuerNotFound,
    IssuerNotReady,
}

impl WaitReason {
    pub fn as_str(self) -> &'static str {
        match self {
            WaitReason::IssuerNotFound => "IssuerNotFound",
            WaitReason::IssuerNotReady => "IssuerNotReady",
        }
    }
}

/// Contract steps 2-5 (step 1, "is it ours", is decided by [`crate::api::IssuerKind::for_ref`]).
pub fn decide(
    request: &RequestView,
    issuer: &IssuerView,
    issuer_name: &str,
    kind: IssuerKind,
    approval_required: bool,
) -> Step {
    if is_terminal(request) {
        return Step::Leave;
    }
    if request.denied {
        return Step::Deny;
    }
    if request.invalid_request {
        return Step::Leave;
    }
    if approval_required && !request.approved {
        return Step::WaitForApproval;
    }
    if request.has_certificate {
        return Step::ConfirmIssued;
    }
    let not_ready = |message: String| Step::WaitForIssuer {
        event: WaitReason::IssuerNotReady,
        message,
    };
    match issuer {
        IssuerView::UnknownKind(other) => Step::Reject(format!(
            "issuerRef.kind {other:?} is not a kind of {}; use Issuer or ClusterIssuer",
            crate::api::GROUP
        )),
        IssuerView::Missing => Step::WaitForIssuer {
            event: WaitReason::IssuerNotFound,
            message: format!("{kind} {issuer_name:?} not found; waiting for it to be created"),
        },
        IssuerView::Unchecked => not_ready(format!("{kind} {issuer_name:?} has not been checked yet")),
        IssuerView::NotReady { reason, message } => not_ready(format!(
            "{kind} {issuer_name:?} is not ready ({reason}): {message}"
        )),
        IssuerView::Ready => Step::Sign,
    }
}

/// Ready=True, or Ready=False with reason Failed or Denied: cert-manager makes a new request.
pub fn is_terminal(request: &RequestView) -> bool {
    match &request.ready {
        Some((status, reason)) => {
            status == "True" || (status == "False" && matches!(reason.as_str(), "Failed" | "Denied"))
        }
        None => false,
    }
}

/// What this process holds for one request it signs, by request UID (`Context::unsaved`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signing {
    /// A sign is in flight: no second one starts.
    InFlight,
    /// Signed, and the Issued write has not landed: a retry writes this chain, never signs.
    Unsaved(Chain),
    /// The Issued write landed as `resource_version`; held until the cache shows it, so a
    /// reconcile from a stale cache neither signs again nor applies a status without it.
    Saved { resource_version: Option<String> },
}

/// What [`hold`] makes of a [`Signing`] entry against the object the reconcile sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Nothing held (or the cache already shows the write: the entry can go).
    Nothing,
    InFlight,
    Unsaved,
    Saved,
}

/// Pure: what an entry means for the observed request, and whether it can be dropped (the
/// cache shows our Issued write: the certificate is there, or the object is the one the write
/// returned). Resource versions are opaque, so only equality is used.
pub fn hold(entry: Option<&Signing>, observed_version: Option<&str>, has_certificate: bool) -> (Held, bool) {
    let seen = |written: Option<&str>| has_certificate || (written.is_some() && written == observed_version);
    match entry {
        None => (Held::Nothing, false),
        Some(Signing::InFlight) => (Held::InFlight, false),
        Some(Signing::Unsaved(_)) if seen(None) => (Held::Nothing, true),
        Some(Signing::Unsaved(_)) => (Held::Unsaved, false),
        Some(Signing::Saved { resource_version }) if seen(resource_version.as_deref()) => {
            (Held::Nothing, true)
        }
        Some(Signing::Saved { .. }) => (Held::Saved, false),
    }
}

/// Pure: the step after [`decide`], given what this process holds. A request is never sent to
/// the CA twice, and no status that lacks the certificate is applied to a request that has one
/// (server-side apply would remove it) or whose Issued write may not be in the cache yet.
pub fn guard(step: Step, has_certificate: bool, held: Held) -> Step {
    match (held, step) {
        (_, Step::Leave) => Step::Leave,
        // The sign in flight writes its outcome; that write brings the request back.
        (Held::InFlight, _) => Step::Leave,
        // The Issued write landed; the cache catches up and brings the request back.
        (Held::Saved, _) => Step::Leave,
        (Held::Unsaved, _) => Step::ConfirmIssued,
        (Held::Nothing, _) if has_certificate => Step::ConfirmIssued,
        (Held::Nothing, step) => step,
    }
}

/// What a signing attempt leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Issued(Chain),
    /// Terminal: Ready=False/Failed with a failure time.
    Failed(String),
    /// Ready=False/Pending; try again after the request's backoff.
    Retry(String),
    /// The issuer is misconfigured: Pending, and the issuer is re-checked at once. The issuer's
    /// watch brings the request back when it is Ready again.
    IssuerFault {
        message: String,
        reason: ReadyReason,
    },
}

/// Contract step 6: classifies a signing result. A retryable error `max_retry` or more after the
/// request's first failed sign (`first_failure`; `None` when this is the first) becomes a
/// failure, so cert-manager's own back-off takes over. The window starts at the first failure,
/// not at creation: time spent waiting for approval or for the issuer does not count. The
/// first failure is remembered in memory only (see `controllers::memory`): a restart restarts
/// the window, which gives a request more time, never less.
pub fn outcome(
    result: Result<Chain, &CfsslError>,
    first_failure: Option<Timestamp>,
    now: Timestamp,
    max_retry: Duration,
) -> Outcome {
    let err = match result {
        Ok(chain) => return Outcome::Issued(chain),
        Err(err) => err,
    };
    match err.class() {
        // Refused here, before any CA call: the CA never saw it.
        Class::Permanent if matches!(err, CfsslError::Csr(_)) => {
            Outcome::Failed(format!("the request cannot be signed: {err}"))
        }
        Class::Permanent => Outcome::Failed(format!("the CA will not sign this request: {err}")),
        Class::Issuer(_) => Outcome::IssuerFault {
            message: format!("the issuer is misconfigured: {err}"),
            reason: crate::controllers::issuer::decide::reason_for(err),
        },
        Class::Retryable if retried_too_long(first_failure.unwrap_or(now), now, max_retry) => {
            Outcome::Failed(format!(
                "gave up after retrying for {}: {err}",
                humantime(max_retry)
            ))
        }
        Class::Retryable => Outcome::Retry(format!("signing failed, will retry: {err}")),
    }
}

fn retried_too_long(since: Timestamp, now: Timestamp, max_retry: Duration) -> bool {
    let max = k8s_openapi::jiff::SignedDuration::try_from(max_retry)
        .unwrap_or(k8s_openapi::jiff::SignedDuration::MAX);
    now.duration_since(since) >= max
}

fn humantime(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        s if s % 3600 == 0 && s > 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 && s > 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfssl::{Call, IssuerFault};
    use crate::pki::CsrError;

    fn request(ready: Option<(&str, &str)>, approved: bool, denied: bool) -> RequestView {
        RequestView {
            ready: ready.map(|(s, r)| (s.to_string(), r.to_string())),
            approved,
            denied,
            invalid_request: false,
            has_certificate: false,
        }
    }

    fn not_ready() -> IssuerView {
        IssuerView::NotReady {
            reason: "InvalidCredentials".into(),
            message: "invalid token".into(),
        }
    }

    fn waits(event: WaitReason) -> impl Fn(&Step) -> bool {
        move |s| matches!(s, Step::WaitForIssuer { event: e, .. } if *e == event)
    }

    #[test]
    fn contract_table() {
        let approved = request(None, true, false);
        let pending = request(Some(("False", "Pending")), true, false);
        let signed_unsaved = RequestView {
            has_certificate: true,
            ..approved.clone()
        };
        let invalid = RequestView {
            invalid_request: true,
            ..approved.clone()
        };
        type Want = Box<dyn Fn(&Step) -> bool>;
        // (row, request, issuer, approval required, want)
        let cases: Vec<(&str, RequestView, IssuerView, bool, Want)> = vec![
            (
                "ready is terminal",
                request(Some(("True", "Issued")), true, false),
                IssuerView::Ready,
                true,
                Box::new(|s| *s == Step::Leave),
            ),
            (
                "failed is terminal",
                request(Some(("False", "Failed")), true, false),
                IssuerView::Ready,
                true,
                Box::new(|s| *s == Step::Leave),
            ),
            (
                "denied reason is terminal",
                request(Some(("False", "Denied")), false, true),
                IssuerView::Ready,
                true,
                Box::new(|s| *s == Step::Leave),
            ),
            (
                "denied condition is honoured",
                request(None, false, true),
                IssuerView::Ready,
                true,
                Box::new(|s| *s == Step::Deny),
            ),
            (
                "denied while pending",
                request(Some(("False", "Pending")), false, true),
                IssuerView::Ready,
                true,
                Box::new(|s| *s == Step::Deny),
            ),
            (
                "unapproved waits without a write",
                request(None, false, false),
                IssuerView::Ready,
                true,
                Box::new(|s| *s == Step::WaitForApproval),
            ),
            (
                "unapproved with the issuer missing still waits for approval first",
                request(None, false, false),
                IssuerView::Missing,
                true,
                Box::new(|s| *s == Step::WaitForApproval),
            ),
            (
                "unapproved but terminal is left alone",
                request(Some(("False", "Failed")), false, false),
                IssuerView::Ready,
                true,
                Box::new(|s| *s == Step::Leave),
            ),
            (
                "approval check disabled",
                request(None, false, false),
                IssuerView::Ready,
                false,
                Box::new(|s| *s == Step::Sign),
            ),
            (
                "marked invalid by someone else",
                invalid,
                IssuerView::Ready,
                true,
                Box::new(|s| *s == Step::Leave),
            ),
            (
                "approved and issuer ready signs",
                approved.clone(),
                IssuerView::Ready,
                true,
                Box::new(|s| *s == Step::Sign),
            ),
            (
                "pending retry signs again",
                pending.clone(),
                IssuerView::Ready,
                true,
                Box::new(|s| *s == Step::Sign),
            ),
            (
                "issuer missing",
                approved.clone(),
                IssuerView::Missing,
                true,
                Box::new(waits(WaitReason::IssuerNotFound)),
            ),
            (
                "issuer unchecked or stale",
                approved.clone(),
                IssuerView::Unchecked,
                true,
                Box::new(waits(WaitReason::IssuerNotReady)),
            ),
            (
                "issuer not ready",
                approved.clone(),
                not_ready(),
                true,
                Box::new(waits(WaitReason::IssuerNotReady)),
            ),
            (
                "unknown kind of our group",
                approved.clone(),
                IssuerView::UnknownKind("Foo".into()),
                true,
                Box::new(|s| matches!(s, Step::Reject(m) if m.contains("Foo"))),
            ),
            (
                "signed before: never twice",
                signed_unsaved,
                IssuerView::Ready,
                true,
                Box::new(|s| *s == Step::ConfirmIssued),
            ),
        ];
        for (row, req, issuer, approval, want) in cases {
            let got = decide(&req, &issuer, "ca", IssuerKind::Issuer, approval);
            assert!(want(&got), "{row}: got {got:?}");
        }
    }

    #[test]
    fn hold_table() {
        let chain = Chain {
            certificates: "leaf".into(),
            ca: None,
        };
        let unsaved = Signing::Unsaved(chain);
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
                (Held::Unsaved, false),
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
            ("plain sign", Step::Sign, false, Held::Nothing, Step::Sign),
            ("plain wait", wait.clone(), false, Held::Nothing, wait.clone()),
            ("plain deny", Step::Deny, false, Held::Nothing, Step::Deny),
            ("leave stays leave", Step::Leave, true, Held::Unsaved, Step::Leave),
            (
                "sign in flight: no second sign",
                Step::Sign,
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
                Step::Sign,
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
                Step::Sign,
                false,
                Held::Unsaved,
                Step::ConfirmIssued,
            ),
            (
                "write lost, issuer not ready: still the chain",
                wait.clone(),
                false,
                Held::Unsaved,
                Step::ConfirmIssued,
            ),
            (
                "write lost, denied since: still the chain",
                Step::Deny,
                false,
                Held::Unsaved,
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
            assert_eq!(guard(step, has_certificate, held), want, "{row}");
        }
    }

    #[test]
    fn waiting_message_names_the_issuer_and_why() {
        let step = decide(
            &request(None, true, false),
            &not_ready(),
            "ca1",
            IssuerKind::ClusterIssuer,
            true,
        );
        let Step::WaitForIssuer { message, .. } = step else {
            panic!("{step:?}")
        };
        assert!(
            message.contains("ClusterIssuer") && message.contains("ca1"),
            "{message}"
        );
        assert!(
            message.contains("InvalidCredentials") && message.contains("invalid token"),
            "{message}"
        );
    }

    fn refused(message: &str, class: Class) -> CfsslError {
        CfsslError::Refused {
            call: Call::AuthSign,
            url: "http://ca".into(),
            label: "l".into(),
            status: 400,
            code: 1,
            message: message.into(),
            class,
        }
    }

    #[test]
    fn outcome_table() {
        let created: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let soon: Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        let late: Timestamp = "2026-01-01T00:05:00Z".parse().unwrap();
        let max = Duration::from_secs(300);
        let down = CfsslError::Unreachable {
            call: Call::AuthSign,
            url: "http://ca".into(),
            label: "l".into(),
            detail: "connection refused".into(),
        };
        let refused_csr = refused("bad request", Class::Permanent);
        let wrong_key = refused("invalid token", Class::Issuer(IssuerFault::Credentials));
        let chain = Chain {
            certificates: "leaf".into(),
            ca: None,
        };
        type Want = fn(&Outcome) -> bool;
        let cases: Vec<(&str, Result<Chain, &CfsslError>, Timestamp, Want)> = vec![
            ("signed", Ok(chain.clone()), soon, |o| {
                matches!(o, Outcome::Issued(_))
            }),
            ("CA refused the CSR", Err(&refused_csr), soon, |o| {
                matches!(o, Outcome::Failed(_))
            }),
            ("wrong key blames the issuer", Err(&wrong_key), soon, |o| {
                matches!(
                    o,
                    Outcome::IssuerFault {
                        reason: ReadyReason::InvalidCredentials,
                        ..
                    }
                )
            }),
            ("CA down: retry", Err(&down), soon, |o| {
                matches!(o, Outcome::Retry(_))
            }),
            (
                "CA down too long: fail",
                Err(&down),
                late,
                |o| matches!(o, Outcome::Failed(m) if m.contains("5m")),
            ),
        ];
        for (row, result, now, want) in cases {
            let got = outcome(result, Some(created), now, max);
            assert!(want(&got), "{row}: got {got:?}");
        }
        let bad_csr = CfsslError::Csr(CsrError::NotPem("x".into()));
        assert_eq!(
            outcome(Err(&bad_csr), Some(created), soon, max),
            Outcome::Failed("the request cannot be signed: the CSR is not PEM: x".into()),
            "garbage CSR is permanent, and the message does not blame the CA"
        );
    }

    #[test]
    fn retry_window_starts_at_the_first_failed_sign() {
        let at = |s: &str| -> Timestamp { s.parse().unwrap() };
        let down = CfsslError::Unreachable {
            call: Call::AuthSign,
            url: "http://ca".into(),
            label: "l".into(),
            detail: "connection refused".into(),
        };
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
}
