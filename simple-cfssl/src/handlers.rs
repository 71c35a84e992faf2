//! The HTTP API: multirootca's `authsign` and `info`, plus `health` as `cfssl serve` has it.
//! Statuses, codes, messages, content types and check order follow Debian's multirootca:
//!
//! | step | authsign refuses with |
//! |---|---|
//! | method is not POST | 405 `only POST is permitted` |
//! | outer or inner body malformed | 400, Go's own JSON or base64 error text |
//! | unknown label (an empty one means the default label) | 400 `bad request` |
//! | unknown profile (an empty one means `default`) | 400 `invalid profile` |
//! | profile has no key | 401 `authorisation required` |
//! | token does not match | 400 `invalid token` |
//! | empty CSR | 400 `invalid request` |
//! | CSR unusable | 400 `bad request` (the reason is logged) |
//!
//! authsign errors carry code 1; `info` and `health` errors carry the HTTP status as code.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use serde::Serialize;
use time::OffsetDateTime;

use crate::ca::Ca;
use crate::ca::bundle::Bundle;
use crate::ca::leaf::LeafRequest;
use crate::config::Policy;
use crate::wire::request::{self, DecodeError};
use crate::wire::response::{Envelope, to_go_json};

pub const AUTHSIGN: &str = "/api/v1/cfssl/authsign";
pub const INFO: &str = "/api/v1/cfssl/info";
pub const HEALTH: &str = "/api/v1/cfssl/health";

/// Bodies beyond this are refused before any parsing.
pub const MAX_BODY: usize = 1 << 20;

/// multirootca's authsign handler uses this code for every refusal.
const AUTHSIGN_CODE: u32 = 1;

const TEXT: &str = "text/plain; charset=utf-8";
const JSON: &str = "application/json";

pub struct AppState {
    pub policy: Policy,
    pub ca: Ca,
    pub issued: AtomicU64,
    /// Every HTTP request received, whatever its path or answer.
    pub requests: AtomicU64,
    pub available: AtomicBool,
    /// Milliseconds each authsign waits before it is answered (a slow CA); 0 by default.
    pub sign_delay_ms: AtomicU64,
    /// Signatures per public key, by the SHA-256 of its SubjectPublicKeyInfo: how often each
    /// request (each has a key of its own) was signed.
    pub signed_keys: Mutex<HashMap<[u8; 32], u32>>,
    /// When each certificate was signed, with the SHA-256 of its SubjectPublicKeyInfo, in
    /// order: how fast and in which order a client's requests reached the CA.
    pub sign_log: Mutex<Vec<(std::time::Instant, [u8; 32])>>,
}

impl AppState {
    pub fn new(policy: Policy, ca: Ca) -> AppState {
        AppState {
            policy,
            ca,
            issued: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            available: AtomicBool::new(true),
            sign_delay_ms: AtomicU64::new(0),
            signed_keys: Mutex::default(),
            sign_log: Mutex::default(),
        }
    }

    fn count_key(&self, leaf_der: &[u8]) {
        use sha2::Digest as _;
        use x509_parser::prelude::FromDer as _;
        let Ok((_, cert)) = x509_parser::certificate::X509Certificate::from_der(leaf_der) else {
            return;
        };
        let digest: [u8; 32] = sha2::Sha256::digest(cert.public_key().raw).into();
        let mut keys = self.signed_keys.lock().unwrap_or_else(|e| e.into_inner());
        *keys.entry(digest).or_default() += 1;
        let mut log = self.sign_log.lock().unwrap_or_else(|e| e.into_inner());
        log.push((std::time::Instant::now(), digest));
    }

    /// How many certificates were signed for the DER SubjectPublicKeyInfo `spki`.
    pub fn signatures_for(&self, spki: &[u8]) -> u32 {
        use sha2::Digest as _;
        let digest: [u8; 32] = sha2::Sha256::digest(spki).into();
        let keys = self.signed_keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.get(&digest).copied().unwrap_or(0)
    }
}

pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route(AUTHSIGN, any(authsign))
        .route(INFO, any(info))
        .route(HEALTH, any(health))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state.clone(), outage))
        .with_state(state)
}

/// A refusal: HTTP status and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: StatusCode,
    pub message: String,
}

impl Refusal {
    fn new(status: StatusCode, message: impl Into<String>) -> Refusal {
        Refusal {
            status,
            message: message.into(),
        }
    }

    fn bad_request(message: impl Into<String>) -> Refusal {
        Refusal::new(StatusCode::BAD_REQUEST, message)
    }
}

impl From<DecodeError> for Refusal {
    fn from(err: DecodeError) -> Refusal {
        Refusal::bad_request(err.0)
    }
}

/// `result` of a successful authsign.
#[derive(Debug, Serialize)]
pub struct Signed {
    pub certificate: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bundle: Option<Bundle>,
}

/// `result` of `/info`.
#[derive(Debug, Serialize)]
pub struct Info {
    /// The label's CA certificate, without its trailing newline.
    pub certificate: String,
    pub usages: Vec<String>,
    pub expiry: String,
}

#[derive(Debug, Serialize)]
struct Health {
    healthy: bool,
}

impl AppState {
    /// The authsign decision, in multirootca's order.
    pub fn authsign(&self, body: &[u8], now: OffsetDateTime) -> Result<Signed, Refusal> {
        let outer = request::auth_request(body)?;
        let inner = request::sign_request(&outer.request, self.policy.bundle_support)?;
        let label = self.policy.label(&inner.label);
        let signer = self
            .ca
            .signers
            .get(label)
            .ok_or_else(|| Refusal::bad_request("bad request"))?;
        let profile = self
            .policy
            .sign_profile(&inner.profile)
            .ok_or_else(|| Refusal::bad_request("invalid profile"))?;
        let key = profile
            .auth
            .as_ref()
            .ok_or_else(|| Refusal::new(StatusCode::UNAUTHORIZED, "authorisation required"))?;
        if !key.verify(&outer.request, &outer.token) {
            return Err(Refusal::bad_request("invalid token"));
        }
        if inner.certificate_request.is_empty() {
            return Err(Refusal::bad_request("invalid request"));
        }
        let leaf_request = LeafRequest {
            csr_pem: &inner.certificate_request,
            hosts: inner.hosts.as_deref(),
            subject: inner.subject.as_ref(),
            extensions: inner.extensions,
        };
        let leaf = signer.sign(&leaf_request, profile, now).map_err(|err| {
            tracing::info!(label, error = %err, "signature failed");
            Refusal::bad_request("bad request")
        })?;
        let bundle = match inner.bundle {
            true => Some(Bundle::new(&leaf, signer, &self.ca.root).map_err(|err| {
                tracing::warn!(label, error = %err, "bundling failed");
                Refusal::new(StatusCode::INTERNAL_SERVER_ERROR, "error creating bundle")
            })?),
            false => None,
        };
        self.issued.fetch_add(1, Ordering::Relaxed);
        self.count_key(&leaf.der);
        tracing::info!(label, profile = %inner.profile, bundle = inner.bundle, "signed a certificate");
        Ok(Signed {
            certificate: leaf.pem,
            bundle,
        })
    }

    pub fn info(&self, body: &[u8]) -> Result<Info, Refusal> {
        let request = request::info_request(body)?;
        let label = self.policy.label(&request.label);
        let signer = self
            .ca
            .signers
            .get(label)
            .ok_or_else(|| Refusal::bad_request("bad label"))?;
        let (usages, expiry) = match self.policy.info_profile(&request.profile) {
            Some(profile) => (profile.usage_names.clone(), profile.expiry_text.clone()),
            None => (Vec::new(), String::new()),
        };
        Ok(Info {
            certificate: signer.cert.pem.trim_end().to_string(),
            usages,
            expiry,
        })
    }
}

