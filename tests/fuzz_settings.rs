//! Fuzzed parsers (issue 15, part 3): what the issuer reads from its own configuration. Each
//! target runs under tests/fuzz_harness (no panic, heap within budget, no hang) and asserts
//! properties of its parser:
//!
//! - `secret_key`: the credential Secret's `key` and `additional_data` (`from_secret`, so
//!   `AuthKey::from_hex`): valid hex (either case, surrounding whitespace) is accepted and signs as
//!   an independent HMAC over the decoded bytes does; whatever is refused, the error never shows
//!   the key;
//! - `url_list`: the issuer's `url` (`Endpoints::parse`, `redact`, `redact_list`): a list that
//!   parses can be iterated and every base is usable; the credentials of a `user:password@` URL
//!   never appear in what is shown (`Display`, `Debug`, errors, redacted text).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

mod fuzz_harness;

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cfssl_issuer::cfssl::{AUTHSIGN_PATH, AuthKey, Endpoints};
use cfssl_issuer::controllers::signing::signer::credentials::{ADDITIONAL_DATA, KEY, from_secret};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use proptest::prelude::*;

/// A case may hold this many times its input's size at once (decoded key, copied data, parsed
/// URLs and their redacted text).
const AMPLIFICATION: usize = 12;
/// Plus this much whatever the input: error values, HMAC state, IDNA tables.
const BASE: usize = 64 * 1024;

/// The API server's cap on a Secret's size: the most a Secret can hand the key reader.
const SECRET_CAP: usize = 1 << 20;

fn budget(input_len: usize) -> usize {
    AMPLIFICATION * input_len + BASE
}

/// A Secret's entries, and the key bytes a valid `key` holds.
#[derive(Debug, Clone)]
struct SecretInput {
    key: Option<Vec<u8>>,
    additional_data: Option<Vec<u8>>,
    /// `Some(decoded)` when `key` is valid hex (after trimming whitespace).
    valid: Option<Vec<u8>>,
}

fn hex_key() -> impl Strategy<Value = (Vec<u8>, Option<Vec<u8>>)> {
    let whitespace = || "[ \t\r\n]{0,3}";
    (
        proptest::collection::vec(any::<u8>(), 1..64),
        0u8..3,
        whitespace(),
        whitespace(),
    )
        .prop_map(|(bytes, case, pre, post)| {
            let digits = match case {
                0 => hex::encode(&bytes),
                1 => hex::encode_upper(&bytes),
                _ => hex::encode(&bytes)
                    .chars()
                    .enumerate()
                    .map(|(i, c)| if i % 3 == 0 { c.to_ascii_uppercase() } else { c })
                    .collect(),
            };
            (format!("{pre}{digits}{post}").into_bytes(), Some(bytes))
        })
}

/// Keys as people put them in Secrets: valid hex, hex with one thing wrong, any bytes.
fn secret_inputs() -> impl Strategy<Value = SecretInput> {
    let broken = (
        hex_key(),
        any::<prop::sample::Index>(),
        prop::sample::select(vec!["", "g", "0", " ", "\u{e9}", "\u{0}", "0x", "\u{ff10}"]),
    )
        .prop_map(|((text, _), at, insert)| {
            let mut text = String::from_utf8(text).unwrap();
            let mut at = at.index(text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            text.insert_str(at, insert);
            let valid = hex::decode(text.trim()).ok();
            (text.into_bytes(), valid)
        });
    let small = prop_oneof![
        4 => hex_key(),
        4 => broken,
        2 => proptest::collection::vec(any::<u8>(), 0..128).prop_map(|b| {
            let valid = std::str::from_utf8(&b).ok().and_then(|t| hex::decode(t.trim()).ok()).filter(|k| !k.is_empty());
            (b, valid)
        }),
    ];
    // Near the API server's cap on a whole Secret: rare, as each takes a while in debug builds.
    let large = (SECRET_CAP / 4 - 2..SECRET_CAP / 4).prop_map(|n| {
        let bytes = vec![0xa5; n];
        (hex::encode(&bytes).into_bytes(), Some(bytes))
    });
    let key = prop_oneof![1000 => small, 1 => large];
    let ad = proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64));
    (proptest::option::weighted(0.95, key), ad).prop_map(|(key, additional_data)| {
        let (key, valid) = match key {
            Some((k, v)) => (Some(k), v),
            None => (None, None),
        };
        SecretInput {
            key,
            additional_data,
            valid,
        }
    })
}

fn secret_len(s: &SecretInput) -> usize {
    s.key.as_ref().map_or(0, Vec::len) + s.additional_data.as_ref().map_or(0, Vec::len)
}

/// HMAC-SHA256 over `message || additional_data`, base64: the token as CFSSL computes it.
fn expected_token(key: &[u8], message: &[u8], additional_data: &[u8]) -> String {
    use aws_lc_rs::hmac;
    let key = hmac::Key::new(hmac::HMAC_SHA256, key);
    let mut ctx = hmac::Context::with_key(&key);
    ctx.update(message);
    ctx.update(additional_data);
    STANDARD.encode(ctx.sign())
}

