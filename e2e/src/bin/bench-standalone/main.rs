//! `cargo run --release -p e2e --bin bench-standalone`: standalone mode (`--certificate-controllers`)
//! under load. One run, one simple-cfssl (in this process), one in-process API server, the real
//! manager binary (the release one when this is built in release):
//! 1. the manager's settled RSS with no Secrets, then (a second manager, started after they
//!    were created) with `BENCH_SECRETS` unrelated Secrets present;
//! 2. N ECDSA P-256 Certificates created at once, until every one is Ready and has its Secret;
//! 3. the same N renewing together (a manual trigger on each, as `cmctl renew` does), until
//!    every one is Ready at revision 2;
//! 4. `BENCH_SCALE_N` more ECDSA Certificates in a namespace of their own: the cost per
//!    Certificate must not grow with their number;
//! 5. N RSA-2048 Certificates, beside this machine's own RSA-2048 key generation rate on all
//!    its cores, measured just before;
//! 6. Certificates added until `BENCH_READY` are Ready, then the manager idle for
//!    `BENCH_IDLE_SECS`: its RSS, writes and CPU; then, that manager stopped, a new one started
//!    on the same Certificates: its settled RSS, and its writes until then (none);
//! 7. the issuance budget: a burst against a manager of its own started with a small
//!    `--issuance-budget`, measured at the CA;
//! 8. the floor: phase 1's API traffic replayed by a bare client of the manager's stack, with
//!    no decisions (`floor.rs`), its CPU per Certificate beside the manager's.
//!
//! Printed per phase: Certificates/s, the manager's and this process's CPU per Certificate
//! (from `/proc`, as `bench` does; this process is the test API server, simple-cfssl and the
//! client), API writes per Certificate with and without Events, the manager's API requests by
//! verb and resource, and the Events posted by type and reason. Targets are printed beside the
//! figures, never asserted.
//!
//! Environment: `BENCH_N` (1000), `BENCH_SCALE_N` (5 N), `BENCH_READY` (10000),
//! `BENCH_IDLE_SECS` (60), `BENCH_CONCURRENCY` (8, the manager's `--concurrency`),
//! `BENCH_SECRETS` (10000), `BENCH_SECRET_SIZE` (4096 bytes), `BENCH_TLS` (1: the CA over
//! HTTPS as in production; 0: plain HTTP), `BENCH_BUDGET` (20 signs/s; 0 skips the phase),
//! `BENCH_RSA` (1; 0 skips the RSA-2048 phase and its key generation rate, for quick
//! iterations on the ECDSA figures), `BENCH_FLOOR` (1; 0 skips the floor).

mod budget;
mod floor;
mod machine;
mod phase;
mod report;

use std::time::Duration;

use base64::Engine as _;

use cfssl_issuer::pki::keys::KeySpec;
use e2e::harness::objects::{self, Kind};
use e2e::harness::{Cluster, KEY_HEX, Manager, ManagerOptions, cpu, env_or, load, manager_binary};
use phase::Bench;
use report::{Figures, Idle, Restarted};

const LABEL: &str = "intermediate1";
const PROFILE: &str = "server";
const ISSUER: &str = "bench-ca";
const SYSTEM: &str = "cfssl-issuer-system";
const WAIT: Duration = Duration::from_secs(60);
/// How long the machine makes RSA-2048 keys for its rate: a key's time varies several-fold
/// (the search for primes), so a few hundred keys make a stable mean.
const KEYGEN_FOR: Duration = Duration::from_secs(15);

/// The manager's allocator, so that the floor's replay (this binary run again) pays what the
/// manager pays; the test API server in this process runs on it too.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub struct Settings {
    n: usize,
    scale_n: usize,
    ready: usize,
    idle: Duration,
    concurrency: usize,
    secrets: usize,
    secret_size: usize,
    tls: bool,
    budget: u32,
    rsa: bool,
    floor: bool,
}

impl Settings {
    fn from_env() -> anyhow::Result<Settings> {
        let n = env_or("BENCH_N", 1000)?;
        Ok(Settings {
            n,
            scale_n: env_or("BENCH_SCALE_N", 5 * n)?,
            ready: env_or("BENCH_READY", 10_000)?,
            idle: Duration::from_secs(env_or("BENCH_IDLE_SECS", 60)?),
            concurrency: env_or("BENCH_CONCURRENCY", 8)?,
            secrets: env_or("BENCH_SECRETS", 10_000)?,
            secret_size: env_or("BENCH_SECRET_SIZE", 4096)?,
            tls: env_or::<u8>("BENCH_TLS", 1)? != 0,
            budget: env_or("BENCH_BUDGET", 20)?,
            rsa: env_or::<u8>("BENCH_RSA", 1)? != 0,
            floor: env_or::<u8>("BENCH_FLOOR", 1)? != 0,
        })
    }
}

