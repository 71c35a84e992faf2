//! simple-cfssl answers every request the way the real multirootca (Debian golang-cfssl) does:
//! the same HTTP status, error code and message, case by case, both servers in one run.

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

const KEY: &str = "0123456789abcdef0123456789abcdef";

struct Lab(tempfile::TempDir);

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("stop").arg(self.0.path()).status();
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/multirootca-lab.sh")
}

fn start_multirootca() -> (Lab, String) {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = Command::new(script())
        .arg("start")
        .arg(dir.path())
        .arg(port.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "multirootca-lab: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (Lab(dir), format!("http://127.0.0.1:{port}"))
}

fn csr() -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["parity.example.org".into()]).unwrap();
    params.serialize_request(&key).unwrap().pem().unwrap()
}

fn signed(inner: &Value, key: &str) -> Vec<u8> {
    let inner = serde_json::to_vec(inner).unwrap();
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&hex::decode(key).unwrap()).unwrap();
    mac.update(&inner);
    let token = STANDARD.encode(mac.finalize().into_bytes());
    serde_json::to_vec(&json!({"token": token, "request": STANDARD.encode(&inner)})).unwrap()
}

/// One request: (name, method, path, body).
fn cases(csr: &str) -> Vec<(&'static str, &'static str, &'static str, Vec<u8>)> {
    let sign = |inner: Value| signed(&inner, KEY);
    let wrong = "deadbeefdeadbeefdeadbeefdeadbeef";
    vec![
        ("authsign GET", "GET", "authsign", vec![]),
        ("authsign not JSON", "POST", "authsign", b"xx".to_vec()),
        (
            "request not base64",
            "POST",
            "authsign",
            br#"{"token":"AAAA","request":"!!!"}"#.to_vec(),
        ),
        (
            "wrong key",
            "POST",
            "authsign",
            signed(
                &json!({"certificate_request": csr, "label": "intermediate1"}),
                wrong,
            ),
        ),
        (
            "unknown label",
            "POST",
            "authsign",
            sign(json!({"certificate_request": csr, "label": "nope"})),
        ),
        (
            "unknown profile",
            "POST",
            "authsign",
            sign(json!({"certificate_request": csr, "label": "intermediate1", "profile": "nope"})),
        ),
        (
            "profile without auth key",
            "POST",
            "authsign",
            sign(json!({"certificate_request": csr, "label": "intermediate1", "profile": "noauth"})),
        ),
        (
            "empty CSR",
            "POST",
            "authsign",
            sign(json!({"certificate_request": "", "label": "intermediate1"})),
        ),
        (
            "garbage CSR",
            "POST",
            "authsign",
            sign(json!({"certificate_request": "garbage", "label": "intermediate1"})),
        ),
        (
            "sign ok",
            "POST",
            "authsign",
            sign(json!({"certificate_request": csr, "label": "intermediate1", "profile": "server"})),
        ),
        ("info GET", "GET", "info", vec![]),
        (
            "info unknown label",
            "POST",
            "info",
            br#"{"label":"nope"}"#.to_vec(),
        ),
        (
            "info ok",
            "POST",
            "info",
            br#"{"label":"intermediate2","profile":"server"}"#.to_vec(),
        ),
        (
            "info unknown profile falls back",
            "POST",
            "info",
            br#"{"label":"intermediate2","profile":"nope"}"#.to_vec(),
        ),
    ]
}

/// What must match: status, success, error codes and messages, result keys, expiry.
async fn answer(http: &reqwest::Client, base: &str, method: &str, path: &str, body: Vec<u8>) -> Value {
    let url = format!("{base}/api/v1/cfssl/{path}");
    let request = match method {
        "GET" => http.get(url),
        _ => http.post(url).body(body),
    };
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    let result_keys: Vec<String> = body["result"]
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    json!({
        "status": status,
        "success": body["success"],
        "errors": body["errors"],
        "result_keys": result_keys,
        "expiry": body["result"]["expiry"],
    })
}

#[tokio::test]
async fn every_answer_matches_multirootca() {
    let (_lab, real) = start_multirootca();
    let ours = simple_cfssl::spawn(simple_cfssl::Config::test_default(KEY))
        .await
        .unwrap();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let csr = csr();
    let mut mismatches = vec![];
    for (name, method, path, body) in cases(&csr) {
        let want = answer(&http, &real, method, path, body.clone()).await;
        let got = answer(&http, &ours.url, method, path, body).await;
        if want != got {
            mismatches.push(format!("{name}:\n  multirootca  {want}\n  simple-cfssl {got}"));
        }
    }
    ours.shutdown();
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
