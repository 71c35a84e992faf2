//! Fuzzed parsers (issue 15, part 3): what the issuer reads from a CA and from a
//! CertificateRequest. Each target feeds a parser generated and mutated inputs under proptest
//! and fails on a panic, a broken property, a case whose heap peak is over its budget, or a hang
//! (see tests/fuzz_harness). `FUZZ_CASES` sets the cases per target; `make fuzz` runs a million.
//!
//! - `cfssl_answer`: answers as the client decodes them (`parse_answer`), arbitrary bytes and
//!   envelopes built from real ones (success, result, errors, bundle shapes, PEM inside JSON),
//!   then the chain built from a successful one;
//! - `csr_reader`: `check_csr_pem` on mutated DER of real CSRs in varied PEM armour;
//! - `chain_completion`: `complete_chain` and `certificates_in` on mutated real chains.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

mod fuzz_harness;

use std::sync::OnceLock;

use cfssl_issuer::cfssl::wire::{InfoResult, SignResult};
use cfssl_issuer::cfssl::{Call, ClientConfig, parse_answer};
use cfssl_issuer::pki::{MAX_CSR_BYTES, certificates_in, check_csr_pem, complete_chain};
use fuzz_harness::mutate::{self, Armour, Mutation};
use http::StatusCode;
use proptest::prelude::*;
use serde_json::{Value, json};

/// A case may hold this many times its input's size at once: a parser copies the input a few
/// times (decoded strings, DER from PEM, PEM re-encoded with `\n`) but must never grow with
/// the input's shape faster than linearly.
const AMPLIFICATION: usize = 12;
/// Plus this much whatever the input: parsed certificates, error values, signature checks.
const BASE: usize = 256 * 1024;

/// The answer cap the client reads within (bodies over it are refused unread).
const ANSWER_CAP: usize = ClientConfig::DEFAULT_MAX_RESPONSE_BYTES;

fn budget(input_len: usize) -> usize {
    AMPLIFICATION * input_len + BASE
}

/// Real material: a root, an intermediate, a leaf it signed, and CSRs of several key types.
struct Pki {
    root: Vec<u8>,
    int: Vec<u8>,
    leaf: Vec<u8>,
    /// The leaf's key (SubjectPublicKeyInfo DER), which the CSR would carry.
    leaf_key: Vec<u8>,
    csrs: Vec<Vec<u8>>,
}

/// The material is fixed (made by `tests/data/fuzz/make.sh`), so a seed replays its cases.
fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| Pki {
        root: include_bytes!("data/fuzz/root.der").to_vec(),
        int: include_bytes!("data/fuzz/int.der").to_vec(),
        leaf: include_bytes!("data/fuzz/leaf.der").to_vec(),
        leaf_key: include_bytes!("data/fuzz/leaf-spki.der").to_vec(),
        csrs: [
            &include_bytes!("data/fuzz/csr-p256.der")[..],
            include_bytes!("data/fuzz/csr-p384.der"),
            include_bytes!("data/fuzz/csr-ed25519.der"),
            include_bytes!("data/fuzz/csr-rsa.der"),
        ]
        .map(<[u8]>::to_vec)
        .to_vec(),
    })
}

fn pem_text(der: &[u8]) -> String {
    String::from_utf8(mutate::pem("CERTIFICATE", der, &Armour::Lf)).unwrap()
}

/// A certificate as a CA may send it: real, or mutated and armoured in some way.
fn certificate(which: fn(&Pki) -> &Vec<u8>) -> impl Strategy<Value = (String, bool)> {
    (mutate::mutations(3), mutate::armour()).prop_map(move |(m, armour)| {
        let real = m.is_empty() && matches!(armour, Armour::Lf);
        let der = mutate::apply(which(pki()), &m);
        (
            String::from_utf8_lossy(&mutate::pem("CERTIFICATE", &der, &armour)).into_owned(),
            real,
        )
    })
}

/// The `result` of an answer and whether it is a well-formed signature result.
fn result_value() -> impl Strategy<Value = (Option<Value>, bool)> {
    let leaf = || certificate(|p| &p.leaf);
    // (bundle, whether it is one the client must accept)
    let bundle = prop_oneof![
        1 => Just((Value::Null, true)),
        3 => certificate(|p| &p.int).prop_map(|(int, real)| (json!({
            "bundle": format!("{}{int}", pem_text(&pki().leaf)),
            "root": pem_text(&pki().root),
            "status": {"code": 0, "rebundled": false, "messages": []},
        }), real)),
        1 => certificate(|p| &p.root).prop_map(|(root, _)| (json!({"bundle": pem_text(&pki().int), "root": root}), true)),
        1 => Just((json!({"bundle": 5}), false)),
        1 => Just((json!({"root": "x"}), false)),
        1 => Just((json!("bundle"), false)),
    ];
    prop_oneof![
        1 => Just((None, false)),
        1 => Just((Some(Value::Null), false)),
        1 => Just((Some(json!({})), false)),
        1 => Just((Some(json!([1, "x", null])), false)),
        4 => leaf().prop_map(|(cert, real)| (Some(json!({"certificate": cert})), real)),
        4 => (leaf(), bundle).prop_map(|((cert, real), (b, ok))| (Some(json!({"certificate": cert, "bundle": b})), real && ok)),
        1 => leaf().prop_map(|(cert, _)| (Some(json!({"certificate": cert, "usages": ["signing"], "expiry": "8760h"})), false)),
        1 => Just((Some(json!({"certificate": 17})), false)),
    ]
}

