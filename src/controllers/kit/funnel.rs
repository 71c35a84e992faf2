//! One compact line in front of a controller's scheduler. kube-runtime's scheduler takes each
//! trigger as it comes, and its tables stay at the size of the most objects they ever held at
//! once: a manager started on 10,000 Ready Certificates (each triggered by its own list entry,
//! its Secret's and its request's) kept 7 MiB of empty tables after the start (heaptrack).
//! Here triggers wait as their `namespace/name`, each at most once, in the order they came,
//! and go on only while fewer than `width` of those let through have not finished their pass.
//!
//! A key let through counts until the controller says its pass finished ([`Funnel::done`]) or
//! [`HELD_AT_MOST`] has passed: an object deleted before its pass has none, and its place must
//! not be lost. A key let through and not finished that comes again waits in the line: the
//! scheduler would merge the two into one pass, and the second would never be counted done.

use std::collections::{HashMap, HashSet, VecDeque};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{FutureExt, Stream, StreamExt, stream};
use kube::Resource;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::clock::lock;

/// How long a key let through counts at most without its pass finishing.
pub const HELD_AT_MOST: Duration = Duration::from_secs(30);

/// Past this many places, an emptied line gives its memory back.
const KEPT_CAPACITY: usize = 1024;

/// The line of `K`s waiting for the scheduler. Cheap to clone: clones share the line.
pub struct Funnel<K> {
    line: Arc<Mutex<Line>>,
    /// Told when a pass finished, so a waiting [`Funnel::through`] lets the next one go.
    room: Arc<Notify>,
    kind: PhantomData<fn() -> K>,
}

impl<K> Clone for Funnel<K> {
    fn clone(&self) -> Self {
        Funnel {
            line: self.line.clone(),
            room: self.room.clone(),
            kind: PhantomData,
        }
    }
}

impl<K> std::fmt::Debug for Funnel<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let line = lock(&self.line);
        f.debug_struct("Funnel")
            .field("waiting", &line.waiting.len())
            .field("out", &line.out.len())
            .finish_non_exhaustive()
    }
}

impl<K: Resource<DynamicType = ()>> Funnel<K> {
    /// A line letting at most `width` (at least 1) unfinished keys through.
    pub fn new(width: usize) -> Self {
        Funnel {
            line: Arc::new(Mutex::new(Line::new(width))),
            room: Arc::default(),
            kind: PhantomData,
        }
    }

    /// The pass of `obj` has finished: its place goes to the next in line.
    pub fn done(&self, obj: &K) {
        if lock(&self.line).done(&key_of(obj)) {
            self.room.notify_one();
        }
    }

    /// The objects of `sources`, in line: for `reconcile_on`. The sources are read as fast as
    /// they come (they never wait on the line); the stream ends when they have and the line is
    /// empty.
    pub fn through<S>(self, sources: S) -> impl Stream<Item = ObjectRef<K>> + Send + 'static
    where
        K: 'static,
        S: Stream<Item = ObjectRef<K>> + Send + Unpin + 'static,
    {
        let state = (self, sources.fuse());
        stream::unfold(state, |(funnel, mut sources)| async move {
            loop {
                while let Some(Some(next)) = sources.next().now_or_never() {
                    funnel.push(&next);
                }
                let (next, ended, expiry) = {
                    let mut line = lock(&funnel.line);
                    let now = Instant::now();
                    (line.next(now), line.is_empty(), line.expiry())
                };
                if let Some(key) = next {
                    return Some((object_ref(&key), (funnel, sources)));
                }
                if ended && sources.is_done() {
                    return None;
                }
                let expired = async {
                    match expiry {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    Some(next) = sources.next() => funnel.push(&next),
                    () = funnel.room.notified() => {}
                    () = expired => {}
                }
            }
        })
    }

    fn push(&self, obj: &ObjectRef<K>) {
        lock(&self.line).push(&key(obj.namespace.as_deref(), &obj.name));
    }
}

/// `obj`'s `namespace/name`.
pub(super) fn key_of<K: Resource>(obj: &K) -> String {
    let meta = obj.meta();
    key(
        meta.namespace.as_deref(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

/// `namespace/name`: neither can hold a `/`.
fn key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_string(),
    }
}

pub(super) fn object_ref<K: Resource<DynamicType = ()>>(key: &str) -> ObjectRef<K> {
    match key.split_once('/') {
        Some((namespace, name)) => ObjectRef::new(name).within(namespace),
        None => ObjectRef::new(key),
    }
}

struct Line {
    width: usize,
    /// Keys in the order they came, each once.
    waiting: VecDeque<Arc<str>>,
    queued: HashSet<Arc<str>>,
    /// Keys let through and not finished, with when they went.
    out: HashMap<Arc<str>, Instant>,
}

impl Line {
    fn new(width: usize) -> Self {
        Line {
            width: width.max(1),
            waiting: VecDeque::new(),
            queued: HashSet::new(),
            out: HashMap::new(),
        }
    }

    fn push(&mut self, key: &str) {
        if !self.queued.contains(key) {
            let key: Arc<str> = Arc::from(key);
            self.queued.insert(key.clone());
            self.waiting.push_back(key);
        }
    }

    /// The next key to let through at `now`, if there is room: the first in line not out
    /// already (at most `width` are passed over).
    fn next(&mut self, now: Instant) -> Option<Arc<str>> {
        self.out
            .retain(|_, went| now.duration_since(*went) < HELD_AT_MOST);
        if self.out.len() >= self.width {
            return None;
        }
        let at = self.waiting.iter().position(|k| !self.out.contains_key(k))?;
        let key = self.waiting.remove(at)?;
        self.queued.remove(&key);
        self.out.insert(key.clone(), now);
        if self.waiting.is_empty() && self.waiting.capacity() > KEPT_CAPACITY {
            self.waiting.shrink_to_fit();
            self.queued.shrink_to_fit();
        }
        Some(key)
    }

    /// Whether `key` was out.
    fn done(&mut self, key: &str) -> bool {
        self.out.remove(key).is_some()
    }

    fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// When the oldest key out stops counting, if keys wait: a full line then has room, and a
    /// key waiting behind its own earlier trigger (its object deleted before that pass, then
    /// made again under the same name) can go.
    fn expiry(&self) -> Option<Instant> {
        if self.waiting.is_empty() {
            return None;
        }
        self.out.values().min().map(|went| *went + HELD_AT_MOST)
    }
}

#[cfg(test)]
mod tests;
