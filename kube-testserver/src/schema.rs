//! Custom resource schemas: list semantics for server-side apply, and a structural check that
//! defaults, prunes unknown fields and rejects type errors as kube-apiserver does.
//!
//! The check covers `type`, `required`, `enum`, `nullable`, `default`, `properties`,
//! `additionalProperties`, `items`, `x-kubernetes-preserve-unknown-fields`,
//! `x-kubernetes-int-or-string` and `x-kubernetes-embedded-resource`. It skips formats,
//! patterns, numeric and length bounds, CEL rules, and `metadata` (only name rules apply there).
//!
//! Server-side apply is stricter than the other writes: [`typed_check`] refuses an applied
//! configuration that sets a field the schema does not declare, where the check above prunes it.

use serde_json::Value;

use super::{
    error::{ApiError, ApiResult, Reason},
    resources::ResourceType,
};

/// How server-side apply merges a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType {
    Atomic,
    Set,
    Map(Vec<String>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Metadata,
    /// A field of `metadata`.
    MetaField,
    Other,
}

/// A position in an object's schema, which may be unknown (built-in kinds carry none).
#[derive(Debug, Clone, Copy)]
pub struct Cursor<'a> {
    node: Option<&'a Value>,
    level: Level,
    /// Whether the object is a custom resource (it has a schema): then only the schema says
    /// which lists merge, as for CRDs on kube-apiserver.
    custom: bool,
}

impl<'a> Cursor<'a> {
    pub fn root(schema: Option<&'a Value>) -> Self {
        Cursor {
            node: schema,
            level: Level::Root,
            custom: schema.is_some(),
        }
    }

    /// The schema of field `name` of the object at this position.
    pub fn field(self, name: &str) -> Cursor<'a> {
        if self.level == Level::Root && name == "metadata" {
            return Cursor {
                node: None,
                level: Level::Metadata,
                custom: self.custom,
            };
        }
        let node = self.node.and_then(|n| {
            n.get("properties")
                .and_then(|p| p.get(name))
                .or_else(|| n.get("additionalProperties").filter(|a| a.is_object()))
        });
        let level = if self.level == Level::Metadata {
            Level::MetaField
        } else {
            Level::Other
        };
        Cursor {
            node,
            level,
            custom: self.custom,
        }
    }

    pub fn items(self) -> Cursor<'a> {
        Cursor {
            node: self.node.and_then(|n| n.get("items")),
            level: Level::Other,
            custom: self.custom,
        }
    }

    /// How the list at this position (the value of field `name`) merges.
    ///
    /// The schema decides when it says; otherwise metadata lists follow ObjectMeta
    /// (`finalizers` a set, `ownerReferences` a map by `uid`), `conditions` of built-in kinds
    /// merge by `type` (their Go types mark them so), and the rest are atomic. A custom
    /// resource's unmarked list is atomic, `conditions` included, as a CRD's is on a real
    /// server.
    pub fn list_type(self, name: &str) -> ListType {
        let explicit = self
            .node
            .and_then(|n| n.get("x-kubernetes-list-type"))
            .and_then(Value::as_str);
        match explicit {
            Some("map") => {
                let keys = self
                    .node
                    .and_then(|n| n.get("x-kubernetes-list-map-keys"))
                    .and_then(Value::as_array)
                    .map(|k| k.iter().filter_map(|k| k.as_str().map(String::from)).collect())
                    .unwrap_or_default();
                return ListType::Map(keys);
            }
            Some("set") => return ListType::Set,
            Some(_) => return ListType::Atomic,
            None => {}
        }
        match (self.level, name) {
            (Level::MetaField, "finalizers") => ListType::Set,
            (Level::MetaField, "ownerReferences") => ListType::Map(vec!["uid".into()]),
            (_, "conditions") if !self.custom => ListType::Map(vec!["type".into()]),
            _ => ListType::Atomic,
        }
    }

    /// Whether the map at this position is replaced whole (`x-kubernetes-map-type: atomic`).
    pub fn atomic_map(self) -> bool {
        self.node
            .and_then(|n| n.get("x-kubernetes-map-type"))
            .and_then(Value::as_str)
            == Some("atomic")
    }
}

/// What a structural check found: hard errors, and unknown fields (already pruned).
#[derive(Debug, Default)]
pub struct Findings {
    pub errors: Vec<(String, String)>,
    pub unknown: Vec<String>,
}

