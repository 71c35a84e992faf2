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
use tokio::sync::Semaphore;
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

/// How many issuances (key, request, wait) run at once by default, Publishes and renewals
/// together (`--max-concurrent-issuances`).
pub const DEFAULT_MAX_CONCURRENT: usize = 32;

/// Why a volume is issued: its Publish, or its renewal (which keeps its current request until
/// the new certificate is written, and may reuse its current key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Publish,
    Renew,
}

/// A renewal's certificate and the request it came from (the one to keep).
pub struct Renewed {
    pub issued: Issued,
    pub request: String,
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
    /// Bounds the issuances in flight: a node restarted with many volumes due, or a Deployment
    /// scaled up, would otherwise open a request and a watch per volume at once.
    permits: Arc<Semaphore>,
}

/// A pending issuance with its key parsed.
struct InFlight {
    pending: Pending,
    key: Key,
    /// Made by this Publish: no request of that name can exist yet.
    new: bool,
    /// Delete the volume's earlier requests before creating this one (a Publish's).
    forget_first: bool,
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
            permits: Arc::new(Semaphore::new(DEFAULT_MAX_CONCURRENT)),
        }
    }

    /// Counts the requests created in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<CsiMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// At most `max` issuances at once (at least one).
    #[must_use]
    pub fn with_max_concurrent(mut self, max: usize) -> Self {
        self.permits = Arc::new(Semaphore::new(max.max(1)));
        self
    }

    /// A renewal's new key is a fresh one unless the volume asks to reuse its key: then the
    /// key the volume's files hold now.
    fn current_key(&self, publish: &Publish, purpose: Purpose) -> Result<Option<String>, IssueError> {
        if purpose != Purpose::Renew || !publish.attributes.reuse_private_key {
            return Ok(None);
        }
        let path = self
            .store
            .data_dir(&publish.volume_id)?
            .join(&publish.attributes.files.private_key);
        let pem = std::fs::read_to_string(&path).map_err(crate::csi::store::io_error("read", &path))?;
        Ok(Some(pem))
    }

    /// The volume's issuance in flight, or a new one (key, name) recorded before any request
    /// exists, so a request is never created without the key to use its certificate.
    async fn in_flight(&self, publish: &Publish, purpose: Purpose) -> Result<InFlight, IssueError> {
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
                forget_first: false,
            });
        }
        let key = match self.current_key(publish, purpose)? {
            Some(pem) => {
                self.pool
                    .run(namespace, move || Key::from_pem(pem.as_bytes()))
                    .await?
            }
            None => {
                let spec = publish.attributes.key;
                self.pool.run(namespace, move || Key::generate(spec)).await?
            }
        }
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
            forget_first: purpose == Purpose::Publish,
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
        if flight.forget_first {
            self.forget_earlier(api, publish, None).await;
        } else if !flight.new {
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
    /// A renewal keeps its new request (`keep`), and deletes the others only once the new
    /// certificate is written: until then the old one is what the volume's files came from.
    async fn forget_earlier(&self, api: &Api<CertificateRequest>, publish: &Publish, keep: Option<&str>) {
        let selector = shape::volume_selector(&self.node_id, &publish.volume_id);
        let mut params = ListParams::default().labels(&selector);
        if let Some(keep) = keep {
            params = params.fields(&format!("metadata.name!={keep}"));
        }
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

    async fn issue_volume(&self, publish: &Publish, purpose: Purpose) -> Result<Renewed, IssueError> {
        let deadline = tokio::time::Instant::now() + self.wait;
        let work = async {
            // Held through the key, the request and the wait; never closed, so never an error.
            let _permit = self.permits.acquire().await;
            let flight = self.in_flight(publish, purpose).await?;
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
                let at = (publish.volume_id.clone(), (self.clock)());
                let issued = self
                    .pool
                    .run(&publish.pod.namespace, move || {
                        files::issued(&key, (certificate, ca), &attributes, (&at.0, at.1))
                    })
                    .await?
                    .map_err(|source| IssueError::Certificate { request, source })?;
                Ok(Renewed {
                    issued,
                    request: flight.pending.request,
                })
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

impl CertificateRequests {
    /// Issues for `purpose`; the issuance in flight is kept only at the deadline, for the
    /// retried Publish (or the next renewal attempt) to resume. A renewal's request that was
    /// refused is deleted at once: the volume keeps its files, and each retry would otherwise
    /// leave one more.
    async fn issue_as(&self, publish: &Publish, purpose: Purpose) -> Result<Renewed, IssueError> {
        let result = self.issue_volume(publish, purpose).await;
        if matches!(result, Err(IssueError::Deadline { .. })) {
            return result;
        }
        if purpose == Purpose::Renew
            && result.is_err()
            && let Ok(Some(pending)) = self.store.pending(&publish.volume_id)
        {
            let api: Api<CertificateRequest> = Api::namespaced(self.client.clone(), &publish.pod.namespace);
            if let Err(error) = api.delete(&pending.request, &DeleteParams::background()).await {
                tracing::warn!(%error, volume = %publish.volume_id, "cannot delete the refused renewal's request");
            }
        }
        // Issued or given up: the key in flight is no longer needed.
        let _ = self.store.clear_pending(&publish.volume_id);
        result
    }

    /// Issues the volume again, as its Publish did; its current request stays until
    /// [`CertificateRequests::forget_others`].
    pub async fn renew(&self, publish: &Publish) -> Result<Renewed, IssueError> {
        self.issue_as(publish, Purpose::Renew).await
    }

    /// Deletes the volume's requests but `keep`, once the certificate of `keep` is written.
    pub async fn forget_others(&self, publish: &Publish, keep: &str) {
        let api: Api<CertificateRequest> = Api::namespaced(self.client.clone(), &publish.pod.namespace);
        self.forget_earlier(&api, publish, Some(keep)).await;
    }
}

impl Issue for CertificateRequests {
    async fn refused(&self, publish: &Publish, reason: &str, message: &str) {
        let event = outcome::pod_event(
            &publish.pod,
            &self.node_id,
            (reason, "Issuing"),
            message,
            (self.clock)(),
        );
        self.tell_pod(publish, event).await;
    }

    async fn issue(&self, publish: &Publish) -> Result<Issued, Status> {
        self.issue_as(publish, Purpose::Publish)
            .await
            .map(|renewed| renewed.issued)
            .map_err(|e| e.status(&publish.volume_id))
    }
}

#[cfg(test)]
mod tests;
