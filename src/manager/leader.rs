//! Leader election: reconcile only while holding a Lease, as client-go's leader election does.

use std::future::Future;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use kube_lease_manager::LeaseManager;

use super::finish;
use crate::controllers;
use crate::telemetry::{Health, Role};

/// Which Lease to hold.
#[derive(Debug, Clone)]
pub struct Lease {
    pub name: String,
    pub namespace: String,
    pub duration: Duration,
}

/// Waits for the Lease, reconciles while holding it, and releases it on shutdown. Losing it
/// stops reconciling at once and exits non-zero so the pod restarts as a candidate, as
/// client-go's leader election does.
pub async fn lead_then_run<F, Fut>(
    client: kube::Client,
    lease: Lease,
    health: Arc<Health>,
    signal: impl Future<Output = ()> + Clone + Send + Sync + 'static,
    run_controllers: F,
) -> ExitCode
where
    F: FnOnce(futures::future::BoxFuture<'static, ()>) -> Fut,
    Fut: Future<Output = Result<(), controllers::RunError>>,
{
    let Some((manager, identity)) = lease_manager(client, &lease, &health).await else {
        return ExitCode::FAILURE;
    };
    let (mut leading, watcher) = manager.watch().await;
    tracing::info!(lease = %format!("{}/{}", lease.namespace, lease.name), %identity, "waiting to lead");
    let won = tokio::select! {
        won = leading.wait_for(|l| *l) => Some(won.is_ok()),
        () = signal.clone() => None,
    };
    if won != Some(true) {
        // Stopped before leading: a signal (success) or the election itself (failure).
        drop(leading);
        if won.is_none() {
            let _ = watcher.await;
            return ExitCode::SUCCESS;
        }
        tracing::error!("leader election stopped");
        health.set_role(Role::Lost);
        return ExitCode::FAILURE;
    }
    tracing::info!(%identity, "leading: starting controllers");
    health.set_role(Role::Leader);
    let lost = {
        let mut leading = leading.clone();
        async move {
            let _ = leading.wait_for(|l| !*l).await;
        }
    }
    .shared();
    // On SIGTERM the controllers stop gracefully: signs in flight finish and are saved while
    // the Lease is still ours. Losing the Lease stops them at once instead, in-flight work
    // dropped (as controller-runtime exits on "leader election lost"): another replica may
    // lead already, and two must never write at the same time.
    let result = tokio::select! {
        result = run_controllers(signal.boxed()) => Some(result),
        () = lost.clone() => None,
    };
    let Some(result) = result else {
        tracing::error!("lost the lease: stopped reconciling at once; exiting to restart as a candidate");
        health.set_role(Role::Lost);
        return ExitCode::FAILURE;
    };
    // Shutdown: closing the channel makes the watcher release the Lease before it returns.
    // `lost` holds a clone of the receiver: the channel closes only once both are gone.
    drop((lost, leading));
    released(watcher).await;
    finish(result)
}

/// Waits for the Lease watcher to release the Lease (its channel closed) and says how it went.
async fn released<T, E: std::fmt::Display>(watcher: tokio::task::JoinHandle<Result<T, E>>) {
    match watcher.await {
        Ok(Ok(_)) => tracing::info!("lease released"),
        Ok(Err(err)) => tracing::warn!(error = %err, "releasing the lease failed; it expires by itself"),
        Err(err) => tracing::warn!(error = %err, "lease watcher panicked"),
    }
}

/// Builds the Lease manager under a fresh identity; `None` (with the role `Lost`) when it
/// cannot.
async fn lease_manager(
    client: kube::Client,
    lease: &Lease,
    health: &Health,
) -> Option<(LeaseManager, String)> {
    let suffix = match random_suffix() {
        Ok(suffix) => suffix,
        Err(err) => {
            tracing::error!(error = ?err, "no random identity for leader election");
            health.set_role(Role::Lost);
            return None;
        }
    };
    let identity = lease_identity(
        std::env::var("POD_NAME").ok().as_deref(),
        std::env::var("HOSTNAME").ok().as_deref(),
        &suffix,
    );
    let duration = lease.duration.as_secs().max(2);
    let built = kube_lease_manager::LeaseManagerBuilder::new(client, &lease.name)
        .with_namespace(&lease.namespace)
        .with_identity(&identity)
        .with_duration(duration)
        .with_grace((duration / 3).max(1))
        .with_field_manager(lease_field_manager(&identity))
        .build()
        .await;
    match built {
        Ok(manager) => Some((manager, identity)),
        Err(err) => {
            tracing::error!(error = %err, lease = %lease.name, "cannot set up leader election");
            health.set_role(Role::Lost);
            None
        }
    }
}

/// Pure: this replica's Lease holder identity, the pod name (else the host name) and a random
/// suffix, unique per process as kube-lease-manager requires: a restarted container or a
/// second replica on the same host never passes for the holder of the Lease.
pub fn lease_identity(pod_name: Option<&str>, hostname: Option<&str>, suffix: &str) -> String {
    let base = [pod_name, hostname]
        .into_iter()
        .flatten()
        .map(str::trim)
        .find(|name| !name.is_empty())
        .unwrap_or("cfssl-issuer");
    format!("{base}_{suffix}")
}

/// The longest field manager name the API server accepts.
const MAX_FIELD_MANAGER: usize = 128;

/// Pure: the field manager this replica applies its Lease under, its own so that two replicas
/// racing for a released Lease conflict (409) instead of both "acquiring" it: under one shared
/// manager the second apply silently replaces the first, and both replicas lead. A Lease an
/// older version holds under the shared name is taken over once it expires, by
/// kube-lease-manager's forced release. Cut from the front when long: the random suffix at the
/// end of the identity is what makes it unique.
pub fn lease_field_manager(identity: &str) -> String {
    let prefix = controllers::kit::status::FieldManager::LEADER_ELECTION.as_str();
    let room = MAX_FIELD_MANAGER - prefix.len() - 1;
    let tail = identity
        .get(identity.len().saturating_sub(room)..)
        .unwrap_or(identity);
    format!("{prefix}-{tail}")
}

/// Eight random bytes in hex, from the one crypto provider.
fn random_suffix() -> Result<String, rustls::crypto::GetRandomFailed> {
    let mut bytes = [0u8; 8];
    rustls::crypto::aws_lc_rs::default_provider()
        .secure_random
        .fill(&mut bytes)?;
    Ok(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_identity_table() {
        let cases = [
            (
                Some("issuer-7d9f-abcde"),
                Some("host"),
                "00ff",
                "issuer-7d9f-abcde_00ff",
            ),
            (None, Some("host"), "00ff", "host_00ff"),
            (Some(" "), Some("host"), "00ff", "host_00ff"),
            (None, None, "00ff", "cfssl-issuer_00ff"),
        ];
        for (pod, host, suffix, want) in cases {
            assert_eq!(lease_identity(pod, host, suffix), want);
        }
        let (a, b) = (random_suffix().unwrap(), random_suffix().unwrap());
        assert_eq!(a.len(), 16, "{a}");
        assert_ne!(a, b, "two processes in one pod get different identities");
    }

    #[test]
    fn each_replica_applies_its_lease_under_its_own_field_manager() {
        let long = format!("{}_00ff", "p".repeat(300));
        let cases = [
            ("replica-a_00ff", "cfssl-issuer-replica-a_00ff".to_string()),
            ("replica-b_00ff", "cfssl-issuer-replica-b_00ff".to_string()),
            (long.as_str(), format!("cfssl-issuer-{}_00ff", "p".repeat(110))),
        ];
        for (identity, want) in cases {
            let got = lease_field_manager(identity);
            assert_eq!(got, want);
            assert!(got.len() <= MAX_FIELD_MANAGER, "{got}");
        }
    }
}
