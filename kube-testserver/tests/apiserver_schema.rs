//! Unknown fields against a structural schema, as kube-apiserver treats them: server-side
//! apply types the applied configuration against the schema and refuses a field the schema
//! does not declare ("field not declared in schema", structured-merge-diff), while create,
//! update and merge patch prune it silently. The Go cfssl-issuer's CRDs, whose conditions
//! have no `observedGeneration`, are the case that matters here.

mod support;

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use support::{code, start};

/// The Go issuer's Issuer and ClusterIssuer CRDs, byte for byte as it ships them.
const GO_CRDS: [&str; 2] = [
    include_str!("../../tests/data/crds/cfssl-issuer.wikimedia.org_issuers.yaml"),
    include_str!("../../tests/data/crds/cfssl-issuer.wikimedia.org_clusterissuers.yaml"),
];

fn go_issuers() -> ApiResource {
    let gvk = GroupVersionKind::gvk("cfssl-issuer.wikimedia.org", "v1alpha1", "Issuer");
    ApiResource::from_gvk_with_plural(&gvk, "issuers")
}

async fn with_go_crds() -> support::Harness {
    let h = start().await;
    for text in GO_CRDS {
        h.install_crd(serde_saphyr::from_str(text).unwrap()).await;
    }
    h
}

fn ready(observed_generation: Option<i64>) -> Value {
    let mut c = json!({ "type": "Ready", "status": "True", "reason": "Checked", "message": "ok",
                        "lastTransitionTime": "2026-11-22T10:00:00Z" });
    if let Some(g) = observed_generation {
        c["observedGeneration"] = g.into();
    }
    c
}

fn status_apply(conditions: Value) -> Value {
    json!({ "apiVersion": "cfssl-issuer.wikimedia.org/v1alpha1", "kind": "Issuer",
            "status": { "conditions": conditions } })
}

#[tokio::test]
async fn apply_of_an_undeclared_field_fails_where_other_writes_prune_it() {
    let h = with_go_crds().await;
    let api: Api<DynamicObject> = Api::namespaced_with(h.client.clone(), "default", &go_issuers());
    // Create prunes: `caBundle` and `bogus` are not in the Go schema.
    let issuer: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cfssl-issuer.wikimedia.org/v1alpha1", "kind": "Issuer",
        "metadata": { "name": "ca" },
        "spec": { "url": "http://ca", "label": "l", "authSecretName": "s", "caBundle": "eA==", "bogus": 1 },
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &issuer).await.unwrap();
    assert_eq!(
        created.data["spec"],
        json!({ "url": "http://ca", "label": "l", "authSecretName": "s" })
    );

    // Server-side apply refuses the same kind of field, whole: nothing is written.
    let pp = PatchParams::apply("cfssl-issuer").force();
    let err = api
        .patch_status("ca", &pp, &Patch::Apply(&status_apply(json!([ready(Some(1))]))))
        .await
        .unwrap_err();
    assert_eq!(code(&err), 500, "kube-apiserver answers a plain error: {err}");
    let kube::Error::Api(status) = &err else {
        unreachable!()
    };
    assert_eq!(
        status.message,
        "failed to create typed patch object (default/ca; cfssl-issuer.wikimedia.org/v1alpha1, Kind=Issuer): \
         .status.conditions[0].observedGeneration: field not declared in schema"
    );
    assert_eq!(status.reason, "", "no reason, as for any non-Status error");
    assert!(api.get_status("ca").await.unwrap().data.get("status").is_none());

    // Without the field the apply goes through.
    let applied = api
        .patch_status("ca", &pp, &Patch::Apply(&status_apply(json!([ready(None)]))))
        .await
        .unwrap();
    assert_eq!(applied.data["status"]["conditions"], json!([ready(None)]));

    // Merge patch and update prune it instead of failing.
    let merge = json!({ "status": { "conditions": [ready(Some(1))] } });
    let patched = api
        .patch_status("ca", &PatchParams::default(), &Patch::Merge(&merge))
        .await
        .unwrap();
    assert_eq!(patched.data["status"]["conditions"], json!([ready(None)]));
    let mut replaced = patched.clone();
    replaced.data["status"]["conditions"] = json!([ready(Some(1))]);
    replaced.data["spec"]["bogus"] = json!(2);
    let updated = api
        .replace_status("ca", &PostParams::default(), &replaced)
        .await
        .unwrap();
    assert_eq!(updated.data["status"]["conditions"], json!([ready(None)]));
}

