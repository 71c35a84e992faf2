//! What every controller needs: the API client, settings, the clock, metrics, the status
//! schema knowledge and the crypto pool. Each controller has a context of its own on top (its backoff, its caches,
//! its Events policy); the composition root (`controllers::run`) builds them once.

use std::sync::Arc;

use super::config::Config;
use super::status::schema::StatusSchemas;
use crate::clock::Clock;
use crate::crypto_pool::CryptoPool;
use crate::telemetry::Metrics;
use k8s_openapi::jiff::Timestamp;

/// What every controller gets.
pub struct Shared {
    pub client: kube::Client,
    pub config: Config,
    pub clock: Clock,
    pub metrics: Arc<Metrics>,
    /// Whether the installed Issuer/ClusterIssuer CRDs declare `observedGeneration` in
    /// conditions (kept current by [`super::status::schema::watch`]).
    pub status_schemas: StatusSchemas,
    /// Where expensive crypto runs, off the runtime thread (see [`super::crypto`]).
    pub crypto: CryptoPool,
}

impl Shared {
    pub fn now(&self) -> Timestamp {
        (self.clock)()
    }
}
