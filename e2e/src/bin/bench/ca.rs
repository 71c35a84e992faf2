//! The CA the bench signs with, and its raw `authsign` rate measured without the manager.

use std::time::{Duration, SystemTime};

use base64::Engine as _;
use futures::{StreamExt, TryStreamExt, stream};

use cfssl_issuer::cfssl::wire::{AuthSignRequest, Envelope, SignRequest, SignResult};
use cfssl_issuer::cfssl::{AUTHSIGN_PATH, AuthKey};
use e2e::harness::{Csr, KEY_HEX, cpu};
use simple_cfssl::multirootca::Multirootca;

pub const LABEL: &str = "intermediate1";
pub const PROFILE: &str = "server";

/// Which CA: `BENCH_CA=multirootca` (Debian's golang-cfssl, plain HTTP) or `simple-cfssl`
/// (ours, in this process, HTTPS unless `BENCH_TLS=0`).
pub enum BenchCa {
    Multirootca(Multirootca),
    Simple(simple_cfssl::Running),
}

impl BenchCa {
    pub async fn start(name: &str, tls: bool) -> anyhow::Result<BenchCa> {
        match name {
            "multirootca" => Ok(BenchCa::Multirootca(Multirootca::start(false)?)),
            "simple-cfssl" => {
                let mut config = simple_cfssl::Config::test_default(KEY_HEX);
                config.tls = tls;
                Ok(BenchCa::Simple(simple_cfssl::spawn(config).await?))
            }
            other => anyhow::bail!("BENCH_CA={other:?}: multirootca or simple-cfssl"),
        }
    }

    /// What the figures call it.
    pub fn describe(&self) -> String {
        match self {
            BenchCa::Multirootca(_) => "multirootca over HTTP".into(),
            BenchCa::Simple(ca) if ca.tls_ca_pem.is_some() => "simple-cfssl over HTTPS".into(),
            BenchCa::Simple(_) => "simple-cfssl over HTTP".into(),
        }
    }

    pub fn url(&self) -> &str {
        match self {
            BenchCa::Multirootca(ca) => &ca.url,
            BenchCa::Simple(ca) => &ca.url,
        }
    }

    pub fn tls_ca_pem(&self) -> Option<&str> {
        match self {
            BenchCa::Multirootca(_) => None,
            BenchCa::Simple(ca) => ca.tls_ca_pem.as_deref(),
        }
    }

    /// The CA's own process, when it has one (simple-cfssl runs inside the bench).
    pub fn pid(&self) -> Option<u32> {
        match self {
            BenchCa::Multirootca(ca) => Some(ca.pid),
            BenchCa::Simple(_) => None,
        }
    }

    /// Certificates the CA has signed so far, where it counts them.
    pub fn signed(&self) -> Option<u64> {
        match self {
            BenchCa::Multirootca(_) => None,
            BenchCa::Simple(ca) => Some(ca.issued_count()),
        }
    }
}

/// The raw loop's figures: signatures per second and the CA's CPU per signature.
pub struct Raw {
    pub rate: f64,
    pub ca_cpu: Option<Duration>,
}

/// The CA's own rate: one authsign per CSR, `concurrency` in flight over one pooled client,
/// bodies built (and tokens computed) beforehand with the manager's wire types.
pub async fn raw_authsign(
    ca: &BenchCa,
    requests: &[(String, Csr)],
    concurrency: usize,
) -> anyhow::Result<Raw> {
    let bodies = bodies(requests)?;
    let mut builder = reqwest::Client::builder().no_proxy();
    if let Some(pem) = ca.tls_ca_pem() {
        builder = builder.tls_certs_merge(reqwest::Certificate::from_pem_bundle(pem.as_bytes())?);
    }
    let http = builder.build()?;
    let url = format!("{}/{AUTHSIGN_PATH}", ca.url().trim_end_matches('/'));
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
    let meter = ca.pid().and_then(cpu::Meter::start);
    let start = tokio::time::Instant::now();
    stream::iter(bodies.into_iter().map(&sign))
        .buffer_unordered(concurrency)
        .try_collect::<()>()
        .await?;
    let n = requests.len() as u32;
    Ok(Raw {
        rate: f64::from(n) / start.elapsed().as_secs_f64(),
        ca_cpu: meter.and_then(|m| m.used()).map(|used| used / n.max(1)),
    })
}

/// One authsign body per CSR; the token covers these exact bytes, so they are sent as built.
fn bodies(requests: &[(String, Csr)]) -> anyhow::Result<Vec<Vec<u8>>> {
    let key = AuthKey::from_hex(KEY_HEX)?;
    let timestamp = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)?
        .as_secs() as i64;
    requests
        .iter()
        .map(|(_, csr)| {
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
        .collect()
}
