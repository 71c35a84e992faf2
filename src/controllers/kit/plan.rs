//! The plan a controller's `decide` returns, and the one executor every controller acts with.
//!
//! A plan is a value: the status to apply (a whole apply document, or none when the object
//! already says it), the Event to publish (or none), and what happens next. Tables assert
//! plans exactly; [`execute`] only carries them out: apply, then publish, then hand `next` back
//! for the controller to turn into a requeue or into more work.

use std::time::Duration;

use kube::Resource;
use kube::runtime::controller::Action;
use serde_json::Value;

use super::Error;
use super::events::{Events, Notice};
use super::status::{self, FieldManager};

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
}

/// Where and as whom a plan is carried out.
pub struct Target<'a, K> {
    pub client: &'a kube::Client,
    pub object: &'a K,
    pub manager: FieldManager,
    pub events: &'a Events,
}

/// Carries out the writes of `plan`: the status apply, then its Event. Returns the
/// resourceVersion of the write (when there was one) and what comes next.
pub async fn execute<K, W>(target: Target<'_, K>, plan: Plan<W>) -> Result<(Option<String>, Next<W>), Error>
where
    K: Resource<DynamicType = ()>,
{
    let mut written = None;
    if let Some(body) = &plan.status {
        written = status::apply(target.client, target.object, target.manager, body)
            .await
            .map_err(|source| Error::WriteStatus {
                object: describe(target.object),
                source,
            })?;
    }
    if let Some(notice) = &plan.event {
        target
            .events
            .publish(notice, &target.object.object_ref(&()))
            .await;
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
    match next {
        Next::AwaitChange | Next::Work(_) => Action::await_change(),
        Next::After(after) => Action::requeue(*after),
        Next::Backoff => Action::requeue(backoff()),
    }
}
