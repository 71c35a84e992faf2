//! Server-side apply, simplified.
//!
//! Ownership is derived from each apply manager's last applied configuration (which
//! `managed_fields.rs` encodes as `metadata.managedFields`). From those it derives:
//! - **merge**: maps merge per key, list-maps (`x-kubernetes-list-type: map`, `ownerReferences`,
//!   and `conditions` of built-in kinds) merge per item key, sets union, other lists and
//!   scalars are replaced;
//! - **removal**: a field this manager applied last time but not now is removed, unless another
//!   apply manager's configuration also sets it (list-map items and set members likewise);
//! - **conflicts**: without `force`, setting a leaf to a value that differs from the live one
//!   while another apply manager's configuration sets that leaf is a 409; with `force` the leaf
//!   moves to this manager (it leaves the other manager's configuration).
//!
//! Update and patch writers own nothing here; a leaf they change or remove stops belonging to
//! the applier that set it (so it no longer conflicts, and is not removed when that applier
//! drops it). Real servers would make the updater its owner, so an apply that changes it
//! would conflict with the updater; this server lets such applies through.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{
    meta::Object,
    schema::{Cursor, ListType},
};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Seg {
    Field(String),
    /// A list-map item: its key fields and their JSON-encoded values.
    Key(Vec<(String, String)>),
    /// A set member, JSON-encoded.
    Member(String),
}

pub(super) type Path = Vec<Seg>;

/// Each node a configuration sets, with the value for leaves (scalars, atomic lists and maps,
/// set members) and `None` for maps and list-map items.
pub(super) type Fields = BTreeMap<Path, Option<Value>>;

/// Metadata fields a configuration can own; the rest are the server's.
const OWNED_METADATA: &[&str] = &["labels", "annotations", "finalizers", "ownerReferences"];

/// A configuration without the parts nobody owns (`apiVersion`, `kind`, server-set metadata).
pub fn owned_part(config: &Value) -> Value {
    let mut out = config.clone();
    if let Some(map) = out.as_object_mut() {
        map.remove("apiVersion");
        map.remove("kind");
        if let Some(Value::Object(meta)) = map.get_mut("metadata") {
            meta.retain(|k, _| OWNED_METADATA.contains(&k.as_str()));
        }
    }
    out
}

fn collect(v: &Value, cur: Cursor, path: &mut Path, out: &mut Fields) {
    let Some(map) = v.as_object() else { return };
    for (key, child) in map {
        path.push(Seg::Field(key.clone()));
        let child_cur = cur.field(key);
        match child {
            Value::Object(_) if !child_cur.atomic_map() => {
                out.insert(path.clone(), None);
                collect(child, child_cur, path, out);
            }
            Value::Array(items) => match child_cur.list_type(key) {
                ListType::Map(keys) => {
                    out.insert(path.clone(), None);
                    for item in items {
                        path.push(Seg::Key(item_key(item, &keys)));
                        out.insert(path.clone(), None);
                        collect(item, child_cur.items(), path, out);
                        path.pop();
                    }
                }
                ListType::Set => {
                    out.insert(path.clone(), None);
                    for item in items {
                        path.push(Seg::Member(encode(item)));
                        out.insert(path.clone(), Some(item.clone()));
                        path.pop();
                    }
                }
                ListType::Atomic => {
                    out.insert(path.clone(), Some(child.clone()));
                }
            },
            _ => {
                out.insert(path.clone(), Some(child.clone()));
            }
        }
        path.pop();
    }
}

pub(super) fn fields(config: &Value, schema: Option<&Value>) -> Fields {
    let mut out = Fields::new();
    collect(config, Cursor::root(schema), &mut Vec::new(), &mut out);
    out
}

/// Set members and key values are compared by their JSON text.
fn encode(v: &Value) -> String {
    v.to_string()
}

