//! Issuer and ClusterIssuer reconciler, one code path for both kinds: read the credential
//! Secret, check the CA (info + credential probe), keep `Ready` and Events current, look again
//! at the health-check interval or, while failing, with per-issuer backoff.

pub mod decide;
pub mod watch;
mod wiring;

use std::convert::Infallible;
use std::sync::Arc;

use kube::runtime::controller::Action;

use self::decide::{Observation, Verdict};
use self::watch::Generations;
pub use self::wiring::controller;
use super::kit::backoff::{self, Backoff};
use super::kit::events::Events;
use super::kit::plan::{self, Next, Plan, Target};
use super::kit::shares::SHARE_REQUEUE;
use super::kit::status::FieldManager;
use super::kit::status::schema::{self as status_schema, ObservedGeneration};
use super::kit::{Error, Shared};
use super::signing::IssuerName;
use super::signing::signer::{self, Signer};
use crate::api::{AnyIssuer, IssuerKind};
use crate::cfssl::Call;
use crate::telemetry::metrics::Controller;

/// What the issuer controllers work with.
pub struct IssuerContext {
    pub shared: Arc<Shared>,
    pub signer: Arc<Signer>,
    /// By [`signer::key`], while checks keep failing.
    pub backoff: Backoff<String>,
    /// The spec generation each issuer was last passed on at.
    pub generations: Arc<Generations>,
    /// Aggregated: a check that keeps failing the same way becomes a series.
    events: Events,
}

impl IssuerContext {
    pub fn new(shared: Arc<Shared>, signer: Arc<Signer>) -> Self {
        IssuerContext {
            events: Events::aggregated(shared.client.clone()),
            shared,
            signer,
            backoff: backoff::per_object(),
            generations: Arc::default(),
        }
    }
}

pub async fn reconcile<K: AnyIssuer>(issuer: Arc<K>, ctx: Arc<IssuerContext>) -> Result<Action, Error> {
    let key = signer::key(&*issuer);
    let shared = &ctx.shared;
    shared.metrics.reconciled(controller_of::<K>());
    let verdict = {
        let tenant = signer::tenant(&IssuerName::of(&*issuer));
        let Some(_slot) = ctx.signer.checks.enter(&tenant) else {
            tracing::debug!(issuer = %key, "its tenant's share of health checks is in use; later");
            return Ok(Action::requeue(SHARE_REQUEUE));
        };
        check(&*issuer, &ctx.signer).await
    };
    shared.metrics.set_issuer_ready(&key, verdict.ready);
    tracing::debug!(issuer = %key, ready = verdict.ready, reason = verdict.reason.as_str(), "checked");
    let schema = shared.status_schemas.get(K::KIND);
    let plan = decide::plan(
        &*issuer,
        &verdict,
        schema,
        shared.now(),
        shared.config.health_check_interval,
    );
    let next = act(&*issuer, plan, &ctx).await?;
    if let Next::After(_) = next {
        ctx.backoff.reset(&key);
    }
    Ok(plan::requeue(&next, || ctx.backoff.next(key)))
}

pub fn error_policy<K: AnyIssuer>(issuer: Arc<K>, err: &Error, ctx: Arc<IssuerContext>) -> Action {
    let key = signer::key(&*issuer);
    ctx.shared.metrics.reconcile_failed(controller_of::<K>());
    tracing::warn!(issuer = %key, error = %err, "issuer reconcile failed");
    Action::requeue(ctx.backoff.next(key))
}

/// Observe: the Secret, then the CA.
async fn check<K: AnyIssuer>(issuer: &K, signer: &Signer) -> Verdict {
    let credentials = match signer.credentials(issuer).await {
        Ok(c) => c,
        Err(problem) => return decide::verdict(Observation::Secret(&problem)),
    };
    let additional_data = credentials.key.has_additional_data();
    match signer.client(issuer, credentials) {
        Err(err) => decide::verdict(Observation::Client(&err)),
        Ok(client) => {
            let check = signer.within_deadline(&client, Call::Info, client.check());
            let result = signer.timed(issuer, "check", check).await;
            let verdict = decide::verdict(Observation::Check(result.as_ref().map(|_| ())));
            let verdict = decide::additional_data(verdict, additional_data);
            decide::transport(verdict, &client.endpoints().plaintext())
        }
    }
}

/// Act: the plan's writes. A refusal of `observedGeneration` teaches the schema knowledge
/// (a CRD swapped for the Go one behind an unreadable CRD).
async fn act<K: AnyIssuer>(
    issuer: &K,
    plan: Plan<Infallible>,
    ctx: &IssuerContext,
) -> Result<Next<Infallible>, Error> {
    let target = Target {
        client: &ctx.shared.client,
        object: issuer,
        manager: field_manager::<K>(),
        events: &ctx.events,
    };
    let result = plan::execute(target, plan).await;
    if let Err(Error::WriteStatus { source, .. }) = &result
        && status_schema::refuses_observed_generation(source)
        && ctx
            .shared
            .status_schemas
            .set(K::KIND, ObservedGeneration::NotDeclared)
    {
        tracing::warn!(issuer = %signer::key(issuer), "the installed CRD has no observedGeneration; no longer writing it");
    }
    result.map(|(_, next)| next)
}

/// Each kind's controller applies under its own field manager.
pub fn field_manager<K: AnyIssuer>() -> FieldManager {
    match K::KIND {
        IssuerKind::Issuer => FieldManager::ISSUER,
        IssuerKind::ClusterIssuer => FieldManager::CLUSTER_ISSUER,
    }
}

fn controller_of<K: AnyIssuer>() -> Controller {
    match K::KIND {
        IssuerKind::Issuer => Controller::Issuer,
        IssuerKind::ClusterIssuer => Controller::ClusterIssuer,
    }
}
