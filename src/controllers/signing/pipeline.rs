//! The one sign-and-act pipeline of the signing controllers (CertificateRequests, Kubernetes
//! CSRs), as issuer-lib has one request engine: each controller is a small [`Adapter`] that
//! observes its object and decides (pure, in its own `decide`/`plan`), and this module does the
//! rest the same way for both: what the process holds, at most one sign, the writes, the
//! issuer recheck and the requeue.

use std::future::Future;
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use tokio::sync::mpsc;

use super::budget::{self, Turn, Urgency, Wait};
use super::issuers::{IssuerName, Issuers};
use super::ledger::{Ledger, Memo};
use super::once::Held;
use super::outcome::Outcome;
use super::signer::{Signer, tenant};
use crate::controllers::kit::events::Events;
use crate::controllers::kit::plan::{self, Next, Plan, Target};
use crate::controllers::kit::shares::SHARE_REQUEUE;
use crate::controllers::kit::status::FieldManager;
use crate::controllers::kit::{Error, Shared};
use crate::telemetry::metrics::Controller;

/// The signing controllers' own next moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// Ask the CA through the issuer the object names.
    Sign,
    /// Look further before deciding again (the CSR controller's SubjectAccessReview).
    Review,
    /// The CA blamed the issuer: check it again now, and look at the object again after its
    /// backoff (the issuer's watch brings it back sooner once it is Ready).
    RecheckIssuer,
}

/// A plan plus what the ledger remembers of the object once it is carried out.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub plan: Plan<Work>,
    pub memo: Memo,
}

impl Decision {
    /// Nothing to write or say.
    pub fn idle(next: Next<Work>, memo: Memo) -> Self {
        Decision {
            plan: Plan::idle(next),
            memo,
        }
    }
}

/// An object waiting for its issuer's issuance budget: its place, and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetWait {
    /// For the condition and the Event (see [`budget::message`]).
    pub message: String,
    pub wait: Wait,
}

/// What both signing controllers work with.
pub struct Core {
    pub shared: Arc<Shared>,
    pub signer: Arc<Signer>,
    pub issuers: Issuers,
    /// Backoff, sign, retry window and approval notice, by UID.
    pub ledger: Ledger,
    /// Asks the issuer controllers to check an issuer again now.
    pub recheck: mpsc::UnboundedSender<IssuerName>,
    pub events: Events,
}

impl Core {
    pub fn new(
        shared: Arc<Shared>,
        signer: Arc<Signer>,
        issuers: Issuers,
        recheck: mpsc::UnboundedSender<IssuerName>,
    ) -> Self {
        Core {
            events: Events::per_event(shared.client.clone(), shared.clock.clone()),
            ledger: Ledger::new(shared.metrics.signed_unsaved.clone()),
            shared,
            signer,
            issuers,
            recheck,
        }
    }
}

/// What a controller observed of one of its objects.
pub struct Observed<V> {
    /// The issuer it names; `None` when it names a kind that is not ours.
    pub issuer: Option<IssuerName>,
    pub view: V,
}

/// One object as the pipeline hands it to `decide`: what was observed, plus what the process
/// holds for it.
pub struct Seen<V> {
    pub uid: String,
    pub issuer: Option<IssuerName>,
    pub view: V,
    pub held: Held,
    /// Its wait for approval already had its Event.
    pub announced: bool,
}

