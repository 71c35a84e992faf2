//! Objects, resource versions, watch history and the write rules kube-apiserver applies.
//!
//! Everything happens under one lock (the caller's), so each request is atomic and watch
//! subscribers see every change in resourceVersion order. Writes are in [`write`], deletion,
//! finalizers and garbage collection in [`delete`], kind-specific rules in [`kinds`].

mod delete;
mod foreground;
mod index;
mod kinds;
mod managed;
mod write;

use std::{
    collections::{BTreeMap, VecDeque},
    sync::Arc,
};

use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::{
    error::{ApiError, ApiResult},
    meta,
    resources::{Registry, ResourceType, StorageKey},
};

/// Namespaces every cluster starts with.
const INITIAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjKey {
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    pub name: String,
}

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Sub {
    Main,
    Status,
    /// CertificateSigningRequests' `approval`: conditions only.
    Approval,
}

/// A server-side apply manager and the subresource it applied to.
type ManagerKey = (String, Sub);

#[derive(Debug, Clone, Default)]
struct Entry {
    obj: Value,
    /// Last configuration each server-side apply manager applied, per subresource.
    applied: BTreeMap<ManagerKey, Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "ADDED",
            ChangeKind::Modified => "MODIFIED",
            ChangeKind::Deleted => "DELETED",
        }
    }
}

/// One committed write, as watches replay it. Objects are in stored form.
#[derive(Debug)]
pub struct Change {
    pub rv: u64,
    pub storage: StorageKey,
    pub key: ObjKey,
    pub kind: ChangeKind,
    pub object: Value,
    /// The object before a modification, so selector watches can turn it into ADDED/DELETED.
    pub old: Option<Value>,
    /// This change as watchers have rendered it.
    pub lines: crate::watch::Lines,
}

#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    pub dry_run: bool,
    /// `fieldValidation=Strict`: unknown fields are an error instead of being pruned.
    pub strict: bool,
    /// Who writes, for kinds that record their requester (CertificateSigningRequests); None
    /// keeps what the object says.
    pub requester: Option<super::access::UserInfo>,
}

/// Who applies, how, and to which part of the object.
#[derive(Debug, Clone, Copy)]
pub struct ApplyRequest<'a> {
    pub manager: &'a str,
    pub force: bool,
    pub sub: Sub,
    pub opts: &'a WriteOptions,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Propagation {
    /// Dependents go once the owner is gone.
    #[default]
    Background,
    /// The owner waits, with the `foregroundDeletion` finalizer, until its dependents are
    /// deleted and those with `blockOwnerDeletion` are gone.
    Foreground,
    /// Dependents lose their ownerReference to the owner and stay.
    Orphan,
}

#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub propagation: Propagation,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub dry_run: bool,
}

/// The outcome of a delete.
#[derive(Debug)]
pub enum Deleted {
    /// Removed; the last state, as the DELETED event carries it.
    Gone(Value),
    /// Marked with deletionTimestamp and waiting for finalizers (or namespace contents).
    Pending(Value),
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy)]
pub enum Since {
    /// Current objects, as synthetic ADDED events.
    Now,
    /// Changes after this resourceVersion, from history.
    After(u64),
}

/// A watch's starting point, taken atomically with its subscription.
pub struct WatchStart {
    pub initial: Vec<(ChangeKind, Value, Option<Value>)>,
    pub rx: broadcast::Receiver<Arc<Change>>,
    pub rv: u64,
}

pub struct Store {
    pub registry: Registry,
    objects: BTreeMap<StorageKey, BTreeMap<ObjKey, Entry>>,
    rv: u64,
    history: VecDeque<Arc<Change>>,
    history_limit: usize,
    /// Changes at or below this resourceVersion may be missing from `history`.
    compacted: u64,
    changes: broadcast::Sender<Arc<Change>>,
    index: index::Index,
}

fn rv_of(obj: &Value) -> Option<&str> {
    meta::meta_str(obj, "resourceVersion")
}

fn ns_key(rt: &ResourceType, ns: Option<&str>, name: &str) -> ObjKey {
    let namespace = if rt.namespaced {
        ns.unwrap_or_default().to_string()
    } else {
        String::new()
    };
    ObjKey {
        namespace,
        name: name.to_string(),
    }
}

impl Store {
    pub fn new(history_limit: usize, watch_buffer: usize) -> Self {
        let (changes, _) = broadcast::channel(watch_buffer.max(1));
        let mut store = Store {
            registry: Registry::default(),
            objects: BTreeMap::new(),
            rv: 0,
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            compacted: 0,
            changes,
            index: index::Index::default(),
        };
        let ns_type = store
            .registry
            .lookup("", "v1", "namespaces")
            .expect("namespaces are built in");
        for ns in INITIAL_NAMESPACES {
            let obj = json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": ns } });
            store
                .create(&ns_type, None, obj, &WriteOptions::default())
                .expect("seed namespace");
        }
        store
    }

    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    /// Forgets all watch history: watches resuming from an older resourceVersion get 410.
    pub fn compact(&mut self) {
        self.history.clear();
        self.compacted = self.rv;
    }

    pub fn is_expired(&self, rv: u64) -> bool {
        rv < self.compacted
    }

    fn entries(&self, storage: &StorageKey) -> Option<&BTreeMap<ObjKey, Entry>> {
        self.objects.get(storage)
    }

