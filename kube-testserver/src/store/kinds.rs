//! Rules particular to some built-in kinds: Secret, Namespace, CustomResourceDefinition.

use serde_json::{Value, json};

use crate::{
    error::{ApiError, ApiResult},
    meta,
    resources::{ResourceType, StorageKey},
};

pub(super) fn is_crd(rt: &ResourceType) -> bool {
    rt.group == "apiextensions.k8s.io" && rt.plural == "customresourcedefinitions"
}

pub(super) fn is_namespace(rt: &ResourceType) -> bool {
    rt.group.is_empty() && rt.plural == "namespaces"
}

pub(super) fn is_secret(rt: &ResourceType) -> bool {
    rt.group.is_empty() && rt.plural == "secrets"
}

pub(super) fn normalize_secret(rt: &ResourceType, name: &str, obj: &mut Value) -> ApiResult<()> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let map = obj.as_object_mut().expect("objects only");
    if let Some(Value::Object(string_data)) = map.remove("stringData") {
        let data = map.entry("data").or_insert_with(|| json!({}));
        if !data.is_object() {
            *data = json!({});
        }
        for (k, v) in string_data {
            let text = v.as_str().map(String::from).unwrap_or_else(|| v.to_string());
            data[k.as_str()] = b64.encode(text).into();
        }
    }
    if map.get("type").and_then(Value::as_str).is_none_or(str::is_empty) {
        map.insert("type".into(), "Opaque".into());
    }
    let bad: Vec<(String, String)> = map
        .get("data")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(_, v)| v.as_str().is_none_or(|s| b64.decode(s).is_err()))
        .map(|(k, _)| {
            (
                format!("data[{k}]"),
                "Invalid value: must be base64-encoded bytes".to_string(),
            )
        })
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&rt.kind_qualified(), name, &bad))
    }
}

pub(super) fn namespace_storage() -> StorageKey {
    StorageKey {
        group: String::new(),
        plural: "namespaces".into(),
    }
}

/// Status the apiextensions controllers would give a CRD: names accepted, established.
pub(super) fn crd_status(crd: &mut Value, old: Option<&Value>) {
    let mut names = crd.pointer("/spec/names").cloned().unwrap_or_else(|| json!({}));
    let kind = names
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if names.get("singular").is_none() {
        names["singular"] = kind.to_lowercase().into();
    }
    if names.get("listKind").is_none() {
        names["listKind"] = format!("{kind}List").into();
    }
    let mut stored: Vec<Value> = old
        .and_then(|o| o.pointer("/status/storedVersions"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for v in versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
    {
        if let Some(name) = v.get("name")
            && !stored.contains(name)
        {
            stored.push(name.clone());
        }
    }
    let conditions = old
        .and_then(|o| o.pointer("/status/conditions"))
        .cloned()
        .unwrap_or_else(|| {
            let now = meta::now_rfc3339();
            json!([
                { "type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                  "message": "no conflicts found", "lastTransitionTime": now },
                { "type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                  "message": "the initial names have been accepted", "lastTransitionTime": now },
            ])
        });
    crd["status"] = json!({ "conditions": conditions, "acceptedNames": names, "storedVersions": stored });
}
