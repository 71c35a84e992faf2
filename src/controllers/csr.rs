//! Kubernetes CertificateSigningRequest reconciler: signs `certificates.k8s.io/v1` CSRs whose
//! `signerName` names one of our issuers, once approved, on the same CFSSL path as
//! CertificateRequests, at most once each.
//!
//! Observe ([`observe`]), decide ([`decide`] for the step, [`plan`] for the exact writes), act
//! ([`crate::controllers::plan::execute`]; the SubjectAccessReview and the sign are the two
//! pieces of work that leave the process).

pub mod decide;
pub mod observe;
pub mod plan;
pub mod signer_name;
mod wiring;

use std::sync::Arc;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use tokio::sync::mpsc;

use self::decide::{Access, CsrView, IssuerReadiness};
use self::plan::{Decision, Work};
use self::signer_name::SignerRef;
pub use self::wiring::controller;
use super::certificaterequest::decide::Outcome;
use super::context::Shared;
use super::events::Events;
use super::kept::Kept;
use super::plan::{self as plans, Next, Target};
use super::signer::Signer;
use super::status::FieldManager;
use super::watches::Relist;
use super::{Error, Recheck};
use crate::api::{AnyIssuer, ClusterIssuer, Issuer};
use crate::telemetry::metrics::Controller;

/// What the CSR controller works with.
pub struct CsrContext {
    pub shared: Arc<Shared>,
    pub signer: Arc<Signer>,
    pub issuers: Store<Issuer>,
    pub cluster_issuers: Store<ClusterIssuer>,
    /// Whether `issuers.<group>/<namespace>.<name>` signer names are ours.
    pub namespaced: bool,
    /// Backoff, sign and retry window, by CSR UID.
    pub kept: Kept,
    pub recheck: mpsc::UnboundedSender<Recheck>,
    events: Events,
}

impl CsrContext {
    pub fn new(
        shared: Arc<Shared>,
        signer: Arc<Signer>,
        (issuers, cluster_issuers): (Store<Issuer>, Store<ClusterIssuer>),
        recheck: mpsc::UnboundedSender<Recheck>,
    ) -> Self {
        CsrContext {
            events: Events::per_event(shared.client.clone(), shared.clock.clone()),
            kept: Kept::new(shared.metrics.signed_unsaved.clone()),
            namespaced: shared.config.kubernetes_csr.is_some_and(|c| c.namespaced_signers),
            shared,
            signer,
            issuers,
            cluster_issuers,
            recheck,
        }
    }

    /// Follows one event of the CSR watch (ours only): forgets a deleted CSR and, at the end
    /// of a relist, every CSR it did not bring (deleted while the watch was away).
    pub fn follow(&self, event: &watcher::Event<CertificateSigningRequest>, relist: &mut Relist) {
        if let watcher::Event::Delete(csr) = event {
            self.kept.forget(&key(csr));
        }
        if let Some(live) = relist.observe(event, |csr| Some(key(csr))) {
            self.kept.retain(&live);
        }
    }

    /// The issuer a CSR names, when it is ours.
    pub fn signer_of(&self, csr: &CertificateSigningRequest) -> Option<SignerRef> {
        SignerRef::parse(&csr.spec.signer_name, self.namespaced)
    }
}

/// One CSR as the reconcile sees it.
struct Seen<'a> {
    csr: &'a CertificateSigningRequest,
    uid: String,
    signer: SignerRef,
    view: CsrView,
}

