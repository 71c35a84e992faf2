//! simple-cfssl: a small CA server that speaks the CFSSL `multirootca` API, for tests, demos and
//! the e2e suite. Labels are intermediates under one generated root; profiles carry expiry,
//! usages and an HMAC key; `bundle: true` is answered as cfssl PR #1218 does.

pub mod ca;
pub mod config;
mod server;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

pub use config::{Config, Profile};
use server::AppState;

/// A running server. Dropping it does not stop it; call [`Running::shutdown`].
pub struct Running {
    /// Base URL, `http(s)://127.0.0.1:PORT`.
    pub url: String,
    pub addr: SocketAddr,
    /// PEM of the root every label chains to.
    pub root_pem: String,
    /// `(label, PEM)` of each intermediate.
    pub intermediates: Vec<(String, String)>,
    /// PEM of the CA that signed the TLS server certificate, when TLS is on.
    pub tls_ca_pem: Option<String>,
    state: Arc<AppState>,
    stop: watch::Sender<bool>,
}

impl Running {
    pub fn shutdown(&self) {
        let _ = self.stop.send(true);
    }

    /// Certificates issued so far.
    pub fn issued_count(&self) -> u64 {
        self.state.issued.load(Ordering::Relaxed)
    }

    /// `false` simulates an outage: every request is answered 503 with a body that is not CFSSL's.
    pub fn set_available(&self, up: bool) {
        self.state.available.store(up, Ordering::Relaxed);
    }
}

/// Generates the CA, writes its files when `config.dir` is set, and serves until shut down.
pub async fn spawn(config: Config) -> anyhow::Result<Running> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = ca::Ca::generate(&config.labels)?;
    let tls = if config.tls {
        Some(ca::tls_material()?)
    } else {
        None
    };
    if let Some(dir) = &config.dir {
        write_files(dir, &ca, tls.as_ref())?;
    }
    let listener = TcpListener::bind(&config.listen)
        .await
        .with_context(|| format!("listen on {}", config.listen))?;
    let addr = listener.local_addr()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{addr}");
    let intermediates = ca
        .signers
        .iter()
        .map(|(label, s)| (label.clone(), s.cert_pem.clone()))
        .collect();
    let root_pem = ca.root_pem.clone();
    let state = Arc::new(AppState {
        config,
        ca,
        issued: AtomicU64::new(0),
        available: AtomicBool::new(true),
    });
    let app = server::router(state.clone());
    let (stop, mut stopped) = watch::channel(false);
    let shutdown = async move {
        let _ = stopped.wait_for(|s| *s).await;
    };
    let tls_ca_pem = tls.as_ref().map(|t| t.ca_pem.clone());
    match tls {
        None => {
            tokio::spawn(async move { axum::serve(listener, app).with_graceful_shutdown(shutdown).await });
        }
        Some(material) => {
            let listener = TlsListener {
                tcp: listener,
                acceptor: acceptor(&material)?,
            };
            tokio::spawn(async move { axum::serve(listener, app).with_graceful_shutdown(shutdown).await });
        }
    }
    Ok(Running {
        url,
        addr,
        root_pem,
        intermediates,
        tls_ca_pem,
        state,
        stop,
    })
}

fn write_files(dir: &std::path::Path, ca: &ca::Ca, tls: Option<&ca::TlsMaterial>) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    std::fs::write(dir.join("root.pem"), &ca.root_pem)?;
    for (label, signer) in &ca.signers {
        std::fs::write(dir.join(format!("{label}.pem")), &signer.cert_pem)?;
    }
    if let Some(tls) = tls {
        std::fs::write(dir.join("tls-ca.pem"), &tls.ca_pem)?;
    }
    Ok(())
}

fn acceptor(material: &ca::TlsMaterial) -> anyhow::Result<TlsAcceptor> {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(material.cert_der.clone())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(material.key_der.clone())),
        )?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// A TCP listener that completes the TLS handshake before handing the stream to axum.
struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((stream, addr)) = self.tcp.accept().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            // A client that never finishes its handshake must not stall the others for long.
            match tokio::time::timeout(Duration::from_secs(5), self.acceptor.accept(stream)).await {
                Ok(Ok(tls)) => return (tls, addr),
                Ok(Err(err)) => tracing::debug!(%addr, error = %err, "TLS handshake failed"),
                Err(_) => tracing::debug!(%addr, "TLS handshake timed out"),
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}
