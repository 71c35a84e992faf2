//! Failover across an issuer's URLs when a CA hangs: the request goes to the next URL, the sign
//! that may have been taken by the hung CA is counted as a possible duplicate, and the hung URL
//! is tried last afterwards, so later requests do not wait for its timeout. Against the real
//! multirootca and simple-cfssl.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cfssl_issuer::cfssl::{AuthKey, Client, ClientConfig};
use prometheus_client::metrics::counter::Counter;
use support::{Backend, Ca, KEY_HEX, csr};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

/// Long enough for a sign by a CA that answers, on a busy machine, in a debug build: the hung
/// CA costs this much, the others must cost less.
const TIMEOUT: Duration = Duration::from_secs(5);

/// A server that accepts connections, reads the request and never answers; counts connections.
async fn hung_server() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                while sock.read(&mut buf).await.is_ok_and(|n| n > 0) {}
            });
        }
    });
    (url, accepted)
}

fn client(urls: &str, unanswered: &Counter) -> Client {
    let mut config = ClientConfig::new(urls, "intermediate1", AuthKey::from_hex(KEY_HEX).unwrap());
    config.profile = "server".into();
    config.timeout = TIMEOUT;
    config.unanswered_signs = unanswered.clone();
    Client::new(config).unwrap()
}

async fn hung_ca_is_passed_over_and_then_tried_last(backend: Backend) {
    let ca = Ca::start(backend, false).await;
    let (hung, accepted) = hung_server().await;
    let unanswered = Counter::default();
    let client = client(&format!("{hung},{}", ca.url), &unanswered);

    let started = Instant::now();
    let signed = client.sign(csr("one.example.org").0.as_bytes()).await.unwrap();
    assert_eq!(signed.endpoint, ca.url, "signed by the second URL");
    assert!(started.elapsed() >= TIMEOUT, "the hung CA was tried first");
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
    assert_eq!(unanswered.get(), 1, "the unanswered sign is a possible duplicate");

    let started = Instant::now();
    for name in ["two.example.org", "three.example.org"] {
        let signed = client.sign(csr(name).0.as_bytes()).await.unwrap();
        assert_eq!(signed.endpoint, ca.url);
    }
    assert!(
        started.elapsed() < TIMEOUT,
        "later signs went to the answering CA first: {:?}",
        started.elapsed()
    );
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "the hung URL was not tried again"
    );
    assert_eq!(unanswered.get(), 1);
}

async fn refused_connection_fails_over_at_once_and_counts_nothing(backend: Backend) {
    let ca = Ca::start(backend, false).await;
    let closed_port = support::ClosedPort::new();
    let closed = closed_port.url();
    let unanswered = Counter::default();
    let client = client(&format!("{closed},{}", ca.url), &unanswered);
    let started = Instant::now();
    let signed = client.sign(csr("svc.example.org").0.as_bytes()).await.unwrap();
    assert_eq!(signed.endpoint, ca.url);
    assert!(started.elapsed() < TIMEOUT, "{:?}", started.elapsed());
    assert_eq!(unanswered.get(), 0, "nothing was sent to the closed port");
}

async fn a_hung_health_check_is_no_possible_duplicate(backend: Backend) {
    let ca = Ca::start(backend, false).await;
    let (hung, _) = hung_server().await;
    let unanswered = Counter::default();
    let client = client(&format!("{hung},{}", ca.url), &unanswered);
    client.check().await.unwrap();
    assert_eq!(unanswered.get(), 0, "a check carries no CSR");
}

macro_rules! against_both {
    ($($case:ident),* $(,)?) => {
        mod multirootca {
            $(#[tokio::test] async fn $case() { super::$case(super::Backend::Multirootca).await; })*
        }
        mod simple_cfssl {
            $(#[tokio::test] async fn $case() { super::$case(super::Backend::SimpleCfssl).await; })*
        }
    };
}

against_both!(
    hung_ca_is_passed_over_and_then_tried_last,
    refused_connection_fails_over_at_once_and_counts_nothing,
    a_hung_health_check_is_no_possible_duplicate,
);