fn main() -> anyhow::Result<()> {
    if floor::is_replay() {
        return floor::replay();
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(bench())
}

async fn bench() -> anyhow::Result<()> {
    let s = Settings::from_env()?;
    eprintln!(
        "bench-standalone: N={}, scale N={}, {} Ready at the end, --concurrency {}, {} unrelated Secrets, simple-cfssl over {}, {} build, manager {}",
        s.n,
        s.scale_n,
        s.ready,
        s.concurrency,
        s.secrets,
        if s.tls { "HTTPS" } else { "plain HTTP" },
        build_profile(),
        manager_binary().display()
    );
    let cluster = Cluster::start().await?;
    anyhow::ensure!(
        !cluster.is_external(),
        "the bench measures the manager it starts: unset E2E_KUBECONFIG"
    );
    let mut config = simple_cfssl::Config::test_default(KEY_HEX);
    config.tls = s.tls;
    let ca = simple_cfssl::spawn(config).await?;
    cluster.ensure_namespace(SYSTEM).await?;
    let options = ManagerOptions::new(&cluster.kubeconfig, SYSTEM)
        .arg("--certificate-controllers")
        .arg(format!("--concurrency={}", s.concurrency));
    let (mut manager, rss) = managers(&cluster, &s, options.clone()).await?;
    let mut figures = phases(&cluster, &ca, &manager, &s).await?;
    figures.rss = [rss[0], rss[1], figures.rss[2], figures.rss[3]];
    manager.terminate(Duration::from_secs(10)).await?;
    figures.restarted = Some(restarted(&cluster, options, figures.idle.ready).await?);
    if s.floor {
        eprintln!("phase 8: the floor, phase 1's API traffic from a bare client");
        let server = cluster.server().expect("in-process cluster");
        let concurrency = s.concurrency;
        let floor = floor::measure(&cluster, ISSUER, s.n, concurrency, || server.counts());
        figures.floor = Some(floor.await?);
    }
    if s.budget > 0 {
        eprintln!("phase 7: the issuance budget ({}/s)", s.budget);
        let n = (s.budget as usize * 5).max(20);
        figures.budget = Some(budget::budget_burst(&cluster, SYSTEM, n, s.budget, 1).await?);
    }
    report::print(&s, &figures, build_profile());
    let incorrect: Vec<&str> = figures
        .phases
        .iter()
        .filter(|p| {
            p.signed != p.n as u64 || p.reissued > 0 || p.check.mismatched > 0 || p.check.wrong_key > 0
        })
        .map(|p| p.name.as_str())
        .collect();
    anyhow::ensure!(
        incorrect.is_empty(),
        "incorrect issuance in {incorrect:?} (see above)"
    );
    Ok(())
}

/// The manager's RSS with nothing to watch; then a manager started after `BENCH_SECRETS`
/// unrelated Secrets were created, with its RSS then: the manager the phases run against.
async fn managers(
    cluster: &Cluster,
    s: &Settings,
    options: ManagerOptions,
) -> anyhow::Result<(Manager, [u64; 2])> {
    let mut first = Manager::start(options.clone()).await?;
    let idle = load::settled_rss_kib(&first, Duration::from_secs(2)).await?;
    first.terminate(Duration::from_secs(10)).await?;
    let unrelated = cluster.namespace("unrelated").await?;
    let start = tokio::time::Instant::now();
    load::create_secrets(
        &cluster.client,
        &unrelated,
        "unrelated",
        s.secrets,
        s.secret_size,
        32,
    )
    .await?;
    eprintln!(
        "created {} unrelated Secrets of {} bytes in {:.2?}",
        s.secrets,
        s.secret_size,
        start.elapsed()
    );
    let manager = Manager::start(options).await?;
    let idle_secrets = load::settled_rss_kib(&manager, Duration::from_secs(2)).await?;
    eprintln!(
        "manager (pid {}) idle: {:.1} MiB; with the Secrets: {:.1} MiB",
        manager.pid().unwrap_or_default(),
        report::mib(idle),
        report::mib(idle_secrets)
    );
    Ok((manager, [idle, idle_secrets]))
}

/// A namespace with our Issuer `ISSUER` in it, Ready.
async fn namespace_with_issuer(
    cluster: &Cluster,
    ca: &simple_cfssl::Running,
    prefix: &str,
) -> anyhow::Result<String> {
    let client = &cluster.client;
    let ns = cluster.namespace(prefix).await?;
    cluster.put_key_secret(&ns, ISSUER, KEY_HEX).await?;
    let mut spec = serde_json::json!({
        "url": ca.url, "label": LABEL, "profile": PROFILE, "authSecretName": ISSUER,
    });
    if let Some(pem) = &ca.tls_ca_pem {
        spec["caBundle"] = base64::engine::general_purpose::STANDARD.encode(pem).into();
    }
    objects::create_issuer(client, Kind::Issuer, &ns, ISSUER, spec).await?;
    objects::wait_issuer_reason(client, Kind::Issuer, &ns, ISSUER, "Checked", WAIT).await?;
    Ok(ns)
}

/// Phases 2 to 6.
async fn phases(
    cluster: &Cluster,
    ca: &simple_cfssl::Running,
    manager: &Manager,
    s: &Settings,
) -> anyhow::Result<Figures> {
    let server = cluster.server().expect("in-process cluster");
    let bench = Bench {
        client: &cluster.client,
        server,
        ca,
        manager,
        n: s.n,
    };
    let ecdsa = KeySpec::Ecdsa(256);
    let ns = namespace_with_issuer(cluster, ca, "ecdsa").await?;
    eprintln!("phase 1: {} ECDSA Certificates", s.n);
    let issued = bench.issue(&ns, ISSUER, ecdsa).await?;
    eprintln!("  done in {:.2?}", issued.elapsed);
    eprintln!("phase 2: the same {} renewing together", s.n);
    let renewed = bench.renew(&ns, &issued, ecdsa).await?;
    eprintln!("  done in {:.2?}", renewed.elapsed);
    let ns = namespace_with_issuer(cluster, ca, "scale").await?;
    eprintln!("phase 3: {} more ECDSA Certificates", s.scale_n);
    let scaled = bench.issue_n(&ns, ISSUER, ecdsa, s.scale_n).await?;
    eprintln!("  done in {:.2?}", scaled.elapsed);
    let rsa = match s.rsa {
        true => Some(rsa_phase(cluster, ca, &bench, s.n).await?),
        false => None,
    };
    let rsa_n = rsa.as_ref().map_or(0, |(_, p)| p.n);
    let mut phases = vec![issued, renewed, scaled];
    let keygen = rsa.map(|(keygen, issued_rsa)| {
        phases.push(issued_rsa);
        keygen
    });
    let ready = s.n + s.scale_n + rsa_n;
    if s.ready > ready {
        let ns = namespace_with_issuer(cluster, ca, "fill").await?;
        eprintln!(
            "phase 5: {} more ECDSA Certificates, {} Ready in all",
            s.ready - ready,
            s.ready
        );
        phases.push(bench.issue_n(&ns, ISSUER, ecdsa, s.ready - ready).await?);
    }
    let idle = idle(&bench, s.idle, ready.max(s.ready)).await?;
    Ok(Figures {
        phases,
        keygen,
        idle,
        rss: [0, 0, idle.rss_kib, manager.peak_rss_kib().unwrap_or(0)],
        budget: None,
        floor: None,
        restarted: None,
    })
}

/// This machine's RSA-2048 key generation rate, then `n` RSA-2048 Certificates.
async fn rsa_phase(
    cluster: &Cluster,
    ca: &simple_cfssl::Running,
    bench: &Bench<'_>,
    n: usize,
) -> anyhow::Result<(machine::Keygen, phase::Outcome)> {
    eprintln!("phase 4: this machine's RSA-2048 key generation rate, then {n} RSA-2048 Certificates");
    let keygen = tokio::task::block_in_place(|| machine::rsa_2048_keygen_rate(KEYGEN_FOR))?;
    eprintln!(
        "  {:.1} RSA-2048 keys/s on all cores ({} keys, {:.1} ms CPU each)",
        keygen.rate,
        keygen.keys,
        keygen.cpu_per_key.as_secs_f64() * 1e3
    );
    let ns = namespace_with_issuer(cluster, ca, "rsa").await?;
    let issued_rsa = bench.issue(&ns, ISSUER, KeySpec::Rsa(2048)).await?;
    eprintln!("  done in {:.2?}", issued_rsa.elapsed);
    Ok((keygen, issued_rsa))
}

/// The manager left alone with every Certificate Ready: its settled RSS, then its writes and
/// CPU over `window`.
async fn idle(bench: &Bench<'_>, window: Duration, ready: usize) -> anyhow::Result<Idle> {
    eprintln!("phase 6: idle with {ready} Ready Certificates for {window:?}");
    let rss_kib = load::settled_rss_kib(bench.manager, Duration::from_secs(5)).await?;
    bench.server.reset_counts();
    let meter = bench.manager.pid().and_then(cpu::Meter::start);
    let start = tokio::time::Instant::now();
    tokio::time::sleep(window).await;
    let cpu = meter.and_then(|m| m.used()).unwrap_or_default();
    let counts = bench.server.counts();
    let writes = phase::writes(&counts);
    Ok(Idle {
        ready,
        rss_kib,
        seconds: start.elapsed().as_secs_f64(),
        writes,
        cpu,
    })
}

/// A manager started on the Ready Certificates the first one left: its settled RSS (what a
/// restart or an upgrade needs, without the history of a mass issuance) and its writes until
/// then (none: a restart re-issues nothing).
async fn restarted(cluster: &Cluster, options: ManagerOptions, ready: usize) -> anyhow::Result<Restarted> {
    eprintln!("phase 6b: a new manager on the {ready} Ready Certificates");
    let server = cluster.server().expect("in-process cluster");
    server.reset_counts();
    let mut manager = Manager::start(options).await?;
    let rss_kib = load::settled_rss_kib(&manager, Duration::from_secs(10)).await?;
    let writes = phase::writes(&server.counts());
    manager.terminate(Duration::from_secs(10)).await?;
    Ok(Restarted { rss_kib, writes })
}

fn build_profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}
