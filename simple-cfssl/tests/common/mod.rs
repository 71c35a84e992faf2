//! Shared by the integration tests: an HTTP client, signed authsign bodies, CSRs, replies.
#![allow(dead_code)]

use std::process::Command;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

pub const KEY: &str = "0123456789abcdef0123456789abcdef";
pub const WRONG_KEY: &str = "ffffffffffffffffffffffffffffffff";
pub const AUTHSIGN: &str = "/api/v1/cfssl/authsign";
pub const INFO: &str = "/api/v1/cfssl/info";
pub const HEALTH: &str = "/api/v1/cfssl/health";

pub fn http(tls_ca_pem: Option<&str>) -> reqwest::Client {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let mut builder = reqwest::Client::builder().no_proxy();
    if let Some(pem) = tls_ca_pem {
        let certs = reqwest::Certificate::from_pem_bundle(pem.as_bytes()).unwrap();
        builder = builder.tls_certs_only(certs);
    }
    builder.build().unwrap()
}

/// The outer authsign body for `inner` (bytes sent as they are), signed with `key_hex`.
pub fn signed_bytes(inner: &[u8], key_hex: &str) -> Vec<u8> {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&hex::decode(key_hex).unwrap()).unwrap();
    mac.update(inner);
    let token = STANDARD.encode(mac.finalize().into_bytes());
    serde_json::to_vec(&json!({"token": token, "request": STANDARD.encode(inner)})).unwrap()
}

pub fn signed(inner: &Value, key_hex: &str) -> Vec<u8> {
    signed_bytes(&serde_json::to_vec(inner).unwrap(), key_hex)
}

/// An authsign body with a token that is valid base64 but signs nothing.
pub fn unsigned(inner: &Value) -> Vec<u8> {
    let inner = serde_json::to_vec(inner).unwrap();
    serde_json::to_vec(&json!({"token": "AAAA", "request": STANDARD.encode(inner)})).unwrap()
}

/// A CSR for an ECDSA P-256 key with the given subject CN and SANs (names that parse as IP
/// addresses become IP SANs, `x@y` emails, `scheme://` URIs).
pub fn csr(common_name: &str, sans: &[&str]) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::default();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, common_name);
    for san in sans {
        let san = if let Ok(ip) = san.parse() {
            rcgen::SanType::IpAddress(ip)
        } else if san.contains("://") {
            rcgen::SanType::URI(san.to_string().try_into().unwrap())
        } else if san.contains('@') {
            rcgen::SanType::Rfc822Name(san.to_string().try_into().unwrap())
        } else {
            rcgen::SanType::DnsName(san.to_string().try_into().unwrap())
        };
        params.subject_alt_names.push(san);
    }
    params.serialize_request(&key).unwrap().pem().unwrap()
}

/// A reply as the tests compare it.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub nosniff: bool,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// `(code, message)` of the first error.
    pub fn error(&self) -> (i64, String) {
        let body = self.json();
        let error = &body["errors"][0];
        (
            error["code"].as_i64().unwrap(),
            error["message"].as_str().unwrap().to_string(),
        )
    }
}

pub async fn call(http: &reqwest::Client, method: &str, url: &str, body: Vec<u8>) -> Reply {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let response = http.request(method, url).body(body).send().await.unwrap();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let content_type = header("content-type");
    let nosniff = header("x-content-type-options") == "nosniff";
    let status = response.status().as_u16();
    let body = response.bytes().await.unwrap().to_vec();
    Reply {
        status,
        content_type,
        nosniff,
        body,
    }
}

/// Runs openssl with `args`; panics with its output on failure.
pub fn openssl(args: &[&str], dir: &std::path::Path) -> String {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
