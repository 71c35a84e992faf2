//! The one Secret metadata watch: every change, deletes included (a shared reflector passes on
//! no deletes, kube-rs/kube#1590), fanned out to the controllers that trigger on Secrets, and
//! the index of which Secrets exist at which resourceVersion.

use std::sync::Arc;

use futures::Stream;
use futures::{FutureExt, StreamExt, future};
use k8s_openapi::api::core::v1::Secret;
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc;

use super::scope::{Present, Scope};

/// Secret metadata, without annotations (a `kubectl apply`'d Secret carries its data there).
pub type SecretMeta = PartialObjectMeta<Secret>;

/// Fans the one Secret metadata watch out to the controllers that trigger on Secrets, and
/// keeps the names of the Secrets that exist ([`SecretIndex`]).
#[derive(Default)]
pub struct SecretFeed {
    subscribers: Vec<mpsc::Sender<Arc<SecretMeta>>>,
    index: SecretIndex,
}

/// Which Secrets exist, by namespace and name, and at which resourceVersion, from the
/// metadata watch: lets a controller skip a live GET of a Secret that is not there, and the
/// signer reuse what it read from a Secret that has not changed since. Says nothing until the
/// first list is complete.
#[derive(Clone, Default)]
pub struct SecretIndex(Arc<std::sync::RwLock<IndexState>>);

type SecretKey = (String, String);

#[derive(Default)]
struct IndexState {
    synced: bool,
    /// resourceVersion by (namespace, name).
    versions: std::collections::HashMap<SecretKey, String>,
    relisting: Option<std::collections::HashMap<SecretKey, String>>,
}

impl SecretIndex {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, IndexState> {
        self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether the watch has listed every Secret and `namespace/name` is not among them.
    pub fn surely_absent(&self, namespace: &str, name: &str) -> bool {
        let state = self.read();
        state.synced
            && !state
                .versions
                .contains_key(&(namespace.to_string(), name.to_string()))
    }

    /// Whether the watch, having listed every Secret, last saw `namespace/name` at another
    /// version than `version` (or saw it deleted): a cached copy is then not to be trusted.
    /// The labelled-Secret cache and this watch are separate streams, and a delete reaches the
    /// Certificate controllers through this one only (a shared reflector passes on no deletes, kube-rs/kube#1590).
    pub fn differs(&self, namespace: &str, name: &str, version: Option<&str>) -> bool {
        let state = self.read();
        state.synced
            && state
                .versions
                .get(&(namespace.to_string(), name.to_string()))
                .map(String::as_str)
                != version
    }

    /// The resourceVersion the watch last saw of `namespace/name`, once it has listed every
    /// Secret.
    pub fn version(&self, namespace: &str, name: &str) -> Option<String> {
        let state = self.read();
        if !state.synced {
            return None;
        }
        state
            .versions
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// The Secrets the index holds in `namespace`, as bare metadata: what a namespace's relist
    /// is compared with when several namespaces are watched.
    fn present(&self, namespace: &str) -> Vec<SecretMeta> {
        let state = self.read();
        let names = state.versions.keys().filter(|(ns, _)| ns == namespace);
        names
            .map(|(ns, name)| {
                let mut secret = SecretMeta::default();
                secret.metadata.namespace = Some(ns.clone());
                secret.metadata.name = Some(name.clone());
                secret
            })
            .collect()
    }

    /// Follows one event of the Secret metadata watch.
    pub fn apply(&self, event: &watcher::Event<SecretMeta>) {
        let entry = |s: &SecretMeta| {
            let key = (
                s.metadata.namespace.clone().unwrap_or_default(),
                s.metadata.name.clone().unwrap_or_default(),
            );
            (key, s.metadata.resource_version.clone().unwrap_or_default())
        };
        let mut state = self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        match event {
            watcher::Event::Apply(s) => {
                let (key, version) = entry(s);
                state.versions.insert(key, version);
            }
            watcher::Event::Delete(s) => {
                state.versions.remove(&entry(s).0);
            }
            watcher::Event::Init => state.relisting = Some(std::collections::HashMap::new()),
            watcher::Event::InitApply(s) => {
                let (key, version) = entry(s);
                if let Some(fresh) = state.relisting.as_mut() {
                    fresh.insert(key.clone(), version.clone());
                }
                state.versions.insert(key, version);
            }
            watcher::Event::InitDone => {
                if let Some(fresh) = state.relisting.take() {
                    state.versions = fresh;
                }
                state.synced = true;
            }
        }
    }
}

impl SecretFeed {
    /// A feed that keeps `index` (the signer's) current.
    pub fn with_index(index: SecretIndex) -> Self {
        SecretFeed {
            subscribers: Vec::new(),
            index,
        }
    }

