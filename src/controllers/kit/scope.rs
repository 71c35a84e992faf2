//! Which namespaces the manager serves (`--namespace`, repeatable), and one watch of a
//! namespaced kind over all of them.
//!
//! Cluster-wide (no flag), a kind is watched with one `Api::all`. Namespace-scoped, each served
//! namespace has its own watch (so Roles suffice), merged into the one stream a store is fed
//! from ([`merge`]): a store must see one initial list, not one per namespace, since each
//! `Init`…`InitDone` replaces the whole store.

mod merge;

use futures::stream::BoxStream;
use futures::{StreamExt, stream};
use kube::Api;
use kube::core::NamespaceResourceScope;
use kube::runtime::{WatchStreamExt, watcher};

pub use self::merge::{Merge, Out};

/// What a reflector can keep in a store.
pub trait Reflected:
    kube::Resource<DynamicType = ()>
    + Clone
    + std::fmt::Debug
    + serde::de::DeserializeOwned
    + Send
    + Sync
    + 'static
{
}

impl<K> Reflected for K where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static
{
}

/// The namespaces the manager serves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Scope {
    /// Every namespace (no `--namespace`): today's install, ClusterRoles.
    #[default]
    Cluster,
    /// Only these (sorted, without duplicates, never empty).
    Namespaces(Vec<String>),
}

impl Scope {
    /// The scope the `--namespace` values name; none (or only blanks) means the whole cluster.
    pub fn new(namespaces: impl IntoIterator<Item = String>) -> Self {
        let mut served: Vec<String> = namespaces
            .into_iter()
            .map(|ns| ns.trim().to_string())
            .filter(|ns| !ns.is_empty())
            .collect();
        served.sort();
        served.dedup();
        if served.is_empty() {
            Scope::Cluster
        } else {
            Scope::Namespaces(served)
        }
    }

    /// Whether objects in `namespace` are served.
    pub fn serves(&self, namespace: &str) -> bool {
        self.served()
            .is_none_or(|served| served.iter().any(|ns| ns == namespace))
    }

    /// The served namespaces; None for the whole cluster (an empty list too: [`Scope::new`]
    /// never makes one).
    fn served(&self) -> Option<&[String]> {
        match self {
            Scope::Namespaces(served) if !served.is_empty() => Some(served),
            _ => None,
        }
    }

    /// This scope and `namespace` (the cluster resource namespace, for Secrets).
    pub fn and(&self, namespace: &str) -> Scope {
        match self.served() {
            None => Scope::Cluster,
            Some(served) => Scope::new(served.iter().cloned().chain([namespace.to_string()])),
        }
    }

    /// One API per watched namespace: one `Api::all` cluster-wide.
    pub fn apis<K>(&self, client: &kube::Client) -> Scoped<K>
    where
        K: kube::Resource<Scope = NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        match self.served() {
            None => Scoped(vec![(String::new(), Api::all(client.clone()))]),
            Some(served) => Scoped(
                served
                    .iter()
                    .map(|ns| (ns.clone(), Api::namespaced(client.clone(), ns)))
                    .collect(),
            ),
        }
    }

    /// Where a list of a namespaced kind can be tried at start: the whole cluster, or the
    /// first served namespace.
    pub fn probe<K>(&self, client: &kube::Client) -> Api<K>
    where
        K: kube::Resource<Scope = NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        match self.served().and_then(<[String]>::first) {
            None => Api::all(client.clone()),
            Some(first) => Api::namespaced(client.clone(), first),
        }
    }
}

/// The APIs one kind is watched through, each with its namespace (empty for `Api::all`).
pub struct Scoped<K>(Vec<(String, Api<K>)>);

impl<K> From<Api<K>> for Scoped<K> {
    fn from(api: Api<K>) -> Self {
        Scoped(vec![(String::new(), api)])
    }
}

impl<K: Clone> Clone for Scoped<K> {
    fn clone(&self) -> Self {
        Scoped(self.0.clone())
    }
}

/// What a merged watch reads from its store to end a namespace's relist: the objects it holds
/// in that namespace (the ones the relist did not bring are then deleted).
pub type Present<K> = std::sync::Arc<dyn Fn(&str) -> Vec<K> + Send + Sync>;

/// The watch events of `scoped`: one watcher as is, several merged into one initial list.
pub fn watch<K>(
    scoped: Scoped<K>,
    config: watcher::Config,
    present: Present<K>,
) -> BoxStream<'static, watcher::Result<watcher::Event<K>>>
where
    K: Reflected,
{
    let mut apis = scoped.0;
    if apis.len() == 1 {
        let (_, api) = apis.remove(0);
        return watcher(api, config).default_backoff().boxed();
    }
    let namespaces: Vec<String> = apis.iter().map(|(ns, _)| ns.clone()).collect();
    let streams = apis.into_iter().enumerate().map(|(i, (_, api))| {
        watcher(api, config.clone())
            .default_backoff()
            .map(move |event| (i, event))
            .boxed()
    });
    merged(stream::select_all(streams), namespaces, present).boxed()
}

/// Feeds the tagged events of several namespaces' watches through one [`Merge`].
fn merged<K, S>(
    events: S,
    namespaces: Vec<String>,
    present: Present<K>,
) -> impl futures::Stream<Item = watcher::Result<watcher::Event<K>>> + Send
where
    K: Reflected,
    S: futures::Stream<Item = (usize, watcher::Result<watcher::Event<K>>)> + Send + 'static,
{
    let mut merge = Merge::new(namespaces);
    events
        .flat_map(move |(i, event)| {
            let outs = match event {
                Ok(event) => merge.feed(i, event).into_iter().map(Ok).collect(),
                Err(err) => vec![Err(err)],
            };
            stream::iter(outs)
        })
        // A sweep reads the store when it is reached, after every event before it was applied.
        .flat_map(move |out| {
            let events: Vec<watcher::Result<watcher::Event<K>>> = match out {
                Ok(out) => out.resolve(&*present).into_iter().map(Ok).collect(),
                Err(err) => vec![Err(err)],
            };
            stream::iter(events)
        })
}

#[cfg(test)]
mod tests;
