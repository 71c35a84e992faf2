//! Fuzzed request parser (issue 15, part 3): simple-cfssl reads what multirootca reads, so it
//! faces the same bodies. Each target runs under the shared harness (tests/fuzz_harness at the
//! workspace root: no panic, heap within budget, no hang) and asserts properties:
//!
//! - `authsign_request`: outer body (token, base64 request), HMAC check, inner sign request;
//!   built from real requests with a real CSR, then varied field by field and mutated byte by
//!   byte. Nothing is signed without the right token; a clean request with the right token is
//!   signed, for the CSR's key; every refusal is a 400, 401 or 500 with a message.
//! - `info_request`: the `/info` body; an answer is the label's certificate.

#[path = "../../tests/fuzz_harness/mod.rs"]
mod fuzz_harness;

use std::sync::OnceLock;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use fuzz_harness::mutate::{self, Armour};
use hmac::{Hmac, KeyInit, Mac};
use proptest::prelude::*;
use serde_json::{Value, json};
use sha2::Sha256;
use simple_cfssl::{Config, Decisions, MAX_BODY};
use time::OffsetDateTime;
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::prelude::FromDer;

const KEY: &str = "0123456789abcdef0123456789abcdef";

/// A case may hold this many times its body's size at once: the parsed JSON tree, decoded
/// base64, the inner request's tree and strings.
const AMPLIFICATION: usize = 24;
/// Plus this much whatever the body: a signature (certificate building, keys, PEM).
const BASE: usize = 512 * 1024;
/// Plus the parser's stack of open containers, at most Go's depth limit of 10,000 frames of up
/// to 64 bytes, in a vector that grows by doubling: `[[[[...` costs this, not per byte.
const NESTING: usize = 10_000 * 64 * 2;

fn budget(body_len: usize) -> usize {
    AMPLIFICATION * body_len + BASE + NESTING
}

struct Fixture {
    ca: Decisions,
    csr_der: Vec<u8>,
    /// The CSR key's SubjectPublicKeyInfo, which a certificate for it must carry.
    csr_key: Vec<u8>,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let ca = Decisions::new(&Config::test_default(KEY), OffsetDateTime::now_utc()).unwrap();
        // A fixed CSR (the workspace's fuzz material, tests/data/fuzz/make.sh), so a seed
        // replays the same requests.
        let csr_der = include_bytes!("../../tests/data/fuzz/csr-p256.der").to_vec();
        let (_, csr) = X509CertificationRequest::from_der(&csr_der).unwrap();
        let csr_key = csr.certification_request_info.subject_pki.raw.to_vec();
        Fixture { ca, csr_der, csr_key }
    })
}

/// A field's value and whether it is one a clean, signable request carries.
fn field<T: Into<Value> + Clone + std::fmt::Debug + 'static>(
    clean: Vec<T>,
    other: Vec<Value>,
) -> impl Strategy<Value = (Option<Value>, bool)> {
    let clean: Vec<Value> = clean.into_iter().map(Into::into).collect();
    prop_oneof![
        3 => prop::sample::select(clean).prop_map(|v| (Some(v), true)),
        1 => prop::sample::select(other).prop_map(|v| (Some(v), false)),
    ]
}

fn optional(other: Vec<Value>) -> impl Strategy<Value = (Option<Value>, bool)> {
    prop_oneof![3 => Just((None, true)), 1 => prop::sample::select(other).prop_map(|v| (Some(v), false))]
}

fn csr_field() -> impl Strategy<Value = (Option<Value>, bool)> {
    prop_oneof![
        3 => Just(()).prop_map(|()| {
            let pem = String::from_utf8(mutate::pem("CERTIFICATE REQUEST", &fixture().csr_der, &Armour::Lf)).unwrap();
            (Some(json!(pem)), true)
        }),
        2 => (mutate::mutations(3), mutate::armour()).prop_map(|(m, armour)| {
            let der = mutate::apply(&fixture().csr_der, &m);
            (Some(json!(String::from_utf8_lossy(&mutate::pem("CERTIFICATE REQUEST", &der, &armour)))), false)
        }),
        1 => prop::sample::select(vec![json!(""), json!(5), json!(null), json!(["x"])]).prop_map(|v| (Some(v), false)),
    ]
}

/// Each optional field of the inner request, as (value, whether a clean request may carry it).
type Optional = (Option<Value>, bool);