pub async fn reconcile(csr: Arc<CertificateSigningRequest>, ctx: Arc<CsrContext>) -> Result<Action, Error> {
    ctx.shared
        .metrics
        .reconciled(Controller::CertificateSigningRequest);
    let Some(signer) = ctx.signer_of(&csr) else {
        return Ok(Action::await_change());
    };
    let seen = Seen {
        csr: &csr,
        uid: key(&csr),
        view: observe::csr_view(&csr),
        signer,
    };
    let version = csr.metadata.resource_version.as_deref();
    let held = ctx
        .kept
        .signings
        .held(&seen.uid, version, seen.view.has_certificate);
    let issuer = observe::issuer_readiness(&seen.signer, &ctx);
    let access = Access::for_signer(&seen.signer);
    let mut decision = decided(&seen, &issuer, &access, &held, &ctx);
    if decision.plan.next == Next::Work(Work::Review) {
        decision = match observe::access(&ctx.shared.client, &csr, &seen.signer).await {
            Ok(access) => decided(&seen, &issuer, &access, &held, &ctx),
            Err(err) => plan::review_failed(&super::signer::credentials::describe(&err)),
        };
    }
    tracing::debug!(csr = %csr.name_any(), version, next = ?decision.plan.next, "CSR reconciled");
    if decision.plan.next == Next::Work(Work::Sign) {
        let Some(outcome) = sign(&seen, &ctx).await else {
            return Ok(Action::await_change());
        };
        decision = plan::for_outcome(outcome, ctx.shared.now());
    }
    act(&seen, decision, &ctx).await
}

fn decided(
    seen: &Seen<'_>,
    issuer: &IssuerReadiness,
    access: &Access,
    held: &super::signings::Held,
    ctx: &CsrContext,
) -> Decision {
    let step = decide::decide(&seen.view, &seen.signer, issuer, access);
    plan::for_step(decide::guard(step, held), ctx.shared.now())
}

pub fn error_policy(csr: Arc<CertificateSigningRequest>, err: &Error, ctx: Arc<CsrContext>) -> Action {
    ctx.shared
        .metrics
        .reconcile_failed(Controller::CertificateSigningRequest);
    tracing::warn!(csr = %csr.name_any(), error = %err, "reconcile failed");
    Action::requeue(ctx.kept.backoff.next(key(&csr)))
}

/// Act: memory, writes, then the next move.
async fn act(seen: &Seen<'_>, decision: Decision, ctx: &CsrContext) -> Result<Action, Error> {
    let Decision { plan, memo } = decision;
    let uid = seen.uid.as_str();
    ctx.kept.opened(uid, memo.window, ctx.shared.now());
    let recheck = plan.next == Next::Work(Work::RecheckIssuer);
    if recheck {
        let _ = ctx.recheck.send(recheck_of(&seen.signer));
    }
    let target = Target {
        client: &ctx.shared.client,
        object: seen.csr,
        manager: FieldManager::CERTIFICATE_SIGNING_REQUEST,
        events: &ctx.events,
    };
    let (written, next) = plans::execute(target, plan).await?;
    ctx.kept.written(uid, memo.hold_written, memo.window, written);
    Ok(ctx.kept.requeue(uid, &next, recheck))
}

/// Signs the CSR with the issuer it names, once; `None` when a sign of it is in flight or done.
async fn sign(seen: &Seen<'_>, ctx: &CsrContext) -> Option<Outcome> {
    let flight = ctx.kept.signings.begin(&seen.uid)?;
    let signer = &seen.signer;
    let outcome = match &signer.namespace {
        Some(ns) => {
            let found = ctx.issuers.get(&ObjectRef::new(&signer.name).within(ns));
            sign_with(seen, found.as_deref(), ctx).await
        }
        None => {
            let found = ctx.cluster_issuers.get(&ObjectRef::new(&signer.name));
            sign_with(seen, found.as_deref(), ctx).await
        }
    };
    if let Outcome::Issued(chain) = &outcome {
        flight.signed(chain.clone());
    }
    Some(outcome)
}

/// Signs with `issuer` (from the cache).
async fn sign_with<K: AnyIssuer>(seen: &Seen<'_>, issuer: Option<&K>, ctx: &CsrContext) -> Outcome {
    let Some(issuer) = issuer else {
        return Outcome::Retry(format!("{} disappeared", seen.signer.describe()));
    };
    let first_failure = ctx.kept.memory.first_failure(&seen.uid);
    let (outcome, _) = ctx
        .signer
        .sign(issuer, &seen.csr.spec.request.0, first_failure)
        .await;
    outcome
}

fn recheck_of(signer: &SignerRef) -> Recheck {
    Recheck {
        kind: signer.kind,
        namespace: signer.namespace.clone(),
        name: signer.name.clone(),
    }
}

/// The key of a CSR in backoff and memory: its UID.
pub fn key(csr: &CertificateSigningRequest) -> String {
    csr.uid().unwrap_or_else(|| csr.name_any())
}
