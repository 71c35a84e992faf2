//! `cargo run --release -p e2e --bin bench`: how much of a CFSSL CA's signing rate reaches
//! cert-manager through the manager, and what the manager costs in memory and API requests.
//!
//! One run, one simple-cfssl (in this process), one in-process API server, the real manager
//! binary (the release one when this is built in release):
//! 1. the CA's raw `authsign` rate: precomputed bodies posted at the manager's concurrency;
//! 2. CertificateRequests/s end to end: N requests created (not yet approved, so the manager
//!    leaves them), then all approved; timed from the first approval to the last `Issued`;
//! 3. the manager's RSS idle and after the N requests, and its API requests per request.
//!
//! Environment: `BENCH_N` (10000), `BENCH_CONCURRENCY` (8, the manager's `--concurrency` and
//! the raw loop's), `BENCH_TLS` (1: the CA over HTTPS as in production; 0: plain HTTP).

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use base64::Engine as _;
use futures::{StreamExt, TryStreamExt, stream};

use cfssl_issuer::cfssl::wire::{AuthSignRequest, Envelope, SignRequest, SignResult};
use cfssl_issuer::cfssl::{AUTHSIGN_PATH, AuthKey};
use e2e::apiserver::Verb;
use e2e::harness::objects::{self, Kind};
use e2e::harness::{Cluster, KEY_HEX, Manager, ManagerOptions, cert_matches_key, load, manager_binary};

