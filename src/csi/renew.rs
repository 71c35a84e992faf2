//! Renewal of issued volumes before their certificates expire: one timer per volume, due at
//! the metadata's `next_issuance_time` ([`super::due::next_issuance`]), which issues the volume again
//! through the same pipeline as its Publish and swaps its files under the running pod.
//!
//! One tokio task per volume, sleeping until its due time, rather than one task holding a
//! queue of all of them: a node holds at most a few hundred volumes, a sleeping task costs a
//! few hundred bytes, a task's own loop carries its back-off count, and Unpublish cancels it
//! by aborting it; nothing polls. All the issuances, Publish's and renewals', share the
//! issuer's `--max-concurrent-issuances`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use tokio::task::AbortHandle;
use tonic::Status;

use crate::clock::{Clock, lock};
use crate::csi::issue::{CertificateRequests, IssueError};
use crate::csi::metrics::CsiMetrics;
use crate::csi::node::{Publish, decide, files};
use crate::csi::store::{Metadata, Store, StoreError};

/// Why one renewal attempt failed; the volume keeps its files and tries again later.
#[derive(Debug, thiserror::Error)]
pub enum RenewError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("its stored attributes are no longer accepted: {}", .0.message())]
    Attributes(Status),
    #[error(transparent)]
    Issue(#[from] IssueError),
}

/// The Publish a volume's stored metadata stands for, checked by the same rules as kubelet's
/// (so a renewal reads the attributes as the Publish did).
pub fn publish_of(metadata: &Metadata) -> Result<Publish, Status> {
    use crate::csi::proto::volume_capability::{AccessType, MountVolume};
    use crate::csi::proto::{NodePublishVolumeRequest, VolumeCapability};
    let mount = MountVolume {
        volume_mount_group: metadata.volume_mount_group.clone().unwrap_or_default(),
        ..MountVolume::default()
    };
    let request = NodePublishVolumeRequest {
        volume_id: metadata.volume_id.clone(),
        target_path: metadata.target_path.clone(),
        volume_capability: Some(VolumeCapability {
            access_type: Some(AccessType::Mount(mount)),
            access_mode: None,
        }),
        readonly: true,
        volume_context: metadata.volume_context().clone().into_iter().collect(),
        ..NodePublishVolumeRequest::default()
    };
    decide::publish(&request)
}

/// A volume's armed timer: its task, and the generation that tells a replaced or cancelled
/// task's late write from the current one's.
struct Timer {
    generation: u64,
    task: AbortHandle,
}

struct Inner {
    issuer: Arc<CertificateRequests>,
    store: Store,
    clock: Clock,
    timers: Mutex<HashMap<String, Timer>>,
    generations: AtomicU64,
    metrics: Option<Arc<CsiMetrics>>,
    /// Whether this plugin may renew: not until it holds the node's renewal lock (see
    /// [`Renewer::hold_until`]).
    open: tokio::sync::watch::Sender<bool>,
}

/// The renewal timers of one node; cheap to clone.
#[derive(Clone)]
pub struct Renewer {
    inner: Arc<Inner>,
}

impl Renewer {
    pub fn new(issuer: Arc<CertificateRequests>, store: Store, clock: Clock) -> Self {
        Self {
            inner: Arc::new(Inner {
                issuer,
                store,
                clock,
                timers: Mutex::new(HashMap::new()),
                generations: AtomicU64::new(0),
                metrics: None,
                open: tokio::sync::watch::Sender::new(true),
            }),
        }
    }

