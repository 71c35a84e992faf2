//! simple-cfssl: a small CA server that speaks the CFSSL `multirootca` API, for tests, demos and
//! the e2e suite.
//!
//! - `POST /api/v1/cfssl/authsign` and `POST /api/v1/cfssl/info` answer as Debian's multirootca
//!   does, down to the status, error code and message of every refusal;
//! - `GET /api/v1/cfssl/health` answers as `cfssl serve` does (multirootca has no such path);
//! - labels are intermediates under one root, generated at start or loaded from PEM files;
//! - `bundle: true` is answered as the wmf fork (cfssl PR #1218) does, unless turned off.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! let mut config = simple_cfssl::Config::test_default("0123456789abcdef0123456789abcdef");
//! config.tls = true;
//! let ca = simple_cfssl::spawn(config).await?;
//! println!("{} trusts {:?}", ca.url, ca.tls_ca_pem);
//! ca.shutdown();
//! # Ok(()) }
//! ```

mod auth;
mod ca;
pub mod config;
mod handlers;
pub mod multirootca;
mod tls;
mod wire;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use anyhow::Context as _;
use time::OffsetDateTime;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use ca::CaError;
pub use ca::keys::KeyError;
pub use config::{Config, ConfigError, Label, Profile, RootFiles};
pub use handlers::MAX_BODY;

use ca::{Ca, TlsMaterial};
use handlers::AppState;

/// Where [`spawn`] wrote the CA certificates (when [`Config::dir`] is set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaFiles {
    pub root: PathBuf,
    pub tls_ca: Option<PathBuf>,
    /// `(label, path)` of each label's certificate.
    pub labels: Vec<(String, PathBuf)>,
}

/// A running server. Dropping it shuts it down.
pub struct Running {
    /// Base URL, `http(s)://127.0.0.1:PORT` (a wildcard listen address is reached via loopback).
    pub url: String,
    pub addr: SocketAddr,
    /// PEM of the root every label chains to.
    pub root_pem: String,
    /// `(label, PEM)` of each label's certificate, in configuration order.
    pub intermediates: Vec<(String, String)>,
    /// PEM of the CA behind the TLS server certificate, when TLS is on.
    pub tls_ca_pem: Option<String>,
    pub files: Option<CaFiles>,
    state: Arc<AppState>,
    stop: watch::Sender<bool>,
    server: Option<JoinHandle<()>>,
}

impl Running {
    /// Stops accepting connections; requests in flight are completed.
    pub fn shutdown(&self) {
        let _ = self.stop.send(true);
    }

    /// Certificates issued so far.
    pub fn issued_count(&self) -> u64 {
        self.state.issued.load(Ordering::Relaxed)
    }

    /// HTTP requests received so far (any path, any answer, during an outage too).
    pub fn request_count(&self) -> u64 {
        self.state.requests.load(Ordering::Relaxed)
    }

    /// `false` simulates an outage: every request gets a 503 whose body is not CFSSL's.
    pub fn set_available(&self, up: bool) {
        self.state.available.store(up, Ordering::Relaxed);
    }

    /// Makes every authsign wait `delay` before it is answered, as a slow CA (an HSM, a
    /// loaded host) would; zero, the default, answers at once.
    pub fn set_sign_delay(&self, delay: std::time::Duration) {
        let millis = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.state.sign_delay_ms.store(millis, Ordering::Relaxed);
    }

    /// Certificates signed so far for the public key `spki` (DER SubjectPublicKeyInfo): each
    /// request has a key of its own, so this is how often a request was signed.
    pub fn signatures_for(&self, spki: &[u8]) -> u32 {
        self.state.signatures_for(spki)
    }

