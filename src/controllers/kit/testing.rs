//! What unit tests of any layer build a controller context from.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::status::schema::StatusSchemas;
use super::{Config, Shared};
use crate::clock::system_clock;
use crate::crypto_pool::CryptoPool;
use crate::telemetry::Metrics;

/// A client whose requests go nowhere (a tower-test mock nobody answers).
pub fn client() -> kube::Client {
    let (service, _handle) =
        tower_test::mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
    kube::Client::new(service, "default")
}

/// `Shared` with the default settings, the system clock, fresh metrics and a two-slot crypto pool.
pub fn shared() -> Arc<Shared> {
    shared_with(Config::new("cfssl-system"))
}

/// [`shared`] with `config`.
pub fn shared_with(config: Config) -> Arc<Shared> {
    Arc::new(Shared {
        client: client(),
        config,
        clock: system_clock(),
        metrics: Arc::new(Metrics::default()),
        status_schemas: StatusSchemas::default(),
        crypto: CryptoPool::new(2),
    })
}

/// An issued Secret `ns/name` (or a next-key one) at `version`, owned by Certificate `crt`, with
/// `data` bytes of data.
pub fn labelled_secret(name: &str, version: &str, next_key: bool, data: usize) -> Secret {
    let mut labels = BTreeMap::from([("controller.cert-manager.io/fao".to_string(), "true".to_string())]);
    if next_key {
        labels.insert(
            crate::certificates::keys::label::NEXT_PRIVATE_KEY.to_string(),
            "true".to_string(),
        );
    }
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("ns".to_string()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some(version.to_string()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(
                "cert-manager.io/issuer-name".to_string(),
                "ca".to_string(),
            )])),
            owner_references: Some(vec![OwnerReference {
                name: "crt".to_string(),
                uid: "crt-uid".to_string(),
                kind: "Certificate".to_string(),
                ..Default::default()
            }]),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "tls.crt".to_string(),
            ByteString(vec![b'x'; data]),
        )])),
        type_: Some("kubernetes.io/tls".to_string()),
        ..Default::default()
    }
}
