//! Pods are served as stored objects (nothing runs them): created with a UID, their status
//! written through the subresource, and what they own deleted with them.

mod support;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodStatus};
use kube::Resource;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{code, config_map, eventually, start};

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]},
    }))
    .unwrap()
}

#[tokio::test]
async fn pods_are_stored_with_a_status_subresource() {
    let server = start().await;
    let pods = server.api::<Pod>();
    let created = pods.create(&PostParams::default(), &pod("web-0")).await.unwrap();
    assert!(created.metadata.uid.as_deref().is_some_and(|uid| !uid.is_empty()));
    let status = json!({"status": {"phase": "Running"}});
    let patched = pods
        .patch_status("web-0", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    assert_eq!(
        patched.status,
        Some(PodStatus {
            phase: Some("Running".into()),
            ..PodStatus::default()
        })
    );
    let listed = pods.list(&Default::default()).await.unwrap();
    let names: Vec<_> = listed
        .items
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    assert_eq!(names, ["web-0"]);
}

#[tokio::test]
async fn what_a_pod_owns_goes_with_it() {
    let server = start().await;
    let pods = server.api::<Pod>();
    let owner = pods.create(&PostParams::default(), &pod("web-1")).await.unwrap();
    let cms = server.api::<ConfigMap>();
    let mut owned = config_map("web-1-tls", &[]);
    let mut reference = owner.controller_owner_ref(&()).unwrap();
    reference.controller = None;
    owned.metadata.owner_references = Some(vec![reference]);
    cms.create(&PostParams::default(), &owned).await.unwrap();
    pods.delete("web-1", &DeleteParams::default()).await.unwrap();
    eventually(|| async {
        match cms.get("web-1-tls").await {
            Err(err) => (code(&err) == 404).then_some(()),
            Ok(_) => None,
        }
    })
    .await;
}
