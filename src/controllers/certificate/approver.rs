//! The approver: in standalone mode no cert-manager approver runs, so the requests the
//! request manager creates for our issuers are approved here, under a field manager of their
//! own (the request controller's applies of `Ready` never remove `Approved`).
//!
//! It approves only what the request manager made: a request controlled by one of our
//! Certificates, for its next revision, whose CSR matches the Certificate's spec and carries
//! its next private key. A controller owner reference is no proof: anyone who may create a
//! request can point one at someone else's Certificate (its UID is readable). Anything else is
//! left unapproved, never denied: another approver (approver-policy) may still act on it, and a
//! denial is final. A request that claims a Certificate but fails the check gets one Warning
//! Event saying why.
//!
//! A request that claims no Certificate but looks like the CSI plugin's (a Pod owner, csi-lib's
//! labels) is judged by [`volume`], on the live Pod it names.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use serde_json::{Value, json};

use super::observe::{self, controlled_by, is_ours, next_revision, revision_of};
use super::{CertificateContext, Error};
use crate::api::ConditionStatus;
use crate::api::certmanager::{
    APPROVED, Certificate, CertificateRequest, CertificateRequestCondition, DENIED, ISSUING,
};
use crate::certificates::matching::{request_has_key, request_matches_spec};
use crate::controllers::kit::events::Notice;
use crate::controllers::kit::plan::{self, Next, Plan, Target, requeue};
use crate::controllers::kit::status::{self, FieldManager};
use crate::pki::keys::Key;

pub mod volume;

/// The reason and message of the approval.
pub const REASON: &str = "cfssl-issuer.wikimedia.org";
pub const MESSAGE: &str = "Certificate request has been approved by cfssl-issuer (standalone mode)";

/// What the approver makes of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The Certificate's own next request: approve it.
    Approve,
    /// Decided already (finished, as a summary), or claims none of our Certificates: not ours
    /// to judge.
    NotOurs,
    /// It claims a Certificate the caches do not show in full yet (right after a start): look
    /// again after the back-off.
    NotSeenYet,
    /// It claims one of our Certificates but is not its next request: why.
    NotGenuine(String),
}

/// Whether `cr` is `owner`'s next request, made from the key `next_key` gives (the key the
/// trusted next-key Secret of the derived name holds): called, and so the key decoded, only
/// once every other check passed.
pub fn verdict(
    cr: &CertificateRequest,
    owner: Option<&Certificate>,
    next_key: impl FnOnce() -> Option<Key>,
) -> Verdict {
    // A summary is a finished request as the cache keeps it, conditions and CSR left out.
    if cr.is_summary() || cr.condition(APPROVED).is_some() || cr.condition(DENIED).is_some() {
        return Verdict::NotOurs;
    }
    let Some(owner) = owner else {
        return if controller_name(cr).is_some() && cr.spec.issuer_ref.group == crate::api::GROUP {
            Verdict::NotSeenYet
        } else {
            Verdict::NotOurs
        };
    };
    if !is_ours(owner) || !controlled_by(&cr.metadata, owner) {
        return Verdict::NotOurs;
    }
    let next = next_revision(owner);
    let not = |why: String| Verdict::NotGenuine(format!("{why}: not approved by cfssl-issuer"));
    match revision_of(cr) {
        Some(revision) if revision == next => {}
        Some(revision) => return not(format!("it is for revision {revision}, the next is {next}")),
        None => return not("it carries no revision annotation".into()),
    }
    match request_matches_spec(cr, &owner.spec) {
        Ok(differ) if differ.is_empty() => {}
        Ok(differ) => {
            return not(format!(
                "its fields differ from the Certificate's: {}",
                differ.join(", ")
            ));
        }
        Err(err) => return not(format!("its CSR cannot be read: {err}")),
    }
    match next_key() {
        None if !owner.has_true(ISSUING) => not("its Certificate is not issuing".into()),
        None => Verdict::NotSeenYet,
        Some(key) if request_has_key(cr, &key) => Verdict::Approve,
        Some(_) => not("its CSR is not signed by the Certificate's next private key".into()),
    }
}

