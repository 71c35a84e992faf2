//! Patch types and server-side apply.

mod support;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::json;
use support::{Widget, code, config_map, reason, secret, start, widget};

#[tokio::test]
async fn merge_patch_sets_and_removes_fields() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    cms.create(
        &PostParams::default(),
        &config_map("a", &[("keep", "1"), ("drop", "1")]),
    )
    .await
    .unwrap();
    let patch = json!({ "metadata": { "labels": { "drop": null, "new": "2" } }, "data": { "k": "v" } });
    let out = cms
        .patch("a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let labels = out.metadata.labels.unwrap();
    assert_eq!(labels.keys().collect::<Vec<_>>(), ["keep", "new"]);
    assert_eq!(out.data.unwrap()["k"], "v");
}

#[tokio::test]
async fn merge_patch_with_a_stale_resource_version_conflicts() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    cms.create(&PostParams::default(), &config_map("a", &[]))
        .await
        .unwrap();
    let patch = json!({ "metadata": { "resourceVersion": "1" }, "data": { "k": "v" } });
    let err = cms
        .patch("a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_err();
    assert_eq!((code(&err), reason(&err).as_str()), (409, "Conflict"));
}

#[tokio::test]
async fn json_patch_applies_operations_and_fails_on_test() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    cms.create(&PostParams::default(), &config_map("a", &[]))
        .await
        .unwrap();
    let ops: json_patch::Patch = serde_json::from_value(json!([
        { "op": "add", "path": "/data", "value": { "a": "1" } },
        { "op": "replace", "path": "/data/a", "value": "2" },
    ]))
    .unwrap();
    let out = cms
        .patch("a", &PatchParams::default(), &Patch::<()>::Json(ops))
        .await
        .unwrap();
    assert_eq!(out.data.unwrap()["a"], "2");
    let failing: json_patch::Patch =
        serde_json::from_value(json!([{ "op": "test", "path": "/data/a", "value": "9" }])).unwrap();
    let err = cms
        .patch("a", &PatchParams::default(), &Patch::<()>::Json(failing))
        .await
        .unwrap_err();
    assert_eq!(code(&err), 422);
}

#[tokio::test]
async fn strategic_merge_patch_merges_finalizers_on_builtins() {
    let h = start().await;
    let secrets: Api<Secret> = h.api();
    let mut s = secret("s", &[("a", "1")]);
    s.metadata.finalizers = Some(vec!["x/one".into()]);
    secrets.create(&PostParams::default(), &s).await.unwrap();
    let patch = json!({ "metadata": { "finalizers": ["x/two"] }, "stringData": { "b": "2" } });
    let out = secrets
        .patch("s", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
    assert_eq!(out.metadata.finalizers.unwrap(), ["x/one", "x/two"]);
    assert_eq!(out.data.unwrap().len(), 2);
}

#[tokio::test]
async fn strategic_merge_patch_on_custom_resources_acts_as_merge() {
    let h = start().await;
    h.install_widgets().await;
    let widgets: Api<Widget> = h.api();
    widgets
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    let out = widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Strategic(&json!({ "spec": { "color": "red" } })),
        )
        .await
        .unwrap();
    assert_eq!((out.spec.size, out.spec.color.as_deref()), (1, Some("red")));
}

fn apply_params(manager: &str) -> PatchParams {
    PatchParams::apply(manager).force()
}

#[tokio::test]
async fn apply_creates_missing_objects() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    let config =
        json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "a" }, "data": { "k": "v" } });
    let out = cms
        .patch("a", &apply_params("tester"), &Patch::Apply(&config))
        .await
        .unwrap();
    assert_eq!(out.data.unwrap()["k"], "v");
    assert!(out.metadata.uid.is_some());
}

#[tokio::test]
async fn apply_requires_a_field_manager() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    let config = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "a" } });
    let req = http::Request::patch("/api/v1/namespaces/default/configmaps/a")
        .header("content-type", "application/apply-patch+yaml")
        .body(serde_json::to_vec(&config).unwrap())
        .unwrap();
    let err = h.client.request_text(req).await.unwrap_err();
    assert_eq!(code(&err), 400);
    assert!(cms.get_opt("a").await.unwrap().is_none());
}

#[tokio::test]
async fn apply_accepts_yaml_bodies() {
    let h = start().await;
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\ndata:\n  k: v\n";
    let req = http::Request::patch("/api/v1/namespaces/default/configmaps/y?fieldManager=yaml")
        .header("content-type", "application/apply-patch+yaml")
        .body(yaml.as_bytes().to_vec())
        .unwrap();
    h.client.request_text(req).await.unwrap();
    assert_eq!(
        h.api::<ConfigMap>().get("y").await.unwrap().data.unwrap()["k"],
        "v"
    );
}

/// An apply body is YAML, of which JSON is a subset: the server reads JSON bodies as JSON (what
/// kube-rs and kubectl send) and a YAML flow mapping, which also starts with `{` but is not
/// JSON, as YAML.
#[tokio::test]
async fn apply_reads_json_and_yaml_flow_bodies() {
    let h = start().await;
    let bodies = [
        (
            "j",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"j"},"data":{"k":"json"}}"#,
        ),
        (
            "f",
            "{apiVersion: v1, kind: ConfigMap, metadata: {name: f}, data: {k: flow}}",
        ),
    ];
    for (name, body) in bodies {
        let req = http::Request::patch(format!(
            "/api/v1/namespaces/default/configmaps/{name}?fieldManager=m"
        ))
        .header("content-type", "application/apply-patch+yaml")
        .body(body.as_bytes().to_vec())
        .unwrap();
        h.client.request_text(req).await.unwrap();
    }
    let data = |name: &str| {
        let cms = h.api::<ConfigMap>();
        let name = name.to_string();
        async move { cms.get(&name).await.unwrap().data.unwrap()["k"].clone() }
    };
    assert_eq!(data("j").await, "json");
    assert_eq!(data("f").await, "flow");
}