#[tokio::test]
async fn apply_to_our_crds_keeps_observed_generation() {
    let h = start().await;
    for crd in cfssl_issuer::api::crds() {
        h.install_crd(crd).await;
    }
    let api: Api<DynamicObject> = Api::namespaced_with(h.client.clone(), "default", &go_issuers());
    let issuer: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cfssl-issuer.wikimedia.org/v1alpha1", "kind": "Issuer",
        "metadata": { "name": "ca" }, "spec": { "url": "http://ca", "label": "l", "authSecretName": "s" },
    }))
    .unwrap();
    api.create(&PostParams::default(), &issuer).await.unwrap();
    let pp = PatchParams::apply("cfssl-issuer").force();
    let applied = api
        .patch_status("ca", &pp, &Patch::Apply(&status_apply(json!([ready(Some(1))]))))
        .await
        .unwrap();
    assert_eq!(applied.data["status"]["conditions"][0]["observedGeneration"], 1);
}

/// A watch of one CRD by `metadata.name`, as a client restricted by RBAC `resourceNames` must
/// make it: only that CRD, and its changes.
#[tokio::test]
async fn crds_can_be_watched_by_name() {
    let h = with_go_crds().await;
    let crds: Api<CustomResourceDefinition> = Api::all(h.client.clone());
    let name = "issuers.cfssl-issuer.wikimedia.org";
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher(crds.clone(), config).applied_objects().boxed();
    let first = next(&mut events).await;
    assert_eq!(first.name_any(), name);

    // Our CRD replaces the Go one, as `kubectl apply` of the chart's CRDs would.
    let mut ours = cfssl_issuer::api::crds().remove(0);
    ours.metadata.resource_version = first.metadata.resource_version.clone();
    crds.replace(name, &PostParams::default(), &ours).await.unwrap();
    let changed = next(&mut events).await;
    assert_eq!(changed.name_any(), name);
    assert_ne!(changed.metadata.resource_version, first.metadata.resource_version);
}

async fn next<S>(events: &mut S) -> CustomResourceDefinition
where
    S: futures::Stream<Item = Result<CustomResourceDefinition, watcher::Error>> + Unpin,
{
    tokio::time::timeout(Duration::from_secs(5), events.try_next())
        .await
        .expect("a watch event")
        .unwrap()
        .expect("the stream goes on")
}

/// The next object event of a raw watch, within a second.
async fn next_object<S>(events: &mut S) -> DynamicObject
where
    S: futures::Stream<Item = kube::Result<kube::api::WatchEvent<DynamicObject>>> + Unpin,
{
    loop {
        let event = tokio::time::timeout(Duration::from_secs(1), events.next())
            .await
            .expect("an event within a second")
            .expect("the stream goes on")
            .unwrap();
        match event {
            kube::api::WatchEvent::Added(o) | kube::api::WatchEvent::Modified(o) => return o,
            kube::api::WatchEvent::Bookmark(_) => continue,
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// A watch opened before a CRD update goes on reading through the old schema: kube-apiserver
/// serves it from the old storage, which prunes with the old schema, until it tears that
/// storage down up to two request timeouts later (apiextensions-apiserver
/// `crdHandler.tearDown`; seen against kube-apiserver v1.35 in `make e2e-real`). A watch
/// opened after the update reads the new schema's fields.
#[tokio::test]
async fn a_watch_opened_before_a_crd_update_reads_through_the_old_schema() {
    let h = with_go_crds().await;
    let api: Api<DynamicObject> = Api::namespaced_with(h.client.clone(), "default", &go_issuers());
    let issuer: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cfssl-issuer.wikimedia.org/v1alpha1", "kind": "Issuer",
        "metadata": { "name": "ca" }, "spec": { "url": "http://ca", "label": "l", "authSecretName": "s" },
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &issuer).await.unwrap();
    let from = created.resource_version().unwrap();
    let mut before = api.watch(&Default::default(), &from).await.unwrap().boxed();

    // Our schema: the Go one with `observedGeneration` in each condition.
    let crds: Api<CustomResourceDefinition> = Api::all(h.client.clone());
    let mut crd =
        serde_json::to_value(crds.get("issuers.cfssl-issuer.wikimedia.org").await.unwrap()).unwrap();
    let path =
        "/spec/versions/0/schema/openAPIV3Schema/properties/status/properties/conditions/items/properties";
    crd.pointer_mut(path).unwrap()["observedGeneration"] = json!({ "type": "integer", "format": "int64" });
    let crd: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
    crds.replace("issuers.cfssl-issuer.wikimedia.org", &PostParams::default(), &crd)
        .await
        .unwrap();
    let mut after = api.watch(&Default::default(), &from).await.unwrap().boxed();

    let status = json!({ "status": { "conditions": [ready(Some(1))] } });
    api.patch_status("ca", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let condition = |o: &DynamicObject| o.data["status"]["conditions"][0].clone();
    assert_eq!(condition(&next_object(&mut before).await), ready(None));
    assert_eq!(condition(&next_object(&mut after).await), ready(Some(1)));
    assert_eq!(condition(&api.get("ca").await.unwrap()), ready(Some(1)));
}
