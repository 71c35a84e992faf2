//! Standalone mode never runs beside cert-manager: the real manager binary with
//! `--certificate-controllers` against the in-process API server, with cert-manager's Lease
//! `kube-system/cert-manager-controller` held (it refuses to start), stale (it starts), and
//! taken while it runs (it stops, exit 1).
//!
//! These run their own managers and write cert-manager's Lease, so none runs against a real
//! cluster (`E2E_KUBECONFIG`).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams};

use e2e::harness::{Cluster, Manager, ManagerOptions, SYSTEM};

const LEASE: &str = "cert-manager-controller";
const LEASE_NS: &str = "kube-system";
const EXIT_WAIT: Duration = Duration::from_secs(30);

/// The in-process cluster with the manager's namespace and kube-system; `None` against a real
/// cluster.
async fn cluster() -> anyhow::Result<Option<Cluster>> {
    if std::env::var_os("E2E_KUBECONFIG").is_some() {
        eprintln!("skipped against a real cluster: this scenario writes cert-manager's Lease");
        return Ok(None);
    }
    let cluster = Cluster::start().await?;
    cluster.ensure_namespace(SYSTEM).await?;
    cluster.ensure_namespace(LEASE_NS).await?;
    Ok(Some(cluster))
}

/// Writes cert-manager's Lease as its leader election does: held by `holder`, renewed `age` ago,
/// for 60 s.
async fn put_lease(cluster: &Cluster, holder: &str, age: SignedDuration) -> anyhow::Result<()> {
    let renewed = Timestamp::now() - age;
    let lease: Lease = serde_json::from_value(serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": LEASE, "namespace": LEASE_NS},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 60,
            "acquireTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string(),
            "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string(),
        },
    }))?;
    Api::<Lease>::namespaced(cluster.client.clone(), LEASE_NS)
        .patch(
            LEASE,
            &PatchParams::apply("cert-manager-leader-election").force(),
            &Patch::Apply(&lease),
        )
        .await?;
    Ok(())
}

fn standalone(cluster: &Cluster) -> ManagerOptions {
    ManagerOptions::new(cluster.manager_kubeconfig(), SYSTEM).arg("--certificate-controllers")
}

const REFUSED: &str = "standalone mode refused: cert-manager is running (Lease kube-system/cert-manager-controller held by cert-manager-7d9f_4f1e until";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_lease_refuses_standalone_mode() -> anyhow::Result<()> {
    let Some(cluster) = cluster().await? else {
        return Ok(());
    };
    put_lease(&cluster, "cert-manager-7d9f_4f1e", SignedDuration::from_secs(5)).await?;
    let mut options = standalone(&cluster);
    options.wait_ready = false;
    let mut manager = Manager::start(options).await?;
    let status = manager.wait_exit(EXIT_WAIT).await?;
    let log = manager.log();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains(REFUSED), "the error names the Lease:\n{log}");
    assert!(
        log.contains("run either cert-manager or --certificate-controllers, not both"),
        "{log}"
    );
    assert!(!log.contains("controllers started"), "nothing ran:\n{log}");

    // Without standalone mode the same cluster is fine: the Lease is not even read.
    let mut plain = Manager::start(ManagerOptions::new(cluster.manager_kubeconfig(), SYSTEM)).await?;
    plain.wait_ready(EXIT_WAIT).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_lease_starts_and_a_lease_taken_later_stops_it() -> anyhow::Result<()> {
    let Some(cluster) = cluster().await? else {
        return Ok(());
    };
    // Left behind by a cert-manager that was removed: renewed 2 minutes ago for 60 s.
    put_lease(&cluster, "cert-manager-7d9f_4f1e", SignedDuration::from_secs(120)).await?;
    let mut manager = Manager::start(standalone(&cluster)).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        manager.wait_exit(Duration::from_millis(10)).await.is_err(),
        "still running with a stale Lease:\n{}",
        manager.log()
    );
    assert_eq!(manager.probe("/readyz").await?.0, 200);

    put_lease(&cluster, "cert-manager-7d9f_4f1e", SignedDuration::ZERO).await?;
    let status = manager.wait_exit(EXIT_WAIT).await?;
    let log = manager.log();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains(REFUSED), "{log}");
    assert!(log.contains("controllers stopped"), "stopped gracefully:\n{log}");
    Ok(())
}
