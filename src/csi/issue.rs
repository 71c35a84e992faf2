//! Issuance through a cert-manager CertificateRequest in the pod's namespace: the plugin's
//! [`Issue`].
//!
//! One request per issuance. A new volume gets a key (on the crypto pool), a request name,
//! both recorded in the volume's private `pending.json`, then the request; the plugin watches
//! that one name until it is issued, denied or failed, or the deadline passes. At the deadline
//! the request and the key are kept: kubelet retries the Publish, which resumes them instead of
//! asking again. Shapes and outcomes are pure (`shape`, `outcome`, `files`).

pub mod files;
pub mod keystores;
pub mod outcome;
pub mod shape;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use tonic::{Code, Status};

use crate::api::certmanager::CertificateRequest;
use crate::clock::Clock;
use crate::crypto_pool::{CryptoError, CryptoPool};
use crate::csi::metrics::CsiMetrics;
use crate::csi::node::{Issue, Issued, Publish};
use crate::csi::store::{Pending, Store, StoreError};
use crate::pki::keys::{Key, KeyError};
use crate::pki::request::{RequestError, build_csr};
use files::CertificateError;
use outcome::Outcome;

/// Why a volume has no certificate (yet); [`IssueError::code`] is the Publish's answer.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("crypto pool: {0}")]
    Pool(#[from] CryptoError),
    #[error("cannot make the volume's private key: {0}")]
    Key(#[source] KeyError),
    #[error("cannot build the CSR: {0}")]
    Csr(#[from] RequestError),
    #[error("cannot create CertificateRequest {request}: {source}")]
    Create { request: String, source: kube::Error },
    #[error("cannot read CertificateRequest {request}: {source}")]
    Read { request: String, source: kube::Error },
    #[error("CertificateRequest {request} was denied: {message}")]
    Denied { request: String, message: String },
    #[error("CertificateRequest {request} failed: {message}")]
    Failed { request: String, message: String },
    #[error("CertificateRequest {request} was deleted before it was issued")]
    Deleted { request: String },
    #[error(
        "CertificateRequest {request} is not issued after {}s (not approved yet?); the next Publish waits for it again",
        waited.as_secs()
    )]
    Deadline { request: String, waited: Duration },
    #[error("CertificateRequest {request} cannot be used: {source}")]
    Certificate {
        request: String,
        source: CertificateError,
    },
}

impl IssueError {
    /// The gRPC code kubelet sees. A denial is a precondition only a person can change; a
    /// failed request is ABORTED, not INTERNAL: it is over, but a retried Publish starts a
    /// new issuance that may well succeed (the CA was down past the issuer's retry window).
    pub fn code(&self) -> Code {
        match self {
            IssueError::Denied { .. } => Code::FailedPrecondition,
            IssueError::Failed { .. } | IssueError::Deleted { .. } => Code::Aborted,
            IssueError::Deadline { .. } => Code::DeadlineExceeded,
            IssueError::Create { .. } | IssueError::Read { .. } => Code::Unavailable,
            IssueError::Store(_)
            | IssueError::Pool(_)
            | IssueError::Key(_)
            | IssueError::Csr(_)
            | IssueError::Certificate { .. } => Code::Internal,
        }
    }

    /// The Publish's answer for volume `volume_id`.
    pub fn status(&self, volume_id: &str) -> Status {
        Status::new(self.code(), format!("volume {volume_id}: {self}"))
    }
}

/// Issues through CertificateRequests, on one node.
pub struct CertificateRequests {
    client: kube::Client,
    store: Store,
    pool: CryptoPool,
    node_id: String,
    /// How long a Publish waits for its request.
    wait: Duration,
    clock: Clock,
    metrics: Option<Arc<CsiMetrics>>,
}

/// A pending issuance with its key parsed.
struct InFlight {
    pending: Pending,
    key: Key,
    /// Made by this Publish: no request of that name can exist yet.
    new: bool,
}

