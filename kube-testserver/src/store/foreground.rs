//! Foreground cascading deletion, as the garbage collector runs it: the owner is marked
//! deleting with the `foregroundDeletion` finalizer, its dependents are deleted (or, when
//! another owner that is not being deleted still holds them, lose their reference to it), and
//! the finalizer goes once no dependent with `blockOwnerDeletion: true` is left, including
//! dependents that their own finalizers keep.
//!
//! Simplified: dependents are deleted in the background (the real collector deletes a
//! dependent that has dependents of its own in the foreground too), synchronously.

use serde_json::Value;

use super::{ChangeKind, ObjKey, Store};
use crate::{meta, resources::StorageKey};

/// The finalizer that holds an owner deleted with `propagationPolicy: Foreground`.
pub const FOREGROUND: &str = "foregroundDeletion";

fn refers_to(r: &Value, uid: &str) -> bool {
    r.get("uid").and_then(Value::as_str) == Some(uid)
}

fn blocks(r: &Value) -> bool {
    r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true)
}

impl Store {
    /// Adds the foreground finalizer to an owner about to be marked deleting (the same write).
    pub(super) fn hold_for_dependents(&mut self, rt: &crate::resources::ResourceType, key: &ObjKey) {
        let Some(entry) = self.objects.get_mut(&rt.storage).and_then(|m| m.get_mut(key)) else {
            return;
        };
        let mut finalizers = meta::finalizers(&entry.obj);
        if !finalizers.iter().any(|f| f == FOREGROUND) {
            finalizers.push(FOREGROUND.into());
            meta::set_meta(&mut entry.obj, "finalizers", finalizers);
        }
    }

    /// Objects that reference `uid` as an owner.
    fn dependents_of(&self, uid: &str) -> Vec<(StorageKey, ObjKey, Value)> {
        self.index
            .dependents_of(uid)
            .filter_map(|(s, k)| Some((s, k, &self.objects.get(s)?.get(k)?.obj)))
            .filter(|(_, _, o)| meta::owner_references(o).iter().any(|r| refers_to(r, uid)))
            .map(|(s, k, o)| (s.clone(), k.clone(), o.clone()))
            .collect()
    }

    /// Whether `dependent` has an owner besides `uid` that exists and is not being deleted.
    fn has_solid_owner(&self, dependent: &Value, uid: &str) -> bool {
        meta::owner_references(dependent)
            .iter()
            .filter(|r| !refers_to(r, uid))
            .filter_map(|r| r.get("uid").and_then(Value::as_str))
            .any(|other| {
                self.index
                    .with_uid(other)
                    .filter_map(|(s, k)| self.objects.get(s)?.get(k))
                    .any(|e| meta::uid(&e.obj) == Some(other) && !meta::is_deleting(&e.obj))
            })
    }

    /// One pass over owners waiting for their dependents; returns whether anything changed.
    pub(super) fn collect_foreground(&mut self) -> bool {
        let waiting: Vec<(StorageKey, ObjKey, String)> = self
            .index
            .in_foreground()
            .filter_map(|(s, k)| Some((s, k, &self.objects.get(s)?.get(k)?.obj)))
            .filter(|(_, _, o)| meta::is_deleting(o) && meta::finalizers(o).iter().any(|f| f == FOREGROUND))
            .filter_map(|(s, k, o)| Some((s.clone(), k.clone(), meta::uid(o)?.to_string())))
            .collect();
        let mut progressed = false;
        for (storage, key, uid) in waiting {
            for (dep_storage, dep_key, dependent) in self.dependents_of(&uid) {
                if meta::is_deleting(&dependent) {
                    continue;
                }
                progressed = true;
                if self.has_solid_owner(&dependent, &uid) {
                    self.drop_reference(&dep_storage, &dep_key, dependent, &uid);
                } else if let Some(rt) = self.registry.by_storage(&dep_storage) {
                    self.delete_entry(&rt, &dep_key);
                }
            }
            let blocked = self.dependents_of(&uid).iter().any(|(_, _, d)| {
                meta::owner_references(d)
                    .iter()
                    .any(|r| refers_to(r, &uid) && blocks(r))
            });
            if !blocked {
                self.release_owner(&storage, &key);
                progressed = true;
            }
        }
        progressed
    }

    fn drop_reference(&mut self, storage: &StorageKey, key: &ObjKey, mut dependent: Value, uid: &str) {
        let refs: Vec<Value> = meta::owner_references(&dependent)
            .into_iter()
            .filter(|r| !refers_to(r, uid))
            .collect();
        meta::set_meta(&mut dependent, "ownerReferences", refs);
        self.commit(storage, key, ChangeKind::Modified, dependent);
    }

    /// Removes the foreground finalizer; the owner goes if it was the last one.
    fn release_owner(&mut self, storage: &StorageKey, key: &ObjKey) {
        let Some(mut obj) = self
            .objects
            .get(storage)
            .and_then(|m| m.get(key))
            .map(|e| e.obj.clone())
        else {
            return;
        };
        let finalizers: Vec<String> = meta::finalizers(&obj)
            .into_iter()
            .filter(|f| f != FOREGROUND)
            .collect();
        if finalizers.is_empty() {
            meta::metadata_mut(&mut obj).remove("finalizers");
            if let Some(rt) = self.registry.by_storage(storage) {
                self.remove(&rt, key, obj);
            }
        } else {
            meta::set_meta(&mut obj, "finalizers", finalizers);
            self.commit(storage, key, ChangeKind::Modified, obj);
        }
    }
}
