//! `cargo run --release -p e2e --bin bench-standalone`: standalone mode (`--certificate-controllers`)
//! under load. One run, one simple-cfssl (in this process), one in-process API server, the real
//! manager binary (the release one when this is built in release):
//! 1. the manager's settled RSS with no Secrets, then (a second manager, started after they
//!    were created) with `BENCH_SECRETS` unrelated Secrets present;
//! 2. N ECDSA P-256 Certificates created at once, until every one is Ready and has its Secret;
//! 3. the same N renewing together (a manual trigger on each, as `cmctl renew` does), until
//!    every one is Ready at revision 2;
//! 4. N RSA-2048 Certificates, in a namespace of their own.
//!
//! Printed per phase: Certificates/s, the manager's API requests per Certificate by verb, API
//! writes per Certificate; then the manager's peak RSS. Targets are printed beside the figures.
//!
//! Environment: `BENCH_N` (1000), `BENCH_CONCURRENCY` (8, the manager's `--concurrency`),
//! `BENCH_SECRETS` (10000), `BENCH_SECRET_SIZE` (4096 bytes), `BENCH_TLS` (1: the CA over
//! HTTPS as in production; 0: plain HTTP).

mod phase;

use std::time::Duration;

use base64::Engine as _;

use cfssl_issuer::pki::keys::KeySpec;
use e2e::harness::objects::{self, Kind};
use e2e::harness::{Cluster, KEY_HEX, Manager, ManagerOptions, env_or, load, manager_binary};
use phase::{Bench, Outcome};

const LABEL: &str = "intermediate1";
const PROFILE: &str = "server";
const ISSUER: &str = "bench-ca";
const SYSTEM: &str = "cfssl-issuer-system";
const WAIT: Duration = Duration::from_secs(60);

/// The issue's targets.
const TARGET_RATE: f64 = 200.0;
const TARGET_WRITES: f64 = 10.0;
const TARGET_PEAK_MIB: f64 = 128.0;

struct Settings {
    n: usize,
    concurrency: usize,
    secrets: usize,
    secret_size: usize,
    tls: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let settings = Settings {
        n: env_or("BENCH_N", 1000)?,
        concurrency: env_or("BENCH_CONCURRENCY", 8)?,
        secrets: env_or("BENCH_SECRETS", 10_000)?,
        secret_size: env_or("BENCH_SECRET_SIZE", 4096)?,
        tls: env_or::<u8>("BENCH_TLS", 1)? != 0,
    };
    let s = &settings;
    eprintln!(
        "bench-standalone: N={}, --concurrency {}, {} unrelated Secrets, simple-cfssl over {}, {} build, manager {}",
        s.n,
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
    let server = cluster.server().expect("in-process cluster");
    let mut config = simple_cfssl::Config::test_default(KEY_HEX);
    config.tls = s.tls;
    let ca = simple_cfssl::spawn(config).await?;
    cluster.ensure_namespace(SYSTEM).await?;
    let options = ManagerOptions::new(&cluster.kubeconfig, SYSTEM)
        .arg("--certificate-controllers")
        .arg(format!("--concurrency={}", s.concurrency));

    // Memory with nothing to watch, then with the unrelated Secrets there from the start.
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
        mib(idle),
        mib(idle_secrets)
    );

    let client = &cluster.client;
    let mut namespaces = Vec::new();
    for prefix in ["ecdsa", "rsa"] {
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
        namespaces.push(ns);
    }

    let bench = Bench {
        client,
        server,
        ca: &ca,
        manager: &manager,
        n: s.n,
    };
    let (ecdsa, rsa) = (KeySpec::Ecdsa(256), KeySpec::Rsa(2048));
    eprintln!("phase 1: {} ECDSA Certificates", s.n);
    let issued = bench.issue(&namespaces[0], ISSUER, ecdsa).await?;
    eprintln!("  done in {:.2?}", issued.elapsed);
    eprintln!("phase 2: the same {} renewing together", s.n);
    let renewed = bench.renew(&namespaces[0], &issued, ecdsa).await?;
    eprintln!("  done in {:.2?}", renewed.elapsed);
    eprintln!("phase 3: {} RSA-2048 Certificates", s.n);
    let issued_rsa = bench.issue(&namespaces[1], ISSUER, rsa).await?;
    eprintln!("  done in {:.2?}", issued_rsa.elapsed);
    let after = load::settled_rss_kib(&manager, Duration::from_secs(2)).await?;
    let peak = manager.peak_rss_kib().unwrap_or(0);

