//! `metadata.managedFields`, as kube-apiserver encodes them for server-side apply managers.
//!
//! Each apply manager gets one entry per subresource it applied to:
//! `{manager, operation: "Apply", apiVersion, time, fieldsType: "FieldsV1", fieldsV1,
//! subresource: "status"}` (no `subresource` for the main resource). `fieldsV1` is the
//! structured-merge-diff set of what the manager owns: `f:<name>` for fields, `k:<json>` for
//! list-map items (the key fields as compact JSON, sorted by name), `v:<json>` for set members;
//! a node owned itself is `{}`, and a list item owned with children also has `".": {}` (list
//! items are always owned as a whole; plain map fields are not, so they get no `.`).
//! What a manager owns is its last applied configuration, minus what another manager took
//! with `force` and minus leaves an update or patch has changed or removed since.
//!
//! Entries are ordered as the real server orders them: by operation, time, manager, apiVersion
//! and subresource. A manager's `time` moves when its apply changes the object.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{
    apply::{self, Fields, Seg},
    store::Sub,
};

/// One apply manager's record, as the store keeps it.
pub struct Owner<'a> {
    pub manager: &'a str,
    pub sub: Sub,
    pub config: &'a Value,
}

/// The apply being written, if any: its manager's entry gets this apiVersion, and a new time
/// when the object changed.
pub struct Applying<'a> {
    pub manager: &'a str,
    pub sub: Sub,
    pub api_version: &'a str,
}

/// Everything one encoding needs besides the owners.
pub struct Context<'a> {
    /// The object as it will be stored (without managedFields).
    pub object: &'a Value,
    pub schema: Option<&'a Value>,
    /// The managedFields stored before this write, for the times and apiVersions they carry.
    pub previous: &'a [Value],
    pub applying: Option<Applying<'a>>,
    /// Whether this write changes the object (besides managedFields).
    pub changed: bool,
    /// The apiVersion of the request, for managers with no previous entry.
    pub api_version: &'a str,
    pub now: &'a str,
}

/// A node of a field set: owned itself or not, and its children by path element.
#[derive(Default)]
struct Node {
    member: bool,
    children: BTreeMap<String, Node>,
}

impl Node {
    fn to_json(&self) -> Value {
        let mut out = Map::new();
        if self.member && !self.children.is_empty() {
            out.insert(".".into(), json!({}));
        }
        for (key, child) in &self.children {
            out.insert(key.clone(), child.to_json());
        }
        Value::Object(out)
    }
}

/// `f:name`, `k:{"type":"Ready"}`, `v:"finalizer"`.
fn element(seg: &Seg) -> String {
    match seg {
        Seg::Field(name) => format!("f:{name}"),
        Seg::Key(pairs) => {
            let mut pairs: Vec<&(String, String)> = pairs.iter().filter(|(_, v)| !v.is_empty()).collect();
            pairs.sort();
            let body: Vec<String> = pairs
                .iter()
                .map(|(k, v)| format!("{}:{v}", Value::String(k.clone())))
                .collect();
            format!("k:{{{}}}", body.join(","))
        }
        Seg::Member(json) => format!("v:{json}"),
    }
}

/// The `fieldsV1` of `fields`, or None when it owns nothing.
fn encode(fields: &Fields) -> Option<Value> {
    let mut root = Node::default();
    for (path, leaf) in fields {
        // Leaves and list items are owned themselves; maps and lists only hold them.
        let member = leaf.is_some() || matches!(path.last(), Some(Seg::Key(_)));
        if !member {
            continue;
        }
        let node = path.iter().fold(&mut root, |node, seg| {
            node.children.entry(element(seg)).or_default()
        });
        node.member = true;
    }
    (!root.children.is_empty()).then(|| root.to_json())
}

/// What a configuration still owns on `object`: its live leaves, and the maps and list items
/// that still exist.
pub fn owned(config: &Value, object: &Value, schema: Option<&Value>) -> Fields {
    apply::live(apply::fields(config, schema), object)
        .into_iter()
        .filter(|(path, leaf)| leaf.is_some() || apply::get(object, path).is_some())
        .collect()
}

/// The `fieldsV1` of what `config` owns on `object`.
pub fn fields_v1(config: &Value, object: &Value, schema: Option<&Value>) -> Option<Value> {
    encode(&owned(config, object, schema))
}

fn subresource(sub: Sub) -> Option<&'static str> {
    match sub {
        Sub::Main => None,
        Sub::Status => Some("status"),
        Sub::Approval => Some("approval"),
    }
}

fn previous_entry<'v>(previous: &'v [Value], manager: &str, sub: Sub) -> Option<&'v Value> {
    previous.iter().find(|e| {
        e.get("manager").and_then(Value::as_str) == Some(manager)
            && e.get("operation").and_then(Value::as_str) == Some("Apply")
            && e.get("subresource").and_then(Value::as_str) == subresource(sub)
    })
}

/// The entry of one owner, or None when it owns nothing any more.
fn entry(owner: &Owner, cx: &Context) -> Option<Value> {
    let fields = fields_v1(owner.config, cx.object, cx.schema)?;
    let before = previous_entry(cx.previous, owner.manager, owner.sub);
    let text = |field: &str| before.and_then(|e| e.get(field)).and_then(Value::as_str);
    let applying = cx
        .applying
        .as_ref()
        .filter(|a| a.manager == owner.manager && a.sub == owner.sub);
    let api_version = match applying {
        Some(a) => a.api_version,
        None => text("apiVersion").unwrap_or(cx.api_version),
    };
    let time = match (applying, text("time")) {
        (Some(_), Some(time)) if !cx.changed => time,
        (Some(_), _) | (None, None) => cx.now,
        (None, Some(time)) => time,
    };
    let mut out = json!({
        "manager": owner.manager, "operation": "Apply", "apiVersion": api_version, "time": time,
        "fieldsType": "FieldsV1", "fieldsV1": fields,
    });
    if let Some(sub) = subresource(owner.sub) {
        out["subresource"] = sub.into();
    }
    Some(out)
}

/// The managedFields of an object whose apply managers are `owners`.
pub fn entries<'a>(owners: impl IntoIterator<Item = Owner<'a>>, cx: &Context) -> Vec<Value> {
    let mut out: Vec<Value> = owners.into_iter().filter_map(|o| entry(&o, cx)).collect();
    let key = |e: &Value| {
        let text = |f: &str| e.get(f).and_then(Value::as_str).unwrap_or_default().to_string();
        (
            text("operation"),
            text("time"),
            text("manager"),
            text("apiVersion"),
            text("subresource"),
        )
    };
    out.sort_by_key(key);
    out
}

#[cfg(test)]
mod tests;