impl CertificateRequests {
    pub fn new(client: kube::Client, store: Store, node_id: &str, wait: Duration, clock: Clock) -> Self {
        Self {
            client,
            store,
            pool: CryptoPool::for_this_machine(),
            node_id: node_id.to_string(),
            wait,
            clock,
            metrics: None,
        }
    }

    /// Counts the requests created in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<CsiMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The volume's issuance in flight, or a new one (key, name) recorded before any request
    /// exists, so a request is never created without the key to use its certificate.
    async fn in_flight(&self, publish: &Publish) -> Result<InFlight, IssueError> {
        let namespace = &publish.pod.namespace;
        if let Some(pending) = self.store.pending(&publish.volume_id)? {
            let pem = pending.private_key_pem.clone();
            let key = self
                .pool
                .run(namespace, move || Key::from_pem(pem.as_bytes()))
                .await?
                .map_err(IssueError::Key)?;
            return Ok(InFlight {
                pending,
                key,
                new: false,
            });
        }
        let spec = publish.attributes.key;
        let key = self
            .pool
            .run(namespace, move || Key::generate(spec))
            .await?
            .map_err(IssueError::Key)?;
        let pending = Pending {
            request: shape::request_name(random_bytes()?),
            private_key_pem: key
                .to_pem(crate::pki::keys::Encoding::Pkcs8)
                .map_err(IssueError::Key)?,
            since: (self.clock)(),
        };
        self.store.put_pending(&publish.volume_id, &pending)?;
        Ok(InFlight {
            pending,
            key,
            new: true,
        })
    }

    /// Creates the request unless a resumed one exists already.
    async fn submit(
        &self,
        api: &Api<CertificateRequest>,
        publish: &Publish,
        flight: &InFlight,
    ) -> Result<(), IssueError> {
        let name = &flight.pending.request;
        let request = qualified(publish, name);
        if flight.new {
            self.forget_earlier(api, publish).await;
        } else {
            // Resumed: made by an earlier Publish, unless it stopped between the key and the
            // create; then it is created now, with the same name and key.
            let found = api.get_opt(name).await.map_err(|source| IssueError::Read {
                request: request.clone(),
                source,
            })?;
            if found.is_some() {
                return Ok(());
            }
        }
        let spec = shape::certificate_spec(&publish.attributes);
        let key = flight.key.clone();
        let csr = self
            .pool
            .run(&publish.pod.namespace, move || build_csr(&spec, &key))
            .await??;
        let object = shape::certificate_request(publish, &self.node_id, name, &csr);
        api.create(&PostParams::default(), &object)
            .await
            .map_err(|source| IssueError::Create { request, source })?;
        if let Some(metrics) = &self.metrics {
            metrics.request_created();
        }
        Ok(())
    }

    /// Deletes the volume's earlier requests (denied, failed, or given up at the deadline and
    /// collected) before a new issuance, as csi-lib keeps at most one per volume: kubelet
    /// retries a failed Publish for as long as the pod lives, and each retry would otherwise
    /// leave a request behind. A failure only leaves them for the pod's garbage collection.
    async fn forget_earlier(&self, api: &Api<CertificateRequest>, publish: &Publish) {
        let selector = shape::volume_selector(&self.node_id, &publish.volume_id);
        let params = ListParams::default().labels(&selector);
        if let Err(error) = api.delete_collection(&DeleteParams::background(), &params).await {
            tracing::warn!(%error, volume = %publish.volume_id, "cannot delete the volume's earlier requests");
        }
    }

    /// Submits and waits for the request's outcome (never [`Outcome::Waiting`]).
    async fn submit_and_wait(&self, publish: &Publish, flight: &InFlight) -> Result<Outcome, IssueError> {
        let api: Api<CertificateRequest> = Api::namespaced(self.client.clone(), &publish.pod.namespace);
        self.submit(&api, publish, flight).await?;
        let name = &flight.pending.request;
        wait_for(&api, name, &qualified(publish, name)).await
    }

    /// Posts `event` on the Pod; an Event is a courtesy (the Publish's answer says it), so a
    /// failure is logged, never returned.
    async fn tell_pod(&self, publish: &Publish, event: Event) {
        let events: Api<Event> = Api::namespaced(self.client.clone(), &publish.pod.namespace);
        if let Err(error) = events.create(&PostParams::default(), &event).await {
            tracing::warn!(%error, volume = %publish.volume_id, "cannot post an Event on the pod");
        }
    }

