//! The crypto pool: computation a tenant's object can make long (generating an RSA key,
//! signing a CSR with it, encoding and checking keystores) runs here, off the one runtime
//! thread that also answers `/healthz` and renews the leader Lease.
//!
//! Work runs on Tokio's blocking threads under two limits: at most `slots` jobs at once (one
//! more than the CPUs, at least 3), and at most `slots - 1` per namespace. A namespace's
//! further jobs wait in its lane before they take a place in the queue for a slot; that queue
//! is first come, first served (Tokio's semaphores are fair). So a tenant alone keeps every
//! CPU busy (a burst of RSA keys in one namespace is made on all cores), one slot always
//! remains for the others, and another tenant's job waits at most for the jobs queued before
//! it, at most `slots - 1` of each namespace. A job whose caller stops waiting still runs to
//! its end (a blocking thread cannot be interrupted) and holds its slot until then: the limits
//! count what really runs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::Semaphore;

use crate::clock::lock;

/// Why pooled work has no result.
#[derive(Debug, thiserror::Error)]
pub enum CryptoError {
    #[error("the crypto pool is closed")]
    Closed,
    #[error("crypto work panicked")]
    Panicked(#[source] tokio::task::JoinError),
}

/// The bounded pool for expensive crypto; one per process (the manager's in its controllers'
/// shared context, the CSI plugin's in its issuer).
#[derive(Debug)]
pub struct CryptoPool {
    slots: Arc<Semaphore>,
    total: usize,
    /// Each namespace's lane of `total - 1` jobs (at least 1); dropped once no job of the
    /// namespace holds or waits for it.
    lanes: Mutex<HashMap<String, Weak<Semaphore>>>,
}

impl CryptoPool {
    /// A pool running at most `slots` jobs at once (at least 1).
    pub fn new(slots: usize) -> Self {
        let total = slots.max(1);
        CryptoPool {
            slots: Arc::new(Semaphore::new(total)),
            total,
            lanes: Mutex::new(HashMap::new()),
        }
    }

    /// A pool with a slot per CPU and one more, at least 3: one tenant alone uses every CPU,
    /// and never holds the last slot.
    pub fn for_this_machine() -> Self {
        let cpus = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        Self::new(cpus.max(2) + 1)
    }

    /// How many jobs of one namespace may run at once.
    fn lane_width(&self) -> usize {
        self.total.saturating_sub(1).max(1)
    }

    /// How many jobs may run at once.
    pub fn slots(&self) -> usize {
        self.total
    }

    /// Runs `work` on a blocking thread once `namespace` has a place in its lane and a slot is
    /// free; its result.
    pub async fn run<T, F>(&self, namespace: &str, work: F) -> Result<T, CryptoError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let lane = self.lane(namespace);
        let own = lane.acquire_owned().await.map_err(|_| CryptoError::Closed)?;
        let slot = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| CryptoError::Closed)?;
        tokio::task::spawn_blocking(move || {
            let _held = (own, slot);
            work()
        })
        .await
        .map_err(CryptoError::Panicked)
    }

    /// `namespace`'s lane, made when none of its jobs holds or waits for one.
    fn lane(&self, namespace: &str) -> Arc<Semaphore> {
        let mut lanes = lock(&self.lanes);
        if let Some(lane) = lanes.get(namespace).and_then(Weak::upgrade) {
            return lane;
        }
        lanes.retain(|_, lane| lane.strong_count() > 0);
        let lane = Arc::new(Semaphore::new(self.lane_width()));
        lanes.insert(namespace.to_string(), Arc::downgrade(&lane));
        lane
    }

    /// How many namespaces have a job running or waiting.
    #[cfg(test)]
    fn lanes(&self) -> usize {
        lock(&self.lanes)
            .values()
            .filter(|l| l.strong_count() > 0)
            .count()
    }
}

#[cfg(test)]
mod tests;