/// A signing controller: its object, how it observes and decides; the pipeline does the rest.
pub trait Adapter: Send + Sync + 'static {
    type Object: Resource<DynamicType = ()> + Send + Sync + 'static;
    type View: Send + Sync;
    const MANAGER: FieldManager;
    const CONTROLLER: Controller;

    fn core(&self) -> &Core;
    /// Observe: `None` when the object is not ours (never touched).
    fn observe(&self, object: &Self::Object) -> Option<Observed<Self::View>>;
    /// Whether the object already holds a certificate.
    fn has_certificate(view: &Self::View) -> bool;
    /// The PEM CSR to send to the CA.
    fn request(object: &Self::Object) -> &[u8];
    /// Decide: the whole plan for what was seen.
    fn decide(&self, seen: &Seen<Self::View>, now: Timestamp) -> Decision;
    /// Decide after a sign.
    fn signed(&self, seen: &Seen<Self::View>, outcome: Outcome, now: Timestamp) -> Decision;
    /// [`Work::Review`]: a further look, then the decision; only the CSR controller asks.
    fn review(
        &self,
        object: &Self::Object,
        seen: &Seen<Self::View>,
    ) -> impl Future<Output = Decision> + Send {
        let _ = object;
        let decision = self.decide(seen, self.core().shared.now());
        async move { decision }
    }
    /// The [`budget::RENEW_BY`] the object carries, for its place in its issuer's line; only
    /// controllers whose objects may say it read it.
    fn renew_by(object: &Self::Object) -> Option<Timestamp> {
        let _ = object;
        None
    }
    /// Decide while the object waits for its issuer's issuance budget: say so once
    /// (`waiting.wait.first`) and look again after `waiting.wait.after`.
    fn waits(&self, seen: &Seen<Self::View>, waiting: &BudgetWait, now: Timestamp) -> Decision;
    /// An issued certificate expires at `not_after` (Unix seconds).
    fn expires(&self, object: &Self::Object, issuer: &IssuerName, not_after: i64) {
        let _ = (object, issuer, not_after);
    }
}

/// The key of an object in the ledger: its UID.
pub fn key<K: Resource<DynamicType = ()>>(object: &K) -> String {
    object.uid().unwrap_or_else(|| match object.namespace() {
        Some(ns) => format!("{ns}/{}", object.name_any()),
        None => object.name_any(),
    })
}

pub async fn reconcile<A: Adapter>(object: Arc<A::Object>, ctx: Arc<A>) -> Result<Action, Error> {
    let core = ctx.core();
    core.shared.metrics.reconciled(A::CONTROLLER);
    let Some(observed) = ctx.observe(&object) else {
        return Ok(Action::await_change());
    };
    let seen = see::<A>(core, &object, observed);
    let mut decision = ctx.decide(&seen, core.shared.now());
    if decision.plan.next == Next::Work(Work::Review) {
        decision = ctx.review(&object, &seen).await;
    }
    tracing::debug!(
        object = %plan::describe(&*object),
        version = object.meta().resource_version.as_deref(),
        next = ?decision.plan.next,
        "reconciled"
    );
    if decision.plan.next != Next::Work(Work::Sign)
        && let Some(issuer) = &seen.issuer
    {
        // No longer asking to sign (denied, failed, its issuer not ready): out of the line.
        core.signer.budget.leave(issuer, &seen.uid);
    }
    if decision.plan.next == Next::Work(Work::Sign) {
        decision = match sign_within(&*ctx, &object, &seen, decision.memo).await {
            Ok(decision) => decision,
            Err(requeue) => return Ok(requeue),
        };
    }
    act(&*ctx, &object, &seen, decision).await
}

pub fn error_policy<A: Adapter>(object: Arc<A::Object>, err: &Error, ctx: Arc<A>) -> Action {
    let core = ctx.core();
    core.shared.metrics.reconcile_failed(A::CONTROLLER);
    tracing::warn!(object = %plan::describe(&*object), error = %err, "reconcile failed");
    Action::requeue(core.ledger.backoff.next(key(&*object)))
}

/// Observe what the process holds for the object.
fn see<A: Adapter>(core: &Core, object: &A::Object, observed: Observed<A::View>) -> Seen<A::View> {
    let uid = key(object);
    let version = object.meta().resource_version.as_deref();
    let held = core
        .ledger
        .signings
        .held(&uid, version, A::has_certificate(&observed.view));
    Seen {
        announced: core.ledger.memory.is_announced(&uid),
        uid,
        issuer: observed.issuer,
        view: observed.view,
        held,
    }
}

