//! Shared fixtures for the API test server's own tests: a started server with a client, two
//! CRD-backed kinds (namespaced `Widget`, cluster-scoped `Gadget`), and a polling helper.

#![allow(dead_code)]

use std::{future::Future, time::Duration};

use k8s_openapi::{
    api::core::v1::{ConfigMap, Secret},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client, CustomResource, CustomResourceExt, ResourceExt,
    api::{ObjectMeta, PostParams},
    runtime::wait::{await_condition, conditions},
};
use kube_testserver::{Options, TestServer};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "test.example.com",
    version = "v1",
    kind = "Widget",
    namespaced,
    shortname = "wd"
)]
#[kube(status = "WidgetStatus")]
#[kube(
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#
)]
#[kube(printcolumn = r#"{"name":"Size","type":"integer","jsonPath":".spec.size"}"#)]
pub struct WidgetSpec {
    pub size: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
    /// A list-map keyed by `name`, so server-side apply merges it per port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub ports: Vec<Port>,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Port {
    pub name: String,
    pub port: i64,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct WidgetStatus {
    /// A list-map keyed by `type`; a CRD without the marker would make it atomic.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<WidgetCondition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct WidgetCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(group = "test.example.com", version = "v1", kind = "Gadget")]
#[kube(status = "GadgetStatus")]
pub struct GadgetSpec {
    pub model: String,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct GadgetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
}

pub struct Harness {
    pub server: TestServer,
    pub client: Client,
}

pub async fn start() -> Harness {
    start_with(Options::default()).await
}

pub async fn start_with(options: Options) -> Harness {
    let server = TestServer::start(options).await.expect("test server starts");
    let client = server.client().expect("client for the test server");
    Harness { server, client }
}

impl Harness {
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), "default")
    }

    pub fn cluster_api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>,
        K::DynamicType: Default,
    {
        Api::all(self.client.clone())
    }

    /// Installs a CRD and waits until it is Established, as a real client would.
    pub async fn install_crd(&self, crd: CustomResourceDefinition) {
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let name = crd.name_any();
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("CRD created");
        let established = await_condition(crds, &name, conditions::is_crd_established());
        tokio::time::timeout(Duration::from_secs(5), established)
            .await
            .expect("CRD established")
            .unwrap();
    }

    pub async fn install_widgets(&self) {
        self.install_crd(Widget::crd()).await;
    }

    pub async fn install_gadgets(&self) {
        self.install_crd(Gadget::crd()).await;
    }
}

pub fn widget(name: &str, size: i64) -> Widget {
    Widget::new(
        name,
        WidgetSpec {
            size,
            ..Default::default()
        },
    )
}

pub fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        string_data: Some(data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
        ..Default::default()
    }
}

pub fn config_map(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Polls `check` until it returns Some, for at most five seconds.
pub async fn eventually<T, F, Fut>(mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not met within 5s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The kubectl to run: `$KUBECTL`, else `kubectl` on the PATH.
pub fn kubectl_bin() -> String {
    std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into())
}

/// The HTTP status code of a failed kube call.
pub fn code(err: &kube::Error) -> u16 {
    match err {
        kube::Error::Api(status) => status.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// The `reason` of a failed kube call.
pub fn reason(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) => status.reason.clone(),
        other => panic!("expected an API error, got {other:?}"),
    }
}
