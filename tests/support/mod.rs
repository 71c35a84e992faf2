//! Test support shared by the integration tests: CAs to talk to (a real multirootca started
//! from Debian's golang-cfssl, and simple-cfssl in-process), misbehaving servers, CSRs and an
//! independent chain check with `openssl verify`.
#![allow(dead_code)]

pub mod apimock;

use std::process::Command;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

pub const KEY_HEX: &str = "0123456789abcdef0123456789abcdef";
pub const WRONG_KEY_HEX: &str = "ffffffffffffffffffffffffffffffff";

/// Which CA implementation a conformance case runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Multirootca,
    SimpleCfssl,
}

/// A running CA with labels `intermediate1`/`intermediate2` and profiles default, server,
/// server-short, client (keyed with [`KEY_HEX`]) and noauth.
pub struct Ca {
    pub backend: Backend,
    pub url: String,
    pub root_pem: String,
    /// The CA to trust for TLS, when the CA listens on https.
    pub tls_ca_pem: Option<String>,
    pub supports_bundle: bool,
    guard: Guard,
}

enum Guard {
    Multirootca(simple_cfssl::multirootca::Multirootca),
    Simple(Option<simple_cfssl::Running>),
}

/// A loopback port that refuses connections for as long as this lives: bound, never listening,
/// so no other process can take it (a port found free and released could be).
pub struct ClosedPort(tokio::net::TcpSocket);

impl ClosedPort {
    pub fn new() -> ClosedPort {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        ClosedPort(socket)
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.0.local_addr().unwrap())
    }
}

impl Ca {
    pub async fn start(backend: Backend, tls: bool) -> Ca {
        cfssl_issuer::install_crypto_provider();
        match backend {
            Backend::Multirootca => start_multirootca(tls),
            Backend::SimpleCfssl => start_simple(tls).await,
        }
    }

    pub fn issued_count(&self) -> Option<u64> {
        match &self.guard {
            Guard::Simple(Some(running)) => Some(running.issued_count()),
            _ => None,
        }
    }
}

fn start_multirootca(tls: bool) -> Ca {
    let lab = simple_cfssl::multirootca::Multirootca::start(tls).expect("start multirootca");
    Ca {
        backend: Backend::Multirootca,
        url: lab.url.clone(),
        tls_ca_pem: tls.then(|| lab.root_pem.clone()),
        root_pem: lab.root_pem.clone(),
        supports_bundle: false,
        guard: Guard::Multirootca(lab),
    }
}

async fn start_simple(tls: bool) -> Ca {
    let mut config = simple_cfssl::Config::test_default(KEY_HEX);
    config.tls = tls;
    let running = simple_cfssl::spawn(config).await.expect("start simple-cfssl");
    Ca {
        backend: Backend::SimpleCfssl,
        url: running.url.clone(),
        root_pem: running.root_pem.clone(),
        tls_ca_pem: running.tls_ca_pem.clone(),
        supports_bundle: true,
        guard: Guard::Simple(Some(running)),
    }
}

/// A fresh ECDSA key and a PEM CSR for `dns`.
pub fn csr(dns: &str) -> (String, rcgen::KeyPair) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec![dns.to_string()]).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, dns);
    (params.serialize_request(&key).unwrap().pem().unwrap(), key)
}

/// A PEM CSR for `dns` made with `key`, signed with the key's own algorithm.
pub fn csr_with(dns: &str, key: rcgen::KeyPair) -> (String, rcgen::KeyPair) {
    let mut params = rcgen::CertificateParams::new(vec![dns.to_string()]).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, dns);
    (params.serialize_request(&key).unwrap().pem().unwrap(), key)
}

/// The keys cert-manager makes beyond P-256, each with the hash cert-manager signs it with.
pub fn other_cert_manager_keys() -> Vec<(&'static str, rcgen::KeyPair)> {
    use rcgen::{KeyPair, RsaKeySize};
    vec![
        (
            "ECDSA P-384",
            KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).unwrap(),
        ),
        (
            "ECDSA P-521",
            KeyPair::generate_for(&rcgen::PKCS_ECDSA_P521_SHA512).unwrap(),
        ),
        (
            "RSA 4096",
            KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA512, RsaKeySize::_4096).unwrap(),
        ),
    ]
}

