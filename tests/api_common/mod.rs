//! Schema walking shared by the `api_*` tests: loading reference CRDs, comparing our schemas with
//! theirs, and a small validator for sample objects.
#![allow(dead_code)] // each test binary uses a different subset

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::{Value, json};

/// `tests/data/crds`: the reference CRDs this repository carries (see the README there).
pub fn crd_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/crds")
}

/// A reference CRD file (one document) as JSON.
pub fn load_crd(file: &str) -> Value {
    let path = crd_dir().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("reference CRD is YAML");
    docs.retain(|d| !d.is_null());
    assert_eq!(docs.len(), 1, "{file}: one CRD per file");
    docs.remove(0)
}

/// The `openAPIV3Schema` of `version` in a CRD (as JSON).
pub fn version_schema<'a>(crd: &'a Value, version: &str) -> &'a Value {
    crd["spec"]["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .find(|v| v["name"] == version)
        .unwrap_or_else(|| panic!("no version {version}"))
        .get("schema")
        .and_then(|s| s.get("openAPIV3Schema"))
        .expect("a schema")
}

/// Names, scope, versions and subresources of `theirs` that `ours` must keep.
pub fn crd_level_problems(theirs: &Value, ours: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let (t, o) = (&theirs["spec"], &ours["spec"]);
    for field in ["group", "scope"] {
        if t[field] != o[field] {
            problems.push(format!("spec.{field}: {} vs {}", o[field], t[field]));
        }
    }
    for name in ["kind", "plural", "singular"] {
        if t["names"][name] != o["names"][name] {
            problems.push(format!(
                "names.{name}: {} vs {}",
                o["names"][name], t["names"][name]
            ));
        }
    }
    // The API server defaults listKind to `<kind>List`.
    let list_kind = o["names"]
        .get("listKind")
        .cloned()
        .unwrap_or_else(|| json!(format!("{}List", o["names"]["kind"].as_str().unwrap())));
    if t["names"].get("listKind").is_some_and(|l| *l != list_kind) {
        problems.push(format!(
            "names.listKind: {list_kind} vs {}",
            t["names"]["listKind"]
        ));
    }
    for list in ["shortNames", "categories"] {
        for name in t["names"][list].as_array().into_iter().flatten() {
            if !o["names"][list].as_array().is_some_and(|l| l.contains(name)) {
                problems.push(format!("names.{list}: {name} dropped"));
            }
        }
    }
    if t["metadata"]["name"] != o["metadata"]["name"] {
        problems.push(format!(
            "metadata.name: {} vs {}",
            o["metadata"]["name"], t["metadata"]["name"]
        ));
    }
    for their_version in t["versions"].as_array().unwrap() {
        let name = their_version["name"].as_str().unwrap();
        let Some(our_version) = o["versions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
        else {
            problems.push(format!("version {name} missing"));
            continue;
        };
        for flag in ["served", "storage"] {
            if their_version[flag] == json!(true) && our_version[flag] != json!(true) {
                problems.push(format!("version {name}: not {flag}"));
            }
        }
        if their_version["subresources"].get("status").is_some()
            && our_version["subresources"].get("status").is_none()
        {
            problems.push(format!("version {name}: no status subresource"));
        }
        let mut schema_problems = Vec::new();
        compare(
            version_schema(theirs, name),
            version_schema(ours, name),
            "",
            Walk::TheirsInOurs,
            &mut schema_problems,
        );
        problems.extend(schema_problems.into_iter().map(|p| format!("{name} schema {p}")));
    }
    problems
}

/// Which side's properties must exist on the other.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Walk {
    /// Compatibility: every property of theirs must exist in ours (ours may add).
    TheirsInOurs,
    /// Modelling: every property we model must exist in theirs (we may leave some out).
    OursInTheirs,
}

/// Keywords that can only make a schema stricter. Ours may carry one only if theirs carries the
/// same (for `enum`: a superset of theirs).
const RESTRICTIONS: &[&str] = &[
    "enum",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "uniqueItems",
    "x-kubernetes-validations",
    "oneOf",
    "anyOf",
    "allOf",
    "not",
];

fn strings(v: Option<&Value>) -> BTreeSet<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// Whether the CEL rules at `path` say only what cert-manager's webhook enforces beside their
/// CRD: a CertificateRequest's spec cannot change after creation ("field is immutable"), so a
/// cluster with cert-manager accepts no object these rules refuse.
fn their_webhook_enforces(path: &str, rules: &Value) -> bool {
    let only_immutable = rules
        .as_array()
        .is_some_and(|rules| rules.iter().all(|r| r["rule"] == "self == oldSelf"));
    path == ".spec" && only_immutable
}

