//! `cargo run --release -p e2e --bin bench`: whether the manager keeps up with a CFSSL CA, and
//! what it costs in CPU, memory and API requests per CertificateRequest.
//!
//! One run, one CA, one in-process API server, the real manager binary (the release one when
//! this is built in release):
//! 1. the CA's raw `authsign` rate: precomputed bodies posted at the manager's concurrency;
//! 2. CertificateRequests/s end to end: N requests created (not yet approved, so the manager
//!    leaves them), then all approved; timed from the first approval to the last `Issued`;
//! 3. CPU per issued request of the manager, the CA and the bench (API server and client),
//!    from `/proc/<pid>/stat` over the whole run, first create to last `Issued`; the manager's
//!    RSS idle and after the N requests; its API requests per request, by verb.
//!
//! Environment: `BENCH_CA` (`multirootca`, the default when Debian's golang-cfssl is installed,
//! or `simple-cfssl`), `BENCH_N` (10000), `BENCH_CONCURRENCY` (the manager's `--concurrency`
//! and the raw loop's; unset: the manager's default, 8 for the raw loop), `BENCH_TLS`
//! (simple-cfssl only; 1: HTTPS as in production, 0: plain HTTP).

mod ca;
mod report;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use anyhow::Context as _;
use base64::Engine as _;

use e2e::harness::load::Completion;
use e2e::harness::objects::{self, Kind};
use e2e::harness::{
    Cluster, Csr, KEY_HEX, Manager, ManagerOptions, cpu, env_or, load, manager_binary, parse_leaf,
};
use kube_testserver::Verb;

use self::ca::{BenchCa, LABEL, PROFILE};
use self::report::Figures;

const ISSUER: &str = "bench-ca";
/// Requests the bench itself has in flight when creating and approving: enough to keep the
/// API server busy, so the manager, not the client, sets the pace.
const CLIENT_CONCURRENCY: usize = 32;
const WAIT: Duration = Duration::from_secs(600);
/// The manager's `--concurrency` default, which the raw loop matches when none is given.
const DEFAULT_CONCURRENCY: usize = 8;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    cfssl_issuer::install_crypto_provider();
    let n: usize = env_or("BENCH_N", 10_000)?;
    let concurrency: Option<usize> = std::env::var("BENCH_CONCURRENCY")
        .ok()
        .map(|v| v.parse())
        .transpose()?;
    let default_ca = if simple_cfssl::multirootca::Multirootca::installed() {
        "multirootca"
    } else {
        eprintln!("bench: multirootca is not installed (apt-get install golang-cfssl); using simple-cfssl");
        "simple-cfssl"
    };
    let ca_name: String = env_or("BENCH_CA", default_ca.to_string())?;
    let tls = env_or::<u8>("BENCH_TLS", 1)? != 0;
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let ca = BenchCa::start(&ca_name, tls).await?;
    let raw_concurrency = concurrency.unwrap_or(DEFAULT_CONCURRENCY);
    eprintln!(
        "bench: N={n}, concurrency {raw_concurrency}, {}, {profile} build, manager {}",
        ca.describe(),
        manager_binary().display()
    );
    eprintln!("generating {n} keys and CSRs");
    let requests = load::requests("bench", n)?;
    let raw = ca::raw_authsign(&ca, &requests, raw_concurrency).await?;
    eprintln!("raw authsign: {:.0}/s", raw.rate);
    let mut figures = through_manager(&ca, &requests, concurrency).await?;
    figures.concurrency = raw_concurrency;
    figures.profile = profile;
    figures.raw_rate = raw.rate;
    figures.raw_ca_cpu = raw.ca_cpu;
    figures.baseline = std::env::var("BENCH_BASELINE")
        .ok()
        .map(|v| v.parse())
        .transpose()
        .context("BENCH_BASELINE: a capacity ratio such as 1.52")?;
    figures.print();
    anyhow::ensure!(figures.correct(), "incorrect issuance (see above)");
    Ok(())
}