const LABEL: &str = "intermediate1";
const PROFILE: &str = "server";
const ISSUER: &str = "bench-ca";
/// Requests the bench itself has in flight when creating and approving: enough to keep the
/// API server busy, so the manager, not the client, sets the pace.
const CLIENT_CONCURRENCY: usize = 32;
const WAIT: Duration = Duration::from_secs(600);

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> anyhow::Result<T> {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .map_err(|_| anyhow::anyhow!("{name}={v:?} is not valid")),
        Err(_) => Ok(default),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n: usize = env_or("BENCH_N", 10_000)?;
    let concurrency: usize = env_or("BENCH_CONCURRENCY", 8)?;
    let tls = env_or::<u8>("BENCH_TLS", 1)? != 0;
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    eprintln!(
        "bench: N={n}, concurrency {concurrency}, simple-cfssl over {}, {profile} build, manager {}",
        if tls { "HTTPS" } else { "plain HTTP" },
        manager_binary().display()
    );

    let cluster = Cluster::start().await?;
    anyhow::ensure!(
        !cluster.is_external(),
        "the bench measures the manager it starts: unset E2E_KUBECONFIG"
    );
    let server = cluster.server().expect("in-process cluster");
    let mut config = simple_cfssl::Config::test_default(KEY_HEX);
    config.tls = tls;
    let ca = simple_cfssl::spawn(config).await?;

    eprintln!("generating {n} keys and CSRs");
    let requests = load::requests("bench", n)?;

    // 1. The CA alone.
    let raw = raw_authsign_rate(&ca, &requests, concurrency).await?;
    eprintln!("raw authsign: {raw:.0}/s");

    // 2. Through the manager.
    let system = "cfssl-issuer-system";
    cluster.ensure_namespace(system).await?;
    let manager = Manager::start(
        ManagerOptions::new(&cluster.kubeconfig, system).arg(format!("--concurrency={concurrency}")),
    )
    .await?;
    let ns = cluster.namespace("bench").await?;
    let client = &cluster.client;
    cluster.put_key_secret(&ns, ISSUER, KEY_HEX).await?;
    let mut spec = serde_json::json!({
        "url": ca.url, "label": LABEL, "profile": PROFILE, "authSecretName": ISSUER,
    });
    if let Some(pem) = &ca.tls_ca_pem {
        spec["caBundle"] = base64::engine::general_purpose::STANDARD.encode(pem).into();
    }
    objects::create_issuer(client, Kind::Issuer, &ns, ISSUER, spec).await?;
    objects::wait_issuer_reason(client, Kind::Issuer, &ns, ISSUER, "Checked", WAIT).await?;
    let idle = load::settled_rss_kib(&manager, Duration::from_secs(2)).await?;
    eprintln!("manager idle: {:.1} MiB", mib(idle));

    let signed_before = ca.issued_count();
    server.reset_counts();
    let start = tokio::time::Instant::now();
    load::create_requests(client, &ns, ISSUER, &requests, false, CLIENT_CONCURRENCY).await?;
    let created = start.elapsed();
    eprintln!("created {n} requests in {created:.2?}; approving");
    let start = tokio::time::Instant::now();
    let names = requests.iter().map(|(name, _)| name.as_str());
    load::approve_all(client, &ns, names, CLIENT_CONCURRENCY).await?;
    let approved = start.elapsed();
    let done = match load::wait_all_issued(client, &ns, n, &manager, WAIT).await {
        Ok(done) => done,
        Err(err) => {
            // The manager's log lives in a temporary directory: keep it for the post-mortem.
            let path = std::env::temp_dir().join("bench-manager.log");
            std::fs::write(&path, manager.log())?;
            let errors = load::request_reconcile_errors(&manager).await.unwrap_or(0);
            return Err(err.context(format!(
                "{errors} failed request reconciles; manager log in {}",
                path.display()
            )));
        }
    };
    let elapsed = done.at - start;
    let counts = server.counts();
    let e2e = n as f64 / elapsed.as_secs_f64();
    eprintln!("approved in {approved:.2?}; all Issued after {elapsed:.2?}: {e2e:.0}/s");

    let after = load::settled_rss_kib(&manager, Duration::from_secs(2)).await?;
    let peak = manager.peak_rss_kib().unwrap_or(0);

    // Correctness before figures: every request issued once, for its own key.
    let keys: HashMap<&str, &rcgen::KeyPair> = requests.iter().map(|(n, c)| (n.as_str(), &c.key)).collect();
    let mut mismatched = 0;
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
        if !cert_matches_key(&chain.0, key)? {
            mismatched += 1;
        }
    }
    let signed = ca.issued_count() - signed_before;

    let own = [
        (Verb::Create, "certificaterequests", n as u64),
        (Verb::Patch, "certificaterequests/status", n as u64),
        (Verb::List, "certificaterequests", done.lists),
    ];
    let by_manager = load::without(&counts, &own);
    let writes = load::request_writes(&by_manager) as f64 / n as f64;
    let events = load::event_writes(&by_manager) as f64 / n as f64;
    let reconcile_errors = load::request_reconcile_errors(&manager).await?;
    let conflict_logged = load::log_has_conflict(&manager.log());
    let conflicts = reconcile_errors + u64::from(conflict_logged);
    let ratio = e2e / raw;

    let verdict = |ok: bool| if ok { "ok" } else { "MISSED" };
    println!();
    println!(
        "cfssl-issuer bench: N={n}, concurrency {concurrency}, simple-cfssl over {}, {profile}",
        if tls { "HTTPS" } else { "HTTP" }
    );
    println!("{:<36} {:>12}  target", "", "measured");
    let row = |what: &str, value: String, target: &str, ok: Option<bool>| {
        println!(
            "{what:<36} {value:>12}  {target:<10} {}",
            ok.map(verdict).unwrap_or("")
        );
    };
    row("raw authsign rate (/s)", format!("{raw:.0}"), "", None);
    row("end-to-end CertificateRequests/s", format!("{e2e:.0}"), "", None);
    row(
        "ratio e2e/raw",
        format!("{ratio:.2}"),
        ">= 0.5",
        Some(ratio >= 0.5),
    );
    row(
        "manager RSS idle (MiB)",
        format!("{:.1}", mib(idle)),
        "<= 20",
        Some(mib(idle) <= 20.0),
    );
    row(
        &format!("manager RSS after {n} (MiB)"),
        format!("{:.1}", mib(after)),
        "<= 128",
        Some(mib(after) <= 128.0),
    );
    row("manager peak RSS (MiB)", format!("{:.1}", mib(peak)), "", None);
    row(
        "request writes per request",
        format!("{writes:.2}"),
        "<= 2",
        Some(writes <= 2.0),
    );
    row("Event writes per request", format!("{events:.2}"), "", None);
    row("409 conflicts", conflicts.to_string(), "0", Some(conflicts == 0));
    row(
        "CA signatures",
        signed.to_string(),
        &n.to_string(),
        Some(signed == n as u64),
    );
    row(
        "certificates not for their CSR",
        mismatched.to_string(),
        "0",
        Some(mismatched == 0),
    );
    println!(
        "phases: create {created:.2?} (unapproved: the manager waits), approve {approved:.2?}, \
         first approval to last Issued {elapsed:.2?}"
    );
    println!(
        "API requests by the manager per CertificateRequest ({:.2} in all):",
        by_manager.total() as f64 / n as f64
    );
    print!("{}", load::per_request_table(&by_manager, n as u64));
    anyhow::ensure!(
        signed == n as u64 && mismatched == 0,
        "incorrect issuance (see above)"
    );
    Ok(())
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The CA's own rate: one authsign per CSR, `concurrency` in flight over one pooled client,
/// bodies built (and tokens computed) beforehand with the manager's wire types.
async fn raw_authsign_rate(
    ca: &simple_cfssl::Running,
    requests: &[(String, e2e::harness::Csr)],
    concurrency: usize,
) -> anyhow::Result<f64> {
    let key = AuthKey::from_hex(KEY_HEX)?;
    let timestamp = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)?
        .as_secs() as i64;
    let bodies = requests
        .iter()
        .map(|(_, csr)| {
            // The token covers these exact bytes, so serialise once and send them.
            let inner = serde_json::to_vec(&SignRequest {
                certificate_request: &csr.pem,
                label: LABEL,
                profile: PROFILE,
                bundle: false,
            })?;
            let outer = AuthSignRequest {
                timestamp,
                token: key.token(&inner),
                request: base64::engine::general_purpose::STANDARD.encode(&inner),
            };
            anyhow::Ok(serde_json::to_vec(&outer)?)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut builder = reqwest::Client::builder().no_proxy();
    if let Some(pem) = &ca.tls_ca_pem {
        builder = builder.tls_certs_merge(reqwest::Certificate::from_pem_bundle(pem.as_bytes())?);
    }
    let http = builder.build()?;
    let url = format!("{}/{AUTHSIGN_PATH}", ca.url.trim_end_matches('/'));
    let sign = |body: Vec<u8>| {
        let (http, url) = (&http, &url);
        async move {
            let response = http.post(url).body(body).send().await?;
            let status = response.status();
            let envelope: Envelope<SignResult> = response.json().await?;
            anyhow::ensure!(
                status.is_success() && envelope.success && envelope.result.is_some(),
                "authsign answered {status}: {:?}",
                envelope.errors
            );
            anyhow::Ok(())
        }
    };
    // A few requests first, so the connections exist before the clock starts.
    let warm = bodies.len().min(concurrency);
    stream::iter(bodies[..warm].iter().cloned().map(&sign))
        .buffer_unordered(concurrency)
        .try_collect::<()>()
        .await?;
    let start = tokio::time::Instant::now();
    stream::iter(bodies.into_iter().map(&sign))
        .buffer_unordered(concurrency)
        .try_collect::<()>()
        .await?;
    Ok(requests.len() as f64 / start.elapsed().as_secs_f64())
}
