//! The trigger: decides when a Certificate needs a new certificate and says so with
//! `Issuing=True` (cert-manager's trigger controller). In order: nothing while issuing; only
//! the owner of a shared `secretName` acts (and only for a spec cert-manager's webhook would
//! accept); back-off after failed issuances; then the policy
//! chain (`certificates::policy::chains::TRIGGER`). When nothing is due it looks again at
//! `status.renewalTime`, never in a periodic scan.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::status::{condition, document};
use super::{CertificateContext, Error, execute, log_and_retry, observe};
use crate::api::certmanager::{Certificate, ISSUING};
use crate::certificates::matching::request_matches_spec;
use crate::certificates::policy::checks::{Input, go_time};
use crate::certificates::policy::{chains::TRIGGER, evaluate, reason};
use crate::certificates::renewal::backoff_remaining;
use crate::certificates::validation;
use crate::controllers::kit::events::Notice;
use crate::controllers::kit::plan::{Next, Plan, Requeue, requeue_at};
use crate::controllers::kit::status::FieldManager;

const NAME: &str = "trigger";

/// A Certificate that does not own its shared Secret looks again after this long.
pub const NOT_OWNER_RECHECK: Duration = Duration::from_secs(180);

/// What the trigger decides from.
#[derive(Debug, Clone)]
pub struct Facts {
    pub input: Input,
    /// Whether this Certificate owns `spec.secretName` among those naming it.
    pub owns_secret: bool,
    /// The back-off flags (minimum, maximum).
    pub backoff: (Duration, Duration),
}

/// The trigger's plan: `Issuing=True` with the reason, or when to look again.
pub fn decide(facts: &Facts) -> Plan<()> {
    decide_warned(facts).1
}

/// [`decide`], with the Warning cert-manager records before the status write when the renewal
/// windows could not place the renewal (`WindowError`); the plan's own Event is then the
/// Normal `Issuing` one, as for every other reason.
pub fn decide_warned(facts: &Facts) -> (Option<Notice>, Plan<()>) {
    let crt = &facts.input.certificate;
    let now = facts.input.now;
    // A spec cert-manager's webhook would refuse is never issued; readiness says why.
    if crt.has_true(ISSUING) || !validation::validate(&crt.spec).is_empty() {
        return (None, Plan::idle(Next::AwaitChange));
    }
    if !facts.owns_secret {
        return (None, Plan::idle(Next::After(NOT_OWNER_RECHECK)));
    }
    if let Some(wait) = backing_off(facts) {
        return (None, Plan::idle(Next::After(wait)));
    }
    let scheduled = crt.status.as_ref().and_then(|s| s.renewal_time.as_ref());
    let Some((_, violation)) = evaluate(TRIGGER, &facts.input) else {
        let next = scheduled
            .map(|t| t.0.duration_since(now))
            .and_then(|d| Duration::try_from(d).ok())
            .map_or(Next::AwaitChange, |d| Next::After(d.max(Duration::from_secs(1))));
        return (None, Plan::idle(next));
    };
    let (reason, message, warning) = if violation.reason == reason::WINDOW_ERROR {
        let note = format!(
            "Renewing certificate without satisfying renewal windows due to {}",
            violation.message
        );
        let message = format!(
            "Renewing certificate without satisfying renewal windows at: {}",
            go_time(scheduled)
        );
        (
            reason::RENEWING,
            message,
            Some(Notice::warning(reason::WINDOW_ERROR, "Trigger", &note)),
        )
    } else {
        (violation.reason, violation.message.clone(), None)
    };
    let issuing = condition(crt, ISSUING, true, reason, &message, now);
    let plan = Plan {
        status: Some(document(json!({ "conditions": [issuing] }))),
        event: Some(Notice::normal("Issuing", "Trigger", &message)),
        next: Next::AwaitChange,
    };
    (warning, plan)
}

