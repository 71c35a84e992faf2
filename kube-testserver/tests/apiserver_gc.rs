//! Foreground cascading deletion and `blockOwnerDeletion`, as the garbage collector does them
//! (https://kubernetes.io/docs/concepts/architecture/garbage-collection/#foreground-deletion):
//! the owner is marked deleting with the `foregroundDeletion` finalizer, its dependents are
//! deleted, and the owner goes only when no dependent with `blockOwnerDeletion: true` is left.
//! Background deletion and orphaning are in apiserver_lifecycle.rs, `generateName` in
//! apiserver_crud.rs.

mod support;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{
    Api, Resource,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use support::{code, config_map, eventually, start};

async fn owner(secrets: &Api<Secret>, name: &str) -> Secret {
    secrets
        .create(&PostParams::default(), &support::secret(name, &[]))
        .await
        .unwrap()
}

/// A ConfigMap owned by `owner`, held by a finalizer of its own.
async fn dependent(cms: &Api<ConfigMap>, name: &str, owners: &[&Secret], block: bool) {
    let mut child = config_map(name, &[]);
    let refs = owners
        .iter()
        .map(|o| {
            let mut r = o.controller_owner_ref(&()).unwrap();
            r.controller = None;
            r.block_owner_deletion = Some(block);
            r
        })
        .collect();
    child.metadata.owner_references = Some(refs);
    child.metadata.finalizers = Some(vec!["test.example.com/hold".into()]);
    cms.create(&PostParams::default(), &child).await.unwrap();
}

async fn release(cms: &Api<ConfigMap>, name: &str) {
    let patch = json!({ "metadata": { "finalizers": null } });
    cms.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

async fn gone<K>(api: &Api<K>, name: &str)
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(|| async {
        match api.get(name).await {
            Err(err) => (code(&err) == 404).then_some(()),
            Ok(_) => None,
        }
    })
    .await;
}

#[tokio::test]
async fn foreground_deletion_waits_for_blocking_dependents() {
    let h = start().await;
    let (secrets, cms): (Api<Secret>, Api<ConfigMap>) = (h.api(), h.api());
    let o = owner(&secrets, "owner").await;
    dependent(&cms, "child", &[&o], true).await;
    secrets
        .delete("owner", &DeleteParams::foreground())
        .await
        .unwrap();

    let waiting = secrets.get("owner").await.unwrap();
    assert!(waiting.metadata.deletion_timestamp.is_some());
    assert_eq!(
        waiting.metadata.finalizers,
        Some(vec!["foregroundDeletion".to_string()])
    );
    let child = cms.get("child").await.unwrap();
    assert!(
        child.metadata.deletion_timestamp.is_some(),
        "the dependent is being deleted"
    );

    release(&cms, "child").await;
    gone(&cms, "child").await;
    gone(&secrets, "owner").await;
}

#[tokio::test]
async fn dependents_without_block_owner_deletion_do_not_hold_the_owner() {
    let h = start().await;
    let (secrets, cms): (Api<Secret>, Api<ConfigMap>) = (h.api(), h.api());
    let o = owner(&secrets, "owner").await;
    dependent(&cms, "child", &[&o], false).await;
    secrets
        .delete("owner", &DeleteParams::foreground())
        .await
        .unwrap();
    gone(&secrets, "owner").await;
    let child = cms.get("child").await.unwrap();
    assert!(child.metadata.deletion_timestamp.is_some());
}

#[tokio::test]
async fn a_dependent_with_another_live_owner_only_loses_its_reference() {
    let h = start().await;
    let (secrets, cms): (Api<Secret>, Api<ConfigMap>) = (h.api(), h.api());
    let (a, b) = (owner(&secrets, "a").await, owner(&secrets, "b").await);
    dependent(&cms, "child", &[&a, &b], true).await;
    secrets.delete("a", &DeleteParams::foreground()).await.unwrap();
    gone(&secrets, "a").await;
    let child = cms.get("child").await.unwrap();
    assert!(child.metadata.deletion_timestamp.is_none());
    let owners: Vec<String> = child
        .metadata
        .owner_references
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(owners, ["b"]);
}

#[tokio::test]
async fn foreground_deletion_without_dependents_deletes_at_once() {
    let h = start().await;
    let secrets: Api<Secret> = h.api();
    owner(&secrets, "lonely").await;
    secrets
        .delete("lonely", &DeleteParams::foreground())
        .await
        .unwrap();
    gone(&secrets, "lonely").await;
}
