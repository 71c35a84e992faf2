//! CertificateRequest reconciler: the cert-manager external issuer contract. Only requests for
//! our group are touched; approval is awaited, denial honoured, and each request is signed at
//! most once.
//!
//! Observe ([`observe`]), decide ([`decide`] for the contract's step, [`plan`] for the exact
//! writes), act ([`crate::controllers::plan::execute`], with [`signing`] as the one piece of
//! work that needs the CA).

pub mod decide;
pub mod observe;
pub mod plan;
pub mod signing;
mod wiring;

use std::sync::Arc;

use kube::ResourceExt;
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use tokio::sync::mpsc;

pub use self::observe::{request_key, request_view};
use self::plan::{Decision, Memo, Waiting, Work};
pub use self::signing::{Signings, expiry_labels};
pub use self::wiring::controller;
use super::context::Shared;
use super::events::Events;
use super::kept::Kept;
use super::memory::ExpiryOwners;
use super::plan::{self as plans, Next, Target};
use super::signer::Signer;
use super::status::FieldManager;
use super::{Error, Recheck};
use crate::api::certmanager::CertificateRequest;
use crate::api::{ClusterIssuer, Issuer, IssuerKind};
use crate::telemetry::metrics::Controller;

/// What the request controller works with.
pub struct RequestContext {
    pub shared: Arc<Shared>,
    pub signer: Arc<Signer>,
    pub issuers: Store<Issuer>,
    pub cluster_issuers: Store<ClusterIssuer>,
    /// Backoff, sign, retry window and approval notice, by request UID.
    pub kept: Kept,
    /// The request each expiry series stands for.
    pub expiry: ExpiryOwners,
    /// Asks the issuer controllers to check an issuer again now.
    pub recheck: mpsc::UnboundedSender<Recheck>,
    events: Events,
}

impl RequestContext {
    pub fn new(
        shared: Arc<Shared>,
        signer: Arc<Signer>,
        (issuers, cluster_issuers): (Store<Issuer>, Store<ClusterIssuer>),
        recheck: mpsc::UnboundedSender<Recheck>,
    ) -> Self {
        RequestContext {
            events: Events::per_event(shared.client.clone(), shared.clock.clone()),
            kept: Kept::new(shared.metrics.signed_unsaved.clone()),
            shared,
            signer,
            issuers,
            cluster_issuers,
            expiry: ExpiryOwners::default(),
            recheck,
        }
    }
}

pub async fn reconcile(cr: Arc<CertificateRequest>, ctx: Arc<RequestContext>) -> Result<Action, Error> {
    ctx.shared.metrics.reconciled(Controller::CertificateRequest);
    // Contract step 1: never touch requests for other issuers.
    let Some(issuer) = observe::issuer_view(&cr, &ctx) else {
        return Ok(Action::await_change());
    };
    let request = request_view(&cr);
    let uid = request_key(&cr);
    let version = cr.metadata.resource_version.as_deref();
    let held = ctx.kept.signings.held(&uid, version, request.has_certificate());
    let step = decide::decide(&request, &issuer, ctx.shared.config.approval_required);
    let step = decide::guard(step, request.has_certificate(), &held);
    tracing::debug!(
        namespace = cr.metadata.namespace.as_deref(),
        version,
        ?step,
        "request reconciled"
    );
    let announced = ctx.kept.memory.is_announced(&uid);
    let decision = plan::for_step(step, &request, &held, announced, ctx.shared.now());
    let decision = match decision.plan.next {
        Next::Work(Work::Sign(kind)) => {
            remember_before(&ctx, &uid, decision.memo);
            match signing::sign(&cr, &uid, kind, &ctx).await {
                Some(outcome) => plan::for_outcome(outcome, kind, &request, ctx.shared.now()),
                None => return Ok(Action::await_change()),
            }
        }
        _ => decision,
    };
    act(&cr, &uid, decision, &ctx).await
}

pub fn error_policy(cr: Arc<CertificateRequest>, err: &Error, ctx: Arc<RequestContext>) -> Action {
    ctx.shared
        .metrics
        .reconcile_failed(Controller::CertificateRequest);
    tracing::warn!(request = %format!("{}/{}", cr.namespace().unwrap_or_default(), cr.name_any()), error = %err, "reconcile failed");
    Action::requeue(ctx.kept.backoff.next(request_key(&cr)))
}

/// Act: memory, writes, then the next move.
async fn act(
    cr: &CertificateRequest,
    uid: &str,
    decision: Decision,
    ctx: &RequestContext,
) -> Result<Action, Error> {
    let Decision { plan, memo } = decision;
    remember_before(ctx, uid, memo);
    let recheck = if let Next::Work(Work::RecheckIssuer(kind)) = plan.next {
        let _ = ctx.recheck.send(recheck_of(cr, kind));
        true
    } else {
        false
    };
    let target = Target {
        client: &ctx.shared.client,
        object: cr,
        manager: FieldManager::CERTIFICATE_REQUEST,
        events: &ctx.events,
    };
    let (written, next) = plans::execute(target, plan).await?;
    ctx.kept.written(uid, memo.hold_written, memo.window, written);
    Ok(ctx.kept.requeue(uid, &next, recheck))
}

/// The memory updates that come before the writes.
fn remember_before(ctx: &RequestContext, uid: &str, memo: Memo) {
    match memo.waiting {
        Waiting::Unchanged => {}
        Waiting::Announced => ctx.kept.memory.announced(uid),
        Waiting::Over => ctx.kept.memory.stopped_waiting(uid),
    }
    ctx.kept.opened(uid, memo.window, ctx.shared.now());
}

/// The issuer of `kind` a request names, to check again.
fn recheck_of(cr: &CertificateRequest, kind: IssuerKind) -> Recheck {
    Recheck {
        kind,
        namespace: match kind {
            IssuerKind::Issuer => cr.namespace(),
            IssuerKind::ClusterIssuer => None,
        },
        name: cr.spec.issuer_ref.name.clone(),
    }
}
