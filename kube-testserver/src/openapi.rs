//! A skeletal OpenAPI v3: one PATCH operation per resource, carrying the
//! `x-kubernetes-group-version-kind` and the `fieldValidation` parameter. That is what kubectl
//! reads to decide that the server validates fields itself (instead of downloading schemas
//! for client-side validation, which this server does not publish).

use serde_json::{Value, json};

use super::resources::Registry;

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// FNV-1a, enough to change the URL kubectl caches by when the document changes.
fn hash(doc: &Value) -> String {
    let digest = doc.to_string().bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    });
    format!("{digest:016X}")
}

/// `/openapi/v3`: where each group version's document lives.
pub fn root(registry: &Registry) -> Value {
    let mut gvs = vec![(String::new(), "v1".to_string())];
    for (group, versions) in registry.groups() {
        gvs.extend(versions.into_iter().map(|v| (group.clone(), v)));
    }
    let paths: serde_json::Map<String, Value> = gvs
        .into_iter()
        .filter_map(|(g, v)| {
            let doc = group_version(registry, &g, &v)?;
            let path = gv_path(&g, &v);
            let url = format!("/openapi/v3/{path}?hash={}", hash(&doc));
            Some((path, json!({ "serverRelativeURL": url })))
        })
        .collect();
    json!({ "paths": paths })
}

/// `/openapi/v3/apis/<group>/<version>` (or `api/v1`).
pub fn group_version(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let types = registry.resources(group, version);
    if types.is_empty() {
        return None;
    }
    let mut paths = serde_json::Map::new();
    for rt in types {
        let prefix = format!("/{}", gv_path(group, version));
        let collection = if rt.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", rt.plural)
        } else {
            format!("{prefix}/{}", rt.plural)
        };
        let mut content = serde_json::Map::new();
        let mut media = vec![
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml",
        ];
        if rt.crd.is_none() {
            media.push("application/strategic-merge-patch+json");
        }
        for m in media {
            content.insert(m.into(), json!({ "schema": { "type": "object" } }));
        }
        let query = |name: &str| json!({ "name": name, "in": "query", "schema": { "type": "string", "uniqueItems": true } });
        let patch = json!({
            "x-kubernetes-group-version-kind": { "group": group, "version": version, "kind": rt.kind },
            "x-kubernetes-action": "patch",
            "parameters": [query("dryRun"), query("fieldManager"), query("fieldValidation"), query("force")],
            "requestBody": { "content": content },
            "responses": { "200": { "description": "OK" } },
        });
        paths.insert(format!("{collection}/{{name}}"), json!({ "patch": patch }));
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes", "version": "v1.33.0" },
        "paths": paths,
        "components": { "schemas": {} },
    }))
}
