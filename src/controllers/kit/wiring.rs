//! What the controllers are built from: one watch per kind, shared.
//!
//! Issuers, ClusterIssuers and CertificateRequests are each reflected into one store whose
//! changes any controller can [`Watched::subscribe`] to. Secrets are watched once, metadata
//! only (see [`super::secrets`]). Each watch of a namespaced kind covers the served namespaces
//! ([`super::scope`]).

use std::collections::HashSet;

use futures::future::{BoxFuture, Shared};
use futures::{FutureExt, Stream, StreamExt, TryStreamExt, future};
use kube::runtime::controller;
use kube::runtime::reflector::{self, ReflectHandle, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};

use super::index::{Index, controller_uid};
use super::scope::{self, Present, Scoped};
use super::secrets::SecretFeed;
use super::size::watch_config;

/// Resolves when the manager stops.
pub type Shutdown = Shared<BoxFuture<'static, ()>>;

/// One kind's store and the writer its reflector fills.
pub struct Watched<K: reflector::Lookup + Clone + 'static>
where
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    pub store: Store<K>,
    writer: Writer<K>,
}

impl<K> Watched<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    pub fn new(buffer: usize) -> Self {
        let (store, writer) = reflector::store_shared(buffer);
        Watched { store, writer }
    }

    /// Every object the reflector applies, from now on.
    pub fn subscribe(&self) -> ReflectHandle<K> {
        match self.writer.subscribe() {
            Some(handle) => handle,
            None => unreachable!("stores are created shared"),
        }
    }

    pub fn into_writer(self) -> Writer<K> {
        self.writer
    }
}

/// What every controller is wired from.
pub struct Wiring {
    pub shutdown: Shutdown,
    pub config: controller::Config,
    pub issuers: Watched<crate::api::Issuer>,
    pub cluster_issuers: Watched<crate::api::ClusterIssuer>,
    pub requests: Watched<crate::api::certmanager::CertificateRequest>,
    /// The requests in `requests`' store by the UID of their controlling Certificate.
    pub request_owners: Index<crate::api::certmanager::CertificateRequest>,
    /// The whole copies of the requests `requests`' store keeps as summaries (finished ones,
    /// in standalone mode).
    pub request_copies: super::recent::Recent<crate::api::certmanager::CertificateRequest>,
    pub secrets: SecretFeed,
}

impl Wiring {
    pub fn new(shutdown: Shutdown, config: controller::Config) -> Self {
        Wiring {
            shutdown,
            config,
            issuers: Watched::new(1024),
            cluster_issuers: Watched::new(1024),
            requests: Watched::new(4096),
            request_owners: Index::new(|cr| controller_uid(&cr.metadata, "Certificate")),
            request_copies: super::recent::Recent::default(),
            secrets: SecretFeed::default(),
        }
    }
}

/// Polls a controller (or reflector) stream to its end.
pub fn drive<S: Stream + Send + 'static>(stream: S) -> BoxFuture<'static, ()> {
    stream.for_each(|_| future::ready(())).boxed()
}

pub use super::scope::Reflected;

/// Reflects `api` (one, or one per served namespace) into `writer`; `filter` sees each event
/// first and may drop or change it.
pub fn reflect<K>(
    api: impl Into<Scoped<K>>,
    writer: Writer<K>,
    filter: impl FnMut(watcher::Event<K>) -> Option<watcher::Event<K>> + Send + 'static,
) -> BoxFuture<'static, ()>
where
    K: Reflected,
{
    reflect_with(api, watch_config(), writer, filter)
}

/// [`reflect`] with a watch configuration (a label selector).
pub fn reflect_with<K>(
    api: impl Into<Scoped<K>>,
    config: watcher::Config,
    writer: Writer<K>,
    filter: impl FnMut(watcher::Event<K>) -> Option<watcher::Event<K>> + Send + 'static,
) -> BoxFuture<'static, ()>
where
    K: Reflected,
{
    let events = scope::watch(api.into(), config, present(&writer));
    reflect_events(events, writer, filter)
}

/// What `writer`'s store holds in a namespace: how a merged watch ends a namespace's relist.
fn present<K: Reflected>(writer: &Writer<K>) -> Present<K> {
    let store = writer.as_reader();
    std::sync::Arc::new(move |namespace: &str| {
        store
            .state()
            .iter()
            .filter(|obj| obj.meta().namespace.as_deref() == Some(namespace))
            .map(|obj| K::clone(obj))
            .collect()
    })
}

