//! Hostile tenants: what one namespace creates must not stop, starve or exhaust the manager
//! for another. Each test is one attack through the real manager binary against the
//! in-process API server and simple-cfssl, with the figure it prints for the README.
//!
//! These measure the manager itself (its memory from /proc), so they need the in-process
//! cluster; against `E2E_KUBECONFIG` they are skipped.

use std::time::Duration;

use base64::Engine as _;
use e2e::harness::objects::{self, Kind};
use e2e::harness::{Ca, Cluster, Manager, ManagerOptions, load};
use kube::api::{Api, PostParams};
use serde_json::json;

use cfssl_issuer::api::certmanager::CertificateRequest;

const GROUP: &str = "cfssl-issuer.wikimedia.org";
const SYSTEM: &str = "cfssl-issuer-system";
const WAIT: Duration = Duration::from_secs(60);
/// The chart's memory limit (`charts/cfssl-issuer/values.yaml`, `resources.limits.memory`).
const CHART_LIMIT_KIB: u64 = 128 * 1024;
/// The body of each hostile request: about what the API server stores at most.
const HOSTILE_BYTES: usize = 1 << 20;

/// `None` against a real cluster: there the manager is not ours to measure.
async fn in_process() -> anyhow::Result<Option<Cluster>> {
    let cluster = Cluster::start().await?;
    if cluster.is_external() || cluster.real().is_some() {
        eprintln!("skipped: needs the manager's /proc and the in-process server");
        return Ok(None);
    }
    cluster.ensure_namespace(SYSTEM).await?;
    Ok(Some(cluster))
}

/// A request whose CSR is `HOSTILE_BYTES` of junk, for an Issuer that does not exist, approved.
async fn create_hostile(client: &kube::Client, ns: &str, name: &str) -> anyhow::Result<()> {
    let body = base64::engine::general_purpose::STANDARD.encode(vec![b'A'; HOSTILE_BYTES]);
    let request: CertificateRequest = serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "CertificateRequest",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "issuerRef": {"group": GROUP, "kind": "Issuer", "name": "nowhere"},
            "request": body,
        },
    }))?;
    Api::<CertificateRequest>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &request)
        .await?;
    objects::approve(client, ns, name).await
}

/// `n` hostile requests, 8 at a time.
async fn create_hostiles(client: &kube::Client, ns: &str, prefix: &str, n: usize) -> anyhow::Result<()> {
    use futures::StreamExt as _;
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}-{i:04}")).collect();
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(&names)
        .map(|name| create_hostile(client, ns, name))
        .buffer_unordered(8)
        .collect()
        .await;
    results.into_iter().collect()
}

