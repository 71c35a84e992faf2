//! Load: a thousand requests at once, and thousands of unrelated Secrets, through the real
//! manager binary against the in-process API server and simple-cfssl.
//!
//! These measure the manager itself (its memory from /proc, its API requests from the server's
//! counts), so they need the in-process cluster; against `E2E_KUBECONFIG` they are skipped.
//! Throughput is printed, not asserted: CI machines differ. Run with `--nocapture` to see it.

use std::collections::HashMap;
use std::time::Duration;

use e2e::harness::load;
use e2e::harness::objects::{self, Kind};
use e2e::harness::{Ca, Cluster, Manager, ManagerOptions, cert_matches_key};
use kube::api::{Api, Patch, PatchParams};
use kube_testserver::Verb;

const WAIT: Duration = Duration::from_secs(60);
const ISSUER: &str = "team-ca";

/// The in-process cluster, simple-cfssl, the manager, and a Ready Issuer in `ns`.
struct Env {
    cluster: Cluster,
    ca: Ca,
    manager: Manager,
    ns: String,
}

impl Env {
    /// `None` against a real cluster: there the manager is not ours to measure.
    async fn start() -> anyhow::Result<Option<Env>> {
        let cluster = Cluster::start().await?;
        if cluster.is_external() {
            eprintln!("skipped against a real cluster: needs the manager's /proc and the server's counts");
            return Ok(None);
        }
        let ca = Ca::simple(false).await?;
        let system = "cfssl-issuer-system";
        cluster.ensure_namespace(system).await?;
        let manager = Manager::start(ManagerOptions::new(&cluster.kubeconfig, system)).await?;
        let ns = cluster.namespace("load").await?;
        cluster.put_key_secret(&ns, ISSUER, &ca.key_hex).await?;
        let spec = objects::issuer_spec(&ca, ISSUER, "server");
        objects::create_issuer(&cluster.client, Kind::Issuer, &ns, ISSUER, spec).await?;
        objects::wait_issuer_reason(&cluster.client, Kind::Issuer, &ns, ISSUER, "Checked", WAIT).await?;
        Ok(Some(Env {
            cluster,
            ca,
            manager,
            ns,
        }))
    }

    fn client(&self) -> &kube::Client {
        &self.cluster.client
    }

    fn server(&self) -> &kube_testserver::TestServer {
        self.cluster.server().expect("in-process cluster")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_requests_at_once() -> anyhow::Result<()> {
    const N: usize = 1000;
    let Some(env) = Env::start().await? else {
        return Ok(());
    };
    // Keys and CSRs up front, so the clock measures issuance, not key generation.
    let requests = load::requests("load", N)?;

    env.server().reset_counts();
    let start = tokio::time::Instant::now();
    load::create_requests(env.client(), &env.ns, ISSUER, &requests, true, 32).await?;
    let created = start.elapsed();
    let done = load::wait_all_issued(env.client(), &env.ns, N, WAIT).await?;
    let elapsed = done.at - start;
    let counts = env.server().counts();

    // The test's own requests: one create and one approval each, and the wait's lists.
    let own = [
        (Verb::Create, "certificaterequests", N as u64),
        (Verb::Patch, "certificaterequests/status", N as u64),
        (Verb::List, "certificaterequests", done.lists),
        (Verb::Watch, "certificaterequests", done.lists),
    ];
    let by_manager = load::without(&counts, &own);
    let writes = load::request_writes(&by_manager);
    let events = load::event_writes(&by_manager);
    let peak = env.manager.peak_rss_kib().unwrap_or(0);
    let reconcile_errors = load::request_reconcile_errors(&env.manager).await?;
    eprintln!(
        "{N} requests: created and approved in {created:.2?}, all Issued after {elapsed:.2?} \
         ({:.0} requests/s); manager peak RSS {:.1} MiB; {writes} request writes, {events} Event \
         writes, {} API requests in all by the manager ({:.2} per request):\n{}",
        N as f64 / elapsed.as_secs_f64(),
        peak as f64 / 1024.0,
        by_manager.total(),
        by_manager.total() as f64 / N as f64,
        load::per_request_table(&by_manager, N as u64),
    );

    assert_eq!(done.requests.len(), N);
    let keys: HashMap<&str, &rcgen::KeyPair> = requests.iter().map(|(n, c)| (n.as_str(), &c.key)).collect();
    for request in &done.requests {
        let name = request.metadata.name.as_deref().unwrap_or_default();
        let chain = &request
            .status
            .as_ref()
            .and_then(|s| s.certificate.as_ref())
            .unwrap_or_else(|| panic!("{name} has no certificate"))
            .0;
        let key = keys
            .get(name)
            .unwrap_or_else(|| panic!("unexpected request {name}"));
        assert!(
            cert_matches_key(chain, key)?,
            "{name}: certificate is not for its CSR's key"
        );
    }
    assert_eq!(
        env.ca.issued_count(),
        Some(N as u64),
        "each request signed exactly once"
    );
    assert!(
        writes <= 2 * N as u64,
        "{writes} writes to {N} requests: more than 2 each"
    );
    assert_eq!(reconcile_errors, 0, "failed request reconciles");
    let log = env.manager.log();
    assert!(
        !load::log_has_conflict(&log),
        "the manager hit a 409 Conflict:\n{log}"
    );
    Ok(())
}

/// The manager watches Secrets by metadata only: thousands of large Secrets it has no use for
/// must not end up in its memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unrelated_secrets_do_not_grow_memory() -> anyhow::Result<()> {
    const SECRETS: usize = 5000;
    const SIZE: usize = 100 * 1024;
    const LIMIT_KIB: u64 = 5 * 1024;
    let Some(env) = Env::start().await? else {
        return Ok(());
    };
    // Touching the issuer's own Secret before each measurement runs the same code (one
    // re-check, one client rebuilt) both times, and the second touch proves the manager has
    // taken every earlier Secret event off its watch: events arrive in order.
    let mut touches = 0;
    touch_issuer_secret(&env, &mut touches).await?;
    let idle = load::settled_rss_kib(&env.manager, Duration::from_secs(2)).await?;

    let start = tokio::time::Instant::now();
    load::create_secrets(env.client(), &env.ns, "unrelated", SECRETS, SIZE, 16).await?;
    let created = start.elapsed();
    touch_issuer_secret(&env, &mut touches).await?;
    let after = load::settled_rss_kib(&env.manager, Duration::from_secs(2)).await?;
    let growth = after.saturating_sub(idle);
    eprintln!(
        "{SECRETS} Secrets of {} KiB created in {created:.2?}; manager RSS idle {:.1} MiB, after \
         {:.1} MiB (+{:.2} MiB), peak {:.1} MiB",
        SIZE / 1024,
        idle as f64 / 1024.0,
        after as f64 / 1024.0,
        growth as f64 / 1024.0,
        env.manager.peak_rss_kib().unwrap_or(0) as f64 / 1024.0,
    );
    let watches = env.server().counts().get(Verb::Watch, "secrets");
    assert!(watches > 0, "the manager watches Secrets");
    assert!(
        growth < LIMIT_KIB,
        "manager RSS grew by {growth} KiB (from {idle} to {after}) with {SECRETS} unrelated Secrets"
    );
    Ok(())
}

/// Requests for other issuers (cert-manager's own CA issuer here) are none of the manager's
/// business: 20,000 of them, each with its CSR, certificate chain and CA as cert-manager leaves
/// them, must not end up in its memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_requests_do_not_grow_memory() -> anyhow::Result<()> {
    const REQUESTS: usize = 20_000;
    const LIMIT_KIB: u64 = 10 * 1024;
    let Some(env) = Env::start().await? else {
        return Ok(());
    };
    // Our own request before each measurement: the same code runs both times, and (events of
    // one watch arriving in order) the second proves every foreign request reached the manager.
    let own = load::requests("own", 2)?;
    load::create_requests(env.client(), &env.ns, ISSUER, &own[..1], true, 1).await?;
    objects::wait_request_reason(env.client(), &env.ns, &own[0].0, "Issued", WAIT).await?;
    let idle = load::settled_rss_kib(&env.manager, Duration::from_secs(2)).await?;

