//! A loopback HTTP server that answers every request with a redirect, and the place each
//! redirect points at spelled in the request's own path, so that one server serves every row:
//! `POST /307/http/127.0.0.1:8888/api/v1/cfssl/info` is answered `307` with
//! `Location: http://127.0.0.1:8888/api/v1/cfssl/info`. An issuer whose URL is [`via`] the
//! redirector to a CA is redirected to that CA on every call: the CA then sees a request only
//! if the manager follows the redirect.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// A running redirector on 127.0.0.1; dropping it closes its port.
pub struct Redirector {
    pub url: String,
    requests: Arc<AtomicU64>,
    server: tokio::task::JoinHandle<()>,
}

impl Redirector {
    pub async fn start() -> anyhow::Result<Redirector> {
        let requests = Arc::new(AtomicU64::new(0));
        let app = axum::Router::new()
            .route(
                "/{status}/{scheme}/{authority}/{*rest}",
                axum::routing::any(redirect),
            )
            .with_state(requests.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Redirector {
            url,
            requests,
            server,
        })
    }

    /// Requests answered so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
}

/// The base URL under the redirector at `redirector` that redirects with `status` to the same
/// path under `target` (a base URL such as `http://127.0.0.1:8888`).
pub fn via(redirector: &str, status: u16, target: &str) -> String {
    format!("{redirector}/{status}/{}", target.replacen("://", "/", 1))
}

impl Drop for Redirector {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn redirect(
    State(requests): State<Arc<AtomicU64>>,
    Path((status, scheme, authority, rest)): Path<(u16, String, String, String)>,
) -> Response {
    requests.fetch_add(1, Ordering::SeqCst);
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::TEMPORARY_REDIRECT);
    let location = format!("{scheme}://{authority}/{rest}");
    (status, [(header::LOCATION, location)], "redirected").into_response()
}