#[tokio::test]
async fn apply_keeps_conditions_of_two_managers() {
    let h = start().await;
    h.install_widgets().await;
    let widgets: Api<Widget> = h.api();
    widgets
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    let status = |t: &str, s: &str| {
        json!({ "apiVersion": "test.example.com/v1", "kind": "Widget",
                "status": { "conditions": [{ "type": t, "status": s }] } })
    };
    widgets
        .patch_status(
            "w",
            &apply_params("approver"),
            &Patch::Apply(status("Approved", "True")),
        )
        .await
        .unwrap();
    widgets
        .patch_status(
            "w",
            &apply_params("controller"),
            &Patch::Apply(status("Ready", "False")),
        )
        .await
        .unwrap();
    let out = widgets
        .patch_status(
            "w",
            &apply_params("controller"),
            &Patch::Apply(status("Ready", "True")),
        )
        .await
        .unwrap();
    let conditions: Vec<(String, String)> = out
        .status
        .unwrap()
        .conditions
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    assert_eq!(
        conditions,
        [
            ("Approved".into(), "True".into()),
            ("Ready".into(), "True".into())
        ]
    );
}

#[tokio::test]
async fn apply_merges_schema_list_maps_by_key() {
    let h = start().await;
    h.install_widgets().await;
    let widgets: Api<Widget> = h.api();
    let config = |manager_port: &str, port: i64| {
        json!({ "apiVersion": "test.example.com/v1", "kind": "Widget", "metadata": { "name": "w" },
                "spec": { "size": 1, "ports": [{ "name": manager_port, "port": port }] } })
    };
    widgets
        .patch("w", &apply_params("a"), &Patch::Apply(config("http", 80)))
        .await
        .unwrap();
    let out = widgets
        .patch("w", &apply_params("b"), &Patch::Apply(config("https", 443)))
        .await
        .unwrap();
    let ports: Vec<&str> = out.spec.ports.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(ports, ["http", "https"]);
}

#[tokio::test]
async fn apply_removes_fields_the_manager_stopped_applying() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    let config = |data: serde_json::Value| json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "a" }, "data": data });
    cms.patch(
        "a",
        &apply_params("one"),
        &Patch::Apply(config(json!({ "x": "1", "y": "1" }))),
    )
    .await
    .unwrap();
    cms.patch(
        "a",
        &apply_params("two"),
        &Patch::Apply(config(json!({ "z": "2" }))),
    )
    .await
    .unwrap();
    let out = cms
        .patch(
            "a",
            &apply_params("one"),
            &Patch::Apply(config(json!({ "x": "1" }))),
        )
        .await
        .unwrap();
    let keys: Vec<String> = out.data.unwrap().into_keys().collect();
    assert_eq!(keys, ["x", "z"]);
}

#[tokio::test]
async fn apply_without_force_reports_conflicts() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    let config = |v: &str| json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "a" }, "data": { "k": v } });
    cms.patch("a", &PatchParams::apply("one"), &Patch::Apply(config("1")))
        .await
        .unwrap();
    let err = cms
        .patch("a", &PatchParams::apply("two"), &Patch::Apply(config("2")))
        .await
        .unwrap_err();
    assert_eq!(code(&err), 409);
    cms.patch(
        "a",
        &PatchParams::apply("two").force(),
        &Patch::Apply(config("2")),
    )
    .await
    .unwrap();
    assert_eq!(cms.get("a").await.unwrap().data.unwrap()["k"], "2");
}

#[tokio::test]
async fn apply_of_an_unchanged_configuration_writes_nothing() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    let config =
        json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "a" }, "data": { "k": "v" } });
    let first = cms
        .patch("a", &apply_params("m"), &Patch::Apply(&config))
        .await
        .unwrap();
    let second = cms
        .patch("a", &apply_params("m"), &Patch::Apply(&config))
        .await
        .unwrap();
    assert_eq!(first.metadata.resource_version, second.metadata.resource_version);
}

#[tokio::test]
async fn lease_locking_by_apply_conflicts_only_while_the_holder_owns_the_field() {
    use k8s_openapi::api::coordination::v1::Lease;
    let h = start().await;
    let leases: Api<Lease> = h.api();
    let lock = |holder: &str| {
        json!({ "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": { "name": "leader" },
                "spec": { "holderIdentity": holder, "leaseDurationSeconds": 15 } })
    };
    leases
        .patch("leader", &PatchParams::apply("a"), &Patch::Apply(lock("a")))
        .await
        .unwrap();
    let err = leases
        .patch("leader", &PatchParams::apply("b"), &Patch::Apply(lock("b")))
        .await
        .unwrap_err();
    assert_eq!((code(&err), reason(&err).as_str()), (409, "Conflict"));

    // The holder releases with a strategic merge patch; the field has no owner any more.
    let release = json!({ "spec": { "holderIdentity": null, "leaseDurationSeconds": null } });
    leases
        .patch("leader", &PatchParams::default(), &Patch::Strategic(release))
        .await
        .unwrap();
    let taken = leases
        .patch("leader", &PatchParams::apply("b"), &Patch::Apply(lock("b")))
        .await
        .unwrap();
    assert_eq!(taken.spec.unwrap().holder_identity.as_deref(), Some("b"));
}