/// Hostile requests of about 1 MiB each, half there before the manager starts (its first list)
/// and half made while it runs (its watch), for an Issuer that does not exist: every one is
/// failed with the size it had, the manager's peak memory stays under the chart's limit, and
/// another tenant's requests are issued meanwhile. `TENANTS_N` sets the count (200; `make
/// bench` prints 1,000).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_requests_do_not_exhaust_memory() -> anyhow::Result<()> {
    let n: usize = std::env::var("TENANTS_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let Some(cluster) = in_process().await? else {
        return Ok(());
    };
    let client = &cluster.client;
    let hostile = cluster.namespace("hostile").await?;
    create_hostiles(client, &hostile, "before", n / 2).await?;

    let mut manager = Manager::start(ManagerOptions::new(&cluster.kubeconfig, SYSTEM)).await?;
    let ca = Ca::simple(false).await?;
    let good = cluster.namespace("good").await?;
    cluster.put_key_secret(&good, "team-ca", &ca.key_hex).await?;
    let spec = objects::issuer_spec(&ca, "team-ca", "server");
    objects::create_issuer(client, Kind::Issuer, &good, "team-ca", spec).await?;
    objects::wait_issuer_reason(client, Kind::Issuer, &good, "team-ca", "Checked", WAIT).await?;

    let requests = load::requests("good", 5)?;
    let (made, ()) = tokio::join!(create_hostiles(client, &hostile, "during", n - n / 2), async {
        let _ = load::create_requests(client, &good, "team-ca", &requests, true, 4).await;
    });
    made?;
    load::wait_all_issued(client, &good, requests.len(), WAIT).await?;

    let created_peak = manager.peak_rss_kib().expect("the manager's /proc");
    println!(
        "hostile requests: {n} made; manager RSS peak so far {:.1} MiB",
        created_peak as f64 / 1024.0
    );
    let want = format!("the CSR is {HOSTILE_BYTES} bytes, over the 64 KiB limit");
    for i in 0..n {
        let prefix = if i < n / 2 { "before" } else { "during" };
        let index = if i < n / 2 { i } else { i - n / 2 };
        let name = format!("{prefix}-{index:04}");
        let cr = objects::wait_request_reason(client, &hostile, &name, "Failed", WAIT).await?;
        let message = cr
            .status
            .unwrap()
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .unwrap()
            .message;
        assert!(message.contains(&want), "{name}: {message}");
    }
    let peak = manager.peak_rss_kib().expect("the manager's /proc");
    let now = manager.rss_kib().expect("the manager's /proc");
    println!(
        "hostile requests: {n} of {} KiB each: all failed; manager RSS peak {:.1} MiB, after {:.1} MiB (limit {} MiB)",
        HOSTILE_BYTES / 1024,
        peak as f64 / 1024.0,
        now as f64 / 1024.0,
        CHART_LIMIT_KIB / 1024
    );
    assert!(
        peak < CHART_LIMIT_KIB,
        "peak RSS {peak} KiB over the chart's limit"
    );
    manager.kill().await?;
    Ok(())
}

/// A tenant whose CA stalls (every sign takes longer than the CFSSL timeout) with 20 approved
/// requests, and another tenant's 10 requests to a healthy CA made just after: beyond its share
/// the stalled tenant never takes the last free signing slot, so the other's are issued at once
/// instead of waiting for stalled signs to time out (30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalling_ca_does_not_starve_another_issuer() -> anyhow::Result<()> {
    let Some(cluster) = in_process().await? else {
        return Ok(());
    };
    let client = &cluster.client;
    let manager =
        Manager::start(ManagerOptions::new(&cluster.kubeconfig, SYSTEM).arg("--cfssl-timeout=30s")).await?;
    let (slow_ca, fast_ca) = (Ca::simple(false).await?, Ca::simple(false).await?);
    let (slow, fast) = (
        cluster.namespace("stall").await?,
        cluster.namespace("fast").await?,
    );
    for (ns, ca) in [(&slow, &slow_ca), (&fast, &fast_ca)] {
        cluster.put_key_secret(ns, "team-ca", &ca.key_hex).await?;
        let spec = objects::issuer_spec(ca, "team-ca", "server");
        objects::create_issuer(client, Kind::Issuer, ns, "team-ca", spec).await?;
        objects::wait_issuer_reason(client, Kind::Issuer, ns, "team-ca", "Checked", WAIT).await?;
    }
    assert!(slow_ca.set_sign_delay(Duration::from_secs(120)));
    let stalled = load::requests("stalled", 20)?;
    load::create_requests(client, &slow, "team-ca", &stalled, true, 8).await?;
    // Let the stalled signs take every slot they can.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let requests = load::requests("fast", 10)?;
    let start = tokio::time::Instant::now();
    load::create_requests(client, &fast, "team-ca", &requests, true, 4).await?;
    let done = load::wait_all_issued(client, &fast, requests.len(), WAIT).await?;
    let delay = done.at - start;
    let in_flight = slow_ca.issued_count().unwrap_or_default();
    println!(
        "stalling CA: 20 requests held; another issuer's 10 requests issued in {:.2} s (bound: 15 s, half the CFSSL timeout); the stalled CA signed {in_flight}",
        delay.as_secs_f64()
    );
    assert!(delay < Duration::from_secs(15), "another issuer waited {delay:?}");
    drop(manager);
    Ok(())
}
