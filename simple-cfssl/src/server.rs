//! The multirootca HTTP API: `authsign`, `info`, plus `health` as `cfssl serve` has it. Statuses,
//! codes and messages follow the Debian multirootca build, step by step.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::ca::Ca;
use crate::config::Config;

pub struct AppState {
    pub config: Config,
    pub ca: Ca,
    pub issued: AtomicU64,
    pub available: AtomicBool,
}

/// Requests larger than this are refused, as any sane CA front end does.
const MAX_BODY: usize = 1 << 20;

pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/api/v1/cfssl/authsign", any(authsign))
        .route("/api/v1/cfssl/info", any(info))
        .route("/api/v1/cfssl/health", any(health))
        .fallback(|| async { (StatusCode::NOT_FOUND, "404 page not found\n") })
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(state)
}

fn envelope(status: StatusCode, result: Value, errors: Value, content_type: &'static str) -> Response {
    let body = json!({"success": status.is_success(), "result": result, "errors": errors, "messages": []});
    let mut response = (status, format!("{body}\n")).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

const TEXT: &str = "text/plain; charset=utf-8";
const JSON: &str = "application/json";

/// multirootca's authsign handler reports every error with code 1, as text/plain.
fn refuse(status: StatusCode, message: &str) -> Response {
    envelope(
        status,
        Value::Null,
        json!([{"code": 1, "message": message}]),
        TEXT,
    )
}

fn outage() -> Response {
    (StatusCode::SERVICE_UNAVAILABLE, "upstream unavailable\n").into_response()
}

#[derive(Deserialize)]
struct AuthSignRequest {
    #[serde(default)]
    token: String,
    #[serde(default)]
    request: String,
}

#[derive(Deserialize, Default)]
struct SignRequest {
    #[serde(default)]
    certificate_request: String,
    #[serde(default)]
    label: String,
    #[serde(default)]
    profile: String,
    #[serde(default)]
    bundle: bool,
}

/// Go's base64 error text: `illegal base64 data at input byte N`.
fn base64_message(err: base64::DecodeError) -> String {
    let at = match err {
        base64::DecodeError::InvalidByte(at, _) | base64::DecodeError::InvalidLastSymbol(at, _) => at,
        base64::DecodeError::InvalidLength(at) => at,
        base64::DecodeError::InvalidPadding => 0,
    };
    format!("illegal base64 data at input byte {at}")
}

/// Go's json error text for the common cases a client can trigger.
fn json_message(err: &serde_json::Error, input: &[u8]) -> String {
    let first = input.iter().copied().find(|b| !b.is_ascii_whitespace());
    match (err.classify(), first) {
        (serde_json::error::Category::Eof, None) => "unexpected end of JSON input".into(),
        (serde_json::error::Category::Syntax, Some(b)) if b != b'{' => {
            format!("invalid character '{}' looking for beginning of value", b as char)
        }
        _ => err.to_string(),
    }
}

async fn authsign(State(state): State<Arc<AppState>>, method: Method, body: Bytes) -> Response {
    if !state.available.load(Ordering::Relaxed) {
        return outage();
    }
    if method != Method::POST {
        return refuse(StatusCode::METHOD_NOT_ALLOWED, "only POST is permitted");
    }
    let outer: AuthSignRequest = match serde_json::from_slice(&body) {
        Ok(o) => o,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, &json_message(&e, &body)),
    };
    let inner_bytes = match STANDARD.decode(outer.request.as_bytes()) {
        Ok(b) => b,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, &base64_message(e)),
    };
    let mut inner: SignRequest = match serde_json::from_slice(&inner_bytes) {
        Ok(r) => r,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, &json_message(&e, &inner_bytes)),
    };
    if inner.label.is_empty() {
        inner.label = state.config.default_label.clone().unwrap_or_default();
    }
    if !state.ca.signers.contains_key(&inner.label) {
        return refuse(StatusCode::BAD_REQUEST, "bad request");
    }
    let Some(profile) = state.config.profile(&inner.profile) else {
        return refuse(StatusCode::BAD_REQUEST, "invalid profile");
    };
    let Some(key_hex) = &profile.auth_key else {
        return refuse(StatusCode::UNAUTHORIZED, "authorisation required");
    };
    if !token_valid(key_hex, &outer.token, &inner_bytes) {
        return refuse(StatusCode::BAD_REQUEST, "invalid token");
    }
    if inner.certificate_request.is_empty() {
        return refuse(StatusCode::BAD_REQUEST, "invalid request");
    }
    let leaf = match state.ca.sign(&inner.label, &inner.certificate_request, profile) {
        Ok(pem) => pem,
        Err(err) => {
            tracing::info!(label = %inner.label, error = %err, "signing failed");
            return refuse(StatusCode::BAD_REQUEST, "bad request");
        }
    };
    state.issued.fetch_add(1, Ordering::Relaxed);
    let mut result = json!({ "certificate": leaf });
    if inner.bundle && state.config.bundle_support {
        let intermediate = &state.ca.signers[&inner.label].cert_pem;
        result["bundle"] = json!({
            "bundle": format!("{leaf}{intermediate}"),
            "root": state.ca.root_pem,
            "crt": leaf,
            "status": {"code": 0},
        });
    }
    envelope(StatusCode::OK, result, json!([]), TEXT)
}

/// HMAC-SHA256 over the exact inner bytes, compared in constant time.
fn token_valid(key_hex: &str, token_b64: &str, message: &[u8]) -> bool {
    let (Ok(key), Ok(token)) = (hex::decode(key_hex.trim()), STANDARD.decode(token_b64)) else {
        return false;
    };
    let Ok(mut mac) = <Hmac<Sha256> as KeyInit>::new_from_slice(&key) else {
        return false;
    };
    mac.update(message);
    token.len() == 32 && mac.verify_slice(&token).is_ok()
}

#[derive(Deserialize, Default)]
struct InfoRequest {
    #[serde(default)]
    label: String,
    #[serde(default)]
    profile: String,
}

/// Generic cfssl handlers report errors with the HTTP status as the code.
fn info_error(status: StatusCode, message: &str) -> Response {
    envelope(
        status,
        Value::Null,
        json!([{"code": status.as_u16(), "message": message}]),
        TEXT,
    )
}

async fn info(State(state): State<Arc<AppState>>, method: Method, body: Bytes) -> Response {
    if !state.available.load(Ordering::Relaxed) {
        return outage();
    }
    if method != Method::POST {
        return info_error(
            StatusCode::METHOD_NOT_ALLOWED,
            &format!("Method is not allowed:\"{method}\""),
        );
    }
    let mut request: InfoRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return info_error(StatusCode::BAD_REQUEST, &json_message(&e, &body)),
    };
    if request.label.is_empty() {
        request.label = state.config.default_label.clone().unwrap_or_default();
    }
    let Some(signer) = state.ca.signers.get(&request.label) else {
        return info_error(StatusCode::BAD_REQUEST, "bad label");
    };
    // multirootca falls back to the default profile for an unknown one.
    let profile = state
        .config
        .profile(&request.profile)
        .or_else(|| state.config.profile("default"));
    let (usages, expiry) = profile.map_or((vec![], String::new()), |p| (p.usages.clone(), p.expiry.clone()));
    envelope(
        StatusCode::OK,
        json!({"certificate": signer.cert_pem.trim_end(), "usages": usages, "expiry": expiry}),
        json!([]),
        JSON,
    )
}

async fn health(State(state): State<Arc<AppState>>) -> Response {
    if !state.available.load(Ordering::Relaxed) {
        return outage();
    }
    envelope(StatusCode::OK, json!({"healthy": true}), json!([]), JSON)
}
