//! Deletion: finalizers, namespaces, and the garbage collector.

use serde_json::{Value, json};

use super::{
    ChangeKind, DeleteOptions, Deleted, ObjKey, Propagation, Store,
    kinds::{is_crd, is_namespace, namespace_storage},
    ns_key, rv_of,
};
use crate::{
    error::{ApiError, ApiResult},
    meta,
    resources::{ResourceType, StorageKey, crd_types},
};

impl Store {
    pub fn delete(
        &mut self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> ApiResult<Deleted> {
        let key = ns_key(rt, ns, name);
        let obj = self.entry(rt, &key)?.obj.clone();
        if let Some(uid) = &opts.uid
            && Some(uid.as_str()) != meta::uid(&obj)
        {
            let why = format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                meta::uid(&obj).unwrap_or_default()
            );
            return Err(ApiError::conflict(&rt.qualified(), name, &why));
        }
        if let Some(rv) = &opts.resource_version
            && Some(rv.as_str()) != rv_of(&obj)
        {
            let why = format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                rv_of(&obj).unwrap_or_default()
            );
            return Err(ApiError::conflict(&rt.qualified(), name, &why));
        }
        if opts.dry_run {
            return Ok(Deleted::Gone(obj));
        }
        if opts.propagation == Propagation::Orphan
            && let Some(uid) = meta::uid(&obj)
        {
            self.orphan_dependents(uid);
        }
        if opts.propagation == Propagation::Foreground && !meta::is_deleting(&obj) {
            self.hold_for_dependents(rt, &key);
        }
        let outcome = self.delete_entry(rt, &key);
        self.collect_garbage();
        Ok(outcome)
    }

    /// Deletes now, or marks deleting when finalizers (or a namespace's contents) hold it.
    pub(super) fn delete_entry(&mut self, rt: &ResourceType, key: &ObjKey) -> Deleted {
        let Some(entry) = self.objects.get(&rt.storage).and_then(|m| m.get(key)) else {
            return Deleted::Gone(Value::Null);
        };
        let mut obj = entry.obj.clone();
        let holds = !meta::finalizers(&obj).is_empty() || is_namespace(rt);
        if !holds {
            return Deleted::Gone(self.remove(rt, key, obj));
        }
        if meta::is_deleting(&obj) {
            return Deleted::Pending(obj);
        }
        let meta = meta::metadata_mut(&mut obj);
        meta.insert("deletionTimestamp".into(), meta::now_rfc3339().into());
        meta.insert("deletionGracePeriodSeconds".into(), 0.into());
        if let Some(generation) = meta.get("generation").and_then(Value::as_i64) {
            meta.insert("generation".into(), (generation + 1).into());
        }
        if is_namespace(rt) {
            obj["status"] = json!({ "phase": "Terminating" });
        }
        let obj = self.commit(&rt.storage, key, ChangeKind::Modified, obj);
        if is_namespace(rt) {
            self.empty_namespace(&key.name);
        }
        Deleted::Pending(obj)
    }

    /// Removes an object for good, with what removing it implies for CRDs.
    pub(super) fn remove(&mut self, rt: &ResourceType, key: &ObjKey, obj: Value) -> Value {
        let gone = self.commit(&rt.storage, key, ChangeKind::Deleted, obj);
        if is_crd(rt)
            && let Ok(types) = crd_types(&gone)
            && let Some(first) = types.first()
        {
            // The CRD's objects go with it (kube-apiserver waits for their finalizers; this does not).
            let keys: Vec<ObjKey> = self
                .entries(&first.storage)
                .into_iter()
                .flatten()
                .map(|(k, _)| k.clone())
                .collect();
            for k in keys {
                let obj = self
                    .objects
                    .get(&first.storage)
                    .and_then(|m| m.get(&k))
                    .map(|e| e.obj.clone());
                if let Some(obj) = obj {
                    self.commit(&first.storage, &k, ChangeKind::Deleted, obj);
                }
            }
            self.registry.unregister_crd(&key.name);
        }
        gone
    }

    fn empty_namespace(&mut self, ns: &str) {
        let victims: Vec<(StorageKey, ObjKey)> = self
            .objects
            .iter()
            .flat_map(|(s, m)| {
                m.keys()
                    .filter(|k| k.namespace == ns)
                    .map(move |k| (s.clone(), k.clone()))
            })
            .collect();
        for (storage, key) in victims {
            if let Some(rt) = self.registry.by_storage(&storage) {
                self.delete_entry(&rt, &key);
            }
        }
    }

    pub fn delete_collection(
        &mut self,
        rt: &ResourceType,
        ns: Option<&str>,
        keep: impl Fn(&Value) -> bool,
        opts: &DeleteOptions,
    ) -> Vec<Value> {
        // Borrowed: only the selected objects' keys are copied, not every object of the kind.
        let targets: Vec<ObjKey> = self
            .scan(rt, ns, None)
            .filter(|(_, o)| keep(o))
            .map(|(k, _)| k.clone())
            .collect();
        let mut out = Vec::new();
        for key in targets {
            let result = self.delete(
                rt,
                Some(&key.namespace).filter(|n| !n.is_empty()).map(String::as_str),
                &key.name,
                opts,
            );
            match result {
                Ok(Deleted::Gone(obj) | Deleted::Pending(obj)) => out.push(obj),
                Err(_) => {}
            }
        }
        out
    }

    fn orphan_dependents(&mut self, owner_uid: &str) {
        let dependents: Vec<(StorageKey, ObjKey, Value)> = self
            .index
            .dependents_of(owner_uid)
            .filter_map(|(s, k)| Some((s, k, &self.objects.get(s)?.get(k)?.obj)))
            .filter(|(_, _, o)| {
                meta::owner_references(o)
                    .iter()
                    .any(|r| r.get("uid").and_then(Value::as_str) == Some(owner_uid))
            })
            .map(|(s, k, o)| (s.clone(), k.clone(), o.clone()))
            .collect();
        for (storage, key, mut obj) in dependents {
            let refs: Vec<Value> = meta::owner_references(&obj)
                .into_iter()
                .filter(|r| r.get("uid").and_then(Value::as_str) != Some(owner_uid))
                .collect();
            let meta = meta::metadata_mut(&mut obj);
            if refs.is_empty() {
                meta.remove("ownerReferences");
            } else {
                meta.insert("ownerReferences".into(), refs.into());
            }
            self.commit(&storage, &key, ChangeKind::Modified, obj);
        }
    }

    /// The garbage collector and namespace controller, run to a fixed point after each write.
    pub(super) fn collect_garbage(&mut self) {
        loop {
            let progressed = self.collect_foreground();
            let (orphans, empty_namespaces) = (self.orphans(), self.empty_namespaces());
            if orphans.is_empty() && empty_namespaces.is_empty() && !progressed {
                return;
            }
            for (storage, key) in orphans {
                if let Some(rt) = self.registry.by_storage(&storage) {
                    self.delete_entry(&rt, &key);
                }
            }
            for (key, obj) in empty_namespaces {
                self.commit(&namespace_storage(), &key, ChangeKind::Deleted, obj);
            }
        }
    }

    /// Objects not yet deleting whose owners are all gone. Owners of kinds this server does
    /// not serve count as present: the real collector cannot resolve them either.
    fn orphans(&self) -> Vec<(StorageKey, ObjKey)> {
        let owner_gone = |r: &Value| {
            let field = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default();
            let known = self
                .registry
                .by_kind(field("apiVersion"), field("kind"))
                .is_some();
            known && !self.index.is_live(field("uid"))
        };
        // Only an object naming an owner that no stored object is can qualify.
        self.index
            .with_missing_owner()
            .into_iter()
            .filter_map(|(s, k)| Some((s, k, &self.objects.get(s)?.get(k)?.obj)))
            .filter(|(_, _, o)| !meta::is_deleting(o))
            .filter(|(_, _, o)| {
                let refs = meta::owner_references(o);
                !refs.is_empty() && refs.iter().all(owner_gone)
            })
            .map(|(s, k, _)| (s.clone(), k.clone()))
            .collect()
    }

    /// Terminating namespaces with no objects and no finalizers left.
    fn empty_namespaces(&self) -> Vec<(ObjKey, Value)> {
        let occupied = |ns: &str| self.index.occupied(ns);
        self.objects
            .get(&namespace_storage())
            .into_iter()
            .flatten()
            .filter(|(k, e)| {
                meta::is_deleting(&e.obj) && meta::finalizers(&e.obj).is_empty() && !occupied(&k.name)
            })
            .map(|(k, e)| (k.clone(), e.obj.clone()))
            .collect()
    }
}