    let start = tokio::time::Instant::now();
    let foreign = load::foreign_request(&env.ns)?;
    let created = env
        .server()
        .create_all(
            "cert-manager.io",
            "v1",
            "certificaterequests",
            (0..REQUESTS).map(|i| load::numbered(&foreign, "foreign", i)),
        )
        .map_err(anyhow::Error::msg)?;
    assert_eq!(created, REQUESTS);
    let seeded = start.elapsed();
    load::create_requests(env.client(), &env.ns, ISSUER, &own[1..], true, 1).await?;
    objects::wait_request_reason(env.client(), &env.ns, &own[1].0, "Issued", WAIT).await?;
    let after = load::settled_rss_kib(&env.manager, Duration::from_secs(2)).await?;
    let growth = after.saturating_sub(idle);
    eprintln!(
        "{REQUESTS} foreign CertificateRequests of {:.1} KiB stored in {seeded:.2?}; manager RSS \
         idle {:.1} MiB, after {:.1} MiB (+{:.2} MiB), peak {:.1} MiB",
        serde_json::to_vec(&foreign)?.len() as f64 / 1024.0,
        idle as f64 / 1024.0,
        after as f64 / 1024.0,
        growth as f64 / 1024.0,
        env.manager.peak_rss_kib().unwrap_or(0) as f64 / 1024.0,
    );
    assert!(
        growth < LIMIT_KIB,
        "manager RSS grew by {growth} KiB (from {idle} to {after}) with {REQUESTS} foreign requests"
    );
    // They never reach the controller either: a handful of reconciles for our two requests.
    let exposition = e2e::harness::scrape::scrape(&env.manager.metrics_addr).await?;
    let reconciles = exposition
        .value(
            "cfssl_issuer_reconciles_total",
            &[("controller", "CertificateRequest")],
        )
        .unwrap_or(0.0);
    assert!(
        reconciles < 20.0,
        "{reconciles} request reconciles for 2 requests of ours"
    );
    Ok(())
}

/// Labels the issuer's credential Secret and waits for the Issuer reconcile that follows.
async fn touch_issuer_secret(env: &Env, touches: &mut u32) -> anyhow::Result<()> {
    let reconciles = || async {
        let exposition = e2e::harness::scrape::scrape(&env.manager.metrics_addr).await?;
        anyhow::Ok(
            exposition
                .value("cfssl_issuer_reconciles_total", &[("controller", "Issuer")])
                .unwrap_or(0.0),
        )
    };
    let before = reconciles().await?;
    *touches += 1;
    let patch = serde_json::json!({"metadata": {"labels": {"e2e-touch": touches.to_string()}}});
    Api::<k8s_openapi::api::core::v1::Secret>::namespaced(env.client().clone(), &env.ns)
        .patch(ISSUER, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    e2e::harness::eventually(WAIT, "the Issuer reconcile after its Secret changed", || async {
        reconciles().await.ok().filter(|now| *now > before).map(|_| ())
    })
    .await
}
