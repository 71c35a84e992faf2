//! What the controllers share, and the contexts the manager builds for them once.
//!
//! [`Shared`] is what every controller needs: the API client, settings, the clock, metrics and
//! the status schema knowledge. Each controller has a context of its own on top (its backoff,
//! its caches, its Events policy); only the controllers that reach the CA hold the
//! [`Signer`](super::signer::Signer).

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::runtime::reflector::Store;
use tokio::sync::mpsc;

use super::certificaterequest::RequestContext;
use super::csr::CsrContext;
use super::issuer::IssuerContext;
use super::signer::Signer;
use super::status::schema::StatusSchemas;
use super::{Config, Recheck};
use crate::api::{ClusterIssuer, Issuer};
use crate::clock::Clock;
use crate::telemetry::Metrics;

/// What every controller gets.
pub struct Shared {
    pub client: kube::Client,
    pub config: Config,
    pub clock: Clock,
    pub metrics: Arc<Metrics>,
    /// Whether the installed Issuer/ClusterIssuer CRDs declare `observedGeneration` in
    /// conditions (kept current by [`super::status::schema::watch`]).
    pub status_schemas: StatusSchemas,
}

impl Shared {
    pub fn now(&self) -> Timestamp {
        (self.clock)()
    }
}

/// The contexts of the issuer controllers, the request controller and the CSR controller, over
/// shared caches.
pub struct Contexts {
    pub shared: Arc<Shared>,
    pub issuers: Arc<IssuerContext>,
    pub requests: Arc<RequestContext>,
    pub csrs: Arc<CsrContext>,
}

impl Contexts {
    /// Contexts over the given caches; the receiver yields the issuer rechecks the request
    /// controller asks for.
    pub fn new(
        client: kube::Client,
        config: Config,
        clock: Clock,
        issuers: Store<Issuer>,
        cluster_issuers: Store<ClusterIssuer>,
        metrics: Arc<Metrics>,
    ) -> (Self, mpsc::UnboundedReceiver<Recheck>) {
        let signer = Arc::new(Signer::new(
            client.clone(),
            &config,
            clock.clone(),
            metrics.clone(),
        ));
        let shared = Arc::new(Shared {
            client,
            config,
            clock,
            metrics,
            status_schemas: StatusSchemas::default(),
        });
        let (recheck, rechecks) = mpsc::unbounded_channel();
        let contexts = Contexts {
            issuers: Arc::new(IssuerContext::new(shared.clone(), signer.clone())),
            csrs: Arc::new(CsrContext::new(
                shared.clone(),
                signer.clone(),
                (issuers.clone(), cluster_issuers.clone()),
                recheck.clone(),
            )),
            requests: Arc::new(RequestContext::new(
                shared.clone(),
                signer,
                (issuers, cluster_issuers),
                recheck,
            )),
            shared,
        };
        (contexts, rechecks)
    }
}
