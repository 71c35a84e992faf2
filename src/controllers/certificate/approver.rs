//! The approver: in standalone mode no cert-manager approver runs, so the requests the
//! request manager creates for our issuers are approved here, under a field manager of their
//! own (the request controller's applies of `Ready` never remove `Approved`). Only requests
//! controlled by a Certificate this manager acts on are approved; a request already approved
//! or denied is left alone.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use serde_json::{Value, json};

use super::observe::{controlled_by, is_ours};
use super::{CertificateContext, Error};
use crate::api::ConditionStatus;
use crate::api::certmanager::{
    APPROVED, Certificate, CertificateRequest, CertificateRequestCondition, DENIED,
};
use crate::controllers::kit::plan::{self, Next, Plan, Target, requeue};
use crate::controllers::kit::status::{self, FieldManager};

/// The reason and message of the approval.
pub const REASON: &str = "cfssl-issuer.wikimedia.org";
pub const MESSAGE: &str = "Certificate request has been approved by cfssl-issuer (standalone mode)";

/// The approver's plan: approve `cr` when it is ours to; look again after the back-off when
/// its Certificate is not cached yet ([`owner_not_seen_yet`]).
pub fn decide(cr: &CertificateRequest, owner: Option<&Certificate>, now: Timestamp) -> Plan<()> {
    match approval(cr, owner, now) {
        Some(body) => Plan {
            status: Some(body),
            event: None,
            next: Next::AwaitChange,
        },
        None if owner_not_seen_yet(cr, owner) => Plan::idle(Next::Backoff),
        None => Plan::idle(Next::AwaitChange),
    }
}

/// The status apply approving `cr`, or `None` when it is not ours to approve.
fn approval(cr: &CertificateRequest, owner: Option<&Certificate>, now: Timestamp) -> Option<Value> {
    if cr.condition(APPROVED).is_some() || cr.condition(DENIED).is_some() {
        return None;
    }
    let owner = owner.filter(|crt| is_ours(crt) && controlled_by(&cr.metadata, crt))?;
    if cr.spec.issuer_ref != owner.spec.issuer_ref {
        return None;
    }
    let approved = CertificateRequestCondition {
        type_: APPROVED.to_string(),
        status: ConditionStatus::True.as_str().to_string(),
        reason: REASON.to_string(),
        message: MESSAGE.to_string(),
        last_transition_time: Some(Time(now)),
        ..CertificateRequestCondition::default()
    };
    Some(status::document::<CertificateRequest>(
        json!({ "conditions": [approved] }),
    ))
}

/// The Certificate controlling `cr`, from the cache.
fn owner(ctx: &CertificateContext, cr: &CertificateRequest) -> Option<Arc<Certificate>> {
    let reference = cr
        .owner_references()
        .iter()
        .find(|r| r.controller == Some(true) && r.kind == "Certificate")?;
    ctx.certificates
        .get(&ObjectRef::new(&reference.name).within(&cr.namespace().unwrap_or_default()))
}

/// Whether `cr` waits on a Certificate the cache has not shown yet: a request for our issuers,
/// neither approved nor denied, controlled by a Certificate missing from the store. Right
/// after a start the requests' cache can be ready before the Certificates'; nothing else would
/// bring the request back.
fn owner_not_seen_yet(cr: &CertificateRequest, owner: Option<&Certificate>) -> bool {
    let undecided = cr.condition(APPROVED).is_none() && cr.condition(DENIED).is_none();
    let controlled = cr
        .owner_references()
        .iter()
        .any(|r| r.controller == Some(true) && r.kind == "Certificate");
    owner.is_none() && undecided && controlled && cr.spec.issuer_ref.group == crate::api::GROUP
}

pub async fn reconcile(cr: Arc<CertificateRequest>, ctx: Arc<CertificateContext>) -> Result<Action, Error> {
    let owner = owner(&ctx, &cr);
    let key = format!("approver/{}", cr.uid().unwrap_or_default());
    let plan = decide(&cr, owner.as_deref(), ctx.shared.now());
    let target = Target {
        client: &ctx.shared.client,
        object: &*cr,
        manager: FieldManager::APPROVER,
        events: &ctx.events,
    };
    let (_, next) = plan::execute(target, plan).await?;
    if next == Next::Backoff {
        return Ok(ctx.retry(key));
    }
    ctx.settled(&key);
    Ok(requeue(&next, || std::time::Duration::from_secs(1)))
}

pub fn error_policy(cr: Arc<CertificateRequest>, err: &Error, ctx: Arc<CertificateContext>) -> Action {
    tracing::warn!(request = %crate::controllers::kit::plan::describe(&*cr), error = %err, "approval failed");
    ctx.retry(format!("approver/{}", cr.uid().unwrap_or_default()))
}

#[cfg(test)]
mod tests;