/// Verifies `chain_pem` (leaf first) to `root_pem` with the openssl CLI, independent of our
/// own chain code. Returns openssl's output on failure.
pub fn openssl_verify(chain_pem: &str, root_pem: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let blocks = pem::parse_many(chain_pem).unwrap();
    let write = |name: &str, blocks: &[pem::Pem]| {
        let path = dir.path().join(name);
        std::fs::write(&path, blocks.iter().map(pem::encode).collect::<String>()).unwrap();
        path
    };
    let leaf = write("leaf.pem", &blocks[..1]);
    let untrusted = write("untrusted.pem", &blocks[1..]);
    let root = dir.path().join("root.pem");
    std::fs::write(&root, root_pem).unwrap();
    let mut cmd = Command::new("openssl");
    cmd.arg("verify").arg("-CAfile").arg(&root);
    if blocks.len() > 1 {
        cmd.arg("-untrusted").arg(&untrusted);
    }
    let out = cmd.arg(&leaf).output().expect("openssl");
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// How a fake server misbehaves.
#[derive(Debug, Clone, Copy)]
pub enum Misbehaviour {
    /// Accepts the connection and never answers.
    Hang,
    /// Answers 200 with a body that is not JSON.
    NotJson,
    /// Answers 200 with a body of this many bytes, streamed without a length.
    Oversized(usize),
    /// Answers 503 with an HTML page, as a proxy in front of a dead CA would.
    ServiceUnavailable,
    /// Answers this status with [`proxy_page`], as a proxy or ingress in front of a CA does
    /// (404 for a wrong path, 413 for a body over its limit).
    Proxy(u16),
}

/// The HTML page a [`Misbehaviour::Proxy`] answers with: longer than the 120 bytes an error
/// message quotes.
pub fn proxy_page(status: u16) -> String {
    format!(
        "<html><head><title>{status}</title></head><body><h1>{status} from the proxy</h1>{}</body></html>",
        "p".repeat(200)
    )
}

/// A loopback server that records the head of every request it gets and answers each with
/// [`Misbehaviour::Proxy`]`(503)`; returns its base URL and the recorded heads.
pub async fn recording_server() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let record = record.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 256 * 1024];
                let n = sock.read(&mut buf).await.unwrap_or(0);
                let text = String::from_utf8_lossy(&buf[..n]);
                let head = text.split("\r\n\r\n").next().unwrap_or_default().to_string();
                record.lock().unwrap().push(head);
                let _ = sock.write_all(proxy_answer(503).as_bytes()).await;
            });
        }
    });
    (url, seen)
}

fn proxy_answer(status: u16) -> String {
    let body = proxy_page(status);
    format!(
        "HTTP/1.1 {status} Proxy\r\ncontent-type: text/html\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Starts a loopback server that misbehaves on every connection; returns its base URL.
pub async fn misbehaving_server(how: Misbehaviour) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                let _ = sock.read(&mut buf).await;
                match how {
                    Misbehaviour::Hang => tokio::time::sleep(std::time::Duration::from_secs(3600)).await,
                    Misbehaviour::NotJson => {
                        let body = "<html>hello</html>";
                        let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
                        let _ = sock.write_all(format!("{head}{body}").as_bytes()).await;
                    }
                    Misbehaviour::ServiceUnavailable => {
                        let body = "<html>503 Service Unavailable</html>";
                        let head = format!(
                            "HTTP/1.1 503 Service Unavailable\r\ncontent-length: {}\r\n\r\n",
                            body.len()
                        );
                        let _ = sock.write_all(format!("{head}{body}").as_bytes()).await;
                    }
                    Misbehaviour::Proxy(status) => {
                        let _ = sock.write_all(proxy_answer(status).as_bytes()).await;
                    }
                    Misbehaviour::Oversized(n) => {
                        let _ = sock
                            .write_all(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n")
                            .await;
                        let chunk = vec![b'x'; 16 * 1024];
                        let mut sent = 0;
                        while sent < n {
                            if sock.write_all(&chunk).await.is_err() {
                                return;
                            }
                            sent += chunk.len();
                        }
                    }
                }
            });
        }
    });
    url
}
