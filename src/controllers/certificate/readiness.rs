//! Readiness: writes `Ready` (the readiness chain: the trigger's checks, then expiry) with
//! `notBefore`, `notAfter` and `renewalTime` from the Secret's certificate, and looks again
//! at the renewal time and just after `notAfter`, so an expired certificate reads
//! `Ready=False`/`Expired` within a second instead of at the next resync. A spec cert-manager's
//! webhook would refuse (no webhook runs in standalone mode) reads `Ready=False` with why.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Map, Value, json};

use super::status::{Times, condition, document, time, times};
use super::{CertificateContext, Error, execute, log_and_retry, observe};
use crate::api::certmanager::{Certificate, READY};
use crate::certificates::policy::checks::Input;
use crate::certificates::policy::{chains::READINESS, evaluate, reason};
use crate::certificates::renewal::RENEWAL_FLOOR;
use crate::certificates::validation;
use crate::controllers::kit::events::Notice;
use crate::controllers::kit::plan::{Next, Plan, Requeue, requeue_at};
use crate::controllers::kit::status::FieldManager;

const NAME: &str = "readiness";

/// The reason of `Ready=False` for a spec the webhook would refuse.
pub const REASON_INVALID: &str = "InvalidSpec";

/// The reason of the Warning Event when the guard moves a renewal off the issuance.
pub const REASON_RENEWAL_ADJUSTED: &str = "RenewalTimeAdjusted";

/// Looks again this long after `notAfter`, when the certificate has expired.
const AFTER_EXPIRY: SignedDuration = SignedDuration::from_millis(1000);

/// The readiness plan for `input`.
pub fn decide(input: &Input) -> Plan<()> {
    let crt = &input.certificate;
    let times = times(input);
    let errors = validation::validate(&crt.spec);
    // As cert-manager: a renewal time the windows cannot place overrides the chain's verdict.
    let window_error = times.as_ref().and_then(|t| t.window_error.clone());
    let (ready, why, message) = if !errors.is_empty() {
        (false, REASON_INVALID, validation::message(&errors))
    } else if let Some(err) = &window_error {
        (
            false,
            reason::WINDOW_ERROR,
            format!("Could not calculate renewal time: {err}"),
        )
    } else if let Some((_, violation)) = evaluate(READINESS, input) {
        (false, violation.reason, violation.message)
    } else {
        (
            true,
            "Ready",
            "Certificate is up to date and has not expired".to_string(),
        )
    };
    let condition = condition(crt, READY, ready, why, &message, input.now);
    let mut doc = Map::new();
    doc.insert("conditions".into(), json!([condition]));
    if let Some(t) = &times {
        doc.insert("notBefore".into(), time(t.not_before));
        doc.insert("notAfter".into(), time(t.not_after));
        if let Some(renewal) = t.renewal {
            doc.insert("renewalTime".into(), time(renewal));
        }
    }
    let next = next_look(times.as_ref(), input.now);
    let status = (!already_says(crt, &doc)).then(|| document(Value::Object(doc)));
    // cert-manager records the WindowError Warning on every sync that finds it.
    let event = if why == reason::WINDOW_ERROR {
        Some(Notice::warning(reason::WINDOW_ERROR, "Schedule", &message))
    } else {
        times
            .as_ref()
            .filter(|_| status.is_some())
            .and_then(|t| renewal_adjusted(crt, t))
    };
    Plan { status, event, next }
}

/// The Warning when the guard moved the renewal time and readiness writes the moved time: once
/// per certificate, not on every reconcile.
fn renewal_adjusted(crt: &Certificate, t: &Times) -> Option<Notice> {
    let guarded = t.guarded?;
    let used = t.renewal?;
    let written = crt.status.as_ref().and_then(|s| s.renewal_time.as_ref());
    if written.is_some_and(|w| w.0 == used) {
        return None;
    }
    let note = format!(
        "Renewal time moved from {} to {used}: the computed time is not after the certificate's issuance at {} \
         (its notBefore {} is backdated by the CA and renewBefore covers nearly the whole lifetime), \
         so the certificate would be re-issued in a loop; it renews at two thirds of the validity left at issuance, \
         and at least {}s after it",
        guarded.computed,
        guarded.issued_at,
        t.not_before,
        RENEWAL_FLOOR.as_secs(),
    );
    Some(Notice::warning(REASON_RENEWAL_ADJUSTED, "Schedule", &note))
}

/// The next time readiness can change by itself: the renewal time, or just after expiry.
fn next_look(times: Option<&Times>, now: Timestamp) -> Next<()> {
    let Some(t) = times else {
        return Next::AwaitChange;
    };
    let expiry = t.not_after.checked_add(AFTER_EXPIRY).ok();
    let soonest = [t.renewal, expiry]
        .into_iter()
        .flatten()
        .filter(|at| *at > now)
        .min();
    match soonest.and_then(|at| Duration::try_from(at.duration_since(now)).ok()) {
        Some(wait) => Next::After(wait),
        None => Next::AwaitChange,
    }
}

/// Whether the status already holds `doc` (same condition, same times).
fn already_says(crt: &Certificate, doc: &Map<String, Value>) -> bool {
    let Some(status) = crt.status.as_ref() else {
        return false;
    };
    let Ok(current) = serde_json::to_value(status) else {
        return false;
    };
    let same_condition = doc["conditions"][0] == json!(crt.condition(READY));
    let same = |key: &str| doc.get(key) == current.get(key);
    same_condition && same("notBefore") && same("notAfter") && same("renewalTime")
}

pub async fn reconcile(crt: Arc<Certificate>, ctx: Arc<CertificateContext>) -> Result<Requeue, Error> {
    if !ctx.acts_on(FieldManager::READINESS, &crt) {
        return Ok(Requeue::AWAIT_CHANGE);
    }
    let requests = observe::picked_requests(&ctx, &crt).await?;
    let secret = observe::target_secret(&ctx, &crt).await?;
    if observe::issuing_in_flight(&crt, secret.as_deref(), &requests) {
        return Ok(Requeue::AWAIT_CHANGE);
    }
    let mut input = observe::chain_input(&crt, secret, &requests, ctx.shared.now());
    input.renewal_jitter = ctx.settings.renewal_jitter;
    let plan = decide(&input);
    let next = execute(&ctx, &crt, FieldManager::READINESS, plan).await?;
    ctx.settled(&super::retry_key(NAME, &crt));
    Ok(requeue_at(&next, || Duration::from_secs(1)))
}

pub fn error_policy(crt: Arc<Certificate>, err: &Error, ctx: Arc<CertificateContext>) -> Requeue {
    log_and_retry(NAME, &crt, err, &ctx)
}

#[cfg(test)]
mod tests;
