//! Collection of volumes whose issuance never finished. kubelet never unpublishes a volume
//! whose Publish failed, so a volume left pending at a deadline (its request and key kept for
//! the retry) stays in the store when its Pod goes away before the retry succeeds, and its
//! request stays in the cluster when no one approves it. Each pass removes, for every pending
//! volume whose Pod is gone (or is another Pod of the same name) or whose issuance began more
//! than the age limit ago, its request and its store entry. A Pod still there retries its
//! Publish, which then starts a fresh issuance. Issued volumes are kubelet's to unpublish.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};

use crate::api::certmanager::CertificateRequest;
use crate::clock::Clock;
use crate::csi::attributes::PodInfo;
use crate::csi::store::{Metadata, Pending, Store, StoreError};

/// How long between two passes: a pending volume costs a directory and, in the cluster, one
/// request; neither needs collecting within the minute.
pub const INTERVAL: Duration = Duration::from_secs(300);

/// Where a pending volume's Pod stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodState {
    Present,
    /// No Pod of that name, or one with another UID (deleted and made again).
    Gone,
    /// Not looked up (the API server did not answer): never a reason to collect.
    Unknown,
}

/// Why a pending volume is collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Keep,
    PodGone,
    TooOld,
}

/// Pure: what to do with a pending volume whose issuance began at `since` (unknown when
/// the deadline passed before its key was made).
pub fn verdict(pod: PodState, since: Option<Timestamp>, now: Timestamp, max_age: SignedDuration) -> Verdict {
    if pod == PodState::Gone {
        return Verdict::PodGone;
    }
    match since {
        Some(since) if now.duration_since(since) > max_age => Verdict::TooOld,
        _ => Verdict::Keep,
    }
}

/// Why a pass stopped early.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot delete CertificateRequest {request}: {source}")]
    Delete { request: String, source: kube::Error },
}

/// One node's collector.
pub struct Collector {
    client: kube::Client,
    store: Store,
    max_age: SignedDuration,
    clock: Clock,
}

impl Collector {
    pub fn new(client: kube::Client, store: Store, max_age: Duration, clock: Clock) -> Self {
        let max_age = SignedDuration::try_from(max_age).unwrap_or(SignedDuration::MAX);
        Self {
            client,
            store,
            max_age,
            clock,
        }
    }

    async fn pod_state(&self, pod: &PodInfo) -> PodState {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        match pods.get_metadata_opt(&pod.name).await {
            Ok(Some(found)) if found.metadata.uid.as_deref() == Some(pod.uid.as_str()) => PodState::Present,
            Ok(_) => PodState::Gone,
            Err(error) => {
                tracing::warn!(%error, pod = %pod.name, "cannot look up a pending volume's pod");
                PodState::Unknown
            }
        }
    }

    /// The verdict on one stored volume; issued volumes and ones without pod info are kept.
    async fn judge(&self, metadata: &Metadata, pending: Option<&Pending>) -> (Verdict, Option<PodInfo>) {
        if metadata.next_issuance_time.is_some() {
            return (Verdict::Keep, None);
        }
        let Some(pod) = PodInfo::from_context(metadata.volume_context()) else {
            return (Verdict::Keep, None);
        };
        let state = self.pod_state(&pod).await;
        let since = pending.map(|p| p.since);
        (verdict(state, since, (self.clock)(), self.max_age), Some(pod))
    }

    /// Deletes the volume's request (one already gone is no error), then its store entry.
    async fn collect(&self, id: &str, pod: &PodInfo, pending: Option<&Pending>) -> Result<(), CollectError> {
        if let Some(pending) = pending {
            let requests: Api<CertificateRequest> = Api::namespaced(self.client.clone(), &pod.namespace);
            match requests
                .delete(&pending.request, &DeleteParams::background())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(source) => {
                    return Err(CollectError::Delete {
                        request: format!("{}/{}", pod.namespace, pending.request),
                        source,
                    });
                }
            }
        }
        self.store.remove(id)?;
        Ok(())
    }

    /// One pass over the store; the volume IDs collected, each with its reason. A volume that
    /// cannot be judged or removed (its metadata unreadable, its request's delete refused) is
    /// logged and left for the next pass: it never keeps the volumes after it from being
    /// collected. Only a store that cannot be listed ends the pass.
    pub async fn pass(&self) -> Result<Vec<(String, Verdict)>, CollectError> {
        let mut collected = Vec::new();
        for id in self.store.volume_ids()? {
            match self.one(&id).await {
                Ok(Verdict::Keep) => {}
                Ok(verdict) => {
                    tracing::info!(volume = %id, ?verdict, "collected a volume whose issuance never finished");
                    collected.push((id, verdict));
                }
                Err(error) => {
                    tracing::warn!(volume = %id, %error, "cannot collect a pending volume; the next pass tries again");
                }
            }
        }
        Ok(collected)
    }

    /// Judges one stored volume and collects it unless it is kept.
    async fn one(&self, id: &str) -> Result<Verdict, CollectError> {
        let Some(metadata) = self.store.metadata(id)? else {
            return Ok(Verdict::Keep);
        };
        let pending = self.store.pending(id)?;
        let (verdict, pod) = self.judge(&metadata, pending.as_ref()).await;
        let Some(pod) = pod.filter(|_| verdict != Verdict::Keep) else {
            return Ok(Verdict::Keep);
        };
        self.collect(id, &pod, pending.as_ref()).await?;
        Ok(verdict)
    }

    /// Passes every [`INTERVAL`], for ever; a failed pass is logged and the next one tries again.
    pub async fn run(self) {
        let mut ticks = tokio::time::interval(INTERVAL);
        loop {
            ticks.tick().await;
            if let Err(error) = self.pass().await {
                tracing::warn!(%error, "collection of pending volumes stopped early");
            }
        }
    }
}

#[cfg(test)]
mod tests;
