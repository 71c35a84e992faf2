//! Create, get, update, delete, list: names, conflicts, namespaces, selectors, pages.

mod support;

use k8s_openapi::{
    ByteString,
    api::core::v1::{ConfigMap, Namespace, Secret},
};
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, ListParams, ObjectMeta, PostParams},
};
use support::{Gadget, GadgetSpec, code, config_map, reason, secret, start};

#[tokio::test]
async fn secrets_round_trip_through_create_get_update_delete() {
    let h = start().await;
    let secrets: Api<Secret> = h.api();
    let created = secrets
        .create(&PostParams::default(), &secret("s", &[("key", "v1")]))
        .await
        .unwrap();
    assert_eq!(created.type_.as_deref(), Some("Opaque"));
    assert_eq!(created.data.as_ref().unwrap()["key"], ByteString(b"v1".to_vec()));
    assert!(created.string_data.is_none(), "stringData is folded into data");
    assert!(created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some());
    assert_eq!(created.metadata.namespace.as_deref(), Some("default"));

    let mut fetched = secrets.get("s").await.unwrap();
    assert_eq!(fetched, created);
    fetched
        .data
        .as_mut()
        .unwrap()
        .insert("key".into(), ByteString(b"v2".to_vec()));
    let updated = secrets
        .replace("s", &PostParams::default(), &fetched)
        .await
        .unwrap();
    let rv = |s: &Secret| s.resource_version().unwrap().parse::<u64>().unwrap();
    assert!(rv(&updated) > rv(&created));
    assert_eq!(updated.metadata.uid, created.metadata.uid);

    let deleted = secrets.delete("s", &DeleteParams::default()).await.unwrap();
    let status = deleted.right().expect("immediate deletion answers with a Status");
    assert_eq!(status.details.unwrap().uid, created.metadata.uid.unwrap());
    assert_eq!(code(&secrets.get("s").await.unwrap_err()), 404);
}

