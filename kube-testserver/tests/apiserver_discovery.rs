//! Discovery, and CustomResourceDefinitions turning into served resources.

mod support;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, CustomResourceExt, ResourceExt,
    api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams},
    discovery::{Discovery, Scope},
};
use serde_json::{Value, json};
use support::{Gadget, GadgetSpec, Widget, start, widget};

async fn get_json(client: &kube::Client, path: &str) -> Value {
    let req = http::Request::get(path).body(vec![]).unwrap();
    serde_json::from_str(&client.request_text(req).await.unwrap()).unwrap()
}

#[tokio::test]
async fn version_and_core_group_are_served() {
    let h = start().await;
    let version = h.client.apiserver_version().await.unwrap();
    assert_eq!((version.major.as_str(), version.minor.as_str()), ("1", "33"));
    let core = h.client.list_core_api_versions().await.unwrap();
    assert_eq!(core.versions, ["v1"]);
    let resources = h.client.list_core_api_resources("v1").await.unwrap();
    let names: Vec<&str> = resources.resources.iter().map(|r| r.name.as_str()).collect();
    for expected in [
        "namespaces",
        "namespaces/status",
        "secrets",
        "configmaps",
        "events",
        "serviceaccounts",
    ] {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }
}

#[tokio::test]
async fn discovery_finds_builtin_groups() {
    let h = start().await;
    let discovery = Discovery::new(h.client.clone()).run().await.unwrap();
    let kinds: Vec<(String, String, Scope)> = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .map(|(ar, caps)| (ar.group, ar.kind, caps.scope))
        .collect();
    for (group, kind, scope) in [
        ("", "Secret", Scope::Namespaced),
        ("", "Namespace", Scope::Cluster),
        ("coordination.k8s.io", "Lease", Scope::Namespaced),
        ("events.k8s.io", "Event", Scope::Namespaced),
        ("apiextensions.k8s.io", "CustomResourceDefinition", Scope::Cluster),
    ] {
        assert!(
            kinds
                .iter()
                .any(|(g, k, s)| g == group && k == kind && *s == scope),
            "{group}/{kind} not discovered: {kinds:?}"
        );
    }
}

#[tokio::test]
async fn crds_add_namespaced_and_cluster_scoped_resources_with_status() {
    let h = start().await;
    h.install_widgets().await;
    h.install_gadgets().await;
    let discovery = Discovery::new(h.client.clone()).run().await.unwrap();
    let group = discovery.get("test.example.com").expect("CRD group discovered");
    let scope_of = |kind: &str| {
        group
            .recommended_resources()
            .into_iter()
            .find(|(ar, _)| ar.kind == kind)
            .map(|(_, c)| c.scope)
    };
    assert_eq!(scope_of("Widget"), Some(Scope::Namespaced));
    assert_eq!(scope_of("Gadget"), Some(Scope::Cluster));

    let list = get_json(&h.client, "/apis/test.example.com/v1").await;
    let names: Vec<&str> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"widgets/status") && names.contains(&"gadgets/status"),
        "{names:?}"
    );
    let widgets = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "widgets")
        .unwrap();
    assert_eq!(widgets["shortNames"], json!(["wd"]));

    // Both kinds work at once: a namespaced object and a cluster-scoped one.
    h.api::<Widget>()
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    let gadgets: Api<Gadget> = h.cluster_api();
    let g = gadgets
        .create(
            &PostParams::default(),
            &Gadget::new("g", GadgetSpec { model: "x".into() }),
        )
        .await
        .unwrap();
    assert_eq!(g.metadata.namespace, None);
}

#[tokio::test]
async fn crd_status_reports_established_and_accepted_names() {
    let h = start().await;
    h.install_widgets().await;
    let crds: Api<CustomResourceDefinition> = h.cluster_api();
    let crd = crds.get("widgets.test.example.com").await.unwrap();
    let status = crd.status.unwrap();
    let established = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Established")
        .unwrap();
    assert_eq!(established.status, "True");
    assert_eq!(status.accepted_names.unwrap().plural, "widgets");
    assert_eq!(status.stored_versions, Some(vec!["v1".to_string()]));
    assert_eq!(crd.metadata.generation, Some(1));
}

#[tokio::test]
async fn every_served_crd_version_is_reachable() {
    let h = start().await;
    let mut crd = Widget::crd();
    let mut beta = crd.spec.versions[0].clone();
    beta.name = "v1beta1".into();
    beta.storage = false;
    crd.spec.versions.push(beta);
    h.install_crd(crd).await;
    h.api::<Widget>()
        .create(&PostParams::default(), &widget("w", 3))
        .await
        .unwrap();

    let gvk = GroupVersionKind::gvk("test.example.com", "v1beta1", "Widget");
    let beta_api: Api<DynamicObject> =
        Api::namespaced_with(h.client.clone(), "default", &ApiResource::from_gvk(&gvk));
    let obj = beta_api.get("w").await.unwrap();
    assert_eq!(obj.types.unwrap().api_version, "test.example.com/v1beta1");
    assert_eq!(obj.data["spec"]["size"], 3);
    let group = get_json(&h.client, "/apis/test.example.com").await;
    assert_eq!(group["preferredVersion"]["version"], "v1");
}

#[tokio::test]
async fn deleting_a_crd_removes_its_resources_and_objects() {
    let h = start().await;
    h.install_widgets().await;
    h.api::<Widget>()
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    let crds: Api<CustomResourceDefinition> = h.cluster_api();
    crds.delete("widgets.test.example.com", &DeleteParams::default())
        .await
        .unwrap();

    let err = h.api::<Widget>().get("w").await.unwrap_err();
    assert_eq!(support::code(&err), 404);
    let discovery = Discovery::new(h.client.clone()).run().await.unwrap();
    assert!(discovery.get("test.example.com").is_none());
    // Installing it again starts empty.
    h.install_widgets().await;
    assert!(
        h.api::<Widget>()
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(
        crds.get("widgets.test.example.com")
            .await
            .unwrap()
            .name_any()
            .starts_with("widgets")
    );
}

#[tokio::test]
async fn invalid_crds_are_rejected() {
    let h = start().await;
    let mut crd = Widget::crd();
    crd.metadata.name = Some("wrong.test.example.com".into());
    let crds: Api<CustomResourceDefinition> = h.cluster_api();
    let err = crds.create(&PostParams::default(), &crd).await.unwrap_err();
    assert_eq!(
        (support::code(&err), support::reason(&err).as_str()),
        (422, "Invalid")
    );
}

#[tokio::test]
async fn aggregated_discovery_requests_get_the_legacy_documents() {
    let h = start().await;
    let req = http::Request::get("/apis")
        .header(
            "accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json",
        )
        .body(vec![])
        .unwrap();
    let response = h.client.send(req.map(Into::into)).await.unwrap();
    assert_eq!(response.headers()["content-type"], "application/json");
    let body = h
        .client
        .request_text(http::Request::get("/apis").body(vec![]).unwrap())
        .await
        .unwrap();
    let doc: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(doc["kind"], "APIGroupList");
}