/// Drives `events` through `filter` into `writer`: what every `reflect*` shares.
fn reflect_events<K>(
    events: impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static,
    writer: Writer<K>,
    mut filter: impl FnMut(watcher::Event<K>) -> Option<watcher::Event<K>> + Send + 'static,
) -> BoxFuture<'static, ()>
where
    K: Reflected,
{
    drive(
        events
            .try_filter_map(move |event| future::ready(Ok(filter(event))))
            .reflect_shared(writer),
    )
}

/// [`reflect`], with the watch started over (a fresh list, then a watch) at each item of
/// `restarts`. After a CRD update kube-apiserver serves a watch opened before it from the old
/// storage, pruning objects with the old schema, until it tears that storage down up to two
/// request timeouts later (apiextensions-apiserver `crdHandler.tearDown`); a new list and
/// watch read through the new schema at once.
pub fn reflect_restarting<K>(
    api: impl Into<Scoped<K>>,
    writer: Writer<K>,
    filter: impl FnMut(watcher::Event<K>) -> Option<watcher::Event<K>> + Send + 'static,
    restarts: impl Stream<Item = ()> + Send + 'static,
) -> BoxFuture<'static, ()>
where
    K: Reflected,
{
    let (api, present) = (api.into(), present(&writer));
    let start = move || scope::watch(api.clone(), watch_config(), present.clone());
    reflect_events(restarting(start, restarts), writer, filter)
}

/// One step of [`restarting`].
enum Step<T> {
    Restart,
    RestartsEnded,
    Item(Option<T>),
}

/// The stream `start` makes, replaced by a new one from `start` at each item of `restarts`.
fn restarting<S>(
    start: impl Fn() -> S + Send + 'static,
    restarts: impl Stream<Item = ()> + Send + 'static,
) -> impl Stream<Item = S::Item> + Send
where
    S: Stream + Send + 'static,
    S::Item: Send,
{
    let current = start().boxed();
    let state = (current, Some(restarts.boxed()), start);
    futures::stream::unfold(state, |(mut current, mut restarts, start)| async move {
        loop {
            let step = {
                let restart = async {
                    match restarts.as_mut() {
                        Some(r) => r.next().await,
                        None => future::pending().await,
                    }
                };
                tokio::select! {
                    biased;
                    signal = restart => if signal.is_some() { Step::Restart } else { Step::RestartsEnded },
                    item = current.next() => Step::Item(item),
                }
            };
            match step {
                Step::Restart => current = start().boxed(),
                Step::RestartsEnded => restarts = None,
                Step::Item(item) => return item.map(|item| (item, (current, restarts, start))),
            }
        }
    })
}

/// The keys of the objects a relist (`Init` … `InitDone`) brings, to sweep what deletes missed
/// while the watch was down left behind.
#[derive(Debug, Default)]
pub struct Relist {
    keys: Option<HashSet<String>>,
}

impl Relist {
    /// Feeds one event; at the end of a relist, the keys of every object it brought.
    pub fn observe<K>(
        &mut self,
        event: &watcher::Event<K>,
        key: impl Fn(&K) -> Option<String>,
    ) -> Option<HashSet<String>> {
        match event {
            watcher::Event::Init => self.keys = Some(HashSet::new()),
            watcher::Event::InitApply(obj) => {
                if let (Some(keys), Some(key)) = (&mut self.keys, key(obj)) {
                    keys.insert(key);
                }
            }
            watcher::Event::InitDone => return self.keys.take(),
            watcher::Event::Apply(_) | watcher::Event::Delete(_) => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// Each start of the inner stream yields its start number, then waits for ever; a restart
    /// replaces it with the next one, and the end of `restarts` keeps the current one.
    #[tokio::test]
    async fn restarting_starts_the_stream_over_at_each_signal() {
        let starts = Arc::new(AtomicUsize::new(0));
        let counter = starts.clone();
        let start = move || {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            futures::stream::iter([n]).chain(futures::stream::pending())
        };
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let restarts =
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|()| ((), rx)) });
        let mut stream = Box::pin(restarting(start, restarts));
        async fn next<S: Stream + Unpin>(s: &mut S) -> Result<Option<S::Item>, tokio::time::error::Elapsed> {
            tokio::time::timeout(Duration::from_millis(200), s.next()).await
        }
        assert_eq!(next(&mut stream).await, Ok(Some(0)));
        tx.send(()).unwrap();
        assert_eq!(next(&mut stream).await, Ok(Some(1)));
        assert!(next(&mut stream).await.is_err(), "nothing until the next restart");
        drop(tx);
        assert!(
            next(&mut stream).await.is_err(),
            "restarts ended: the current stream goes on"
        );
        assert_eq!(starts.load(Ordering::SeqCst), 2);
    }
}