#[tokio::test]
async fn generate_name_makes_unique_names() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    let template = ConfigMap {
        metadata: ObjectMeta {
            generate_name: Some("cm-".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let a = cms.create(&PostParams::default(), &template).await.unwrap();
    let b = cms.create(&PostParams::default(), &template).await.unwrap();
    assert!(
        a.name_any().starts_with("cm-") && a.name_any().len() == 8,
        "{}",
        a.name_any()
    );
    assert_ne!(a.name_any(), b.name_any());
}

#[tokio::test]
async fn creating_an_existing_name_is_already_exists() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    cms.create(&PostParams::default(), &config_map("a", &[]))
        .await
        .unwrap();
    let err = cms
        .create(&PostParams::default(), &config_map("a", &[]))
        .await
        .unwrap_err();
    assert_eq!((code(&err), reason(&err).as_str()), (409, "AlreadyExists"));
}

#[tokio::test]
async fn updating_a_stale_resource_version_is_a_conflict() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    let first = cms
        .create(&PostParams::default(), &config_map("a", &[]))
        .await
        .unwrap();
    let mut newer = first.clone();
    newer.data = Some([("x".to_string(), "1".to_string())].into());
    cms.replace("a", &PostParams::default(), &newer).await.unwrap();
    let mut stale = first;
    stale.data = Some([("x".to_string(), "2".to_string())].into());
    let err = cms
        .replace("a", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert_eq!((code(&err), reason(&err).as_str()), (409, "Conflict"));
    assert_eq!(cms.get("a").await.unwrap().data.unwrap()["x"], "1");
}

#[tokio::test]
async fn missing_objects_are_not_found() {
    let h = start().await;
    let err = h.api::<Secret>().get("nope").await.unwrap_err();
    assert_eq!((code(&err), reason(&err).as_str()), (404, "NotFound"));
    let kube::Error::Api(status) = err else {
        unreachable!()
    };
    assert_eq!(status.message, "secrets \"nope\" not found");
}

#[tokio::test]
async fn objects_need_an_existing_namespace() {
    let h = start().await;
    let in_ns: Api<ConfigMap> = Api::namespaced(h.client.clone(), "team-a");
    let err = in_ns
        .create(&PostParams::default(), &config_map("a", &[]))
        .await
        .unwrap_err();
    assert_eq!(code(&err), 404);
    let namespaces: Api<Namespace> = h.cluster_api();
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some("team-a".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let ns = namespaces.create(&PostParams::default(), &ns).await.unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Active"));
    in_ns
        .create(&PostParams::default(), &config_map("a", &[]))
        .await
        .unwrap();
    for builtin in ["default", "kube-system"] {
        namespaces.get(builtin).await.unwrap();
    }
}

#[tokio::test]
async fn invalid_names_are_rejected() {
    let h = start().await;
    let err = h
        .api::<ConfigMap>()
        .create(&PostParams::default(), &config_map("Not_Valid", &[]))
        .await
        .unwrap_err();
    assert_eq!((code(&err), reason(&err).as_str()), (422, "Invalid"));
}

#[tokio::test]
async fn dry_run_creates_nothing() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    cms.create(
        &PostParams {
            dry_run: true,
            ..Default::default()
        },
        &config_map("a", &[]),
    )
    .await
    .unwrap();
    assert_eq!(code(&cms.get("a").await.unwrap_err()), 404);
}

#[tokio::test]
async fn cluster_scoped_custom_resources_work() {
    let h = start().await;
    h.install_gadgets().await;
    let gadgets: Api<Gadget> = h.cluster_api();
    gadgets
        .create(
            &PostParams::default(),
            &Gadget::new("g1", GadgetSpec { model: "m".into() }),
        )
        .await
        .unwrap();
    assert_eq!(gadgets.get("g1").await.unwrap().spec.model, "m");
    let listed = gadgets.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    gadgets.delete("g1", &DeleteParams::default()).await.unwrap();
    assert!(
        gadgets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

async fn seeded(h: &support::Harness) -> Api<ConfigMap> {
    let cms: Api<ConfigMap> = h.api();
    for (name, labels) in [
        ("web-1", &[("app", "web"), ("tier", "front")][..]),
        ("web-2", &[("app", "web"), ("tier", "back")][..]),
        ("db-1", &[("app", "db")][..]),
        ("plain", &[][..]),
    ] {
        cms.create(&PostParams::default(), &config_map(name, labels))
            .await
            .unwrap();
    }
    cms
}

async fn names(cms: &Api<ConfigMap>, lp: &ListParams) -> Vec<String> {
    cms.list(lp)
        .await
        .unwrap()
        .items
        .iter()
        .map(|o| o.name_any())
        .collect()
}

#[tokio::test]
async fn label_selectors_support_every_operator() {
    let h = start().await;
    let cms = seeded(&h).await;
    let by = |s: &str| ListParams::default().labels(s);
    assert_eq!(names(&cms, &by("app=web")).await, ["web-1", "web-2"]);
    assert_eq!(names(&cms, &by("app==db")).await, ["db-1"]);
    assert_eq!(names(&cms, &by("app!=web")).await, ["db-1", "plain"]);
    assert_eq!(names(&cms, &by("tier in (front,middle)")).await, ["web-1"]);
    assert_eq!(names(&cms, &by("app notin (web)")).await, ["db-1", "plain"]);
    assert_eq!(names(&cms, &by("tier")).await, ["web-1", "web-2"]);
    assert_eq!(names(&cms, &by("!app")).await, ["plain"]);
    assert_eq!(names(&cms, &by("app=web,tier=back")).await, ["web-2"]);
}

#[tokio::test]
async fn field_selectors_match_name_and_namespace() {
    let h = start().await;
    let cms = seeded(&h).await;
    assert_eq!(
        names(&cms, &ListParams::default().fields("metadata.name=db-1")).await,
        ["db-1"]
    );
    assert_eq!(
        names(
            &cms,
            &ListParams::default().fields("metadata.name!=db-1,metadata.namespace=default")
        )
        .await
        .len(),
        3
    );
    let everywhere: Api<ConfigMap> = Api::all(h.client.clone());
    let lp = ListParams::default().fields("metadata.namespace=kube-system");
    assert!(everywhere.list(&lp).await.unwrap().items.is_empty());
    assert_eq!(
        everywhere.list(&ListParams::default()).await.unwrap().items.len(),
        4
    );
}

#[tokio::test]
async fn lists_paginate_with_limit_and_continue() {
    let h = start().await;
    let cms = seeded(&h).await;
    let first = cms.list(&ListParams::default().limit(3)).await.unwrap();
    assert_eq!(first.items.len(), 3);
    assert_eq!(first.metadata.remaining_item_count, Some(1));
    let token = first.metadata.continue_.clone().expect("a continue token");
    let second = cms
        .list(&ListParams::default().limit(3).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(second.items.len(), 1);
    assert!(
        second
            .metadata
            .continue_
            .as_deref()
            .unwrap_or_default()
            .is_empty()
    );
    // Every page reports the first page's resourceVersion, so a watch from it misses nothing.
    assert_eq!(second.metadata.resource_version, first.metadata.resource_version);
    let all: Vec<String> = first
        .items
        .iter()
        .chain(&second.items)
        .map(|o| o.name_any())
        .collect();
    assert_eq!(all, ["db-1", "plain", "web-1", "web-2"]);
}

#[tokio::test]
async fn continue_tokens_expire_with_history() {
    let h = start().await;
    let cms = seeded(&h).await;
    let first = cms.list(&ListParams::default().limit(1)).await.unwrap();
    cms.create(&PostParams::default(), &config_map("later", &[]))
        .await
        .unwrap();
    h.server.compact_history();
    let token = first.metadata.continue_.unwrap();
    let err = cms
        .list(&ListParams::default().limit(1).continue_token(&token))
        .await
        .unwrap_err();
    assert_eq!((code(&err), reason(&err).as_str()), (410, "Expired"));
}

#[tokio::test]
async fn delete_collection_honours_selectors() {
    let h = start().await;
    let cms = seeded(&h).await;
    cms.delete_collection(&DeleteParams::default(), &ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(names(&cms, &ListParams::default()).await, ["db-1", "plain"]);
}

/// A name pins one object of a namespace (kube's watcher of one object lists so); across
/// namespaces it selects that name in each.
#[tokio::test]
async fn list_by_name_finds_the_one_object_or_none() {
    let h = start().await;
    let cms = seeded(&h).await;
    let by = |selector: &str| ListParams::default().fields(selector);
    assert_eq!(names(&cms, &by("metadata.name=web-2")).await, ["web-2"]);
    assert_eq!(
        names(&cms, &by("metadata.name==web-2,metadata.namespace=default")).await,
        ["web-2"]
    );
    assert!(
        names(&cms, &by("metadata.name=web-2,metadata.namespace=other"))
            .await
            .is_empty()
    );
    assert!(names(&cms, &by("metadata.name=nope")).await.is_empty());
    assert_eq!(
        names(&cms, &by("metadata.name=web-2").labels("app=web")).await,
        ["web-2"]
    );
    assert!(
        names(&cms, &by("metadata.name=web-2").labels("app=db"))
            .await
            .is_empty()
    );
    let other: Api<ConfigMap> = Api::namespaced(h.client.clone(), "kube-system");
    other
        .create(&PostParams::default(), &config_map("web-2", &[]))
        .await
        .unwrap();
    let everywhere: Api<ConfigMap> = Api::all(h.client.clone());
    let found = everywhere.list(&by("metadata.name=web-2")).await.unwrap().items;
    let namespaces: Vec<_> = found.iter().map(|c| c.namespace().unwrap()).collect();
    assert_eq!(namespaces, ["default", "kube-system"]);
}

/// The CSI plugin's renewal: a volume's requests by label, all but the one just issued by name.
#[tokio::test]
async fn delete_collection_honours_labels_and_a_name_field_together() {
    let h = start().await;
    let cms = seeded(&h).await;
    let keep_one = ListParams::default()
        .labels("app=web")
        .fields("metadata.name!=web-2");
    cms.delete_collection(&DeleteParams::default(), &keep_one)
        .await
        .unwrap();
    assert_eq!(
        names(&cms, &ListParams::default()).await,
        ["db-1", "plain", "web-2"]
    );
}

#[tokio::test]
async fn events_recorded_through_events_k8s_io_show_in_core_v1() {
    use k8s_openapi::api::{core::v1::Event as CoreEvent, events::v1::Event};
    use kube::runtime::events::{Event as Publish, EventType, Recorder, Reporter};
    let h = start().await;
    let owner = h
        .api::<ConfigMap>()
        .create(&PostParams::default(), &config_map("subject", &[]))
        .await
        .unwrap();
    let recorder = Recorder::new(
        h.client.clone(),
        Reporter {
            controller: "tester".into(),
            instance: None,
        },
    );
    let event = Publish {
        type_: EventType::Warning,
        reason: "Broken".into(),
        note: Some("it broke".into()),
        action: "Check".into(),
        secondary: None,
    };
    let reference = owner.object_ref(&());
    recorder.publish(&event, &reference).await.unwrap();
    recorder.publish(&event, &reference).await.unwrap();

    let v1: Vec<Event> = h.api::<Event>().list(&ListParams::default()).await.unwrap().items;
    assert_eq!(v1.len(), 1);
    assert_eq!(v1[0].series.as_ref().map(|s| s.count), Some(2));
    let core: Api<CoreEvent> = h.api();
    let lp = ListParams::default().fields("involvedObject.name=subject,involvedObject.kind=ConfigMap");
    let listed = core.list(&lp).await.unwrap().items;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].message.as_deref(), Some("it broke"));
    assert_eq!(listed[0].reporting_component.as_deref(), Some("tester"));
}

#[tokio::test]
async fn malformed_requests_get_the_matching_status_reason() {
    let h = start().await;
    let send = |method: &str, path: &str, body: &str| {
        let req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(body.as_bytes().to_vec())
            .unwrap();
        let client = h.client.clone();
        async move { client.request_text(req).await.unwrap_err() }
    };
    let cm = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"elsewhere"}}"#;
    let err = send("POST", "/api/v1/namespaces/default/configmaps", cm).await;
    assert_eq!(
        (code(&err), reason(&err).as_str()),
        (400, "BadRequest"),
        "namespace mismatch"
    );
    let err = send("POST", "/api/v1/namespaces/default/configmaps", "{not json").await;
    assert_eq!(
        (code(&err), reason(&err).as_str()),
        (400, "BadRequest"),
        "undecodable body"
    );
    let err = send("POST", "/api/v1/namespaces/default/configmaps/a", "{}").await;
    assert_eq!((code(&err), reason(&err).as_str()), (405, "MethodNotAllowed"));
    let err = send("GET", "/apis/nothing.example.com/v1/things", "").await;
    assert_eq!((code(&err), reason(&err).as_str()), (404, "NotFound"));
    let err = send("PATCH", "/api/v1/namespaces/default/configmaps/a", "{}").await;
    assert_eq!(code(&err), 415, "a patch needs a patch content type");
}

#[tokio::test]
async fn create_all_stores_objects_as_creates_would() {
    let h = start().await;
    let before = h.server.resource_version();
    let objects = (0..1200).map(|i| {
        serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("bulk-{i:04}"), "namespace": "default"},
            "data": {"i": i.to_string()},
        })
    });
    let created = h.server.create_all("", "v1", "configmaps", objects).unwrap();
    assert_eq!(created, 1200);
    assert_eq!(
        h.server.resource_version(),
        before + 1200,
        "one resourceVersion each"
    );
    let cms: Api<ConfigMap> = h.api();
    let listed = cms.list(&ListParams::default()).await.unwrap().items;
    let bulk: Vec<_> = listed
        .iter()
        .filter(|c| c.name_any().starts_with("bulk-"))
        .collect();
    assert_eq!(bulk.len(), 1200);
    assert!(
        bulk.iter()
            .all(|c| c.metadata.uid.is_some() && c.metadata.creation_timestamp.is_some())
    );
    let again = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "bulk-0000", "namespace": "default"},
    });
    let err = h.server.create_all("", "v1", "configmaps", [again]).unwrap_err();
    assert!(err.contains("already exists"), "{err}");
    let err = h
        .server
        .create_all("nope.example.com", "v1", "things", [])
        .unwrap_err();
    assert!(err.contains("not served"), "{err}");
}
