//! Secondary indexes over a reflected store: the names of the objects grouped by a key each
//! object gives (the UID of its controlling owner, a Secret it names). kube-runtime's stores
//! look objects up by name only, and finding a Certificate's requests by scanning every
//! request made each reconcile cost O(objects): at thousands of Certificates, most of the
//! manager's time.
//!
//! An index follows the very events its store applies (it sees each one in the reflector's
//! filter, after the filter decided), so it holds what the store holds, give or take the event
//! being applied. Readers take names from it and objects from the store; a name whose object is
//! not in the store yet is skipped.
//!
//! Keys and objects are filed by a keyed hash of (namespace, key) and (namespace, name), not
//! by the strings: the strings were most of an index's memory (about 500 bytes per object and
//! index: at 10,000 Certificates two indexes took 10 MiB). A tenant cannot aim a collision at a key
//! it does not know; were two slots ever to share a hash, a reader would be offered a name more
//! than it asked for, so every reader checks the objects it is given (their owner's UID, the
//! Secret they name).

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, PoisonError, RwLock};

use kube::Resource;
use kube::runtime::watcher::Event;

/// The keys an object is filed under.
pub type KeysOf<K> = fn(&K) -> Vec<String>;

/// Names of `K`s by (namespace, key). Cheap to clone: clones share the index.
pub struct Index<K> {
    keys_of: KeysOf<K>,
    state: Arc<RwLock<State>>,
}

impl<K> Clone for Index<K> {
    fn clone(&self) -> Self {
        Index {
            keys_of: self.keys_of,
            state: self.state.clone(),
        }
    }
}

#[derive(Default)]
struct State {
    /// Keyed by a random key per index.
    hasher: RandomState,
    current: Table,
    /// The table an initial list (or relist) is building; it replaces `current` at `InitDone`.
    relisting: Option<Table>,
}

impl State {
    fn slot(&self, namespace: &str, key: &str) -> u64 {
        self.hasher.hash_one((namespace, key))
    }
}

#[derive(Default)]
struct Table {
    /// Sorted names by the slot of their key: almost always one.
    by_key: HashMap<u64, Vec<Box<str>>>,
    /// The slots of the keys each object is filed under now, by the object's own slot.
    keys: HashMap<u64, Box<[u64]>>,
}

impl Table {
    fn file(&mut self, object: u64, name: &str, keys: Box<[u64]>) {
        self.remove(object, name);
        for key in &keys {
            let names = self.by_key.entry(*key).or_default();
            if let Err(at) = names.binary_search_by(|n| (**n).cmp(name)) {
                names.insert(at, name.into());
            }
        }
        if !keys.is_empty() {
            self.keys.insert(object, keys);
        }
    }

    fn remove(&mut self, object: u64, name: &str) {
        let Some(keys) = self.keys.remove(&object) else {
            return;
        };
        for key in keys {
            if let Some(names) = self.by_key.get_mut(&key) {
                names.retain(|n| &**n != name);
                if names.is_empty() {
                    self.by_key.remove(&key);
                }
            }
        }
    }
}

impl<K: Resource> Index<K> {
    pub fn new(keys_of: KeysOf<K>) -> Self {
        Index {
            keys_of,
            state: Arc::default(),
        }
    }

    /// Follows one event of the store's watch, as the store applies it.
    pub fn apply(&self, event: &Event<K>) {
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        let state = &mut *state;
        let object = |obj: &K, state: &State| {
            let meta = obj.meta();
            let (namespace, name) = (meta.namespace.as_deref(), meta.name.as_deref());
            let name = name.unwrap_or_default();
            (state.slot(namespace.unwrap_or_default(), name), name.to_string())
        };
        let keys = |obj: &K, state: &State| -> Box<[u64]> {
            let namespace = obj.meta().namespace.as_deref().unwrap_or_default();
            let keys = (self.keys_of)(obj);
            keys.iter().map(|k| state.slot(namespace, k)).collect()
        };
        match event {
            Event::Apply(obj) => {
                let ((slot, name), keys) = (object(obj, state), keys(obj, state));
                state.current.file(slot, &name, keys);
            }
            Event::Delete(obj) => {
                let (slot, name) = object(obj, state);
                state.current.remove(slot, &name);
            }
            Event::Init => state.relisting = Some(Table::default()),
            Event::InitApply(obj) => {
                let ((slot, name), keys) = (object(obj, state), keys(obj, state));
                let table = state.relisting.get_or_insert_with(Table::default);
                table.file(slot, &name, keys);
            }
            Event::InitDone => {
                if let Some(table) = state.relisting.take() {
                    state.current = table;
                }
            }
        }
    }