/// The sign a decision asked for, within the issuer's budget and then the tenant's share: the
/// decision after it (or while it waits for the budget), or the requeue when there is
/// nothing to write. A waiter for the budget holds no share slot; a token whose sign finds no
/// slot free goes back.
async fn sign_within<A: Adapter>(
    ctx: &A,
    object: &A::Object,
    seen: &Seen<A::View>,
    memo: Memo,
) -> Result<Decision, Action> {
    let core = ctx.core();
    let now = core.shared.now();
    if let Some(waiting) = budget_wait::<A>(core, object, seen, now) {
        return Ok(ctx.waits(seen, &waiting, now));
    }
    let tenant = seen.issuer.as_ref().map(tenant).unwrap_or_default();
    let Some(_slot) = core.signer.signs.enter(&tenant) else {
        if let Some(issuer) = &seen.issuer {
            core.signer.budget.refund(issuer, now);
        }
        tracing::debug!(object = %plan::describe(object), %tenant, "its tenant's share of signs is in use; later");
        return Err(Action::requeue(SHARE_REQUEUE));
    };
    core.ledger.before(&seen.uid, memo, now);
    let Some(outcome) = sign(ctx, object, seen).await else {
        return Err(Action::await_change());
    };
    Ok(ctx.signed(seen, outcome, core.shared.now()))
}

/// The object's place in its issuer's line when the budget has no token for it now; `None`
/// when it may sign (a token taken) or there is no budget.
fn budget_wait<A: Adapter>(
    core: &Core,
    object: &A::Object,
    seen: &Seen<A::View>,
    now: Timestamp,
) -> Option<BudgetWait> {
    let issuer = seen.issuer.as_ref()?;
    let settings = core.signer.budget.settings()?;
    let created = object.meta().creation_timestamp.as_ref().map(|t| t.0);
    let who = Urgency::of(&seen.uid, created, A::renew_by(object), now);
    let turn = core.signer.budget.turn(issuer, &who, now);
    core.shared
        .metrics
        .issuance_budget_waiting
        .set(i64::try_from(core.signer.budget.waiting()).unwrap_or(i64::MAX));
    let Turn::Wait(wait) = turn else {
        return None;
    };
    if wait.first {
        core.shared.metrics.budget_wait(&issuer.key());
    }
    tracing::debug!(object = %plan::describe(object), issuer = %issuer.describe(), place = wait.place, line = wait.line, "waiting for the issuance budget");
    Some(BudgetWait {
        message: budget::message(issuer, settings, &wait),
        wait,
    })
}

/// Signs the object with the issuer it names, once; `None` when a sign of it is in flight or
/// done (its write brings the object back).
async fn sign<A: Adapter>(ctx: &A, object: &A::Object, seen: &Seen<A::View>) -> Option<Outcome> {
    let core = ctx.core();
    let flight = core.ledger.signings.begin(&seen.uid)?;
    let Some(name) = &seen.issuer else {
        return Some(Outcome::Retry("the issuer is not ours".into()));
    };
    let Some(issuer) = core.issuers.find(name) else {
        return Some(Outcome::Retry(format!("{} disappeared", name.describe())));
    };
    // The retry window starts at the first failed sign, not at creation.
    let first_failure = core.ledger.memory.first_failure(&seen.uid);
    let (outcome, not_after) = core
        .signer
        .sign_found(&issuer, A::request(object), first_failure)
        .await;
    if let Outcome::Issued(chain) = &outcome {
        flight.signed(chain.clone());
        if let Some(not_after) = not_after {
            ctx.expires(object, name, not_after);
        }
    }
    Some(outcome)
}

/// Act: the ledger, the writes, the recheck, then the next move.
async fn act<A: Adapter>(
    ctx: &A,
    object: &A::Object,
    seen: &Seen<A::View>,
    decision: Decision,
) -> Result<Action, Error> {
    let core = ctx.core();
    let Decision { plan, memo } = decision;
    let uid = seen.uid.as_str();
    core.ledger.before(uid, memo, core.shared.now());
    let recheck = plan.next == Next::Work(Work::RecheckIssuer);
    if let (true, Some(issuer)) = (recheck, &seen.issuer) {
        let _ = core.recheck.send(issuer.clone());
    }
    let target = Target {
        client: &core.shared.client,
        object,
        manager: A::MANAGER,
        events: &core.events,
    };
    let (written, next) = plan::execute(target, plan).await?;
    core.ledger.written(uid, memo.hold_written, memo.window, written);
    Ok(core.ledger.requeue(uid, &next, recheck))
}
