//! What a CustomResourceDefinition serves: its checks and one `ResourceType` per served version.

use serde_json::Value;

use super::{ColumnValue, PrinterColumn, ResourceType, Shape, StorageKey, age_column};
use crate::error::{ApiError, ApiResult};

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(v, |v, key| v.get(key))?
        .as_str()
        .filter(|s| !s.is_empty())
}

fn strings_at(v: &Value, path: &[&str]) -> Vec<String> {
    path.iter()
        .try_fold(v, |v, key| v.get(key))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// The structural checks apiextensions validation makes that matter here.
fn check_crd(crd: &Value) -> ApiResult<()> {
    let name = crate::meta::name(crd).unwrap_or_default().to_string();
    let mut causes = Vec::new();
    let group = str_at(crd, &["spec", "group"]).unwrap_or_default().to_string();
    let plural = str_at(crd, &["spec", "names", "plural"])
        .unwrap_or_default()
        .to_string();
    let kind = str_at(crd, &["spec", "names", "kind"])
        .unwrap_or_default()
        .to_string();
    let scope = str_at(crd, &["spec", "scope"]).unwrap_or_default();
    if group.is_empty() {
        causes.push(("spec.group".into(), "Required value".into()));
    }
    if plural.is_empty() {
        causes.push(("spec.names.plural".into(), "Required value".into()));
    }
    if kind.is_empty() {
        causes.push(("spec.names.kind".into(), "Required value".into()));
    }
    if name != format!("{plural}.{group}") {
        causes.push((
            "metadata.name".into(),
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    if scope != "Namespaced" && scope != "Cluster" {
        causes.push((
            "spec.scope".into(),
            format!("Unsupported value: \"{scope}\": supported values: \"Cluster\", \"Namespaced\""),
        ));
    }
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let storage_count = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .count();
    if storage_count != 1 {
        causes.push((
            "spec.versions".into(),
            "Invalid value: must have exactly one version marked as storage version".into(),
        ));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(
            "CustomResourceDefinition.apiextensions.k8s.io",
            &name,
            &causes,
        ))
    }
}

/// Checks a CRD the way apiextensions validation would (the parts that matter here) and
/// derives one `ResourceType` per served version.
pub fn crd_types(crd: &Value) -> ApiResult<Vec<ResourceType>> {
    check_crd(crd)?;
    let name = crate::meta::name(crd).unwrap_or_default().to_string();
    let text = |path: &[&str]| str_at(crd, path).unwrap_or_default().to_string();
    let (group, plural, kind) = (
        text(&["spec", "group"]),
        text(&["spec", "names", "plural"]),
        text(&["spec", "names", "kind"]),
    );
    let scope = text(&["spec", "scope"]);
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let singular = str_at(crd, &["spec", "names", "singular"])
        .map(String::from)
        .unwrap_or_else(|| kind.to_lowercase());
    let list_kind = str_at(crd, &["spec", "names", "listKind"])
        .map(String::from)
        .unwrap_or_else(|| format!("{kind}List"));
    let served = versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(false));
    Ok(served
        .map(|v| ResourceType {
            group: group.clone(),
            version: str_at(v, &["name"]).unwrap_or_default().to_string(),
            kind: kind.clone(),
            list_kind: list_kind.clone(),
            plural: plural.clone(),
            singular: singular.clone(),
            short_names: strings_at(crd, &["spec", "names", "shortNames"]),
            categories: strings_at(crd, &["spec", "names", "categories"]),
            namespaced: scope == "Namespaced",
            status_subresource: v.pointer("/subresources/status").is_some(),
            tracks_generation: true,
            storage: StorageKey {
                group: group.clone(),
                plural: plural.clone(),
            },
            shape: Shape::Plain,
            schema: v.pointer("/schema/openAPIV3Schema").cloned(),
            columns: crd_columns(v),
            crd: Some(name.clone()),
            selectable: Some(selectable_fields(v, scope == "Namespaced")),
        })
        .collect())
}

/// What a field selector may name on a CRD's version, as kube-apiserver allows it.
fn selectable_fields(version: &Value, namespaced: bool) -> Vec<String> {
    let mut out = vec!["metadata.name".to_string()];
    if namespaced {
        out.push("metadata.namespace".into());
    }
    let declared = version.get("selectableFields").and_then(Value::as_array);
    out.extend(declared.into_iter().flatten().filter_map(|f| {
        let path = f.get("jsonPath")?.as_str()?;
        Some(path.trim_start_matches('.').to_string())
    }));
    out
}

fn crd_columns(version: &Value) -> Vec<PrinterColumn> {
    let Some(columns) = version.get("additionalPrinterColumns").and_then(Value::as_array) else {
        return vec![age_column()];
    };
    columns
        .iter()
        .map(|c| PrinterColumn {
            name: str_at(c, &["name"]).unwrap_or_default().into(),
            type_: str_at(c, &["type"]).unwrap_or("string").into(),
            description: str_at(c, &["description"]).unwrap_or_default().into(),
            priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
            value: ColumnValue::JsonPath(str_at(c, &["jsonPath"]).unwrap_or_default().into()),
        })
        .collect()
}
