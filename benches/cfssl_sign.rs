//! Signing throughput through our client versus a bare HTTP loop, against a local multirootca,
//! in one run. Run with `cargo bench --bench cfssl_sign` (needs golang-cfssl).
//!
//! Both sides send the same number of authsign requests at the same concurrency to the same CA;
//! the raw side posts precomputed bodies and only reads the answer bytes, so the ratio is what
//! our client's work (CSR checks, tokens, parsing, chain completion) costs.

// A benchmark, like a test, may stop at the first surprise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::{Engine, engine::general_purpose::STANDARD};
use cfssl_issuer::cfssl::wire::{AuthSignRequest, SignRequest};
use cfssl_issuer::cfssl::{AuthKey, Client, ClientConfig};
use futures::StreamExt;

const KEY_HEX: &str = "0123456789abcdef0123456789abcdef";
const LABEL: &str = "intermediate1";
/// Our client against the raw loop at concurrency 16.
const TARGET_RATIO: f64 = 0.9;

fn csrs(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let key = rcgen::KeyPair::generate().unwrap();
            let params = rcgen::CertificateParams::new(vec![format!("svc{i}.bench.example")]).unwrap();
            params.serialize_request(&key).unwrap().pem().unwrap()
        })
        .collect()
}

fn raw_body(key: &AuthKey, csr: &str) -> Vec<u8> {
    let inner = serde_json::to_vec(&SignRequest {
        certificate_request: csr,
        label: LABEL,
        profile: "",
        bundle: false,
    })
    .unwrap();
    let outer = AuthSignRequest {
        timestamp: 0,
        token: key.token(&inner),
        request: STANDARD.encode(&inner),
    };
    serde_json::to_vec(&outer).unwrap()
}

async fn run_ours(client: Arc<Client>, csrs: &[String], concurrency: usize) -> Duration {
    let started = Instant::now();
    futures::stream::iter(csrs.iter().cloned())
        .map(|csr| {
            let client = client.clone();
            async move { client.sign(csr.as_bytes()).await.expect("sign") }
        })
        .buffer_unordered(concurrency)
        .for_each(|_| async {})
        .await;
    started.elapsed()
}

async fn run_raw(http: reqwest::Client, url: &str, bodies: &[Vec<u8>], concurrency: usize) -> Duration {
    let started = Instant::now();
    futures::stream::iter(bodies.iter().cloned())
        .map(|body| {
            let http = http.clone();
            async move {
                let res = http.post(url).body(body).send().await.expect("post");
                assert!(res.status().is_success());
                res.bytes().await.expect("body")
            }
        })
        .buffer_unordered(concurrency)
        .for_each(|_| async {})
        .await;
    started.elapsed()
}

/// CPU time (user + system) a process has used, from /proc: ours and the CA's, to show where a
/// lower ratio comes from.
fn cpu_time(pid: &str) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may contain spaces.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<u64> = rest.split_whitespace().map(|f| f.parse().unwrap_or(0)).collect();
    let ticks = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10) // USER_HZ is 100 on Linux
}

#[tokio::main]
async fn main() {
    cfssl_issuer::install_crypto_provider();
    let n: usize = std::env::var("BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    let lab = simple_cfssl::multirootca::Multirootca::start(false).expect("start multirootca");
    let (url, ca_pid) = (lab.url.clone(), lab.pid.to_string());
    let key = AuthKey::from_hex(KEY_HEX).unwrap();
    let csrs = csrs(n);
    let bodies: Vec<Vec<u8>> = csrs.iter().map(|c| raw_body(&key, c)).collect();
    let client = Arc::new(Client::new(ClientConfig::new(&url, LABEL, key)).unwrap());
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let authsign = format!("{url}/api/v1/cfssl/authsign");

    // Warm up connections, the signer cache and the CA.
    run_ours(client.clone(), &csrs[..n.min(20)], 4).await;
    run_raw(http.clone(), &authsign, &bodies[..n.min(20)], 4).await;

    println!("cfssl_sign: {n} authsign requests per run against multirootca at {url}");
    // The largest piece of our own work per request: parsing and verifying the CSR locally.
    let started = Instant::now();
    for csr in &csrs {
        cfssl_issuer::pki::check_csr_pem(csr.as_bytes()).expect("valid CSR");
    }
    println!(
        "local CSR check: {:.1} us per CSR",
        started.elapsed().as_secs_f64() * 1e6 / n as f64
    );

    let sides = Sides {
        client,
        http,
        authsign,
        csrs,
        bodies,
        ca_pid,
    };
    println!("\n[shared cores] client and CA compete for the same CPUs");
    sides.compare().await;
    // In production the CA runs elsewhere; pinning it to one core and us to the other shows the
    // ratio when our CPU is not taken from the CA.
    if pin(&sides.ca_pid, "0") && pin(&std::process::id().to_string(), "1") {
        println!("\n[separate cores] CA pinned to CPU 0, client to CPU 1");
        sides.compare().await;
    }
}

fn pin(pid: &str, cpu: &str) -> bool {
    Command::new("taskset")
        .args(["-a", "-p", "-c", cpu, pid])
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

struct Sides {
    client: Arc<Client>,
    http: reqwest::Client,
    authsign: String,
    csrs: Vec<String>,
    bodies: Vec<Vec<u8>>,
    ca_pid: String,
}

impl Sides {
    async fn compare(&self) {
        let n = self.csrs.len();
        for concurrency in [1, 16] {
            // Alternate raw/ours and keep each side's best, to damp drift on a shared machine;
            // add up the CPU each side cost us and the CA.
            let mut best_raw = Duration::MAX;
            let mut best_ours = Duration::MAX;
            let (mut cpu_raw, mut cpu_ours) = ([Duration::ZERO; 2], [Duration::ZERO; 2]);
            let rounds = 3;
            for _ in 0..rounds {
                let before = [cpu_time("self"), cpu_time(&self.ca_pid)];
                let raw = run_raw(self.http.clone(), &self.authsign, &self.bodies, concurrency).await;
                let mid = [cpu_time("self"), cpu_time(&self.ca_pid)];
                let ours = run_ours(self.client.clone(), &self.csrs, concurrency).await;
                let after = [cpu_time("self"), cpu_time(&self.ca_pid)];
                best_raw = best_raw.min(raw);
                best_ours = best_ours.min(ours);
                for i in 0..2 {
                    cpu_raw[i] += mid[i] - before[i];
                    cpu_ours[i] += after[i] - mid[i];
                }
            }
            let rate = |d: Duration| n as f64 / d.as_secs_f64();
            let per_req = |d: Duration| d.as_secs_f64() * 1e6 / (n * rounds) as f64;
            let ratio = rate(best_ours) / rate(best_raw);
            // The bar (issue 14) is for concurrency 16: our client at least 0.9 x the raw loop.
            let verdict = match (concurrency, ratio >= TARGET_RATIO) {
                (16, true) => format!("  (target >= {TARGET_RATIO}: ok)"),
                (16, false) => format!("  (target >= {TARGET_RATIO}: MISSED)"),
                _ => String::new(),
            };
            println!(
                "concurrency {concurrency:>2}: raw {:>7.1} req/s, ours {:>7.1} req/s, ratio ours/raw {ratio:.3}{verdict}",
                rate(best_raw),
                rate(best_ours),
            );
            println!(
                "    CPU per request: client raw {:.0} us, ours {:.0} us; CA {:.0} us, {:.0} us",
                per_req(cpu_raw[0]),
                per_req(cpu_ours[0]),
                per_req(cpu_raw[1]),
                per_req(cpu_ours[1])
            );
        }
    }
}
