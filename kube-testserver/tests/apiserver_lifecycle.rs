//! Generation and status rules, finalizers, garbage collection, namespaces, schema validation.

mod support;

use k8s_openapi::{
    api::core::v1::{ConfigMap, Namespace, Secret},
    apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams, PropagationPolicy},
};
use serde_json::json;
use support::{Widget, WidgetCondition, WidgetStatus, code, config_map, eventually, reason, start, widget};

fn generation(w: &Widget) -> i64 {
    w.metadata.generation.unwrap()
}

#[tokio::test]
async fn generation_starts_at_one_and_follows_spec_changes_only() {
    let h = start().await;
    h.install_widgets().await;
    let widgets: Api<Widget> = h.api();
    let w = widgets
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    assert_eq!(generation(&w), 1);
    let labelled = widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": { "a": "b" } } })),
        )
        .await
        .unwrap();
    assert_eq!(generation(&labelled), 1, "metadata changes keep the generation");
    let resized = widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "size": 2 } })),
        )
        .await
        .unwrap();
    assert_eq!(generation(&resized), 2);
    let status = json!({ "status": { "phase": "Running" } });
    let with_status = widgets
        .patch_status("w", &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
    assert_eq!(generation(&with_status), 2, "status writes keep the generation");
}

#[tokio::test]
async fn status_writes_change_only_status() {
    let h = start().await;
    h.install_widgets().await;
    let widgets: Api<Widget> = h.api();
    widgets
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    let sneaky = json!({ "spec": { "size": 99 }, "metadata": { "labels": { "x": "y" } }, "status": { "phase": "Up" } });
    let out = widgets
        .patch_status("w", &PatchParams::default(), &Patch::Merge(sneaky))
        .await
        .unwrap();
    assert_eq!(out.spec.size, 1);
    assert!(out.metadata.labels.unwrap_or_default().is_empty());
    assert_eq!(out.status.unwrap().phase.as_deref(), Some("Up"));
}

#[tokio::test]
async fn main_resource_writes_never_change_status() {
    let h = start().await;
    h.install_widgets().await;
    let widgets: Api<Widget> = h.api();
    let mut w = widget("w", 1);
    w.status = Some(WidgetStatus {
        phase: Some("Preset".into()),
        ..Default::default()
    });
    let created = widgets.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(
        created.status, None,
        "create drops status when it is a subresource"
    );
    widgets
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "phase": "Real" } })),
        )
        .await
        .unwrap();
    let mut current = widgets.get("w").await.unwrap();
    current.status.as_mut().unwrap().phase = Some("Overwritten".into());
    current.status.as_mut().unwrap().conditions.push(WidgetCondition {
        type_: "X".into(),
        status: "True".into(),
        reason: None,
    });
    current.spec.size = 5;
    let replaced = widgets
        .replace("w", &PostParams::default(), &current)
        .await
        .unwrap();
    assert_eq!(replaced.spec.size, 5);
    assert_eq!(replaced.status.unwrap().phase.as_deref(), Some("Real"));
}

#[tokio::test]
async fn writes_that_change_nothing_keep_the_resource_version() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    let created = cms
        .create(&PostParams::default(), &config_map("a", &[("x", "1")]))
        .await
        .unwrap();
    let same = cms
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": { "x": "1" } } })),
        )
        .await
        .unwrap();
    assert_eq!(same.metadata.resource_version, created.metadata.resource_version);
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    let mut cm = config_map("held", &[]);
    cm.metadata.finalizers = Some(vec!["test.example.com/hold".into()]);
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let pending = cms
        .delete("held", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("object still there");
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert!(
        cms.get("held")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );

    let add = json!({ "metadata": { "finalizers": ["test.example.com/hold", "test.example.com/new"] } });
    let err = cms
        .patch("held", &PatchParams::default(), &Patch::Merge(add))
        .await
        .unwrap_err();
    assert_eq!(code(&err), 422, "no new finalizers once deleting");

    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "finalizers": null } })),
    )
    .await
    .unwrap();
    assert_eq!(code(&cms.get("held").await.unwrap_err()), 404);
}