fn messages() -> impl Strategy<Value = Option<Value>> {
    let message = prop_oneof![
        12 => (any::<i64>(), ".{0,40}").prop_map(|(code, message)| json!({"code": code, "message": message})),
        1 => Just(json!({"code": "1", "message": "x"})),
        1 => Just(json!({"code": 1.5, "message": "x"})),
        1 => Just(json!({"message": "no code"})),
        1 => Just(json!(null)),
    ];
    proptest::option::of(proptest::collection::vec(message, 0..4).prop_map(Value::Array))
}

/// An answer: status, body, and whether the client must accept it.
#[derive(Clone)]
struct Answer {
    status: u16,
    body: Vec<u8>,
    acceptable: bool,
}

impl std::fmt::Debug for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Answer")
            .field("status", &self.status)
            .field("body", &bstr(&self.body))
            .field("acceptable", &self.acceptable)
            .finish()
    }
}

/// Bytes as Rust would write them in a byte string literal, for failing cases.
fn bstr(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

fn envelope() -> impl Strategy<Value = Answer> {
    let success = prop_oneof![
        6 => Just(Some(json!(true))),
        1 => Just(Some(json!(false))),
        1 => Just(None),
        1 => Just(Some(json!("true"))),
        1 => Just(Some(json!(1))),
    ];
    let status = prop_oneof![
        4 => Just(200u16),
        1 => prop::sample::select(vec![201u16, 204, 400, 401, 403, 404, 413, 500, 503]),
        1 => 100u16..=999,
    ];
    let text = prop_oneof![3 => Just(Vec::<Mutation>::new()), 1 => mutate::mutations(4)];
    (
        success,
        result_value(),
        messages(),
        messages(),
        status,
        any::<bool>(),
        text,
    )
        .prop_map(|(success, (result, real), errors, msgs, status, escape, text)| {
            let mut env = serde_json::Map::new();
            let acceptable =
                real && success == Some(json!(true)) && (200..300).contains(&status) && text.is_empty();
            for (key, value) in [
                ("success", success),
                ("result", result),
                ("errors", errors),
                ("messages", msgs),
            ] {
                if let Some(value) = value {
                    env.insert(key.to_string(), value);
                }
            }
            let mut body = serde_json::to_string(&Value::Object(env)).unwrap();
            if escape {
                body = body.replace("\\n", "\\u000a").replace('/', "\\/");
            }
            let body = mutate::apply(body.as_bytes(), &text);
            let acceptable = acceptable && !errors_break(&body);
            Answer {
                status,
                body,
                acceptable,
            }
        })
}

/// Whether the envelope's messages are of a shape the client refuses (a message without code).
fn errors_break(body: &[u8]) -> bool {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    ["errors", "messages"].iter().any(|k| match &v[k] {
        Value::Array(items) => items
            .iter()
            .any(|m| !(m["code"].is_i64() && m["message"].is_string())),
        Value::Null => false,
        _ => true,
    })
}

fn answers() -> impl Strategy<Value = Answer> {
    prop_oneof![
        3 => envelope(),
        1 => (100u16..=999, proptest::collection::vec(any::<u8>(), 0..2048)).prop_map(|(status, body)| Answer { status, body, acceptable: false }),
        // Many small values: what a parser building a tree of them allocates per input byte.
        1 => (1usize..4000, prop::sample::select(vec!["{\"a\":0}", "[]", "0", "\"\"", "{}"])).prop_map(|(n, item)| {
            let items = vec![item; n].join(",");
            let body = format!("{{\"success\":true,\"result\":[{items}]}}");
            Answer { status: 200, body: body.into_bytes(), acceptable: false }
        }),
        1 => (1usize..300, any::<bool>()).prop_map(|(depth, object)| {
            let (open, close) = if object { ("{\"a\":", "}") } else { ("[", "]") };
            let body = format!("{{\"success\":true,\"result\":{}1{}}}", open.repeat(depth), close.repeat(depth));
            Answer { status: 200, body: body.into_bytes(), acceptable: false }
        }),
    ]
}

/// What the client does with an answer to `authsign`, to `info` and to its credential probe.
fn decode_answer(answer: &Answer) -> bool {
    let status = StatusCode::from_u16(answer.status).unwrap();
    let body = &answer.body;
    assert!(body.len() <= ANSWER_CAP);
    let signed = parse_answer::<SignResult>(Call::AuthSign, status, body);
    match &signed {
        Ok(result) => {
            assert!(status.is_success(), "accepted under status {status}");
            let bundle = result
                .bundle
                .as_ref()
                .map(|b| (b.bundle.as_str(), b.root.as_deref()));
            let pki = pki();
            for (bundle, signer) in [(bundle, None), (None, Some(pki.int.as_slice()))] {
                let chain = complete_chain(&result.certificate, bundle, signer, &pki.leaf_key);
                if answer.acceptable {
                    let chain = chain.unwrap_or_else(|e| panic!("a real answer's chain: {e}"));
                    assert_eq!(certificates_in(&chain.certificates).unwrap()[0], pki.leaf);
                }
            }
        }
        Err(err) => {
            assert!(!answer.acceptable, "a real answer refused: {err}");
            assert!(!err.to_string().is_empty());
        }
    }
    if let Ok(info) = parse_answer::<InfoResult>(Call::Info, status, body) {
        let _ = certificates_in(&info.certificate);
    }
    // The credential probe skips any result unread and only checks that it is a refusal.
    let probe = parse_answer::<serde::de::IgnoredAny>(Call::AuthSign, status, body);
    assert!(probe.is_err() || status.is_success());
    if signed.is_ok() {
        assert!(probe.is_ok(), "a signature the probe could not read");
    }
    signed.is_ok()
}

#[test]
fn cfssl_answer() {
    fuzz_harness::run("cfssl_answer", answers(), |a| budget(a.body.len()), decode_answer);
}

/// A CSR as a CertificateRequest may carry it: real DER (of one of four key types), mutated,
/// in some armour; or bytes of any kind; or text over the size cap.
fn csr_inputs() -> impl Strategy<Value = (Vec<u8>, bool)> {
    let mutated =
        (0usize..4, mutate::mutations(4), mutate::armour(), any::<bool>()).prop_map(|(i, m, armour, new)| {
            let der = mutate::apply(&pki().csrs[i], &m);
            let label = if new {
                "NEW CERTIFICATE REQUEST"
            } else {
                "CERTIFICATE REQUEST"
            };
            let real = m.is_empty()
                && matches!(
                    armour,
                    Armour::Lf | Armour::Crlf | Armour::OneLine | Armour::Twice
                );
            (mutate::pem(label, &der, &armour), real)
        });
    prop_oneof![
        6 => mutated,
        1 => proptest::collection::vec(any::<u8>(), 0..1024).prop_map(|b| (b, false)),
        1 => (MAX_CSR_BYTES - 8..MAX_CSR_BYTES + 8).prop_map(|n| {
            let mut text = mutate::pem("CERTIFICATE REQUEST", &pki().csrs[0], &Armour::Lf);
            text.resize(n, b'A');
            (text, false)
        }),
    ]
}

fn read_csr((input, real): &(Vec<u8>, bool)) -> bool {
    let checked = check_csr_pem(input);
    if input.len() > MAX_CSR_BYTES {
        assert!(checked.is_err(), "{} bytes accepted", input.len());
        return false;
    }
    match checked {
        Ok(csr) => {
            // What is sent to the CA reads back as the same CSR.
            let again = check_csr_pem(csr.pem.as_bytes()).expect("the re-armoured CSR");
            assert_eq!(again, csr);
            true
        }
        Err(err) => {
            assert!(!real, "a real CSR refused: {err}");
            false
        }
    }
}

#[test]
fn csr_reader() {
    // Over the cap a CSR is refused before it is read; under it, the DER is copied a few times.
    fuzz_harness::run(
        "csr_reader",
        csr_inputs(),
        |(b, _)| budget(b.len().min(MAX_CSR_BYTES)),
        read_csr,
    );
}

/// A chain as a CA's answer gives it: leaf, optional bundle and root, optional signer; any
/// of them mutated.
#[derive(Debug, Clone)]
struct ChainInput {
    leaf: String,
    bundle: Option<(String, Option<String>)>,
    signer: Option<Vec<u8>>,
    real: bool,
}

fn chain_inputs() -> impl Strategy<Value = ChainInput> {
    let int_der = (mutate::mutations(3)).prop_map(|m| (mutate::apply(&pki().int, &m), m.is_empty()));
    let bundle = (
        certificate(|p| &p.int),
        proptest::option::of(certificate(|p| &p.root)),
        any::<bool>(),
    )
        .prop_map(|((int, real), root, with_leaf)| {
            let leaf = if with_leaf {
                pem_text(&pki().leaf)
            } else {
                String::new()
            };
            ((format!("{leaf}{int}"), root.map(|r| r.0)), real)
        });
    (
        certificate(|p| &p.leaf),
        proptest::option::of(bundle),
        proptest::option::of(int_der),
    )
        .prop_map(|((leaf, leaf_real), bundle, signer)| {
            let real =
                leaf_real && bundle.as_ref().is_none_or(|b| b.1) && signer.as_ref().is_none_or(|s| s.1);
            ChainInput {
                leaf,
                bundle: bundle.map(|b| b.0),
                signer: signer.map(|s| s.0),
                real,
            }
        })
}

fn key_of(der: &[u8]) -> Vec<u8> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).expect("a chain member parses");
    cert.public_key().raw.to_vec()
}