fn item_key(item: &Value, keys: &[String]) -> Vec<(String, String)> {
    keys.iter()
        .map(|k| (k.clone(), item.get(k).map(encode).unwrap_or_default()))
        .collect()
}

fn matches_seg(item: &Value, seg: &Seg) -> bool {
    match seg {
        Seg::Key(kv) => kv
            .iter()
            .all(|(k, v)| item.get(k).map(encode).unwrap_or_default() == *v),
        Seg::Member(m) => *m == encode(item),
        Seg::Field(_) => false,
    }
}

fn child<'v>(v: &'v Value, seg: &Seg) -> Option<&'v Value> {
    match (v, seg) {
        (Value::Object(m), Seg::Field(f)) => m.get(f),
        (Value::Array(items), seg) => items.iter().find(|i| matches_seg(i, seg)),
        _ => None,
    }
}

fn child_mut<'v>(v: &'v mut Value, seg: &Seg) -> Option<&'v mut Value> {
    match (v, seg) {
        (Value::Object(m), Seg::Field(f)) => m.get_mut(f),
        (Value::Array(items), seg) => items.iter_mut().find(|i| matches_seg(i, seg)),
        _ => None,
    }
}

pub(super) fn get<'v>(v: &'v Value, path: &[Seg]) -> Option<&'v Value> {
    path.iter().try_fold(v, child)
}

/// Removes the node at `path`; with `only_if_empty`, only an empty map or list.
fn remove(v: &mut Value, path: &[Seg], only_if_empty: bool) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    let Some(parent) = parent_path.iter().try_fold(v, |v, seg| child_mut(v, seg)) else {
        return;
    };
    if only_if_empty {
        let empty = match child(parent, last) {
            Some(Value::Object(m)) => m.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            _ => false,
        };
        if !empty {
            return;
        }
    }
    match (parent, last) {
        (Value::Object(m), Seg::Field(f)) => {
            m.remove(f);
        }
        (Value::Array(items), seg) => items.retain(|i| !matches_seg(i, seg)),
        _ => {}
    }
}

fn merge(target: &mut Value, config: &Value, cur: Cursor) {
    let Some(config) = config.as_object() else { return };
    if !target.is_object() {
        *target = Value::Object(Object::new());
    }
    let target = target.as_object_mut().expect("made an object");
    for (key, value) in config {
        let child_cur = cur.field(key);
        match value {
            Value::Null => {
                target.remove(key);
            }
            Value::Object(_) if !child_cur.atomic_map() => {
                merge(target.entry(key.clone()).or_insert(Value::Null), value, child_cur);
            }
            Value::Array(items) => {
                let list_type = child_cur.list_type(key);
                if list_type == ListType::Atomic {
                    target.insert(key.clone(), value.clone());
                    continue;
                }
                let current = target.entry(key.clone()).or_insert_with(|| Value::Array(vec![]));
                if !current.is_array() {
                    *current = Value::Array(vec![]);
                }
                let list = current.as_array_mut().expect("made an array");
                for item in items {
                    let seg = match &list_type {
                        ListType::Map(keys) => Seg::Key(item_key(item, keys)),
                        _ => Seg::Member(encode(item)),
                    };
                    match list.iter_mut().find(|i| matches_seg(i, &seg)) {
                        Some(existing) if matches!(list_type, ListType::Map(_)) => {
                            merge(existing, item, child_cur.items());
                        }
                        Some(_) => {}
                        None => list.push(item.clone()),
                    }
                }
            }
            _ => {
                target.insert(key.clone(), value.clone());
            }
        }
    }
}

/// `.spec.x`, `.status.conditions[type="Ready"].status`: how conflict messages name fields.
fn display(path: &[Seg]) -> String {
    path.iter()
        .map(|seg| match seg {
            Seg::Field(f) => format!(".{f}"),
            Seg::Key(kv) => {
                let parts: Vec<String> = kv.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("[{}]", parts.join(","))
            }
            Seg::Member(m) => format!("[{m}]"),
        })
        .collect()
}