/// Phase 2 and 3: the manager signs every request; the figures, less the raw loop's.
async fn through_manager(
    ca: &BenchCa,
    requests: &[(String, Csr)],
    concurrency: Option<usize>,
) -> anyhow::Result<Figures> {
    let n = requests.len();
    let cluster = Cluster::start().await?;
    anyhow::ensure!(
        !cluster.is_external(),
        "the bench measures the manager it starts: unset E2E_KUBECONFIG"
    );
    let server = cluster.server().expect("in-process cluster");
    let system = "cfssl-issuer-system";
    cluster.ensure_namespace(system).await?;
    let mut options = ManagerOptions::new(&cluster.kubeconfig, system);
    if let Some(c) = concurrency {
        options = options.arg(format!("--concurrency={c}"));
    }
    let manager = Manager::start(options).await?;
    let ns = cluster.namespace("bench").await?;
    let client = &cluster.client;
    cluster.put_key_secret(&ns, ISSUER, KEY_HEX).await?;
    let mut spec = serde_json::json!({
        "url": ca.url(), "label": LABEL, "profile": PROFILE, "authSecretName": ISSUER,
    });
    if let Some(pem) = ca.tls_ca_pem() {
        spec["caBundle"] = base64::engine::general_purpose::STANDARD.encode(pem).into();
    }
    objects::create_issuer(client, Kind::Issuer, &ns, ISSUER, spec).await?;
    objects::wait_issuer_reason(client, Kind::Issuer, &ns, ISSUER, "Checked", WAIT).await?;
    let rss_idle_kib = load::settled_rss_kib(&manager, Duration::from_secs(2)).await?;
    eprintln!("manager idle: {:.1} MiB", rss_idle_kib as f64 / 1024.0);

    let signed_before = ca.signed();
    server.reset_counts();
    let pid = manager.pid().context("the manager has no pid")?;
    let meters = [Some(pid), ca.pid(), Some(std::process::id())].map(|p| p.and_then(cpu::Meter::start));
    let start = tokio::time::Instant::now();
    load::create_requests(client, &ns, ISSUER, requests, false, CLIENT_CONCURRENCY).await?;
    let created = start.elapsed();
    eprintln!("created {n} requests in {created:.2?}; approving");
    let start = tokio::time::Instant::now();
    load::approve_all(
        client,
        &ns,
        requests.iter().map(|(name, _)| name.as_str()),
        CLIENT_CONCURRENCY,
    )
    .await?;
    let approved = start.elapsed();
    let done = wait_issued(client, &ns, n, &manager).await?;
    let per_request = |m: &Option<cpu::Meter>| m.as_ref().and_then(|m| m.used()).map(|d| d / n as u32);
    let [manager_cpu, ca_cpu, bench_cpu] = meters.each_ref().map(per_request);
    let elapsed = done.at - start;
    let counts = server.counts();
    eprintln!("approved in {approved:.2?}; all Issued after {elapsed:.2?}");

    let rss_after_kib = load::settled_rss_kib(&manager, Duration::from_secs(2)).await?;
    let (mismatched, duplicate_serials) = check_issued(requests, &done)?;
    let own = [
        (Verb::Create, "certificaterequests", n as u64),
        (Verb::Patch, "certificaterequests/status", n as u64),
        (Verb::List, "certificaterequests", done.lists),
        (Verb::Watch, "certificaterequests", done.lists),
    ];
    let reconcile_errors = load::request_reconcile_errors(&manager).await?;
    Ok(Figures {
        n,
        concurrency: 0,
        ca: ca.describe(),
        profile: "",
        raw_rate: 0.0,
        raw_ca_cpu: None,
        e2e_rate: n as f64 / elapsed.as_secs_f64(),
        manager_cpu: manager_cpu.context("no CPU time for the manager")?,
        ca_cpu,
        bench_cpu,
        rss_idle_kib,
        rss_after_kib,
        rss_peak_kib: manager.peak_rss_kib().unwrap_or(0),
        by_manager: load::without(&counts, &own),
        conflicts: reconcile_errors + u64::from(load::log_has_conflict(&manager.log())),
        signed: signed_before
            .zip(ca.signed())
            .map(|(before, after)| after - before),
        duplicate_serials,
        mismatched,
        phases: format!(
            "phases: create {created:.2?} (unapproved: the manager waits), approve {approved:.2?}, \
             first approval to last Issued {elapsed:.2?}"
        ),
        baseline: None,
    })
}

/// Waits for every request to be Issued; on failure keeps the manager's log.
async fn wait_issued(
    client: &kube::Client,
    ns: &str,
    n: usize,
    manager: &Manager,
) -> anyhow::Result<Completion> {
    match load::wait_all_issued(client, ns, n, WAIT).await {
        Ok(done) => Ok(done),
        Err(err) => {
            // The manager's log lives in a temporary directory: keep it for the post-mortem.
            let path = std::env::temp_dir().join("bench-manager.log");
            std::fs::write(&path, manager.log())?;
            let errors = load::request_reconcile_errors(manager).await.unwrap_or(0);
            Err(err.context(format!(
                "{errors} failed request reconciles; manager log in {}",
                path.display()
            )))
        }
    }
}

/// Correctness before figures: `(certificates not for their own key, serials seen twice)`.
fn check_issued(requests: &[(String, Csr)], done: &Completion) -> anyhow::Result<(usize, usize)> {
    let keys: HashMap<&str, &rcgen::KeyPair> = requests.iter().map(|(n, c)| (n.as_str(), &c.key)).collect();
    let (mut mismatched, mut serials, mut duplicates) = (0, HashSet::new(), 0);
    for request in &done.requests {
        let name = request.metadata.name.as_deref().unwrap_or_default();
        let chain = request
            .status
            .as_ref()
            .and_then(|s| s.certificate.as_ref())
            .with_context(|| format!("{name} has no certificate"))?;
        let key = keys
            .get(name)
            .with_context(|| format!("unexpected request {name}"))?;
        let leaf = parse_leaf(&chain.0)?;
        if leaf.spki != rcgen::PublicKeyData::subject_public_key_info(*key) {
            mismatched += 1;
        }
        if !serials.insert(leaf.serial) {
            duplicates += 1;
        }
    }
    Ok((mismatched, duplicates))
}