fn input_len(c: &ChainInput) -> usize {
    let bundle = c
        .bundle
        .as_ref()
        .map_or(0, |(b, r)| b.len() + r.as_ref().map_or(0, String::len));
    c.leaf.len() + bundle + c.signer.as_ref().map_or(0, Vec::len)
}

fn complete(c: &ChainInput) -> bool {
    let pki = pki();
    let bundle = c.bundle.as_ref().map(|(b, r)| (b.as_str(), r.as_deref()));
    let _ = certificates_in(&c.leaf);
    match complete_chain(&c.leaf, bundle, c.signer.as_deref(), &pki.leaf_key) {
        Ok(chain) => {
            let ders = certificates_in(&chain.certificates).expect("the chain reads back");
            assert_eq!(
                key_of(&ders[0]),
                pki.leaf_key,
                "the chain does not start with a leaf for the CSR's key"
            );
            if let Some(ca) = &chain.ca {
                certificates_in(ca).expect("the CA reads back");
            }
            if c.real && c.bundle.is_none() && c.signer.is_some() {
                assert_eq!(ders.len(), 2, "the intermediate that signed the leaf is appended");
            }
            true
        }
        Err(err) => {
            assert!(!c.real, "a real chain refused: {err}");
            false
        }
    }
}

#[test]
fn chain_completion() {
    fuzz_harness::run(
        "chain_completion",
        chain_inputs(),
        |c| budget(input_len(c)),
        complete,
    );
}