/// Everything that makes `ours` reject an object `theirs` accepts, as `path: problem` lines.
/// Walks `properties`, `items` and `additionalProperties` recursively.
pub fn compare(theirs: &Value, ours: &Value, path: &str, walk: Walk, errors: &mut Vec<String>) {
    let here = if path.is_empty() { "." } else { path };
    let mut problems = Vec::new();

    let (their_type, our_type) = (theirs.get("type"), ours.get("type"));
    if our_type.is_some() && our_type != their_type {
        problems.push(format!("type {our_type:?}, theirs {their_type:?}"));
    }
    match (theirs.get("format"), ours.get("format")) {
        (Some(t), Some(o)) if t != o => problems.push(format!("format {o}, theirs {t}")),
        // A format on a plain string (or integer) of theirs would validate what they do not.
        (None, Some(o)) if walk == Walk::TheirsInOurs => problems.push(format!("format {o} added")),
        _ => {}
    }
    for keyword in RESTRICTIONS {
        let Some(value) = ours.get(*keyword) else { continue };
        if *keyword == "x-kubernetes-validations" && their_webhook_enforces(here, value) {
            continue;
        }
        let ok = match (*keyword, theirs.get(*keyword)) {
            ("enum", Some(their_enum)) => strings(Some(their_enum)).is_subset(&strings(Some(value))),
            (_, Some(their_value)) => their_value == value,
            (_, None) => false,
        };
        if !ok {
            problems.push(format!(
                "{keyword} {value} is stricter than theirs {:?}",
                theirs.get(*keyword)
            ));
        }
    }
    let (their_required, our_required) = (strings(theirs.get("required")), strings(ours.get("required")));
    let extra: Vec<_> = our_required.difference(&their_required).collect();
    if !extra.is_empty() {
        problems.push(format!("requires {extra:?}, theirs only {their_required:?}"));
    }
    for flag in [
        "x-kubernetes-preserve-unknown-fields",
        "nullable",
        "x-kubernetes-int-or-string",
    ] {
        if theirs.get(flag) == Some(&Value::Bool(true)) && ours.get(flag) != Some(&Value::Bool(true)) {
            problems.push(format!("{flag} removed"));
        }
    }
    // List semantics only matter for a CRD we install.
    if walk == Walk::TheirsInOurs
        && let Some(problem) = list_type(theirs, ours)
    {
        problems.push(problem);
    }
    errors.extend(problems.into_iter().map(|p| format!("{here}: {p}")));

    let (their_props, our_props) = (theirs.get("properties"), ours.get("properties"));
    let (from, missing_side) = match walk {
        Walk::TheirsInOurs => (their_props, "ours"),
        Walk::OursInTheirs => (our_props, "theirs"),
    };
    for name in from.and_then(Value::as_object).into_iter().flat_map(|o| o.keys()) {
        match (
            their_props.and_then(|p| p.get(name)),
            our_props.and_then(|p| p.get(name)),
        ) {
            (Some(t), Some(o)) => compare(t, o, &format!("{path}.{name}"), walk, errors),
            _ => errors.push(format!("{here}: property {name:?} missing from {missing_side}")),
        }
    }
    for (key, suffix) in [("items", "[]"), ("additionalProperties", "{}")] {
        match (
            theirs.get(key).filter(|v| v.is_object()),
            ours.get(key).filter(|v| v.is_object()),
        ) {
            (Some(t), Some(o)) => compare(t, o, &format!("{path}{suffix}"), walk, errors),
            (Some(_), None) if walk == Walk::TheirsInOurs => {
                errors.push(format!("{here}: {key} missing from ours"));
            }
            (None, Some(_)) if walk == Walk::OursInTheirs => {
                errors.push(format!("{here}: {key} missing from theirs"));
            }
            _ => {}
        }
    }
}

/// A list-map where theirs is atomic adds uniqueness by key. Allowed only for a key theirs
/// requires on every item (so each accepted item has it); duplicates are the one thing lost,
/// and only a controller writing its own status could produce them.
fn list_type(theirs: &Value, ours: &Value) -> Option<String> {
    let list_type = |s: &Value| {
        s.get("x-kubernetes-list-type")
            .and_then(Value::as_str)
            .unwrap_or("atomic")
            .to_string()
    };
    let (their_type, our_type) = (list_type(theirs), list_type(ours));
    if our_type == their_type {
        let same_keys = ours.get("x-kubernetes-list-map-keys") == theirs.get("x-kubernetes-list-map-keys");
        return (!same_keys).then(|| "x-kubernetes-list-map-keys differ".into());
    }
    let keys = strings(ours.get("x-kubernetes-list-map-keys"));
    let their_item_required = strings(theirs.get("items").and_then(|i| i.get("required")));
    let allowed = our_type == "map"
        && their_type == "atomic"
        && !keys.is_empty()
        && keys.is_subset(&their_item_required);
    (!allowed).then(|| format!("x-kubernetes-list-type {our_type}, theirs {their_type}"))
}