/// How much longer to wait after failed issuances; none when the next request no longer
/// matches the spec (a changed spec retries at once).
fn backing_off(facts: &Facts) -> Option<Duration> {
    let crt = &facts.input.certificate;
    let status = crt.status.as_ref()?;
    let last_failure = status.last_failure_time.as_ref()?;
    if let Some(next) = &facts.input.next_request {
        match request_matches_spec(next, &crt.spec) {
            Ok(violations) if violations.is_empty() => {}
            _ => return None,
        }
    }
    backoff_remaining(
        last_failure.0,
        facts.input.now,
        status.failed_issuance_attempts,
        facts.backoff,
    )
}

/// Whether `crt` owns its `secretName` among `others` (every Certificate of its namespace):
/// the one the Secret's certificate-name annotation names, else the oldest, then by name.
pub fn owns_secret(crt: &Certificate, others: &[Arc<Certificate>], secret: Option<&Secret>) -> bool {
    let mut sharing: Vec<&Certificate> = others
        .iter()
        .map(AsRef::as_ref)
        .filter(|c| c.namespace() == crt.namespace() && c.spec.secret_name == crt.spec.secret_name)
        .collect();
    if sharing.iter().all(|c| c.name_any() == crt.name_any()) {
        return true;
    }
    sharing.sort_by(|a, b| {
        (a.metadata.creation_timestamp.as_ref(), a.name_any())
            .cmp(&(b.metadata.creation_timestamp.as_ref(), b.name_any()))
    });
    let named = secret
        .and_then(|s| {
            s.annotations()
                .get(crate::certificates::keys::annotation::CERTIFICATE_NAME)
        })
        .filter(|name| sharing.iter().any(|c| &c.name_any() == *name));
    let owner = named.cloned().or_else(|| sharing.first().map(|c| c.name_any()));
    owner.as_deref() == Some(crt.name_any().as_str())
}

pub async fn reconcile(crt: Arc<Certificate>, ctx: Arc<CertificateContext>) -> Result<Requeue, Error> {
    if !ctx.acts_on(FieldManager::TRIGGER, &crt) {
        return Ok(Requeue::AWAIT_CHANGE);
    }
    let requests = observe::picked_requests(&ctx, &crt).await?;
    let secret = observe::target_secret(&ctx, &crt).await?;
    let mut facts = facts(&ctx, &crt, secret, &requests);
    let (mut warning, mut plan) = decide_warned(&facts);
    if plan.status.is_some() {
        // About to issue: decide again on the Secret as the API server has it now, so a cache
        // that has not seen the last issuance's Secret yet cannot start another.
        let live =
            observe::live_secret(&ctx, &crt.namespace().unwrap_or_default(), &crt.spec.secret_name).await?;
        facts = self::facts(&ctx, &crt, live.map(Arc::new), &requests);
        (warning, plan) = decide_warned(&facts);
    }
    if let Some(notice) = &warning {
        ctx.events.publish(notice, &crt.object_ref(&())).await;
    }
    let next = execute(&ctx, &crt, FieldManager::TRIGGER, plan).await?;
    ctx.settled(&super::retry_key(NAME, &crt));
    Ok(requeue_at(&next, || Duration::from_secs(1)))
}

fn facts(
    ctx: &CertificateContext,
    crt: &Arc<Certificate>,
    secret: Option<Arc<Secret>>,
    requests: &[Arc<crate::api::certmanager::CertificateRequest>],
) -> Facts {
    let owns_secret = owns_secret(crt, &observe::naming_secret(ctx, crt), secret.as_deref());
    let mut input = observe::chain_input(crt, secret, requests, ctx.shared.now());
    input.renewal_jitter = ctx.settings.renewal_jitter;
    Facts {
        input,
        owns_secret,
        backoff: (ctx.settings.minimum_backoff, ctx.settings.maximum_backoff),
    }
}

pub fn error_policy(crt: Arc<Certificate>, err: &Error, ctx: Arc<CertificateContext>) -> Requeue {
    log_and_retry(NAME, &crt, err, &ctx)
}

#[cfg(test)]
mod tests;
