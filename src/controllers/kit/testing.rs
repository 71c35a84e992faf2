//! What unit tests of any layer build a controller context from.

use std::sync::Arc;

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
