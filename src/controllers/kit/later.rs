//! Wake-ups kept compactly, for a controller whose objects mostly wait a long time for their
//! next look (a Ready Certificate waits days for its renewal). kube-runtime's scheduler keeps,
//! per object it will wake, a whole `ObjectRef` (name, namespace, UID, resourceVersion), a
//! slab entry of its delay queue and a hash entry: about 740 bytes, and its tables never
//! shrink. Here a waiting object costs its `namespace/name` once and its time twice: about 150
//! bytes. With the funnel in front of the scheduler (`kit::funnel`), this is what keeps 10,000
//! Ready Certificates waiting for their renewal out of it; alone it saved nothing measurable,
//! since the scheduler's tables kept the size a start had grown them to.
//!
//! The reconcile still says when to come back, by its return value; the wiring hands that time
//! here instead of to kube-runtime, and feeds the wakes back with `reconcile_on`, where they
//! queue like any other trigger. An object has at most one time: a new one replaces it, and
//! awaiting a change clears it. The time of an object deleted meanwhile fires once and the
//! controller skips it (it is not in the store), as it would kube-runtime's.

use std::collections::{BTreeSet, HashMap};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt, stream};
use kube::Resource;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::funnel::{key_of, object_ref};
use crate::clock::lock;

/// When to wake each object of kind `K`. Cheap to clone: clones share the times.
pub struct Later<K> {
    due: Arc<Mutex<Due>>,
    /// Told when the first time due moved earlier, so a sleeping [`Later::wakes`] wakes sooner.
    sooner: Arc<Notify>,
    kind: PhantomData<fn() -> K>,
}

impl<K> Clone for Later<K> {
    fn clone(&self) -> Self {
        Later {
            due: self.due.clone(),
            sooner: self.sooner.clone(),
            kind: PhantomData,
        }
    }
}

impl<K> Default for Later<K> {
    fn default() -> Self {
        Later {
            due: Arc::default(),
            sooner: Arc::default(),
            kind: PhantomData,
        }
    }
}

impl<K> std::fmt::Debug for Later<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Later")
            .field("waiting", &lock(&self.due).at.len())
            .finish_non_exhaustive()
    }
}

impl<K: Resource<DynamicType = ()>> Later<K> {
    /// Wakes `obj` after `after`, replacing the time it had; `None`: only a change brings it
    /// back.
    pub fn set(&self, obj: &K, after: Option<Duration>) {
        let key = key_of(obj);
        let when = after.map(|after| Instant::now() + after);
        if lock(&self.due).set(&key, when) {
            self.sooner.notify_one();
        }
    }

    /// The objects as their times come, soonest first; never ends.
    pub fn wakes(&self) -> impl Stream<Item = ObjectRef<K>> + Send + 'static {
        let state = (self.due.clone(), self.sooner.clone());
        stream::unfold(state, |(due, sooner)| async move {
            loop {
                let (keys, first) = {
                    let mut due = lock(&due);
                    (due.take(Instant::now()), due.first())
                };
                if !keys.is_empty() {
                    return Some((keys, (due, sooner)));
                }
                match first {
                    Some(at) => {
                        tokio::select! {
                            () = tokio::time::sleep_until(at) => {}
                            () = sooner.notified() => {}
                        }
                    }
                    None => sooner.notified().await,
                }
            }
        })
        .flat_map(|keys| stream::iter(keys.into_iter().map(|key| object_ref(&key))))
    }
}

#[derive(Default)]
struct Due {
    /// Each waiting object's time, by key.
    at: HashMap<Arc<str>, Instant>,
    /// The same, in the order they come due.
    queue: BTreeSet<(Instant, Arc<str>)>,
}

impl Due {
    /// Sets `key`'s time (`None`: clears it); whether the first time due is now earlier.
    fn set(&mut self, key: &str, when: Option<Instant>) -> bool {
        let old = self.at.remove_entry(key).map(|(key, at)| {
            self.queue.remove(&(at, key.clone()));
            key
        });
        let Some(when) = when else {
            return false;
        };
        let sooner = self.first().is_none_or(|first| when < first);
        let key = old.unwrap_or_else(|| Arc::from(key));
        self.at.insert(key.clone(), when);
        self.queue.insert((when, key));
        sooner
    }

    fn first(&self) -> Option<Instant> {
        self.queue.first().map(|(at, _)| *at)
    }

    /// Takes the keys due at `now`, soonest first.
    fn take(&mut self, now: Instant) -> Vec<Arc<str>> {
        let mut keys = Vec::new();
        while self.first().is_some_and(|at| at <= now)
            && let Some((_, key)) = self.queue.pop_first()
        {
            self.at.remove(&key);
            keys.push(key);
        }
        keys
    }
}

#[cfg(test)]
mod tests;
