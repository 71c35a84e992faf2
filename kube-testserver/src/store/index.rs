//! What the garbage collector and namespace controller look objects up by, kept by every
//! commit: with them a delete costs the objects it concerns, not a pass over the whole store
//! (which made each delete O(N) and a run of N deletes O(N^2)).
//!
//! The indexes only narrow the search: callers still apply the collector's own rules to the
//! objects they name, so what gets collected, and in which order, is what a full pass finds.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use super::{ObjKey, foreground::FOREGROUND};
use crate::{meta, resources::StorageKey};

/// Where one object is stored.
pub type Loc = (StorageKey, ObjKey);

#[derive(Debug, Default)]
pub struct Index {
    /// Stored objects by uid.
    uids: HashMap<String, BTreeSet<Loc>>,
    /// Objects by the owner uids their ownerReferences give (`""` for a reference without one).
    dependents: HashMap<String, BTreeSet<Loc>>,
    /// Owner uids some object refers to that no stored object has.
    missing: BTreeSet<String>,
    /// Objects being deleted that hold the `foregroundDeletion` finalizer.
    foreground: BTreeSet<Loc>,
    /// How many objects each namespace holds, of every kind.
    per_namespace: HashMap<String, usize>,
}

fn owner_uids(obj: &Value) -> BTreeSet<&str> {
    meta::metadata(obj)
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|r| r.get("uid").and_then(Value::as_str).unwrap_or_default())
        .collect()
}

fn waits_in_foreground(obj: &Value) -> bool {
    meta::is_deleting(obj) && meta::finalizers(obj).iter().any(|f| f == FOREGROUND)
}

impl Index {
    /// Records that the object at `loc` went from `old` to `new` (None or null: absent).
    pub fn update(&mut self, loc: &Loc, old: Option<&Value>, new: Option<&Value>) {
        if let Some(old) = old.filter(|o| o.is_object()) {
            self.forget(loc, old);
        }
        if let Some(new) = new.filter(|o| o.is_object()) {
            self.note(loc, new);
        }
    }

    fn forget(&mut self, loc: &Loc, obj: &Value) {
        if let Some(uid) = meta::uid(obj)
            && let Some(locs) = self.uids.get_mut(uid)
        {
            locs.remove(loc);
            if locs.is_empty() {
                self.uids.remove(uid);
                if self.dependents.contains_key(uid) {
                    self.missing.insert(uid.to_string());
                }
            }
        }
        for owner in owner_uids(obj) {
            if let Some(deps) = self.dependents.get_mut(owner) {
                deps.remove(loc);
                if deps.is_empty() {
                    self.dependents.remove(owner);
                    self.missing.remove(owner);
                }
            }
        }
        self.foreground.remove(loc);
        if let Some(n) = self.per_namespace.get_mut(&loc.1.namespace) {
            *n -= 1;
            if *n == 0 {
                self.per_namespace.remove(&loc.1.namespace);
            }
        }
    }

    fn note(&mut self, loc: &Loc, obj: &Value) {
        if let Some(uid) = meta::uid(obj) {
            self.uids.entry(uid.to_string()).or_default().insert(loc.clone());
            self.missing.remove(uid);
        }
        for owner in owner_uids(obj) {
            self.dependents
                .entry(owner.to_string())
                .or_default()
                .insert(loc.clone());
            if !self.uids.contains_key(owner) {
                self.missing.insert(owner.to_string());
            }
        }
        if waits_in_foreground(obj) {
            self.foreground.insert(loc.clone());
        }
        *self.per_namespace.entry(loc.1.namespace.clone()).or_default() += 1;
    }

    pub fn is_live(&self, uid: &str) -> bool {
        self.uids.contains_key(uid)
    }

    /// Where objects with this uid are stored.
    pub fn with_uid(&self, uid: &str) -> impl Iterator<Item = &Loc> {
        self.uids.get(uid).into_iter().flatten()
    }

    /// Objects whose ownerReferences give `uid`, in store order.
    pub fn dependents_of(&self, uid: &str) -> impl Iterator<Item = &Loc> {
        self.dependents.get(uid).into_iter().flatten()
    }

    /// Objects that refer to at least one owner no stored object is, in store order.
    pub fn with_missing_owner(&self) -> BTreeSet<&Loc> {
        self.missing
            .iter()
            .flat_map(|uid| self.dependents_of(uid))
            .collect()
    }

    /// Objects waiting in foreground deletion, in store order.
    pub fn in_foreground(&self) -> impl Iterator<Item = &Loc> {
        self.foreground.iter()
    }

    pub fn occupied(&self, namespace: &str) -> bool {
        self.per_namespace.contains_key(namespace)
    }
}