/// Writes `body` as Go's handlers do: `nosniff` comes with `http.Error`, which multirootca's
/// own authsign handler does not use.
fn respond(status: StatusCode, content_type: &'static str, nosniff: bool, body: Vec<u8>) -> Response {
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if nosniff {
        headers.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
    }
    response
}

fn authsign_refusal(refusal: Refusal) -> Response {
    let body = to_go_json(&Envelope::failure(AUTHSIGN_CODE, refusal.message));
    respond(refusal.status, TEXT, false, body)
}

/// cfssl's generic API handler: the HTTP status doubles as the error code.
fn api_refusal(refusal: Refusal) -> Response {
    let body = to_go_json(&Envelope::failure(
        u32::from(refusal.status.as_u16()),
        refusal.message,
    ));
    respond(refusal.status, TEXT, true, body)
}

fn method_not_allowed(method: &Method) -> Refusal {
    Refusal::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("Method is not allowed:\"{method}\""),
    )
}

/// Reads the whole body, up to [`MAX_BODY`].
async fn read_body(body: Body) -> Result<Vec<u8>, Refusal> {
    axum::body::to_bytes(body, MAX_BODY)
        .await
        .map(|bytes| bytes.to_vec())
        .map_err(|_| Refusal::new(StatusCode::PAYLOAD_TOO_LARGE, "request body too large"))
}

async fn authsign(State(state): State<Arc<AppState>>, method: Method, body: Body) -> Response {
    if method != Method::POST {
        let refusal = Refusal::new(StatusCode::METHOD_NOT_ALLOWED, "only POST is permitted");
        return authsign_refusal(refusal);
    }
    let delay = state.sign_delay_ms.load(Ordering::Relaxed);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    let result = match read_body(body).await {
        Ok(body) => state.authsign(&body, OffsetDateTime::now_utc()),
        Err(refusal) => Err(refusal),
    };
    match result {
        // Go sniffs the JSON as text/plain, as it does for the errors.
        Ok(signed) => respond(
            StatusCode::OK,
            TEXT,
            false,
            to_go_json(&Envelope::success(signed)),
        ),
        Err(refusal) => {
            tracing::info!(status = %refusal.status, message = %refusal.message, "authsign refused");
            authsign_refusal(refusal)
        }
    }
}

async fn info(State(state): State<Arc<AppState>>, method: Method, body: Body) -> Response {
    if method != Method::POST {
        return api_refusal(method_not_allowed(&method));
    }
    let result = match read_body(body).await {
        Ok(body) => state.info(&body),
        Err(refusal) => Err(refusal),
    };
    match result {
        Ok(info) => respond(StatusCode::OK, JSON, false, to_go_json(&Envelope::success(info))),
        Err(refusal) => api_refusal(refusal),
    }
}

/// `cfssl serve`'s health check; multirootca itself has none.
async fn health(method: Method) -> Response {
    if method != Method::GET {
        return api_refusal(method_not_allowed(&method));
    }
    let body = to_go_json(&Envelope::success(Health { healthy: true }));
    respond(StatusCode::OK, JSON, false, body)
}

async fn not_found() -> Response {
    respond(
        StatusCode::NOT_FOUND,
        TEXT,
        true,
        b"404 page not found\n".to_vec(),
    )
}

/// While unavailable, every request gets what a proxy in front of a dead CA would send.
/// Counts every request first, so that a test can tell whether a client reached the CA at all.
async fn outage(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    state.requests.fetch_add(1, Ordering::Relaxed);
    if state.available.load(Ordering::Relaxed) {
        return next.run(request).await;
    }
    let body =
        b"<html><body><h1>503 Service Unavailable</h1>simple-cfssl is set unavailable.</body></html>\n";
    respond(StatusCode::SERVICE_UNAVAILABLE, "text/html", false, body.to_vec())
}