    /// Counts renewals and their issuance latency in `metrics`; before the first clone.
    #[must_use]
    pub fn with_metrics(mut self, metrics: Arc<CsiMetrics>) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.metrics = Some(metrics);
        }
        self
    }

    /// Holds every renewal until `ready` completes. During a DaemonSet's surge two plugins run
    /// on one node over the same volumes; each renews only once it holds the node's renewal
    /// lock, which the old one keeps until it exits, so no volume is renewed by both.
    pub fn hold_until(&self, ready: impl std::future::Future<Output = ()> + Send + 'static) {
        self.inner.open.send_replace(false);
        let inner = self.inner.clone();
        tokio::spawn(async move {
            ready.await;
            inner.open.send_replace(true);
        });
    }

    /// Arms `volume_id`'s timer at `due`, replacing the one it had. Needs a tokio runtime.
    pub fn arm(&self, volume_id: &str, due: Timestamp) {
        let generation = self.inner.generations.fetch_add(1, Ordering::Relaxed);
        let mut timers = lock(&self.inner.timers);
        let task = tokio::spawn(run(self.inner.clone(), volume_id.to_string(), generation, due));
        let timer = Timer {
            generation,
            task: task.abort_handle(),
        };
        if let Some(old) = timers.insert(volume_id.to_string(), timer) {
            old.task.abort();
        }
    }

    /// Cancels `volume_id`'s timer (Unpublish); a renewal in flight stops at its next wait,
    /// and one about to write finds itself disarmed and writes nothing.
    pub fn disarm(&self, volume_id: &str) {
        if let Some(old) = lock(&self.inner.timers).remove(volume_id) {
            old.task.abort();
        }
    }

    /// Whether `volume_id` has a timer.
    pub fn is_armed(&self, volume_id: &str) -> bool {
        lock(&self.inner.timers).contains_key(volume_id)
    }

    /// Arms every issued volume of the store at its stored time (at start): a volume not yet
    /// due makes no request until then. Returns how many were armed.
    pub fn arm_issued(&self) -> Result<usize, StoreError> {
        let mut armed = 0;
        for id in self.inner.store.volume_ids()? {
            match self.inner.store.metadata(&id) {
                Ok(Some(Metadata {
                    next_issuance_time: Some(due),
                    ..
                })) => {
                    self.arm(&id, due);
                    armed += 1;
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, volume = %id, "cannot read a volume's metadata; not renewed");
                }
            }
        }
        Ok(armed)
    }

    /// One renewal of `volume_id` now (what its timer does when due): the next due time, or
    /// `None` when the volume is gone or its timer was replaced.
    pub async fn renew_now(&self, volume_id: &str) -> Result<Option<Timestamp>, RenewError> {
        let generation = lock(&self.inner.timers).get(volume_id).map(|t| t.generation);
        match generation {
            Some(generation) => self.inner.renew_once(volume_id, generation).await,
            None => Ok(None),
        }
    }
}

/// The timer of one volume: sleeps until due, renews, and sleeps again until the new
/// certificate's due time, or a back-off after a failure.
async fn run(inner: Arc<Inner>, volume_id: String, generation: u64, mut due: Timestamp) {
    let mut failures = 0u32;
    loop {
        let wait = due.duration_since((inner.clock)());
        if let Ok(wait) = std::time::Duration::try_from(wait) {
            tokio::time::sleep(wait).await;
        }
        // Closed only while another plugin on this node still renews (`hold_until`).
        let _ = inner.open.subscribe().wait_for(|open| *open).await;
        match inner.renew_once(&volume_id, generation).await {
            Ok(Some(next)) => {
                inner.count("renewed");
                failures = 0;
                due = next;
                tracing::info!(volume = %volume_id, next = %next, "volume renewed");
            }
            Ok(None) => return,
            Err(error) => {
                inner.count("failed");
                failures = failures.saturating_add(1);
                let delay = super::due::retry_delay(failures, random_spread());
                tracing::warn!(%error, volume = %volume_id, retry_in = ?delay, "cannot renew the volume; it keeps its files");
                due = (inner.clock)() + delay;
            }
        }
    }
}

fn random_spread() -> u32 {
    let mut bytes = [0u8; 4];
    // A failed draw only loses the spread, never the retry.
    let _ = aws_lc_rs::rand::fill(&mut bytes);
    u32::from_be_bytes(bytes)
}

impl Inner {
    fn count(&self, outcome: &str) {
        if let Some(metrics) = &self.metrics {
            metrics.renewal(outcome);
        }
    }

    async fn renew_once(&self, volume_id: &str, generation: u64) -> Result<Option<Timestamp>, RenewError> {
        let Some(metadata) = self.store.metadata(volume_id)? else {
            return Ok(None);
        };
        let publish = publish_of(&metadata).map_err(RenewError::Attributes)?;
        let started = std::time::Instant::now();
        let renewed = self.issuer.renew(&publish).await;
        if let Some(metrics) = &self.metrics {
            let code = renewed
                .as_ref()
                .map_or_else(IssueError::code, |_| tonic::Code::Ok);
            metrics.issuance(code, started.elapsed().as_secs_f64());
        }
        let renewed = renewed?;
        let next = renewed.issued.next_issuance_time;
        {
            // Held while writing, so an Unpublish (disarm, then remove) either comes first and
            // this writes nothing, or waits and removes what this wrote; without it a late write
            // could bring a removed volume's directory back.
            let timers = lock(&self.timers);
            if timers.get(volume_id).is_none_or(|t| t.generation != generation) {
                return Ok(None);
            }
            self.store
                .write_files(volume_id, &files(&publish, &renewed.issued), publish.group)?;
            let mut metadata = metadata;
            metadata.next_issuance_time = Some(next);
            metadata.not_after = Some(renewed.issued.not_after);
            self.store.put_metadata(&metadata)?;
        }
        self.issuer.forget_others(&publish, &renewed.request).await;
        Ok(Some(next))
    }
}

impl crate::csi::node::Timers for Renewer {
    fn arm(&self, volume_id: &str, due: Timestamp) {
        Renewer::arm(self, volume_id, due);
    }

    fn disarm(&self, volume_id: &str) {
        Renewer::disarm(self, volume_id);
    }
}

#[cfg(test)]
mod tests;