/// One apply request.
pub struct Apply<'a> {
    /// The live object, if it exists.
    pub current: Option<&'a Value>,
    /// This manager's configuration now (already reduced to [`owned_part`]).
    pub config: &'a Value,
    /// This manager's previous configuration for the same subresource.
    pub previous: Option<&'a Value>,
    /// Other apply managers' configurations; `force` takes conflicting leaves from them.
    pub others: &'a mut [(String, Value)],
    pub schema: Option<&'a Value>,
    pub force: bool,
}

/// `(manager, field)` pairs that block an apply without `force`.
pub type Conflicts = Vec<(String, String)>;

impl Apply<'_> {
    /// The object after applying, or the conflicts that stop it.
    pub fn run(mut self) -> Result<Value, Conflicts> {
        let mine = fields(self.config, self.schema);
        let empty = Value::Null;
        let current = self.current.unwrap_or(&empty);
        let conflicts = self.contest(&mine, current);
        if !conflicts.is_empty() {
            return Err(conflicts);
        }
        let mut object = current.clone();
        if !object.is_object() {
            object = Value::Object(Object::new());
        }
        self.release(&mine, current, &mut object);
        merge(&mut object, self.config, Cursor::root(self.schema));
        Ok(object)
    }

    /// Leaves this configuration changes that another apply manager still owns: conflicts, or
    /// with `force`, taken from that manager.
    fn contest(&mut self, mine: &Fields, current: &Value) -> Conflicts {
        let mut conflicts = Vec::new();
        for (manager, config) in self.others.iter_mut() {
            let theirs = live(fields(config, self.schema), current);
            let contested: Vec<&Path> = mine
                .iter()
                .filter_map(|(path, leaf)| leaf.as_ref().map(|v| (path, v)))
                .filter(|(path, value)| theirs.contains_key(*path) && get(current, path) != Some(value))
                .map(|(path, _)| path)
                .collect();
            if self.force {
                for path in contested {
                    remove(config, path, false);
                }
            } else {
                conflicts.extend(contested.into_iter().map(|p| (manager.clone(), display(p))));
            }
        }
        conflicts
    }

    /// Removes what this manager applied before and no longer does, unless another apply
    /// manager owns it too.
    fn release(&self, mine: &Fields, current: &Value, object: &mut Value) {
        let Some(previous) = self.previous else { return };
        let owned_by_others: BTreeSet<Path> = self
            .others
            .iter()
            .flat_map(|(_, c)| live(fields(c, self.schema), current).into_keys())
            .collect();
        let mut released: Vec<(Path, bool)> = live(fields(previous, self.schema), current)
            .into_iter()
            .filter(|(path, _)| !mine.contains_key(path) && !owned_by_others.contains(path))
            .map(|(path, leaf)| (path, leaf.is_none()))
            .collect();
        // Deepest first, so that a map or list emptied by removals can go too.
        released.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
        for (path, container) in released {
            let is_item = matches!(path.last(), Some(Seg::Key(_)));
            remove(object, &path, container && !is_item);
        }
    }
}

