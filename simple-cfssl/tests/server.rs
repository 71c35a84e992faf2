//! What simple-cfssl issues and how it behaves beyond multirootca parity.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use x509_parser::prelude::*;

const KEY: &str = "0123456789abcdef0123456789abcdef";

fn authsign_body(inner: Value) -> Vec<u8> {
    let inner = serde_json::to_vec(&inner).unwrap();
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&hex::decode(KEY).unwrap()).unwrap();
    mac.update(&inner);
    let token = STANDARD.encode(mac.finalize().into_bytes());
    serde_json::to_vec(&json!({"token": token, "request": STANDARD.encode(&inner)})).unwrap()
}

fn csr_with_sans() -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["a.example.org".into(), "10.0.0.7".into()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "a.example.org");
    params.serialize_request(&key).unwrap().pem().unwrap()
}

async fn post(url: &str, body: Vec<u8>) -> (u16, Value) {
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let r = http.post(url).body(body).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn leaf_follows_csr_and_profile() {
    let ca = simple_cfssl::spawn(simple_cfssl::Config::test_default(KEY))
        .await
        .unwrap();
    let url = format!("{}/api/v1/cfssl/authsign", ca.url);
    let body = authsign_body(
        json!({"certificate_request": csr_with_sans(), "label": "intermediate2", "profile": "server-short"}),
    );
    let (status, answer) = post(&url, body).await;
    assert_eq!(status, 200, "{answer}");
    let pem_text = answer["result"]["certificate"].as_str().unwrap();
    let der = ::pem::parse(pem_text).unwrap().into_contents();
    let (_, cert) = X509Certificate::from_der(&der).unwrap();

    let sans: Vec<String> = cert
        .subject_alternative_name()
        .unwrap()
        .unwrap()
        .value
        .general_names
        .iter()
        .map(|n| format!("{n}"))
        .collect();
    assert!(sans.iter().any(|s| s.contains("a.example.org")), "{sans:?}");
    assert!(
        sans.iter().any(|s| s.contains("0a:00:00:07")),
        "IP SAN 10.0.0.7: {sans:?}"
    );
    assert!(cert.subject().to_string().contains("a.example.org"));
    let eku = cert.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.server_auth && !eku.client_auth);
    assert!(!cert.is_ca());

    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
    let not_before = cert.validity().not_before.timestamp();
    let not_after = cert.validity().not_after.timestamp();
    assert!(
        (now - not_before - 300).abs() < 30,
        "backdated ~5 minutes: {}",
        now - not_before
    );
    assert!(
        (not_after - now - 600).abs() < 30,
        "server-short lasts 600 s: {}",
        not_after - now
    );

    // It chains to intermediate2 and the root.
    let dir = tempfile::tempdir().unwrap();
    let int2 = &ca
        .intermediates
        .iter()
        .find(|(l, _)| l == "intermediate2")
        .unwrap()
        .1;
    std::fs::write(dir.path().join("root.pem"), &ca.root_pem).unwrap();
    std::fs::write(dir.path().join("int.pem"), int2).unwrap();
    std::fs::write(dir.path().join("leaf.pem"), pem_text).unwrap();
    let out = std::process::Command::new("openssl")
        .args([
            "verify",
            "-CAfile",
            "root.pem",
            "-untrusted",
            "int.pem",
            "leaf.pem",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(ca.issued_count(), 1);
    ca.shutdown();
}

#[tokio::test]
async fn bundle_answer_has_chain_and_root() {
    let ca = simple_cfssl::spawn(simple_cfssl::Config::test_default(KEY))
        .await
        .unwrap();
    let url = format!("{}/api/v1/cfssl/authsign", ca.url);
    let inner = json!({"certificate_request": csr_with_sans(), "label": "intermediate1", "bundle": true});
    let (status, answer) = post(&url, authsign_body(inner)).await;
    assert_eq!(status, 200);
    let bundle = &answer["result"]["bundle"];
    let chain = bundle["bundle"].as_str().unwrap();
    assert_eq!(::pem::parse_many(chain).unwrap().len(), 2, "leaf + intermediate");
    assert!(chain.starts_with(answer["result"]["certificate"].as_str().unwrap()));
    assert_eq!(bundle["root"].as_str().unwrap(), ca.root_pem);
    ca.shutdown();
}

#[tokio::test]
async fn outage_and_health() {
    let ca = simple_cfssl::spawn(simple_cfssl::Config::test_default(KEY))
        .await
        .unwrap();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let health = format!("{}/api/v1/cfssl/health", ca.url);
    let ok: Value = http.get(&health).send().await.unwrap().json().await.unwrap();
    assert_eq!(ok["result"]["healthy"], true);
    ca.set_available(false);
    let down = http.get(&health).send().await.unwrap();
    assert_eq!(down.status().as_u16(), 503);
    let info = format!("{}/api/v1/cfssl/info", ca.url);
    let r = http
        .post(&info)
        .body(r#"{"label":"intermediate1"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 503);
    assert!(
        r.json::<Value>().await.is_err(),
        "an outage does not answer in CFSSL's envelope"
    );
    ca.set_available(true);
    let r = http
        .post(&info)
        .body(r#"{"label":"intermediate1"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    ca.shutdown();
}

#[tokio::test]
async fn oversized_request_is_refused() {
    let ca = simple_cfssl::spawn(simple_cfssl::Config::test_default(KEY))
        .await
        .unwrap();
    let url = format!("{}/api/v1/cfssl/authsign", ca.url);
    let (status, _) = post(&url, vec![b'x'; 2 << 20]).await;
    assert_eq!(status, 413);
    ca.shutdown();
}