    fn entry(&self, rt: &ResourceType, key: &ObjKey) -> ApiResult<&Entry> {
        self.entries(&rt.storage)
            .and_then(|m| m.get(key))
            .ok_or_else(|| ApiError::not_found(&rt.qualified(), &key.name))
    }

    fn commit(&mut self, storage: &StorageKey, key: &ObjKey, kind: ChangeKind, mut obj: Value) -> Value {
        self.rv += 1;
        meta::set_meta(&mut obj, "resourceVersion", self.rv.to_string());
        let objects = self.objects.entry(storage.clone()).or_default();
        let old = match kind {
            ChangeKind::Deleted => objects.remove(key).map(|e| e.obj),
            _ => {
                let entry = objects.entry(key.clone()).or_default();
                Some(std::mem::replace(&mut entry.obj, obj.clone()))
            }
        };
        let loc = (storage.clone(), key.clone());
        let new = (kind != ChangeKind::Deleted).then_some(&obj);
        self.index.update(&loc, old.as_ref(), new);
        let change = Arc::new(Change {
            rv: self.rv,
            storage: storage.clone(),
            key: key.clone(),
            kind,
            object: obj.clone(),
            old: old.filter(|o| !o.is_null() && kind == ChangeKind::Modified),
            lines: Default::default(),
        });
        self.history.push_back(Arc::clone(&change));
        while self.history.len() > self.history_limit {
            if let Some(dropped) = self.history.pop_front() {
                self.compacted = dropped.rv;
            }
        }
        // No receivers is fine: nobody is watching.
        let _ = self.changes.send(change);
        obj
    }

    pub fn get(&self, rt: &ResourceType, ns: Option<&str>, name: &str) -> ApiResult<Value> {
        self.entry(rt, &ns_key(rt, ns, name)).map(|e| e.obj.clone())
    }

    /// Objects in key order (namespace, then name), as etcd returns them.
    pub fn list(&self, rt: &ResourceType, ns: Option<&str>) -> Vec<(ObjKey, Value)> {
        self.scan(rt, ns, None)
            .map(|(k, o)| (k.clone(), o.clone()))
            .collect()
    }

    /// Objects after `after` in key order, borrowed: a page of a paginated list costs the page,
    /// not a copy of every object of the kind (kube's reflectors list in pages of 500). Keys
    /// sort by namespace first, so one namespace's objects are one range of them.
    pub fn scan<'a>(
        &'a self,
        rt: &ResourceType,
        ns: Option<&'a str>,
        after: Option<&ObjKey>,
    ) -> impl Iterator<Item = (&'a ObjKey, &'a Value)> + 'a {
        use std::ops::Bound;
        let first = ns.map(|ns| ObjKey {
            namespace: ns.to_string(),
            name: String::new(),
        });
        let lower = match (after, first) {
            (Some(a), Some(first)) if *a < first => Bound::Included(first),
            (Some(a), _) => Bound::Excluded(a.clone()),
            (None, Some(first)) => Bound::Included(first),
            (None, None) => Bound::Unbounded,
        };
        self.entries(&rt.storage)
            .into_iter()
            .flat_map(move |m| m.range((lower.clone(), Bound::Unbounded)))
            .take_while(move |(k, _)| ns.is_none_or(|ns| k.namespace == ns))
            .map(|(k, e)| (k, &e.obj))
    }

    /// As [`Store::scan`], narrowed to the one object `name` when a selector pins it: a list
    /// of one object by name is a lookup, not a scan of its namespace. Across namespaces a
    /// name pins nothing.
    pub fn scan_pinned<'a>(
        &'a self,
        rt: &ResourceType,
        ns: Option<&'a str>,
        after: Option<&ObjKey>,
        name: Option<&str>,
    ) -> Box<dyn Iterator<Item = (&'a ObjKey, &'a Value)> + 'a> {
        let Some(name) = name.filter(|_| ns.is_some() || !rt.namespaced) else {
            return Box::new(self.scan(rt, ns, after));
        };
        let key = ns_key(rt, ns, name);
        if after.is_some_and(|after| *after >= key) {
            return Box::new(std::iter::empty());
        }
        let found = self.entries(&rt.storage).and_then(|m| m.get_key_value(&key));
        Box::new(found.into_iter().map(|(k, e)| (k, &e.obj)))
    }

    /// Subscribes a watch and takes its starting point in one step, so nothing falls between.
    pub fn watch(&self, rt: &ResourceType, ns: Option<&str>, since: Since) -> ApiResult<WatchStart> {
        let rx = self.changes.subscribe();
        let initial = match since {
            Since::Now => self
                .list(rt, ns)
                .into_iter()
                .map(|(_, o)| (ChangeKind::Added, o, None))
                .collect(),
            Since::After(rv) if self.is_expired(rv) => {
                return Err(ApiError::expired(format!(
                    "too old resource version: {rv} ({})",
                    self.compacted + 1
                )));
            }
            Since::After(rv) => self
                .history
                .iter()
                .filter(|c| c.rv > rv && c.storage == rt.storage && ns.is_none_or(|ns| c.key.namespace == ns))
                .map(|c| (c.kind, c.object.clone(), c.old.clone()))
                .collect(),
        };
        Ok(WatchStart {
            initial,
            rx,
            rv: self.rv,
        })
    }
}
