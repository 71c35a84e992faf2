//! The pieces every end-to-end scenario starts from: a cluster (the in-process API server, or
//! the one `E2E_KUBECONFIG` names), a CFSSL CA (simple-cfssl or a real multirootca), and the
//! manager binary run as a child process, as users run it.
//!
//! Environment:
//! - `E2E_KUBECONFIG`: run against an existing cluster (kind) where `make deploy` installed the
//!   manager and `make deploy-simple-cfssl` the CA; scenarios that must stop the CA or the
//!   manager say so and return early there.
//! - `E2E_REAL_PEERS`: the directory `scripts/real-peers.sh` built etcd and kube-apiserver
//!   into; each scenario then starts a real API server of its own instead of the in-process
//!   one (`make e2e-real`). Scenarios that need the in-process server's faults or counters
//!   return early there.
//! - `E2E_CFSSL_URL`, `E2E_CFSSL_KEY`, `E2E_CFSSL_TLS_CA`: the in-cluster CA as the manager
//!   reaches it (defaults: the simple-cfssl Service, the test key, no extra trust).
//! - `CFSSL_ISSUER_BIN`: the manager binary (default: `cfssl-issuer` next to the test binary,
//!   built with cargo when missing).

pub mod budget;
mod ca;
mod cluster;
pub mod cpu;
mod crds;
pub mod csi;
pub mod csr;
pub mod fleet;
pub mod load;
mod manager;
pub mod objects;
mod own_managers;
mod pki;
pub mod rbac;
pub mod real;
pub mod redirector;
pub mod scrape;
pub mod scripted_ca;

use std::time::Duration;

pub use ca::{Backend, Ca};
pub use cluster::Cluster;
pub use crds::{IssuerCrds, go_issuer_crds};
pub use manager::{Manager, ManagerOptions, manager_binary};
pub use own_managers::{OwnManagers, SYSTEM};
pub use pki::{Csr, cert_matches_key, openssl_verify, parse_leaf, pem_key_matches};

/// The HMAC key every test CA here is configured with.
pub const KEY_HEX: &str = "0123456789abcdef0123456789abcdef";
/// A well-formed key the CA does not know.
pub const WRONG_KEY_HEX: &str = "ffffffffffffffffffffffffffffffff";

/// Polls `check` every 50 ms until it returns `Some`, or fails with `what` after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A short random suffix for names, so runs against a shared cluster never collide.
pub fn unique(prefix: &str) -> String {
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).expect("random bytes");
    let suffix: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}-{suffix}")
}

/// The environment variable `name` parsed, or `default` when it is unset (benches' settings).
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> anyhow::Result<T> {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .map_err(|_| anyhow::anyhow!("{name}={v:?} is not valid")),
        Err(_) => Ok(default),
    }
}

/// Runs every piece of `work`, `concurrency` at a time, stopping at the first error: how the
/// load helpers create, approve and trigger many objects at once.
pub async fn all_at_once<F, T>(work: impl IntoIterator<Item = F>, concurrency: usize) -> anyhow::Result<()>
where
    F: Future<Output = anyhow::Result<T>>,
{
    use futures::{StreamExt as _, TryStreamExt as _};
    futures::stream::iter(work)
        .buffer_unordered(concurrency)
        .try_for_each(|_| std::future::ready(Ok(())))
        .await
}

/// The kubectl to run: `$KUBECTL`, or `kubectl` from PATH.
pub fn kubectl_bin() -> String {
    std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into())
}