/// Serves every connection one answer: `info` for `/info`, `authsign` for anything else.
fn canned_ca(info: String, authsign: String) -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let mut reader = BufReader::new(stream.unwrap());
            let (mut line, mut length, mut path) = (String::new(), 0, String::new());
            while reader.read_line(&mut line).unwrap() > 2 {
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
                if path.is_empty() {
                    path.clone_from(&line);
                }
                line.clear();
            }
            reader.read_exact(&mut vec![0; length]).unwrap();
            let body = if path.contains("/info") { &info } else { &authsign };
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let mut stream = reader.into_inner();
            let _ = stream
                .write_all(head.as_bytes())
                .and_then(|()| stream.write_all(body.as_bytes()));
        }
    });
    url
}

/// Inputs the fuzz targets found, each run once more through the client itself and held to the
/// same budget: (name, `/info` answer, `authsign` answer to the credential probe).
#[tokio::test(flavor = "current_thread")]
async fn regressions() {
    let info = json!({"success": true, "result": {"certificate": pem_text(&pki().int)}, "errors": [], "messages": []});
    let wide = format!(
        r#"{{"success":true,"result":[{}]}}"#,
        vec![r#"{"a":0}"#; 120_000].join(",")
    );
    let cases = [(
        // cfssl_answer: a result of many small objects, ~1 MiB; a `serde_json::Value` of it
        // took ~80 bytes per byte of answer in the credential probe, which never reads it.
        "probe: a wide result within the cap",
        info.to_string(),
        wide,
    )];
    for (name, info, authsign) in cases {
        let limit = budget(authsign.len());
        assert!(authsign.len() <= ANSWER_CAP, "{name}: {} bytes", authsign.len());
        let key = cfssl_issuer::cfssl::AuthKey::from_hex("00ff").unwrap();
        let client =
            cfssl_issuer::cfssl::Client::new(ClientConfig::new(canned_ca(info, authsign), "l", key)).unwrap();
        let base = fuzz_harness::reset_peak();
        let got = client.check().await;
        let peak = fuzz_harness::peak_since(base);
        let err = got.expect_err("the probe must not pass").to_string();
        assert!(err.contains("the CA accepted an empty CSR"), "{name}: {err}");
        assert!(
            peak <= limit,
            "{name}: {peak} bytes at peak, over the budget of {limit}"
        );
        println!("regression {name}: {peak} bytes at peak (budget {limit})");
    }
}