fn read_secret(input: &SecretInput) -> bool {
    let mut data = BTreeMap::new();
    for (name, value) in [(KEY, &input.key), (ADDITIONAL_DATA, &input.additional_data)] {
        if let Some(value) = value {
            data.insert(name.to_string(), ByteString(value.clone()));
        }
    }
    let secret = Secret {
        data: Some(data),
        ..Default::default()
    };
    let message = br#"{"certificate_request":"","label":"l"}"#;
    match (from_secret(&secret, "ns", "name"), &input.valid) {
        (Ok(credentials), Some(key)) => {
            let ad = input.additional_data.as_deref().unwrap_or_default();
            assert_eq!(credentials.key.token(message), expected_token(key, message, ad));
            let text = std::str::from_utf8(input.key.as_deref().unwrap()).unwrap();
            // Round trip: the same key read from either hex case.
            assert_eq!(
                AuthKey::from_hex(&hex::encode_upper(key)).unwrap(),
                AuthKey::from_hex(text).unwrap()
            );
            true
        }
        (Ok(_), None) => panic!("a key that is not valid hex was accepted"),
        (Err(err), Some(_)) => panic!("a valid key was refused: {err}"),
        (Err(err), None) => {
            let shown = format!("{err} {err:?}");
            if let Some(text) = input.key.as_deref().map(String::from_utf8_lossy) {
                let text = text.trim();
                assert!(
                    text.len() < 6 || !shown.contains(text),
                    "the key is shown: {shown}"
                );
            }
            false
        }
    }
}

#[test]
fn secret_key() {
    fuzz_harness::run(
        "secret_key",
        secret_inputs(),
        |s| budget(secret_len(s)),
        read_secret,
    );
}

/// Marks generated passwords, so that their appearance anywhere can be looked for.
const SECRET_MARK: &str = "Pw7q";

fn url_element() -> impl Strategy<Value = String> {
    let scheme = prop::sample::select(vec![
        "http://", "https://", "http://", "https://", "HTTPS://", "ftp://", "", "http:/", "http:", "//",
    ]);
    let userinfo = proptest::option::of(
        (
            "[a-z%:@]{0,6}",
            "[A-Za-z0-9._~!$&'()*+;=:@%/#?\\\\\\[\\] -]{0,10}",
        )
            .prop_map(|(user, pw)| format!("{user}:{SECRET_MARK}{pw}@")),
    );
    let host = prop::sample::select(vec![
        "ca",
        "ca.example.org",
        "10.0.0.1",
        "[::1]",
        "ca",
        "ca",
        "",
        "b\u{fc}cher.de",
        "xn--",
        "a b",
        "ca%2f",
        "[::1",
    ]);
    let port = proptest::option::of(
        prop_oneof![1 => "[0-9]{1,6}", 1 => "[a-z0-9]{0,3}"].prop_map(|p| format!(":{p}")),
    );
    let path = prop::sample::select(vec![
        "", "/", "", "/", "/cfssl", "/cfssl/", "/a@b", "?x=1", "#f", "/p?q#f", "\\x", "/%zz",
    ]);
    (scheme, userinfo, host, port, path, "[ \t]{0,2}").prop_map(|(s, u, h, p, path, pad)| {
        format!(
            "{pad}{s}{}{h}{}{path}{pad}",
            u.unwrap_or_default(),
            p.unwrap_or_default()
        )
    })
}

fn url_lists() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => proptest::collection::vec(url_element(), 0..4).prop_map(|e| e.join(",")),
        1 => "\\PC{0,80}",
        1 => "[a-z:/@,.\\[\\] ]{0,60}",
    ]
}

/// Whether the url crate reads a marked password from `element` (reqwest then sends it as basic
/// auth): such text is a credential and must never be shown.
fn has_credentials(element: &str) -> bool {
    reqwest::Url::parse(element.trim()).is_ok_and(|u| u.password().is_some_and(|pw| pw.contains(SECRET_MARK)))
}

fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = format!("{err} {err:?}");
    let mut next = err.source();
    while let Some(e) = next {
        text.push_str(&format!(" {e} {e:?}"));
        next = e.source();
    }
    text
}

fn parse_urls(list: &str) -> bool {
    let parsed = Endpoints::parse(list);
    let mut shown = vec![cfssl_issuer::cfssl::redact_list(list)];
    shown.extend(list.split(',').map(cfssl_issuer::cfssl::redact));
    let ok = match &parsed {
        Ok(eps) => {
            assert!(!eps.is_empty() && eps.len() == eps.iter().count(), "{eps:?}");
            for base in eps.iter() {
                assert!(matches!(base.scheme(), "http" | "https"), "{base}");
                assert!(base.host_str().is_some_and(|h| !h.is_empty()), "{base}");
                assert!(
                    base.path().ends_with('/') && base.query().is_none() && base.fragment().is_none(),
                    "{base}"
                );
                let api = Endpoints::api(base, AUTHSIGN_PATH);
                assert!(api.path().ends_with(AUTHSIGN_PATH), "{api}");
            }
            assert_eq!(eps.to_string().split(',').count(), eps.len(), "{eps}");
            shown.push(format!("{eps} {eps:?}"));
            true
        }
        Err(err) => {
            shown.push(error_chain(err));
            false
        }
    };
    for element in list.split(',').filter(|e| has_credentials(e)) {
        let redacted = cfssl_issuer::cfssl::redact(element);
        assert!(!redacted.contains(SECRET_MARK), "a password is shown: {redacted}");
    }
    // A password written after a scheme and before an `@` is never shown, even when a `,`,
    // `/`, `?` or `#` in it keeps the url crate from reading it as one.
    if list.split(',').any(|e| e.contains(SECRET_MARK)) && list.contains("://") {
        let written = list
            .split(',')
            .all(|e| !e.contains(SECRET_MARK) || e.contains("://"));
        for text in shown.iter().filter(|_| written) {
            assert!(!text.contains(SECRET_MARK), "a password is shown: {text}");
        }
    }
    // When every marked password is a credential, none may appear anywhere.
    if list
        .split(',')
        .all(|e| !e.contains(SECRET_MARK) || has_credentials(e))
    {
        for text in &shown {
            assert!(!text.contains(SECRET_MARK), "a password is shown: {text}");
        }
    }
    ok
}

#[test]
fn url_list() {
    fuzz_harness::run("url_list", url_lists(), |l| budget(l.len()), |l| parse_urls(l));
}