/// Defaults, prunes and type-checks `obj` (a whole custom resource) against `schema`.
pub fn check(schema: &Value, obj: &mut Value) -> Findings {
    let mut findings = Findings::default();
    let Some(map) = obj.as_object_mut() else {
        findings.errors.push((String::new(), "must be an object".into()));
        return findings;
    };
    walk_object(schema, map, "", true, &mut findings);
    findings
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Returns false when the value must be dropped (a null where null is not allowed).
fn walk(schema: &Value, value: &mut Value, path: &str, out: &mut Findings) -> bool {
    if value.is_null() {
        return schema.get("nullable").and_then(Value::as_bool).unwrap_or(false);
    }
    let actual = type_name(value);
    if schema.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true) {
        if actual != "integer" && actual != "string" {
            out.errors.push((
                path.into(),
                format!("Invalid value: \"{actual}\": {path} in body must be of type int-or-string"),
            ));
        }
        return true;
    }
    if let Some(want) = schema.get("type").and_then(Value::as_str) {
        let ok = want == actual || (want == "number" && actual == "integer");
        if !ok {
            out.errors.push((
                path.into(),
                format!("Invalid value: \"{actual}\": {path} in body must be of type {want}: \"{actual}\""),
            ));
            return true;
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
        out.errors.push((
            path.into(),
            format!(
                "Unsupported value: {value}: supported values: {}",
                list.join(", ")
            ),
        ));
    }
    match value {
        Value::Object(map) => {
            let embedded = schema
                .get("x-kubernetes-embedded-resource")
                .and_then(Value::as_bool)
                == Some(true);
            walk_object(schema, map, path, embedded, out);
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    walk(item_schema, item, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
    true
}

fn walk_object(
    schema: &Value,
    map: &mut serde_json::Map<String, Value>,
    path: &str,
    resource: bool,
    out: &mut Findings,
) {
    let props = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties");
    let preserve = schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
        || additional.and_then(Value::as_bool) == Some(true);
    if let Some(props) = props {
        for (key, prop) in props {
            if let Some(default) = prop.get("default")
                && !map.contains_key(key)
            {
                map.insert(key.clone(), default.clone());
            }
        }
    }
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        if resource && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        let child_path = join(path, &key);
        let child_schema = props
            .and_then(|p| p.get(&key))
            .or_else(|| additional.filter(|a| a.is_object()));
        let keep = match (child_schema, map.get_mut(&key)) {
            (Some(s), Some(v)) => walk(s, v, &child_path, out),
            (None, _) if preserve => true,
            (None, _) => {
                out.unknown.push(child_path);
                false
            }
            (Some(_), None) => true,
        };
        if !keep {
            map.remove(&key);
        }
    }
    for req in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(req) = req.as_str()
            && !map.contains_key(req)
        {
            out.errors.push((join(path, req), "Required value".into()));
        }
    }
}

/// Server-side apply types the configuration against the schema before it merges anything:
/// a field the schema does not declare fails the whole apply (create, update and the other
/// patches prune it instead). kube-apiserver reports this as a plain error, so the answer is
/// a 500 without a reason (kubernetes/kubernetes#139253; #139255 proposes a 400).
pub fn typed_check(rt: &ResourceType, ns: Option<&str>, name: &str, owned: &Value) -> ApiResult<()> {
    let Some(schema) = &rt.schema else {
        return Ok(());
    };
    let errors: Vec<String> = undeclared(schema, owned)
        .into_iter()
        .map(|path| format!("{path}: field not declared in schema"))
        .collect();
    let listed = match errors.as_slice() {
        [] => return Ok(()),
        [one] => one.clone(),
        many => format!("errors:\n  {}", many.join("\n  ")),
    };
    Err(ApiError::new(
        Reason::Unknown,
        format!(
            "failed to create typed patch object ({}/{name}; {}/{}, Kind={}): {listed}",
            ns.unwrap_or_default(),
            rt.group,
            rt.version,
            rt.kind
        ),
    ))
}

/// Fields an apply configuration sets that `schema` does not declare, named as
/// structured-merge-diff names them (`.status.conditions[0].observedGeneration`).
///
/// Server-side apply converts the configuration to a typed object before merging, and that
/// conversion refuses undeclared fields where create, update and the other patches prune
/// them. `x-kubernetes-preserve-unknown-fields` (and `additionalProperties: true`) declare
/// everything below them; `metadata`, `apiVersion` and `kind` of the object and of embedded
/// resources are ObjectMeta's, not the schema's.
pub fn undeclared(schema: &Value, config: &Value) -> Vec<String> {
    let mut out = Vec::new();
    undeclared_in(schema, config, "", true, &mut out);
    out
}

fn preserves_unknown(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
        || schema.get("additionalProperties").and_then(Value::as_bool) == Some(true)
}

fn is_embedded(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-embedded-resource")
        .and_then(Value::as_bool)
        == Some(true)
}

fn undeclared_in(schema: &Value, value: &Value, path: &str, resource: bool, out: &mut Vec<String>) {
    if preserves_unknown(schema) {
        return;
    }
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (key, child) in map {
                if resource && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let child_path = format!("{path}.{key}");
                match props.and_then(|p| p.get(key)).or(additional) {
                    Some(s) => undeclared_in(s, child, &child_path, is_embedded(s), out),
                    None => out.push(child_path),
                }
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = schema.get("items") else {
                return;
            };
            let list_type = Cursor {
                node: Some(schema),
                level: Level::Other,
                custom: true,
            }
            .list_type("");
            for (i, item) in items.iter().enumerate() {
                let element = match &list_type {
                    ListType::Map(keys) => {
                        let parts: Vec<String> = keys
                            .iter()
                            .map(|k| format!("{k}={}", item.get(k).unwrap_or(&Value::Null)))
                            .collect();
                        format!("[{}]", parts.join(","))
                    }
                    ListType::Set => format!("[={item}]"),
                    ListType::Atomic => format!("[{i}]"),
                };
                let item_path = format!("{path}{element}");
                undeclared_in(item_schema, item, &item_path, is_embedded(item_schema), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "required": ["spec"],
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["url"],
                    "properties": {
                        "url": { "type": "string" },
                        "replicas": { "type": "integer", "default": 1 },
                        "mode": { "type": "string", "enum": ["a", "b"] },
                        "port": { "x-kubernetes-int-or-string": true },
                        "extra": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
                        "labels": { "type": "object", "additionalProperties": { "type": "string" } }
                    }
                },
                "status": {
                    "type": "object",
                    "properties": {
                        "conditions": { "type": "array", "items": { "type": "object", "properties": { "type": { "type": "string" } } } }
                    }
                }
            }
        })
    }

    #[test]
    fn defaults_and_prunes() {
        let mut obj = json!({
            "apiVersion": "x/v1", "kind": "X", "metadata": { "name": "a" },
            "spec": { "url": "u", "bogus": 1, "extra": { "any": [1] }, "labels": { "a": "b" } },
            "status": { "conditions": [{ "type": "Ready", "junk": true }] }
        });
        let found = check(&schema(), &mut obj);
        assert!(found.errors.is_empty(), "{:?}", found.errors);
        assert_eq!(found.unknown, ["spec.bogus", "status.conditions[0].junk"]);
        assert_eq!(obj["spec"]["replicas"], 1);
        assert_eq!(obj["spec"]["extra"]["any"], json!([1]));
        assert!(obj["spec"].get("bogus").is_none());
    }

    #[test]
    fn rejects_wrong_types_missing_and_enum() {
        let mut obj =
            json!({ "spec": { "replicas": "three", "mode": "c", "port": true, "labels": { "a": 1 } } });
        let found = check(&schema(), &mut obj);
        let fields: Vec<&str> = found.errors.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.labels.a",
                "spec.mode",
                "spec.port",
                "spec.replicas",
                "spec.url"
            ]
        );
    }

    #[test]
    fn list_types_follow_schema_then_conventions() {
        let s = json!({ "properties": { "spec": { "properties": {
            "hosts": { "type": "array", "x-kubernetes-list-type": "set" },
            "ports": { "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port", "protocol"] }
        } } } });
        let spec = Cursor::root(Some(&s)).field("spec");
        assert_eq!(spec.field("hosts").list_type("hosts"), ListType::Set);
        assert_eq!(
            spec.field("ports").list_type("ports"),
            ListType::Map(vec!["port".into(), "protocol".into()])
        );
        assert_eq!(spec.field("other").list_type("other"), ListType::Atomic);
        assert_eq!(
            Cursor::root(None)
                .field("status")
                .field("conditions")
                .list_type("conditions"),
            ListType::Map(vec!["type".into()])
        );
        // A custom resource's unmarked conditions are atomic, as a CRD's are.
        assert_eq!(
            Cursor::root(Some(&s))
                .field("status")
                .field("conditions")
                .list_type("conditions"),
            ListType::Atomic
        );
        assert_eq!(
            Cursor::root(Some(&s))
                .field("metadata")
                .field("ownerReferences")
                .list_type("ownerReferences"),
            ListType::Map(vec!["uid".into()])
        );
        assert_eq!(
            Cursor::root(None)
                .field("metadata")
                .field("finalizers")
                .list_type("finalizers"),
            ListType::Set
        );
    }

    #[test]
    fn apply_configurations_may_set_only_declared_fields() {
        let go_like = json!({ "type": "object", "properties": {
            "spec": { "type": "object", "properties": {
                "url": { "type": "string" },
                "extra": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
                "labels": { "type": "object", "additionalProperties": { "type": "string" } },
                "ports": { "type": "array", "x-kubernetes-list-type": "map",
                           "x-kubernetes-list-map-keys": ["port"],
                           "items": { "type": "object", "properties": { "port": { "type": "integer" } } } }
            } },
            "status": { "type": "object", "properties": {
                "conditions": { "type": "array", "items": { "type": "object", "properties": {
                    "type": { "type": "string" }, "status": { "type": "string" }
                } } }
            } }
        } });
        let cases = [
            (
                json!({ "metadata": { "labels": { "a": "b" } }, "spec": { "url": "u" } }),
                vec![],
            ),
            (
                json!({ "spec": { "extra": { "anything": [1] }, "labels": { "x": "y" } } }),
                vec![],
            ),
            (
                json!({ "status": { "conditions": [{ "type": "Ready", "status": "True", "observedGeneration": 2 }] } }),
                vec![".status.conditions[0].observedGeneration"],
            ),
            (
                json!({ "spec": { "bogus": 1, "ports": [{ "port": 80, "name": "http" }] }, "other": {} }),
                vec![".other", ".spec.bogus", ".spec.ports[port=80].name"],
            ),
        ];
        for (config, want) in cases {
            assert_eq!(undeclared(&go_like, &config), want, "{config}");
        }
    }
}