/// The fields a manager still owns: a leaf someone has since changed or removed (with an
/// update or patch) is no longer the applier's, as in real server-side apply.
pub(super) fn live(fields: Fields, current: &Value) -> Fields {
    fields
        .into_iter()
        .filter(|(path, leaf)| leaf.as_ref().is_none_or(|v| get(current, path) == Some(v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn apply(
        current: &Value,
        config: Value,
        previous: Option<Value>,
        others: &mut [(String, Value)],
    ) -> Value {
        let config = owned_part(&config);
        Apply {
            current: Some(current),
            config: &config,
            previous: previous.as_ref(),
            others,
            schema: None,
            force: true,
        }
        .run()
        .unwrap()
    }

    #[test]
    fn conditions_of_two_managers_survive() {
        let live = json!({ "status": { "conditions": [{ "type": "Approved", "status": "True" }] } });
        let mut others = [("approver".to_string(), owned_part(&live))];
        let out = apply(
            &live,
            json!({ "status": { "conditions": [{ "type": "Ready", "status": "False" }] } }),
            None,
            &mut others,
        );
        assert_eq!(
            out["status"]["conditions"],
            json!([{ "type": "Approved", "status": "True" }, { "type": "Ready", "status": "False" }])
        );
    }

    #[test]
    fn fields_dropped_from_the_config_are_removed() {
        let prev = json!({ "spec": { "a": 1, "b": { "c": 2 } }, "metadata": { "labels": { "x": "1" } } });
        let live = json!({ "metadata": { "name": "n", "labels": { "x": "1", "other": "y" } }, "spec": { "a": 1, "b": { "c": 2 }, "z": 3 } });
        let out = apply(
            &live,
            json!({ "spec": { "a": 5 } }),
            Some(owned_part(&prev)),
            &mut [],
        );
        assert_eq!(
            out,
            json!({ "metadata": { "name": "n", "labels": { "other": "y" } }, "spec": { "a": 5, "z": 3 } })
        );
    }

    #[test]
    fn removal_spares_what_others_applied() {
        let prev = json!({ "status": { "conditions": [{ "type": "Ready", "status": "True" }] } });
        let live = prev.clone();
        let mut others = [("other".to_string(), prev.clone())];
        let out = apply(&live, json!({ "status": {} }), Some(prev), &mut others);
        assert_eq!(out["status"]["conditions"][0]["type"], "Ready");
    }

    #[test]
    fn conflicts_without_force_and_transfer_with_force() {
        let live = json!({ "spec": { "url": "a" } });
        let mut others = [("first".to_string(), live.clone())];
        let config = json!({ "spec": { "url": "b" } });
        let err = Apply {
            current: Some(&live),
            config: &config,
            previous: None,
            others: &mut others,
            schema: None,
            force: false,
        }
        .run()
        .unwrap_err();
        assert_eq!(err, [("first".to_string(), ".spec.url".to_string())]);
        let out = Apply {
            current: Some(&live),
            config: &config,
            previous: None,
            others: &mut others,
            schema: None,
            force: true,
        }
        .run()
        .unwrap();
        assert_eq!(out["spec"]["url"], "b");
        assert_eq!(others[0].1, json!({ "spec": {} }));
    }

    #[test]
    fn sets_union_and_atomic_lists_replace() {
        let live = json!({ "metadata": { "finalizers": ["a"] }, "spec": { "hosts": ["x", "y"] } });
        let out = apply(
            &live,
            json!({ "metadata": { "finalizers": ["b"] }, "spec": { "hosts": ["z"] } }),
            None,
            &mut [],
        );
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "b"]));
        assert_eq!(out["spec"]["hosts"], json!(["z"]));
    }

    #[test]
    fn fields_changed_by_others_since_are_no_longer_owned() {
        // "first" applied holder=a, then an update removed it: "second" may apply it freely.
        let live_obj = json!({ "spec": { "renew": "t" } });
        let mut others = [("first".to_string(), json!({ "spec": { "holder": "a" } }))];
        let config = json!({ "spec": { "holder": "b" } });
        let out = Apply {
            current: Some(&live_obj),
            config: &config,
            previous: None,
            others: &mut others,
            schema: None,
            force: false,
        }
        .run()
        .unwrap();
        assert_eq!(out["spec"]["holder"], "b");
        // And a manager does not remove what someone else has changed since it applied it.
        let live_obj = json!({ "spec": { "holder": "changed" } });
        let out = apply(
            &live_obj,
            json!({ "spec": {} }),
            Some(json!({ "spec": { "holder": "a" } })),
            &mut [],
        );
        assert_eq!(out["spec"]["holder"], "changed");
    }
}