#[tokio::test]
async fn deletion_with_finalizers_bumps_generation() {
    let h = start().await;
    h.install_widgets().await;
    let widgets: Api<Widget> = h.api();
    let mut w = widget("w", 1);
    w.metadata.finalizers = Some(vec!["test.example.com/hold".into()]);
    widgets.create(&PostParams::default(), &w).await.unwrap();
    let pending = widgets
        .delete("w", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(pending.metadata.generation, Some(2));
}

fn owned_by(owner: &Secret) -> OwnerReference {
    owner.controller_owner_ref(&()).unwrap()
}

#[tokio::test]
async fn deleting_an_owner_deletes_its_dependents() {
    let h = start().await;
    let secrets: Api<Secret> = h.api();
    let cms: Api<ConfigMap> = h.api();
    let owner = new_secret(&secrets, "owner").await;
    let mut child = config_map("child", &[]);
    child.metadata.owner_references = Some(vec![owned_by(&owner)]);
    cms.create(&PostParams::default(), &child).await.unwrap();
    let mut grandchild = config_map("grandchild", &[]);
    let child = cms.get("child").await.unwrap();
    grandchild.metadata.owner_references = Some(vec![child.controller_owner_ref(&()).unwrap()]);
    cms.create(&PostParams::default(), &grandchild).await.unwrap();

    secrets
        .delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    eventually(|| async {
        cms.list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn orphan_propagation_keeps_dependents() {
    let h = start().await;
    let secrets: Api<Secret> = h.api();
    let cms: Api<ConfigMap> = h.api();
    let owner = new_secret(&secrets, "owner").await;
    let mut child = config_map("child", &[]);
    child.metadata.owner_references = Some(vec![owned_by(&owner)]);
    cms.create(&PostParams::default(), &child).await.unwrap();
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        ..Default::default()
    };
    secrets.delete("owner", &dp).await.unwrap();
    let child = cms.get("child").await.unwrap();
    assert!(child.metadata.owner_references.unwrap_or_default().is_empty());
}

#[tokio::test]
async fn dependents_with_a_surviving_owner_stay() {
    let h = start().await;
    let secrets: Api<Secret> = h.api();
    let cms: Api<ConfigMap> = h.api();
    let a = new_secret(&secrets, "a").await;
    let b = new_secret(&secrets, "b").await;
    let mut child = config_map("child", &[]);
    let mut second = owned_by(&b);
    second.controller = None;
    child.metadata.owner_references = Some(vec![owned_by(&a), second]);
    cms.create(&PostParams::default(), &child).await.unwrap();
    secrets.delete("a", &DeleteParams::default()).await.unwrap();
    cms.get("child").await.unwrap();
}

/// kube-apiserver's collector deletes an object written with owners that are all gone; an
/// owner is gone when no object of its kind and name carries its uid (a Secret recreated under
/// the same name is another owner). Owners that exist keep the object, whatever their kind.
#[tokio::test]
async fn objects_written_with_only_gone_owners_are_collected() {
    let h = start().await;
    let secrets: Api<Secret> = h.api();
    let cms: Api<ConfigMap> = h.api();
    let owner = new_secret(&secrets, "owner").await;
    let old_ref = owned_by(&owner);
    secrets.delete("owner", &DeleteParams::default()).await.unwrap();
    let again = new_secret(&secrets, "owner").await;
    let live = new_secret(&secrets, "live").await;

    // Created naming only the deleted owner (same name as a live Secret, another uid): collected.
    let mut stale = config_map("stale", &[]);
    stale.metadata.owner_references = Some(vec![old_ref.clone()]);
    cms.create(&PostParams::default(), &stale).await.unwrap();
    // Created with the recreated owner: stays, then patched to name only the gone one: collected.
    let mut moved = config_map("moved", &[]);
    moved.metadata.owner_references = Some(vec![owned_by(&again)]);
    cms.create(&PostParams::default(), &moved).await.unwrap();
    // One owner gone, one live: stays.
    let mut kept = config_map("kept", &[]);
    let mut second = owned_by(&live);
    second.controller = None;
    kept.metadata.owner_references = Some(vec![old_ref.clone(), second]);
    cms.create(&PostParams::default(), &kept).await.unwrap();
    cms.get("moved").await.unwrap();
    let patch = json!({"metadata": {"ownerReferences": [old_ref]}});
    cms.patch("moved", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();

    let names = || async {
        let mut names: Vec<String> = cms
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|c| c.name_any())
            .collect();
        names.sort();
        names
    };
    eventually(|| async { (names().await == ["kept"]).then_some(()) }).await;
}

#[tokio::test]
async fn deleting_a_namespace_removes_its_contents() {
    let h = start().await;
    let namespaces: Api<Namespace> = h.cluster_api();
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some("doomed".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces.create(&PostParams::default(), &ns).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(h.client.clone(), "doomed");
    let mut held = config_map("held", &[]);
    held.metadata.finalizers = Some(vec!["test.example.com/hold".into()]);
    cms.create(&PostParams::default(), &held).await.unwrap();
    cms.create(&PostParams::default(), &config_map("free", &[]))
        .await
        .unwrap();

    let pending = namespaces
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(pending.status.unwrap().phase.as_deref(), Some("Terminating"));
    let err = cms
        .create(&PostParams::default(), &config_map("late", &[]))
        .await
        .unwrap_err();
    assert_eq!(code(&err), 403);
    assert_eq!(code(&cms.get("free").await.unwrap_err()), 404);
    namespaces.get("doomed").await.expect("waits for the finalizer");
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "finalizers": null } })),
    )
    .await
    .unwrap();
    assert_eq!(code(&namespaces.get("doomed").await.unwrap_err()), 404);
}

