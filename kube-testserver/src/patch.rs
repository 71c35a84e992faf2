//! JSON patch, JSON merge patch and a simple strategic merge patch.

use serde_json::Value;

use super::error::{ApiError, ApiResult, Reason};

/// The patch type, from the request's `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchKind {
    pub fn from_content_type(ct: &str) -> Option<Self> {
        match ct.split(';').next().unwrap_or_default().trim() {
            "application/json-patch+json" => Some(PatchKind::Json),
            "application/merge-patch+json" => Some(PatchKind::Merge),
            "application/strategic-merge-patch+json" => Some(PatchKind::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Some(PatchKind::Apply),
            _ => None,
        }
    }
}

/// RFC 7386.
pub fn merge(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// RFC 6902. A failing operation (including `test`) is a 422, as in kube-apiserver.
pub fn json(target: &mut Value, body: &[u8]) -> ApiResult<()> {
    let ops: json_patch::Patch = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    json_patch::patch(target, &ops.0).map_err(|e| {
        ApiError::new(
            Reason::Invalid,
            format!("the server rejected our request due to an error in our request: {e}"),
        )
    })
}

/// How a strategic merge patch merges a list, by field name. Built-in kinds here only have
/// these merge-keyed lists; everything else is replaced, as with a merge patch.
fn merge_key(path: &[&str], field: &str) -> Option<&'static str> {
    match (path, field) {
        (["metadata"], "finalizers") => Some(""),
        (["metadata"], "ownerReferences") => Some("uid"),
        (_, "conditions") => Some("type"),
        ([], "secrets" | "imagePullSecrets") => Some("name"),
        _ => None,
    }
}

/// A strategic merge patch for the kinds this server has: a merge patch plus the directives
/// kubectl sends (`$patch`, `$deleteFromPrimitiveList/…`, `$setElementOrder/…`, `$retainKeys`)
/// and merge-by-key for the few merge-keyed lists built-in kinds have.
pub fn strategic(target: &mut Value, patch: &Value) {
    strategic_at(target, patch, &mut Vec::new());
}

fn strategic_at<'a>(target: &mut Value, patch: &'a Value, path: &mut Vec<&'a str>) {
    let Some(patch_map) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if patch_map.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut replacement = patch.clone();
        strip_directives(&mut replacement);
        *target = replacement;
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    let target_map = target.as_object_mut().expect("made an object");
    for (key, value) in patch_map {
        if key == "$patch" || key == "$retainKeys" || key.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Some(remove)) = (target_map.get_mut(field), value.as_array()) {
                list.retain(|v| !remove.contains(v));
            }
            continue;
        }
        let deletes = value.is_null() || value.get("$patch").and_then(Value::as_str) == Some("delete");
        if deletes {
            target_map.remove(key);
            continue;
        }
        match (value, merge_key(path, key)) {
            (Value::Array(items), Some(key_field)) => {
                let current = target_map
                    .entry(key.clone())
                    .or_insert_with(|| Value::Array(vec![]));
                merge_list(current, items, key_field);
            }
            (Value::Object(_), _) => {
                path.push(key);
                strategic_at(target_map.entry(key.clone()).or_insert(Value::Null), value, path);
                path.pop();
            }
            _ => {
                target_map.insert(key.clone(), value.clone());
            }
        }
    }
}

fn merge_list(current: &mut Value, items: &[Value], key_field: &str) {
    if !current.is_array() {
        *current = Value::Array(vec![]);
    }
    let list = current.as_array_mut().expect("made an array");
    for item in items {
        if key_field.is_empty() {
            if !list.contains(item) {
                list.push(item.clone());
            }
            continue;
        }
        let key = item.get(key_field);
        let pos = list.iter().position(|existing| existing.get(key_field) == key);
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(i), true) => {
                list.remove(i);
            }
            (Some(i), false) => strategic(&mut list[i], item),
            (None, true) => {}
            (None, false) => {
                let mut item = item.clone();
                strip_directives(&mut item);
                list.push(item);
            }
        }
    }
}

fn strip_directives(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|k, _| !k.starts_with('$'));
            map.values_mut().for_each(strip_directives);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_directives),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn json_patch_test_failure_is_invalid() {
        let mut doc = json!({ "a": 1 });
        let err = json(&mut doc, br#"[{"op":"test","path":"/a","value":2}]"#).unwrap_err();
        assert_eq!(err.code(), 422);
        json(&mut doc, br#"[{"op":"replace","path":"/a","value":3}]"#).unwrap();
        assert_eq!(doc["a"], 3);
    }

    #[test]
    fn strategic_merges_finalizers_and_conditions() {
        let mut doc = json!({
            "metadata": { "finalizers": ["a"], "labels": { "x": "1", "y": "2" } },
            "status": { "conditions": [{ "type": "Ready", "status": "False" }, { "type": "Other", "status": "True" }] },
            "data": { "k": "v" }
        });
        strategic(
            &mut doc,
            &json!({
                "metadata": { "finalizers": ["b"], "labels": { "y": null }, "$deleteFromPrimitiveList/finalizers": ["a"] },
                "status": { "conditions": [{ "type": "Ready", "status": "True" }, { "type": "Other", "$patch": "delete" }] },
                "data": { "$patch": "replace", "n": "w" }
            }),
        );
        assert_eq!(doc["metadata"]["finalizers"], json!(["b"]));
        assert_eq!(doc["metadata"]["labels"], json!({ "x": "1" }));
        assert_eq!(
            doc["status"]["conditions"],
            json!([{ "type": "Ready", "status": "True" }])
        );
        assert_eq!(doc["data"], json!({ "n": "w" }));
    }
}
