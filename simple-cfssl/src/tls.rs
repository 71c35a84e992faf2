//! HTTPS: a listener that completes TLS handshakes concurrently (a slow client holds up no one)
//! and answers plain HTTP on the TLS port the way Go's server does.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::ca::TlsMaterial;

/// A client that has not finished its handshake by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What Go's `net/http` sends when a TLS port receives plain HTTP.
const PLAIN_HTTP_REPLY: &[u8] =
    b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";

pub fn acceptor(material: &TlsMaterial) -> Result<TlsAcceptor, rustls::Error> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(material.cert_der.clone())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(material.key_der.clone())),
        )?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Hands axum connections whose TLS handshake is done. Dropping it stops accepting.
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, acceptor: TlsAcceptor) -> std::io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let (send, ready) = mpsc::channel(64);
        tokio::spawn(accept_loop(tcp, acceptor, send));
        Ok(TlsListener { ready, local })
    }
}

async fn accept_loop(
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    loop {
        let accepted = tokio::select! {
            // The server is gone: release the port.
            () = ready.closed() => return,
            accepted = tcp.accept() => accepted,
        };
        let (stream, addr) = match accepted {
            Ok(pair) => pair,
            Err(err) => {
                // Typically out of file descriptors; waiting lets some close.
                tracing::debug!(error = %err, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(stream, acceptor)).await {
                Ok(Some(tls)) => {
                    let _ = ready.send((tls, addr)).await;
                }
                Ok(None) => {}
                Err(_) => tracing::debug!(%addr, "TLS handshake timed out"),
            }
        });
    }
}

async fn handshake(mut stream: TcpStream, acceptor: TlsAcceptor) -> Option<TlsStream<TcpStream>> {
    if speaks_plain_http(&stream).await {
        let _ = stream.write_all(PLAIN_HTTP_REPLY).await;
        let _ = stream.shutdown().await;
        return None;
    }
    match acceptor.accept(stream).await {
        Ok(tls) => Some(tls),
        Err(err) => {
            tracing::debug!(error = %err, "TLS handshake failed");
            None
        }
    }
}

/// Go's test: the first five bytes start an HTTP request rather than a TLS record.
async fn speaks_plain_http(stream: &TcpStream) -> bool {
    let mut head = [0u8; 5];
    loop {
        let Ok(n) = stream.peek(&mut head).await else {
            return false;
        };
        // 0x16 opens a TLS handshake record.
        if n == 0 || head[0] == 0x16 {
            return false;
        }
        if n == head.len() {
            return matches!(&head, b"GET /" | b"HEAD " | b"POST " | b"PUT /" | b"OPTIO");
        }
        // Fewer bytes so far: peek returns at once while data is pending, so wait a little.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accept loop only ends once this listener is dropped.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
