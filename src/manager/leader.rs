//! Leader election: reconcile only while holding a Lease, as client-go's leader election does,
//! and stop at the renew deadline (see [`super::renewal`]) when renewals stop landing.

use std::future::Future;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use kube_lease_manager::{LeaseManager, LeaseManagerError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::finish;
use super::renewal::{self, StepDown, Timing};
use crate::controllers;
use crate::telemetry::{Health, Role};

/// Which Lease to hold, and for how long.
#[derive(Debug, Clone)]
pub struct Lease {
    pub name: String,
    pub namespace: String,
    pub timing: Timing,
}

/// Waits for the Lease, reconciles while holding it, and releases it on shutdown. Losing it,
/// or going the renew deadline without a renewal that landed, stops reconciling at once and
/// exits non-zero so the pod restarts as a candidate, as client-go's leader election does.
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
    let Some((manager, identity)) = lease_manager(client.clone(), &lease, &health).await else {
        return ExitCode::FAILURE;
    };
    let (mut leading, campaigner) = campaign(manager, lease.timing.retry_period);
    tracing::info!(lease = %format!("{}/{}", lease.namespace, lease.name), %identity, "waiting to lead");
    let won = tokio::select! {
        won = leading.wait_for(|l| *l) => Some(won.is_ok()),
        () = signal.clone() => None,
    };
    if won != Some(true) {
        // Stopped before leading: a signal (success) or the election itself (failure).
        drop(leading);
        if won.is_none() {
            let _ = campaigner.await;
            return ExitCode::SUCCESS;
        }
        tracing::error!("leader election stopped");
        health.lose("leader election stopped");
        return ExitCode::FAILURE;
    }
    tracing::info!(%identity, "leading: starting controllers");
    health.set_role(Role::Leader);
    let leases = kube::Api::namespaced(client, &lease.namespace);
    let mut stop = Box::pin(step_down(leading.clone(), leases, &lease, &identity));
    // On SIGTERM the controllers stop gracefully: signs in flight finish and are saved while
    // the Lease is still ours. Losing the Lease, or reaching the renew deadline, stops them at
    // once instead, in-flight work dropped with their future (as controller-runtime exits on
    // "leader election lost"): another replica may lead soon, and two must never write at the
    // same time.
    let result = tokio::select! {
        result = run_controllers(signal.boxed()) => result,
        reason = &mut stop => {
            tracing::error!(%reason, "stepping down: stopped reconciling at once; exiting to restart as a candidate");
            health.lose(reason.to_string());
            return ExitCode::FAILURE;
        }
    };
    // Shutdown: closing the channel makes the campaign release the Lease before it returns.
    // `stop` holds a clone of the receiver: the channel closes only once both are gone.
    drop((stop, leading));
    released(campaigner).await;
    finish(result)
}

/// Resolves once this replica, leading from now on, must stop: the campaign saw the Lease go
/// to another holder, or the renew deadline passed. The deadline counts from now: the renewal
/// that won the Lease landed just before.
async fn step_down(
    mut leading: watch::Receiver<bool>,
    leases: kube::Api<k8s_openapi::api::coordination::v1::Lease>,
    lease: &Lease,
    identity: &str,
) -> StepDown {
    let clock = crate::clock::system_clock();
    let now = clock();
    let deadline = renewal::watch_deadline(leases, &lease.name, identity, lease.timing, clock, now);
    tokio::select! {
        _ = leading.wait_for(|l| !*l) => StepDown::NotHolder,
        reason = deadline => reason,
    }
}

/// Campaigns for the Lease and keeps it renewed, publishing whether this replica holds it,
/// until every receiver is gone; then releases the Lease. kube-lease-manager's `watch()` does
/// the same but backs off failed requests up to 30 s, its back-off reset only when leadership
/// changes: after a few passing failures a leader's next renewal could come after its renew
/// deadline. Here a failed request is retried every retry period, as client-go does.
fn campaign(
    manager: LeaseManager,
    retry_period: Duration,
) -> (watch::Receiver<bool>, JoinHandle<Result<(), LeaseManagerError>>) {
    let (sender, receiver) = watch::channel(false);
    let task = tokio::spawn(async move {
        loop {
            let failed = tokio::select! {
                biased;
                () = sender.closed() => break,
                changed = manager.changed() => match changed {
                    Ok(leading) => {
                        if sender.send(leading).is_err() {
                            break;
                        }
                        continue;
                    }
                    Err(err) => err,
                },
            };
            tracing::warn!(error = %failed, "a Lease request failed; retrying");
            tokio::select! {
                biased;
                () = sender.closed() => break,
                () = tokio::time::sleep(retry_period) => {}
            }
        }
        manager.release().await
    });
    (receiver, task)
}

/// Waits for the campaign to release the Lease (its channel closed) and says how it went.
async fn released<T, E: std::fmt::Display>(watcher: tokio::task::JoinHandle<Result<T, E>>) {
    match watcher.await {
        Ok(Ok(_)) => tracing::info!("lease released"),
        Ok(Err(err)) => tracing::warn!(error = %err, "releasing the lease failed; it expires by itself"),
        Err(err) => tracing::warn!(error = %err, "the Lease campaign panicked"),
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
            health.lose("no random identity for leader election");
            return None;
        }
    };
    let identity = lease_identity(
        std::env::var("POD_NAME").ok().as_deref(),
        std::env::var("HOSTNAME").ok().as_deref(),
        &suffix,
    );
    let built = kube_lease_manager::LeaseManagerBuilder::new(client, &lease.name)
        .with_namespace(&lease.namespace)
        .with_identity(&identity)
        .with_duration(lease.timing.lease_seconds())
        .with_grace(lease.timing.renew_grace_seconds())
        .with_field_manager(lease_field_manager(&identity))
        .build()
        .await;
    match built {
        Ok(manager) => Some((manager, identity)),
        Err(err) => {
            tracing::error!(error = %err, lease = %lease.name, "cannot set up leader election");
            health.lose(format!("cannot set up leader election: {err}"));
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