    pub fn subscribe(&mut self) -> impl Stream<Item = Arc<SecretMeta>> + Send + 'static {
        let (tx, rx) = mpsc::channel(1024);
        self.subscribers.push(tx);
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|s| (s, rx)) })
    }

    /// The names of the Secrets that exist, as this feed sees them.
    pub fn index(&self) -> SecretIndex {
        self.index.clone()
    }

    /// Watches Secret metadata in `scope` until the process ends, passing each change on.
    pub async fn run(self, client: kube::Client, scope: Scope) {
        let subscribers = Arc::new(self.subscribers);
        let index = self.index;
        let known = index.clone();
        let present: Present<SecretMeta> = Arc::new(move |namespace: &str| known.present(namespace));
        super::scope::watch(scope.apis(&client), super::size::watch_config(), present)
            .modify(|secret| {
                secret.metadata.managed_fields = None;
                secret.metadata.annotations = None;
            })
            .for_each(|event| {
                let subscribers = subscribers.clone();
                let Ok(event) = event else {
                    return future::ready(()).boxed();
                };
                index.apply(&event);
                let touched = match event {
                    watcher::Event::Apply(s) | watcher::Event::InitApply(s) | watcher::Event::Delete(s) => {
                        Some(Arc::new(s))
                    }
                    watcher::Event::Init | watcher::Event::InitDone => None,
                };
                async move {
                    let Some(secret) = touched else { return };
                    for tx in subscribers.iter() {
                        let _ = tx.send(secret.clone()).await;
                    }
                }
                .boxed()
            })
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(name: &str, version: &str) -> SecretMeta {
        let mut secret = SecretMeta::default();
        secret.metadata.namespace = Some("ns".into());
        secret.metadata.name = Some(name.into());
        secret.metadata.resource_version = Some(version.into());
        secret
    }

    /// The index says "absent", or gives a version, only once a whole list has been seen;
    /// follows adds, updates and deletes; a relist forgets Secrets deleted while the watch was
    /// away.
    #[test]
    fn secret_index_sequence() {
        let index = SecretIndex::default();
        let seen = |name: &str| (index.surely_absent("ns", name), index.version("ns", name));
        let v = |s: &str| Some(s.to_string());
        type Seen = [(bool, Option<String>); 2];
        let steps: Vec<(watcher::Event<SecretMeta>, Seen)> = vec![
            (watcher::Event::Init, [(false, None), (false, None)]),
            (
                watcher::Event::InitApply(meta("a", "1")),
                [(false, None), (false, None)],
            ),
            (watcher::Event::InitDone, [(false, v("1")), (true, None)]),
            (
                watcher::Event::Apply(meta("b", "2")),
                [(false, v("1")), (false, v("2"))],
            ),
            (
                watcher::Event::Apply(meta("a", "3")),
                [(false, v("3")), (false, v("2"))],
            ),
            (
                watcher::Event::Delete(meta("a", "4")),
                [(true, None), (false, v("2"))],
            ),
            (
                watcher::Event::Apply(meta("a", "5")),
                [(false, v("5")), (false, v("2"))],
            ),
            (watcher::Event::Init, [(false, v("5")), (false, v("2"))]),
            (
                watcher::Event::InitApply(meta("b", "6")),
                [(false, v("5")), (false, v("6"))],
            ),
            (watcher::Event::InitDone, [(true, None), (false, v("6"))]),
        ];
        for (i, (event, want)) in steps.into_iter().enumerate() {
            index.apply(&event);
            assert_eq!([seen("a"), seen("b")], want, "step {i}");
        }
    }

    /// A cached copy is doubted only once the watch has listed everything and saw the Secret
    /// at another version, or deleted.
    #[test]
    fn a_cached_copy_differs_from_what_the_watch_saw() {
        let index = SecretIndex::default();
        index.apply(&watcher::Event::Init);
        index.apply(&watcher::Event::InitApply(meta("a", "1")));
        assert!(!index.differs("ns", "a", Some("0")), "not listed yet: no opinion");
        index.apply(&watcher::Event::InitDone);
        index.apply(&watcher::Event::Apply(meta("b", "2")));
        index.apply(&watcher::Event::Delete(meta("b", "3")));
        let table = [
            ("a", Some("1"), false),
            ("a", Some("0"), true),
            ("a", None, true),
            ("b", Some("2"), true),
            ("c", None, false),
        ];
        for (name, cached, want) in table {
            assert_eq!(
                index.differs("ns", name, cached),
                want,
                "{name} cached at {cached:?}"
            );
        }
    }
}