/// The approver's plan for a verdict.
pub fn decide(cr: &CertificateRequest, verdict: Verdict, now: Timestamp) -> Plan<()> {
    match verdict {
        // cert-manager's approver records a Normal Event with the condition's reason and
        // message once the approval is written.
        Verdict::Approve => Plan {
            status: Some(approval(now)),
            event: Some(Notice::normal(REASON, "Approve", MESSAGE)),
            next: Next::AwaitChange,
        },
        Verdict::NotOurs => Plan::idle(Next::AwaitChange),
        Verdict::NotSeenYet => Plan::idle(Next::Backoff),
        Verdict::NotGenuine(why) => {
            let owner = controller_name(cr).unwrap_or_default();
            let note = format!("Not the next request of Certificate {owner:?} ({why})");
            Plan {
                status: None,
                event: Some(Notice::warning("NotApproved", "Approve", &note)),
                next: Next::AwaitChange,
            }
        }
    }
}

/// The status apply approving a request.
fn approval(now: Timestamp) -> Value {
    let approved = CertificateRequestCondition {
        type_: APPROVED.to_string(),
        status: ConditionStatus::True.as_str().to_string(),
        reason: REASON.to_string(),
        message: MESSAGE.to_string(),
        last_transition_time: Some(Time(now)),
        ..CertificateRequestCondition::default()
    };
    status::document::<CertificateRequest>(json!({ "conditions": [approved] }))
}

/// The name of the Certificate `cr`'s controller owner reference names.
fn controller_name(cr: &CertificateRequest) -> Option<&str> {
    cr.owner_references()
        .iter()
        .find(|r| r.controller == Some(true) && r.kind == "Certificate")
        .map(|r| r.name.as_str())
}

/// The Certificate controlling `cr`, from the cache.
fn owner(ctx: &CertificateContext, cr: &CertificateRequest) -> Option<Arc<Certificate>> {
    let name = controller_name(cr)?;
    ctx.certificates
        .get(&ObjectRef::new(name).within(&cr.namespace().unwrap_or_default()))
}

pub async fn reconcile(cr: Arc<CertificateRequest>, ctx: Arc<CertificateContext>) -> Result<Action, Error> {
    if controller_name(&cr).is_none() && volume::claims(&cr) {
        return reconcile_volume(cr, ctx).await;
    }
    let owner = owner(&ctx, &cr);
    let key = format!("approver/{}", cr.uid().unwrap_or_default());
    let next_key = || owner.as_deref().and_then(|crt| observe::next_key(&ctx, crt).1);
    let verdict = verdict(&cr, owner.as_deref(), next_key);
    let plan = decide(&cr, verdict, ctx.shared.now());
    let target = Target {
        client: &ctx.shared.client,
        object: &*cr,
        manager: FieldManager::APPROVER,
        events: &ctx.events,
    };
    let (_, next) = plan::execute(target, plan).await?;
    if next == Next::Backoff {
        return Ok(ctx.retry(key).into());
    }
    ctx.settled(&key);
    Ok(requeue(&next, || std::time::Duration::from_secs(1)))
}

/// A request that looks like the CSI plugin's, judged on the Pod it names, read live: a
/// cached Pod could be one deleted (and its UID's volumes gone) since, and a watch of every
/// Pod would cost the manager far more than one GET per such request. A failed read is the
/// reconcile's error, retried with the back-off.
async fn reconcile_volume(
    cr: Arc<CertificateRequest>,
    ctx: Arc<CertificateContext>,
) -> Result<Action, Error> {
    let pod = match volume::pod_name(&cr) {
        Some(name) => {
            let namespace = cr.namespace().unwrap_or_default();
            Api::<Pod>::namespaced(ctx.shared.client.clone(), &namespace)
                .get_opt(name)
                .await
                .map_err(Error::api("reading", format!("Pod {namespace}/{name}")))?
        }
        None => None,
    };
    let uid = cr.uid().unwrap_or_default();
    let verdict = volume::verdict(&cr, pod.as_ref());
    let told = verdict.as_ref().err().map(volume::note);
    let said = ctx.volume_notes.get(&uid);
    let plan = volume::decide(verdict, said.as_deref(), ctx.shared.now());
    let target = Target {
        client: &ctx.shared.client,
        object: &*cr,
        manager: FieldManager::APPROVER,
        events: &ctx.events,
    };
    let (_, next) = plan::execute(target, plan).await?;
    if let Some(note) = told {
        ctx.volume_notes.set(&uid, note);
    }
    ctx.settled(&format!("approver/{uid}"));
    Ok(requeue(&next, || std::time::Duration::from_secs(1)))
}

pub fn error_policy(cr: Arc<CertificateRequest>, err: &Error, ctx: Arc<CertificateContext>) -> Action {
    tracing::warn!(request = %crate::controllers::kit::plan::describe(&*cr), error = %err, "approval failed");
    ctx.retry(format!("approver/{}", cr.uid().unwrap_or_default()))
        .into()
}

#[cfg(test)]
mod tests;
