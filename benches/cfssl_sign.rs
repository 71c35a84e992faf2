//! Signing throughput through our client versus a bare HTTP loop, against a local multirootca,
//! in one run. Run with `cargo bench --bench cfssl_sign` (needs golang-cfssl).
//!
//! Both sides send the same number of authsign requests at the same concurrency to the same CA;
//! the raw side posts precomputed bodies and only reads the answer bytes, so the ratio is what
//! our client's work (CSR checks, tokens, parsing, chain completion) costs.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::{Engine, engine::general_purpose::STANDARD};
use cfssl_issuer::cfssl::wire::{AuthSignRequest, SignRequest};
use cfssl_issuer::cfssl::{AuthKey, Client, ClientConfig};
use futures::StreamExt;

const KEY_HEX: &str = "0123456789abcdef0123456789abcdef";
const LABEL: &str = "intermediate1";

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

struct Lab(tempfile::TempDir);

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("stop").arg(self.0.path()).status();
    }
}

fn script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/multirootca-lab.sh")
}

fn start_lab() -> (Lab, String) {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = Command::new(script())
        .arg("start")
        .arg(dir.path())
        .arg(port.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (Lab(dir), format!("http://127.0.0.1:{port}"))
}

#[tokio::main]
async fn main() {
    cfssl_issuer::install_crypto_provider();
    let n: usize = std::env::var("BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    let (_lab, url) = start_lab();
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
    for concurrency in [1, 16] {
        // Alternate raw/ours twice and keep each side's best, to damp drift on a shared machine.
        let mut best_raw = Duration::MAX;
        let mut best_ours = Duration::MAX;
        for _ in 0..2 {
            best_raw = best_raw.min(run_raw(http.clone(), &authsign, &bodies, concurrency).await);
            best_ours = best_ours.min(run_ours(client.clone(), &csrs, concurrency).await);
        }
        let rate = |d: Duration| n as f64 / d.as_secs_f64();
        println!(
            "concurrency {concurrency:>2}: raw {:>7.1} req/s, ours {:>7.1} req/s, ratio ours/raw {:.3}",
            rate(best_raw),
            rate(best_ours),
            rate(best_ours) / rate(best_raw)
        );
    }
}