    let phases = [issued, renewed, issued_rsa];
    report(s, &phases, [idle, idle_secrets, after, peak]);
    let incorrect: Vec<&str> = phases
        .iter()
        .filter(|p| {
            p.signed != s.n as u64 || p.reissued > 0 || p.check.mismatched > 0 || p.check.wrong_key > 0
        })
        .map(|p| p.name.as_str())
        .collect();
    anyhow::ensure!(
        incorrect.is_empty(),
        "incorrect issuance in {incorrect:?} (see above)"
    );
    Ok(())
}

fn build_profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn verdict(ok: bool) -> &'static str {
    if ok { "ok" } else { "MISSED" }
}

/// The figures, with the targets beside them. `rss`: idle, idle with the Secrets, after the
/// phases, peak (KiB).
fn report(s: &Settings, phases: &[Outcome], rss: [u64; 4]) {
    let n = s.n;
    println!();
    println!(
        "cfssl-issuer standalone bench: N={n} per phase, --concurrency {}, simple-cfssl over {}, {}",
        s.concurrency,
        if s.tls { "HTTPS" } else { "HTTP" },
        build_profile()
    );
    println!(
        "{:<40} {:>9} {:>8} {:>11} {:>10}  {:>9}",
        "phase", "time", "Certs/s", "writes/Cert", "(events)", "peak MiB"
    );
    for p in phases {
        println!(
            "{:<40} {:>8.2}s {:>8.0} {:>11.2} {:>10.2}  {:>9.1}",
            p.name,
            p.elapsed.as_secs_f64(),
            p.rate(n),
            p.writes_per(n),
            p.event_writes_per(n),
            mib(p.peak_kib)
        );
    }
    println!("\ntargets (printed, not asserted):");
    let row = |what: &str, value: String, target: String, ok: bool| {
        println!("  {what:<52} {value:>9}  {target:<9} {}", verdict(ok));
    };
    let ecdsa_rate = phases[0].rate(n);
    row(
        "ECDSA Certificates/s (issue)",
        format!("{ecdsa_rate:.0}"),
        format!(">= {TARGET_RATE:.0}"),
        ecdsa_rate >= TARGET_RATE,
    );
    let renew_rate = phases[1].rate(n);
    row(
        "ECDSA Certificates/s (renew)",
        format!("{renew_rate:.0}"),
        format!(">= {TARGET_RATE:.0}"),
        renew_rate >= TARGET_RATE,
    );
    for p in phases {
        let writes = p.writes_per(n);
        row(
            &format!("API writes per Certificate, {}", p.name),
            format!("{writes:.2}"),
            format!("<= {TARGET_WRITES:.0}"),
            writes <= TARGET_WRITES,
        );
    }
    let [idle, idle_secrets, after, peak] = rss;
    row(
        "manager peak RSS (MiB)",
        format!("{:.1}", mib(peak)),
        format!("<= {TARGET_PEAK_MIB:.0}"),
        mib(peak) <= TARGET_PEAK_MIB,
    );
    println!(
        "\nmanager RSS (MiB): idle {:.1}; idle with {} unrelated Secrets of {} bytes {:.1}; after the phases {:.1}; peak {:.1}",
        mib(idle),
        s.secrets,
        s.secret_size,
        mib(idle_secrets),
        mib(after),
        mib(peak)
    );
    for p in phases {
        println!(
            "\n{}: {} signed by the CA, {} Certificates issued more than once, {} Secrets not \
             matching their key, {} with the wrong key type{}",
            p.name,
            p.signed,
            p.reissued,
            p.check.mismatched,
            p.check.wrong_key,
            p.rotated
                .map(|r| format!(", {r} with a new key"))
                .unwrap_or_default()
        );
        println!(
            "API requests by the manager per Certificate ({:.2} in all):",
            p.counts.total() as f64 / n as f64
        );
        print!(
            "{}",
            load::per_request_table(&p.counts, n as u64).replace("/request", "/Cert")
        );
    }
}