    /// Every signature so far, in order: when, and the SHA-256 of the DER
    /// SubjectPublicKeyInfo signed.
    pub fn sign_log(&self) -> Vec<(std::time::Instant, [u8; 32])> {
        self.state
            .sign_log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Waits until the server has stopped (after [`Running::shutdown`]).
    pub async fn stopped(mut self) {
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The `authsign` and `info` decisions without the HTTP server, for tests that feed request
/// bodies straight in (tests/fuzz_requests.rs). The server reads at most [`MAX_BODY`] bytes
/// of a body before deciding; callers keep to that cap.
pub struct Decisions(AppState);

impl Decisions {
    /// The CA `config` describes, built as [`spawn`] builds it.
    pub fn new(config: &Config, now: OffsetDateTime) -> anyhow::Result<Decisions> {
        let policy = config.validate()?;
        let ca = Ca::build(config, now)?;
        Ok(Decisions(AppState::new(policy, ca)))
    }

    /// `authsign`: the certificate PEM, or the refusal's HTTP status and message.
    pub fn authsign(&self, body: &[u8], now: OffsetDateTime) -> Result<String, (u16, String)> {
        self.0
            .authsign(body, now)
            .map(|signed| signed.certificate)
            .map_err(|r| (r.status.as_u16(), r.message))
    }

    /// `info`: the label's certificate PEM, or the refusal's HTTP status and message.
    pub fn info(&self, body: &[u8]) -> Result<String, (u16, String)> {
        self.0
            .info(body)
            .map(|info| info.certificate)
            .map_err(|r| (r.status.as_u16(), r.message))
    }
}

/// Builds the CA, writes its files when `config.dir` is set, and serves until shut down.
pub async fn spawn(config: Config) -> anyhow::Result<Running> {
    // aws-lc-rs is the only provider compiled in; another caller may have installed it already.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let policy = config.validate()?;
    let now = OffsetDateTime::now_utc();
    let ca = Ca::build(&config, now)?;
    let tls = match config.tls {
        true => Some(TlsMaterial::generate(&config.tls_hosts, now)?),
        false => None,
    };
    let files = match &config.dir {
        Some(dir) => Some(write_files(dir, &ca, tls.as_ref())?),
        None => None,
    };
    let listener = TcpListener::bind(&config.listen)
        .await
        .with_context(|| format!("listen on {}", config.listen))?;
    let addr = listener.local_addr()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{}", reachable(addr));
    let root_pem = ca.root.pem.clone();
    let intermediates = config
        .labels
        .iter()
        .filter_map(|label| Some((label.name.clone(), ca.signers.get(&label.name)?.cert.pem.clone())))
        .collect();
    let tls_ca_pem = tls.as_ref().map(|t| t.ca.pem.clone());
    let acceptor = match &tls {
        Some(material) => Some(tls::acceptor(material).context("TLS configuration")?),
        None => None,
    };
    let state = Arc::new(AppState::new(policy, ca));
    let app = handlers::router(state.clone());
    let (stop, mut stopped) = watch::channel(false);
    let shutdown = async move {
        // An error means the Running is gone, which also means stop.
        let _ = stopped.wait_for(|stop| *stop).await;
    };
    let server = match acceptor {
        None => tokio::spawn(log_exit(
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .into_future(),
        )),
        Some(acceptor) => {
            let listener = tls::TlsListener::new(listener, acceptor)?;
            tokio::spawn(log_exit(
                axum::serve(listener, app)
                    .with_graceful_shutdown(shutdown)
                    .into_future(),
            ))
        }
    };
    tracing::info!(%url, "simple-cfssl listening");
    Ok(Running {
        url,
        addr,
        root_pem,
        intermediates,
        tls_ca_pem,
        files,
        state,
        stop,
        server: Some(server),
    })
}

async fn log_exit(server: impl Future<Output = std::io::Result<()>>) {
    if let Err(err) = server.await {
        tracing::error!(error = %err, "server failed");
    }
}

/// The address clients should use: a wildcard listen address is reachable on loopback.
fn reachable(addr: SocketAddr) -> SocketAddr {
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, addr.port())
}

fn write_files(dir: &Path, ca: &Ca, tls: Option<&TlsMaterial>) -> anyhow::Result<CaFiles> {
    let write = |path: PathBuf, pem: &str| -> anyhow::Result<PathBuf> {
        std::fs::write(&path, pem).with_context(|| format!("write {}", path.display()))?;
        Ok(path)
    };
    let labels_dir = dir.join("labels");
    std::fs::create_dir_all(&labels_dir).with_context(|| format!("create {}", labels_dir.display()))?;
    let root = write(dir.join("root.pem"), &ca.root.pem)?;
    let tls_ca = match tls {
        Some(tls) => Some(write(dir.join("tls-ca.pem"), &tls.ca.pem)?),
        None => None,
    };
    let mut labels = Vec::new();
    for (label, signer) in &ca.signers {
        let path = write(labels_dir.join(format!("{label}.pem")), &signer.cert.pem)?;
        labels.push((label.clone(), path));
    }
    Ok(CaFiles { root, tls_ca, labels })
}