    async fn issue_volume(&self, publish: &Publish) -> Result<Issued, IssueError> {
        let deadline = tokio::time::Instant::now() + self.wait;
        let work = async {
            let flight = self.in_flight(publish).await?;
            let outcome = self.submit_and_wait(publish, &flight).await;
            Ok::<_, IssueError>((flight, outcome))
        };
        let Ok(result) = tokio::time::timeout_at(deadline, work).await else {
            // The pending key and request stay: the next Publish resumes them.
            let pending = self.store.pending(&publish.volume_id).ok().flatten();
            // The deadline may pass while the key is still being made (a large RSA key).
            let name = pending.map_or_else(|| "(not created yet)".to_string(), |p| p.request);
            return Err(IssueError::Deadline {
                request: qualified(publish, &name),
                waited: self.wait,
            });
        };
        let (flight, outcome) = result?;
        let request = qualified(publish, &flight.pending.request);
        match outcome? {
            Outcome::Issued { certificate, ca } => {
                let attributes = publish.attributes.clone();
                let key = flight.key;
                let issued = self
                    .pool
                    .run(&publish.pod.namespace, move || {
                        files::issued(&key, certificate, ca, &attributes)
                    })
                    .await?
                    .map_err(|source| IssueError::Certificate { request, source })?;
                Ok(issued)
            }
            Outcome::Denied(message) => {
                let event = outcome::denied_event(publish, &self.node_id, &request, &message, (self.clock)());
                self.tell_pod(publish, event).await;
                Err(IssueError::Denied { request, message })
            }
            Outcome::Failed(message) => Err(IssueError::Failed { request, message }),
            // `wait_for` returns only once the request left Waiting.
            Outcome::Waiting => Err(IssueError::Deleted { request }),
        }
    }
}

/// `namespace/name`, as messages name a request.
fn qualified(publish: &Publish, name: &str) -> String {
    format!("{}/{name}", publish.pod.namespace)
}

fn random_bytes() -> Result<[u8; 16], IssueError> {
    let mut bytes = [0u8; 16];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|_| IssueError::Key(KeyError::Generation))?;
    Ok(bytes)
}

/// Watches the one request until it is no longer waiting: the watch's first list shows where
/// it stands, each change after that comes as it happens (no polling). A watch that breaks is
/// resumed with kube-runtime's backoff; the caller's deadline bounds it all.
async fn wait_for(api: &Api<CertificateRequest>, name: &str, request: &str) -> Result<Outcome, IssueError> {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = std::pin::pin!(watcher(api.clone(), config).default_backoff());
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Apply(seen) | watcher::Event::InitApply(seen)) => {
                let seen = outcome::outcome(&seen);
                if seen != Outcome::Waiting {
                    return Ok(seen);
                }
            }
            Ok(watcher::Event::Delete(_)) => break,
            Ok(watcher::Event::Init | watcher::Event::InitDone) => {}
            Err(error) => tracing::warn!(%error, %request, "the watch of the request broke; resuming"),
        }
    }
    Err(IssueError::Deleted {
        request: request.to_string(),
    })
}

impl Issue for CertificateRequests {
    async fn refused(&self, publish: &Publish, reason: &str, message: &str) {
        let event = outcome::pod_event(&publish.pod, &self.node_id, reason, message, (self.clock)());
        self.tell_pod(publish, event).await;
    }

    async fn issue(&self, publish: &Publish) -> Result<Issued, Status> {
        let result = self.issue_volume(publish).await;
        match &result {
            // Kept for the retried Publish.
            Err(IssueError::Deadline { .. }) => {}
            // Issued or given up: the key in flight is no longer needed.
            _ => {
                let _ = self.store.clear_pending(&publish.volume_id);
            }
        }
        result.map_err(|e| e.status(&publish.volume_id))
    }
}

#[cfg(test)]
mod tests;