/// What the API server would reject in `value` under `schema`, approximately: types, `required`,
/// `enum`, the `byte` and `date-time` formats, recursively. Unknown fields and nulls are pruned
/// by the server rather than rejected, so they pass.
pub fn validate(schema: &Value, value: &Value, path: &str, errors: &mut Vec<String>) {
    let here = if path.is_empty() { "." } else { path };
    if value.is_null() {
        return;
    }
    let ok = match schema.get("type").and_then(Value::as_str) {
        None => true,
        Some("object") => value.is_object(),
        Some("array") => value.is_array(),
        Some("string") => value.is_string(),
        Some("boolean") => value.is_boolean(),
        Some("integer") => value.is_i64() || value.is_u64(),
        Some("number") => value.is_number(),
        Some(other) => panic!("{here}: unexpected type {other}"),
    };
    if !ok {
        errors.push(format!("{here}: {value} is not {}", schema["type"]));
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        errors.push(format!("{here}: {value} not in {allowed:?}"));
    }
    if let Some(s) = value.as_str() {
        match schema.get("format").and_then(Value::as_str) {
            Some("byte") => {
                use base64::Engine;
                if base64::engine::general_purpose::STANDARD.decode(s).is_err() {
                    errors.push(format!("{here}: {s:?} is not base64"));
                }
            }
            Some("date-time") if s.parse::<k8s_openapi::jiff::Timestamp>().is_err() => {
                errors.push(format!("{here}: {s:?} is not a date-time"));
            }
            _ => {}
        }
    }
    if let Some(object) = value.as_object() {
        for name in strings(schema.get("required")) {
            if !object.contains_key(&name) {
                errors.push(format!("{here}: missing required {name:?}"));
            }
        }
        for (name, field) in object {
            let field_schema = schema
                .get("properties")
                .and_then(|p| p.get(name))
                .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()));
            if let Some(field_schema) = field_schema {
                validate(field_schema, field, &format!("{path}.{name}"), errors);
            }
        }
    }
    if let (Some(items), Some(array)) = (schema.get("items"), value.as_array()) {
        for (i, item) in array.iter().enumerate() {
            validate(items, item, &format!("{path}[{i}]"), errors);
        }
    }
}

/// Kubernetes' structural-schema rules, as far as generated CRDs can break them: every node
/// has a `type` (unless it preserves unknown fields or is int-or-string), no `$ref` or
/// `definitions`, no `additionalProperties` beside `properties`, no `anyOf`/`oneOf` shapes, and
/// list-map keys required on the items.
pub fn structural_problems(schema: &Value, path: &str, errors: &mut Vec<String>) {
    let here = if path.is_empty() { "." } else { path };
    let object = schema.as_object().expect("schema nodes are objects");
    let flag = |name: &str| object.get(name) == Some(&Value::Bool(true));
    if !object.contains_key("type")
        && !flag("x-kubernetes-preserve-unknown-fields")
        && !flag("x-kubernetes-int-or-string")
    {
        errors.push(format!("{here}: no type"));
    }
    for banned in [
        "$ref",
        "$schema",
        "definitions",
        "$defs",
        "anyOf",
        "oneOf",
        "allOf",
        "not",
    ] {
        if object.contains_key(banned) {
            errors.push(format!("{here}: {banned}"));
        }
    }
    if object.contains_key("properties") && object.contains_key("additionalProperties") {
        errors.push(format!("{here}: properties and additionalProperties"));
    }
    if schema.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map") {
        let keys = strings(schema.get("x-kubernetes-list-map-keys"));
        let required = strings(schema.get("items").and_then(|i| i.get("required")));
        if keys.is_empty() || !keys.is_subset(&required) {
            errors.push(format!(
                "{here}: list-map keys {keys:?} not all required on items"
            ));
        }
    }
    for (name, child) in object
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        structural_problems(child, &format!("{path}.{name}"), errors);
    }
    for (key, suffix) in [("items", "[]"), ("additionalProperties", "{}")] {
        if let Some(child) = object.get(key).filter(|c| c.is_object()) {
            structural_problems(child, &format!("{path}{suffix}"), errors);
        }
    }
}
