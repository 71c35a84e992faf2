//! The plan a controller's `decide` returns, and the one executor every controller acts with.
//!
//! A plan is a value: the status to apply (a whole apply document, or none when the object
//! already says it), the Event to publish (or none), and what happens next. A controller that
//! writes other objects too decides a [`FullPlan`]: the plan with its object writes
//! ([`Write`]), some before the status, some after. Tables assert plans exactly; [`execute`]
//! only carries them out: the writes before, the status apply, the writes after, the Event,
//! then hands `next` back for the controller to turn into a requeue or into more work.

use std::time::Duration;

use kube::Resource;
use kube::runtime::controller::Action;
use serde_json::Value;

use super::Error;
use super::events::{Events, Notice};
use super::status::{self, FieldManager};
use super::write::Writer;
pub use super::write::{Announce, Create, IfTaken, Object, Write};

/// What a controller decided for one object.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan<W> {
    /// The status apply document (see [`status::document`]), or `None` to write nothing.
    pub status: Option<Value>,
    /// Published after the status write succeeds.
    pub event: Option<Notice>,
    pub next: Next<W>,
}

/// What happens after the writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next<W> {
    /// Nothing until a watch brings the object back.
    AwaitChange,
    /// Look again after this long.
    After(Duration),
    /// Look again after the object's backoff.
    Backoff,
    /// Controller-specific work (signing, rechecking an issuer).
    Work(W),
}

impl<W> Plan<W> {
    /// Nothing to write, nothing to say.
    pub fn idle(next: Next<W>) -> Self {
        Plan {
            status: None,
            event: None,
            next,
        }
    }

    /// This plan with `writes` carried out first, in order, before its status.
    pub fn preceded_by(self, writes: Vec<Write>) -> FullPlan<W> {
        FullPlan {
            before_status: writes,
            plan: self,
            after_status: Vec::new(),
        }
    }

    /// This plan with `writes` carried out in order after its status, before its Event.
    pub fn followed_by(self, writes: Vec<Write>) -> FullPlan<W> {
        FullPlan {
            before_status: Vec::new(),
            plan: self,
            after_status: writes,
        }
    }
}

/// A plan with the object writes that go with it. A write that fails stops the plan there:
/// what comes after it is not done, and the reconcile is retried.
#[derive(Debug, Clone, PartialEq)]
pub struct FullPlan<W> {
    /// Done first: what the status must not claim before it is written.
    pub before_status: Vec<Write>,
    pub plan: Plan<W>,
    /// Done after the status apply, before the Event.
    pub after_status: Vec<Write>,
}

impl<W> FullPlan<W> {
    /// Nothing to write, nothing to say.
    pub fn idle(next: Next<W>) -> Self {
        Plan::idle(next).into()
    }

    /// Every write, in the order they are carried out (the status apply between the two).
    pub fn writes(&self) -> impl Iterator<Item = &Write> {
        self.before_status.iter().chain(&self.after_status)
    }
}

impl<W> From<Plan<W>> for FullPlan<W> {
    fn from(plan: Plan<W>) -> Self {
        plan.preceded_by(Vec::new())
    }
}

/// Where and as whom a plan is carried out.
pub struct Target<'a, K> {
    pub client: &'a kube::Client,
    pub object: &'a K,
    pub manager: FieldManager,
    pub events: &'a Events,
}

/// Carries out `plan` (a [`Plan`] or a [`FullPlan`]): the writes before the status, the status
/// apply, the writes after it, then the Event. Returns the resourceVersion of the status write
/// (when there was one) and what comes next.
pub async fn execute<K, W>(
    target: Target<'_, K>,
    plan: impl Into<FullPlan<W>>,
) -> Result<(Option<String>, Next<W>), Error>
where
    K: Resource<DynamicType = ()>,
{
    let FullPlan {
        before_status,
        plan,
        after_status,
    } = plan.into();
    let regarding = target.object.object_ref(&());
    let writer = Writer {
        client: target.client,
        manager: target.manager,
        events: target.events,
        regarding: &regarding,
    };
    for write in &before_status {
        writer.write(write).await?;
    }
    let mut written = None;
    if let Some(body) = &plan.status {
        written = status::apply(target.client, target.object, target.manager, body)
            .await
            .map_err(|source| Error::WriteStatus {
                object: describe(target.object),
                source,
            })?;
    }
    for write in &after_status {
        writer.write(write).await?;
    }
    if let Some(notice) = &plan.event {
        target.events.publish(notice, &regarding).await;
    }
    Ok((written, plan.next))
}

/// `Kind namespace/name` or `Kind name`, for errors and logs.
pub fn describe<K: Resource<DynamicType = ()>>(obj: &K) -> String {
    let meta = obj.meta();
    let name = meta.name.as_deref().unwrap_or_default();
    match &meta.namespace {
        Some(ns) => format!("{} {ns}/{name}", K::kind(&())),
        None => format!("{} {name}", K::kind(&())),
    }
}

/// The requeue for a `next` that needs no more work; `backoff` gives the object's next delay.
pub fn requeue<W>(next: &Next<W>, backoff: impl FnOnce() -> Duration) -> Action {
    requeue_at(next, backoff).into()
}

/// [`requeue`] as a [`Requeue`], for a reconcile that is one of several run on one queue.
pub fn requeue_at<W>(next: &Next<W>, backoff: impl FnOnce() -> Duration) -> Requeue {
    match next {
        Next::AwaitChange | Next::Work(_) => Requeue::AWAIT_CHANGE,
        Next::After(after) => Requeue::after(*after),
        Next::Backoff => Requeue::after(backoff()),
    }
}

/// When to look at an object again if nothing changes: kube-runtime's `Action`, in a form that
/// can be read. Several decisions run on one queue (the Certificate controllers) requeue at
/// the soonest of theirs, and `Action` does not say what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requeue(Option<Duration>);

impl Requeue {
    /// Only a change brings the object back.
    pub const AWAIT_CHANGE: Requeue = Requeue(None);

    pub const fn after(after: Duration) -> Self {
        Requeue(Some(after))
    }

    /// How long until the object is looked at again; `None`: only on a change.
    pub const fn wait(self) -> Option<Duration> {
        self.0
    }

    /// The sooner of the two.
    #[must_use]
    pub fn soonest(self, other: Requeue) -> Requeue {
        match (self.0, other.0) {
            (Some(a), Some(b)) => Requeue(Some(a.min(b))),
            (a, b) => Requeue(a.or(b)),
        }
    }
}

impl From<Requeue> for Action {
    fn from(requeue: Requeue) -> Action {
        match requeue.0 {
            Some(after) => Action::requeue(after),
            None => Action::await_change(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The soonest of two requeues; awaiting a change is later than any time.
    #[test]
    fn soonest_table() {
        let (one, two) = (
            Requeue::after(Duration::from_secs(1)),
            Requeue::after(Duration::from_secs(2)),
        );
        let cases = [
            (
                Requeue::AWAIT_CHANGE,
                Requeue::AWAIT_CHANGE,
                Requeue::AWAIT_CHANGE,
            ),
            (Requeue::AWAIT_CHANGE, two, two),
            (two, Requeue::AWAIT_CHANGE, two),
            (one, two, one),
            (two, one, one),
        ];
        for (a, b, want) in cases {
            assert_eq!(a.soonest(b), want, "{a:?} and {b:?}");
        }
        assert_eq!(Action::from(one), Action::requeue(Duration::from_secs(1)));
        assert_eq!(Action::from(Requeue::AWAIT_CHANGE), Action::await_change());
    }
}