    /// Files `objects` as applied.
    pub fn extend(&self, objects: impl IntoIterator<Item = Arc<K>>)
    where
        K: Clone,
    {
        for obj in objects {
            self.apply(&Event::Apply(K::clone(&obj)));
        }
    }

    /// The names filed under `key` in `namespace`, sorted: the caller checks the objects it
    /// reads by them (see the module's note on hashes).
    pub fn get(&self, namespace: &str, key: &str) -> Vec<String> {
        let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
        let names = state.current.by_key.get(&state.slot(namespace, key));
        names.into_iter().flatten().map(ToString::to_string).collect()
    }

    /// `filter`, then this index following what it passes on: the filter a reflector of the
    /// indexed store is given.
    pub fn following(
        &self,
        mut filter: impl FnMut(Event<K>) -> Option<Event<K>> + Send + 'static,
    ) -> impl FnMut(Event<K>) -> Option<Event<K>> + Send + 'static
    where
        K: Send + Sync + 'static,
    {
        let index = self.clone();
        move |event| {
            let out = filter(event);
            if let Some(event) = &out {
                index.apply(event);
            }
            out
        }
    }
}

/// The UID of `meta`'s controlling owner of `kind`, as the one key of an [`Index`] of owned
/// objects.
pub fn controller_uid(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    kind: &str,
) -> Vec<String> {
    meta.owner_references
        .iter()
        .flatten()
        .filter(|r| r.controller == Some(true) && r.kind == kind)
        .map(|r| r.uid.clone())
        .take(1)
        .collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    fn map(namespace: &str, name: &str, keys: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                labels: Some([("keys".to_string(), keys.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn keys(map: &ConfigMap) -> Vec<String> {
        let keys = map.metadata.labels.as_ref().and_then(|l| l.get("keys"));
        keys.map(|k| k.split(',').filter(|k| !k.is_empty()).map(String::from).collect())
            .unwrap_or_default()
    }

    /// An index holds what the store holds after each event: applies refile, deletes
    /// unfile, and a relist replaces everything at its end (not before).
    #[test]
    fn follows_the_store() {
        let index = Index::new(keys as KeysOf<ConfigMap>);
        type Expect = [(&'static str, &'static str, Vec<&'static str>); 2];
        let steps: Vec<(Event<ConfigMap>, Expect)> = vec![
            (
                Event::Apply(map("a", "x", "k1,k2")),
                [("a", "k1", vec!["x"]), ("a", "k2", vec!["x"])],
            ),
            (
                Event::Apply(map("a", "y", "k1")),
                [("a", "k1", vec!["x", "y"]), ("b", "k1", vec![])],
            ),
            (
                Event::Apply(map("a", "x", "k2")),
                [("a", "k1", vec!["y"]), ("a", "k2", vec!["x"])],
            ),
            (
                Event::Delete(map("a", "y", "k1")),
                [("a", "k1", vec![]), ("a", "k2", vec!["x"])],
            ),
            (Event::Init, [("a", "k1", vec![]), ("a", "k2", vec!["x"])]),
            (
                Event::InitApply(map("b", "z", "k1")),
                [("b", "k1", vec![]), ("a", "k2", vec!["x"])],
            ),
            (Event::InitDone, [("b", "k1", vec!["z"]), ("a", "k2", vec![])]),
        ];
        for (i, (event, expected)) in steps.into_iter().enumerate() {
            index.apply(&event);
            for (namespace, key, names) in expected {
                assert_eq!(index.get(namespace, key), names, "step {i}: {namespace}/{key}");
            }
        }
    }

    /// A key's names come sorted whatever order they were filed in, each once however often
    /// its object is applied.
    #[test]
    fn names_come_sorted_and_once() {
        let index = Index::new(keys as KeysOf<ConfigMap>);
        for name in ["y", "w", "x", "w"] {
            index.apply(&Event::Apply(map("a", name, "k")));
        }
        assert_eq!(index.get("a", "k"), ["w", "x", "y"]);
        index.apply(&Event::Delete(map("a", "x", "k")));
        assert_eq!(index.get("a", "k"), ["w", "y"]);
    }

    /// The index follows what the filter passes on, not what the watch sent.
    #[test]
    fn follows_the_filter() {
        let index = Index::new(keys as KeysOf<ConfigMap>);
        let mut filter = index.following(|event| match event {
            Event::Apply(m) if m.metadata.name.as_deref() == Some("dropped") => None,
            event => Some(event),
        });
        assert!(filter(Event::Apply(map("a", "dropped", "k"))).is_none());
        assert!(filter(Event::Apply(map("a", "kept", "k"))).is_some());
        assert_eq!(index.get("a", "k"), vec!["kept".to_string()]);
    }
}