#[tokio::test]
async fn custom_resources_are_checked_against_their_schema() {
    let h = start().await;
    h.install_widgets().await;
    let widgets: Api<Widget> = h.api();
    let raw: Api<kube::api::DynamicObject> = Api::namespaced_with(
        h.client.clone(),
        "default",
        &kube::api::ApiResource::erase::<Widget>(&()),
    );
    let object = |spec: serde_json::Value| {
        serde_json::from_value::<kube::api::DynamicObject>(json!({
            "apiVersion": "test.example.com/v1", "kind": "Widget", "metadata": { "name": "w" }, "spec": spec
        }))
        .unwrap()
    };
    let err = raw
        .create(&PostParams::default(), &object(json!({ "size": "big" })))
        .await
        .unwrap_err();
    assert_eq!((code(&err), reason(&err).as_str()), (422, "Invalid"));
    let err = raw
        .create(&PostParams::default(), &object(json!({ "color": "red" })))
        .await
        .unwrap_err();
    assert_eq!(code(&err), 422, "spec.size is required");

    let created = raw
        .create(
            &PostParams::default(),
            &object(json!({ "size": 1, "bogus": true })),
        )
        .await
        .unwrap();
    assert!(
        created.data["spec"].get("bogus").is_none(),
        "unknown fields are pruned"
    );
    assert_eq!(widgets.get("w").await.unwrap().spec.size, 1);

    let req = http::Request::post("/apis/test.example.com/v1/namespaces/default/widgets?fieldValidation=Strict")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&json!({
            "apiVersion": "test.example.com/v1", "kind": "Widget", "metadata": { "name": "w2" }, "spec": { "size": 1, "bogus": true }
        })).unwrap())
        .unwrap();
    let err = h.client.request_text(req).await.unwrap_err();
    assert_eq!(code(&err), 400, "strict field validation rejects unknown fields");
    assert_eq!(widgets.get("w").await.unwrap().name_any(), "w");
}

/// Creates an empty Secret `name` (an owner for the collector's tests).
async fn new_secret(secrets: &Api<Secret>, name: &str) -> Secret {
    secrets
        .create(&PostParams::default(), &support::secret(name, &[]))
        .await
        .unwrap()
}