fn optional_fields() -> impl Strategy<Value = [(&'static str, Optional); 5]> {
    let hosts = optional(vec![
        json!([]),
        json!(["a.example.org", "10.0.0.1"]),
        json!("a"),
        json!([1]),
        json!(null),
    ]);
    let subject = optional(vec![
        json!({"CN": "x", "names": [{"C": "US", "O": "o"}]}),
        json!({"names": "x"}),
        json!({"CN": 5}),
        json!([]),
    ]);
    let extensions = optional(vec![
        json!([]),
        json!([{"id": [2, 5, 29, 17], "critical": false, "value": "AA=="}]),
        json!([{"id": "x"}]),
        json!([{"id": [-1]}]),
        json!(5),
    ]);
    let serial = optional(vec![json!(123), json!("1"), json!(1.5), json!(-1), json!(1e300)]);
    let bundle = optional(vec![json!(true), json!(false), json!("yes")]);
    (hosts, subject, extensions, serial, bundle).prop_map(|(h, s, e, n, b)| {
        [
            ("hosts", h),
            ("subject", s),
            ("extensions", e),
            ("serial", n),
            ("bundle", b),
        ]
    })
}

/// The inner sign request's bytes and whether it is clean (signable as it is).
fn inner_request() -> impl Strategy<Value = (Vec<u8>, bool)> {
    // The test CA has no default label, so an empty one is unknown.
    let label = field(
        vec!["intermediate1", "intermediate2"],
        vec![json!(""), json!("nope"), json!(7), json!(null)],
    );
    // multirootca refuses `default` named outright (only an empty profile means it).
    let profile = field(
        vec!["", "server", "client"],
        vec![json!("default"), json!("noauth"), json!("nope"), json!(true)],
    );
    let text = prop_oneof![3 => Just(vec![]), 1 => mutate::mutations(4)];
    (
        csr_field(),
        label,
        profile,
        optional_fields(),
        any::<bool>(),
        text,
    )
        .prop_map(|(csr, label, profile, optional, upper, text)| {
            let mut clean = text.is_empty();
            let mut map = serde_json::Map::new();
            let required = [
                ("certificate_request", csr),
                ("label", label),
                ("profile", profile),
            ];
            for (name, (value, ok)) in required.into_iter().chain(optional) {
                clean &= ok;
                if let Some(value) = value {
                    // Go matches keys case-insensitively too.
                    let name = if upper && name == "label" { "Label" } else { name };
                    map.insert(name.to_string(), value);
                }
            }
            let bytes = serde_json::to_vec(&Value::Object(map)).unwrap();
            (mutate::apply(&bytes, &text), clean)
        })
}

/// An authsign body, whether its token signs its inner request, and whether it must be signed.
#[derive(Clone)]
struct Body {
    bytes: Vec<u8>,
    token_ok: bool,
    signable: bool,
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Body")
            .field("bytes", &self.bytes.escape_ascii().to_string())
            .field("token_ok", &self.token_ok)
            .field("signable", &self.signable)
            .finish()
    }
}

fn token(inner: &[u8]) -> Vec<u8> {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&hex::decode(KEY).unwrap()).unwrap();
    mac.update(inner);
    mac.finalize().into_bytes().to_vec()
}

fn authsign_bodies() -> impl Strategy<Value = Body> {
    let outer = (
        inner_request(),
        0u8..8,
        any::<bool>(),
        prop_oneof![3 => Just(vec![]), 1 => mutate::mutations(4)],
    )
        .prop_map(|((inner, clean), token_kind, bytes_token, text)| {
            let mut token = token(&inner);
            let token_ok = token_kind < 6;
            if !token_ok {
                token[0] ^= 1;
            }
            let token = if bytes_token {
                json!(token)
            } else {
                json!(STANDARD.encode(&token))
            };
            let body =
                json!({"timestamp": 1_795_467_600, "token": token, "request": STANDARD.encode(&inner)});
            let signable = clean && token_ok && text.is_empty();
            Body {
                bytes: mutate::apply(&serde_json::to_vec(&body).unwrap(), &text),
                token_ok,
                signable,
            }
        });
    prop_oneof![
        8 => outer,
        1 => proptest::collection::vec(any::<u8>(), 0..512).prop_map(|bytes| Body { bytes, token_ok: false, signable: false }),
        // Many small values and deep nesting: what a parser building a tree allocates per byte.
        1 => (1usize..20_000, prop::sample::select(vec!["0", "[]", "{}", "\"\"", "{\"a\":0}", "["])).prop_map(|(n, item)| {
            let body = if item == "[" { "[".repeat(n) } else { format!("{{\"token\":[{}]}}", vec![item; n].join(",")) };
            Body { bytes: body.into_bytes(), token_ok: false, signable: false }
        }),
    ]
}

fn key_of(pem_text: &str) -> Vec<u8> {
    let block = pem::parse(pem_text).expect("a PEM certificate");
    let (_, cert) = x509_parser::parse_x509_certificate(block.contents()).expect("a certificate");
    cert.public_key().raw.to_vec()
}

fn decide(body: &Body) -> bool {
    assert!(body.bytes.len() <= MAX_BODY);
    let fixture = fixture();
    match fixture.ca.authsign(&body.bytes, OffsetDateTime::now_utc()) {
        Ok(pem) => {
            assert!(body.token_ok, "signed without the right token");
            assert_eq!(key_of(&pem), fixture.csr_key, "a certificate for another key");
            true
        }
        Err((status, message)) => {
            assert!(!body.signable, "a clean request refused: {status} {message}");
            assert!(
                matches!(status, 400 | 401 | 500) && !message.is_empty(),
                "{status} {message:?}"
            );
            false
        }
    }
}

#[test]
fn authsign_request() {
    fuzz_harness::run(
        "authsign_request",
        authsign_bodies(),
        |b| budget(b.bytes.len()),
        decide,
    );
}

fn info_bodies() -> impl Strategy<Value = Vec<u8>> {
    let label = field(
        vec!["intermediate1", "intermediate2", ""],
        vec![json!("nope"), json!(7), json!(null)],
    );
    let profile = field(vec!["", "default", "server"], vec![json!("nope"), json!([])]);
    let text = prop_oneof![3 => Just(vec![]), 1 => mutate::mutations(4)];
    prop_oneof![
        4 => (label, profile, text).prop_map(|((label, _), (profile, _), text)| {
            let body = json!({"label": label, "profile": profile});
            mutate::apply(&serde_json::to_vec(&body).unwrap(), &text)
        }),
        1 => proptest::collection::vec(any::<u8>(), 0..256),
    ]
}

fn info(body: &[u8]) -> bool {
    match fixture().ca.info(body) {
        Ok(pem) => {
            assert!(!key_of(&pem).is_empty());
            true
        }
        Err((status, message)) => {
            assert!(status == 400 && !message.is_empty(), "{status} {message:?}");
            false
        }
    }
}

#[test]
fn info_request() {
    fuzz_harness::run("info_request", info_bodies(), |b| budget(b.len()), |b| info(b));
}
