//! The contexts the manager builds once, over shared caches: the composition of the signer,
//! the issuer caches and the recheck channel into each controller's context.

use std::sync::Arc;

use kube::runtime::reflector::Store;
use tokio::sync::mpsc;

use crate::api::{ClusterIssuer, Issuer};
use crate::clock::Clock;
use crate::controllers::certificaterequest::RequestContext;
use crate::controllers::csr::CsrContext;
use crate::controllers::issuer::IssuerContext;
use crate::controllers::kit::status::schema::StatusSchemas;
use crate::controllers::kit::{Config, Shared};
use crate::controllers::signing::{Issuers, Recheck, Signer};
use crate::crypto_pool::CryptoPool;
use crate::telemetry::Metrics;

/// The contexts of the issuer controllers, the request controller and the CSR controller.
pub struct Contexts {
    pub shared: Arc<Shared>,
    pub signer: Arc<Signer>,
    pub issuers: Arc<IssuerContext>,
    pub requests: Arc<RequestContext>,
    pub csrs: Arc<CsrContext>,
}

impl Contexts {
    /// Contexts over the given caches; the receiver yields the issuer rechecks the signing
    /// controllers ask for.
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
            crypto: CryptoPool::for_this_machine(),
        });
        let caches = Issuers {
            issuers,
            cluster_issuers,
        };
        let (recheck, rechecks) = mpsc::unbounded_channel();
        let contexts = Contexts {
            issuers: Arc::new(IssuerContext::new(shared.clone(), signer.clone())),
            csrs: Arc::new(CsrContext::new(
                shared.clone(),
                signer.clone(),
                caches.clone(),
                recheck.clone(),
            )),
            requests: Arc::new(RequestContext::new(
                shared.clone(),
                signer.clone(),
                caches,
                recheck,
            )),
            signer,
            shared,
        };
        (contexts, rechecks)
    }
}
