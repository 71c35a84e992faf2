//! simple-cfssl side by side with the real multirootca (Debian's golang-cfssl, started by
//! `scripts/multirootca-lab.sh` with the same labels, profiles and key): every request below
//! must get the same status, content type, `nosniff` header and, for refusals, the same bytes.
//! Signed certificates are compared by what they say, since keys and serials differ.

mod common;

use common::*;
use serde_json::{Value, json};

/// (name, method, path, body)
type Request = (String, &'static str, &'static str, Vec<u8>);

fn requests(csr: &str) -> Vec<Request> {
    let mut out: Vec<Request> = Vec::new();
    let mut add = |name: &str, method: &'static str, path: &'static str, body: Vec<u8>| {
        out.push((name.to_string(), method, path, body));
    };
    for method in ["GET", "PUT", "DELETE"] {
        add(method, method, AUTHSIGN, vec![]);
        add(method, method, INFO, vec![]);
    }
    add("sign", "POST", "/api/v1/cfssl/sign", b"{}".to_vec());
    add("root path", "GET", "/", vec![]);
    // Malformed outer bodies: Go's JSON and base64 messages.
    let outer: &[&str] = &[
        "",
        "xx",
        "<",
        "{} x",
        "[1]",
        "\"abc\"",
        "null",
        "{}",
        "01",
        "[1,]",
        "{\"a\":1,}",
        "{\"a\":tru}",
        "{\"a\" 1}",
        "{1}",
        "[1 2]",
        "\"\\q\"",
        "\"\\u12g4\"",
        "-x",
        "1.x",
        "1ex",
        "\u{1}",
        "'",
        r#"{"token":1,"request":"e30="}"#,
        r#"{"token":"AAAA","request":"!!!"}"#,
        r#"{"token":"!!!","request":"e30="}"#,
        r#"{"token":"AAA","request":"e30="}"#,
        r#"{"token":"AAAA","request":"e30"}"#,
        r#"{"request":"AA=A"}"#,
        r#"{"request":"AA="}"#,
        r#"{"request":"A==="}"#,
        r#"{"request":"e30=e30="}"#,
        r#"{"request":"AB=="}"#,
        r#"{"request":"e30=\n"}"#,
        r#"{"token":[1,300],"request":"e30="}"#,
        r#"{"timestamp":"x","request":"e30="}"#,
        r#"{"timestamp":1.5,"request":"e30="}"#,
        r#"{"request":"!!","request":"e30="}"#,
        r#"{"timestamp":"x","token":"!!"}"#,
        r#"{"token":{},"request":"e30="}"#,
        r#"{"remote_address":"!!","request":"e30="}"#,
        r#"{"TOKEN":"AAAA","Request":"eyJsYWJlbCI6Im5vcGUifQ=="}"#,
    ];
    for body in outer {
        add(
            &format!("outer {body:?}"),
            "POST",
            AUTHSIGN,
            body.as_bytes().to_vec(),
        );
        add(&format!("info {body:?}"), "POST", INFO, body.as_bytes().to_vec());
    }
    add(
        "outer too deep",
        "POST",
        AUTHSIGN,
        "[".repeat(10_001).into_bytes(),
    );
    add(
        "outer deep but ok",
        "POST",
        AUTHSIGN,
        "[".repeat(10_000).into_bytes(),
    );
    // Malformed inner requests, properly signed.
    let inner: &[&str] = &[
        "",
        "xx",
        "[]",
        "5",
        r#"{"label":5}"#,
        r#"{"hosts":"x"}"#,
        r#"{"hosts":[1]}"#,
        r#"{"subject":"x"}"#,
        r#"{"subject":{"CN":5}}"#,
        r#"{"subject":{"names":[{"O":5}]}}"#,
        r#"{"subject":{"names":"x"}}"#,
        r#"{"subject":{"names":[5]}}"#,
        r#"{"serial":"x"}"#,
        r#"{"serial":1.5}"#,
        r#"{"serial":{"a": 1}}"#,
        r#"{"hosts":"x","serial":"y"}"#,
        r#"{"extensions":"x"}"#,
        r#"{"extensions":[5]}"#,
        r#"{"extensions":[{"id":[1,2]}]}"#,
        r#"{"extensions":[{"id":"x"}]}"#,
        r#"{"extensions":[{"id":"1.x"}]}"#,
        r#"{"extensions":[{"critical":"x"}]}"#,
        r#"{"crl_override":5}"#,
        r#"{"profile":5}"#,
        r#"{"label":null}"#,
        r#"{"label":"intermediate1","profile":"nope"}"#,
        r#"{"label":"intermediate1","profile":"default"}"#,
        r#"{"label":"intermediate1","profile":"noauth"}"#,
        r#"{"label":"intermediate1"}"#,
        r#"{"label":"intermediate1","certificate_request":"garbage"}"#,
    ];
    for body in inner {
        add(
            &format!("inner {body:?}"),
            "POST",
            AUTHSIGN,
            signed_bytes(body.as_bytes(), KEY),
        );
    }
    let with_csr =
        |label: &str, profile: &str| json!({"certificate_request": csr, "label": label, "profile": profile});
    add(
        "unknown label",
        "POST",
        AUTHSIGN,
        signed(&with_csr("nope", ""), KEY),
    );
    add(
        "unknown label, bad token",
        "POST",
        AUTHSIGN,
        unsigned(&with_csr("nope", "")),
    );
    add(
        "unknown profile, bad token",
        "POST",
        AUTHSIGN,
        unsigned(&with_csr("intermediate1", "x")),
    );
    add(
        "noauth, bad token",
        "POST",
        AUTHSIGN,
        unsigned(&with_csr("intermediate1", "noauth")),
    );
    add(
        "wrong key",
        "POST",
        AUTHSIGN,
        signed(&with_csr("intermediate1", ""), WRONG_KEY),
    );
    add(
        "upper-case key",
        "POST",
        AUTHSIGN,
        signed(&with_csr("intermediate1", ""), &KEY.to_uppercase()),
    );
    let extensions = json!({"certificate_request": csr, "label": "intermediate1",
        "extensions": [{"id": "1.2.3", "critical": false, "value": "0500"}]});
    add("extensions", "POST", AUTHSIGN, signed(&extensions, KEY));
    // Successes.
    for profile in ["", "server", "server-short", "client"] {
        add(
            &format!("sign {profile:?}"),
            "POST",
            AUTHSIGN,
            signed(&with_csr("intermediate2", profile), KEY),
        );
    }
    let hosts = json!({"certificate_request": csr, "label": "intermediate1",
        "hosts": ["h.example", "10.1.1.1", "x@y.org"], "subject": {"CN": "o", "names": [{"O": "N"}]}});
    add("hosts and subject", "POST", AUTHSIGN, signed(&hosts, KEY));
    let bundle = json!({"certificate_request": csr, "label": "intermediate1", "bundle": true});
    add("bundle ignored by stock", "POST", AUTHSIGN, signed(&bundle, KEY));
    for body in [
        r#"{"label":"intermediate1"}"#,
        r#"{"label":"intermediate2","profile":"server"}"#,
        r#"{"label":"intermediate1","profile":"nope"}"#,
        r#"{"LABEL":"intermediate1","bare":5}"#,
        r#"{"label":"intermediate1","label":"nope"}"#,
        r#"{"label":"nope","label":"intermediate1"}"#,
    ] {
        add(&format!("info {body}"), "POST", INFO, body.as_bytes().to_vec());
    }
    out
}

/// What a signed certificate says, minus keys, serials and signatures.
fn describe_cert(pem_text: &str) -> Value {
    let der = pem::parse(pem_text).unwrap().into_contents();
    let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
    let mut extensions: Vec<String> = cert
        .extensions()
        .iter()
        .map(|ext| {
            use x509_parser::extensions::ParsedExtension::*;
            let what = match ext.parsed_extension() {
                KeyUsage(ku) => format!("ku {ku}"),
                ExtendedKeyUsage(eku) => format!("eku {eku:?}"),
                BasicConstraints(bc) => format!("bc {bc:?}"),
                SubjectAlternativeName(san) => format!("san {:?}", san.general_names),
                SubjectKeyIdentifier(_) => "ski".into(),
                AuthorityKeyIdentifier(_) => "aki".into(),
                other => format!("other {other:?}"),
            };
            format!("{what} critical={}", ext.critical)
        })
        .collect();
    extensions.sort();
    let validity = cert.validity();
    json!({
        "subject": cert.subject().to_string(),
        "lifetime": validity.not_after.timestamp() - validity.not_before.timestamp(),
        // The current minute, rounded, less five: within 5 +- 0.5 minutes of now.
        "backdated_5_minutes": (4..=5).contains(&(time::OffsetDateTime::now_utc() - validity.not_before.to_datetime()).whole_minutes()),
        "not_before_on_the_minute": validity.not_before.to_datetime().second() == 0,
        "serial_bytes_max": cert.raw_serial().len() <= 20,
        "trailing_newline": pem_text.ends_with('\n'),
        "extensions": extensions,
    })
}

/// The comparable part of a reply.
fn comparable(reply: &Reply) -> Value {
    let mut out = json!({
        "status": reply.status,
        "content_type": reply.content_type,
        "nosniff": reply.nosniff,
    });
    let Ok(mut body) = serde_json::from_slice::<Value>(&reply.body) else {
        out["text"] = json!(reply.text());
        return out;
    };
    if reply.status != 200 {
        // Refusals must match byte for byte.
        out["text"] = json!(reply.text());
        return out;
    }
    let result = &mut body["result"];
    if let Some(cert) = result
        .get("certificate")
        .and_then(Value::as_str)
        .map(str::to_string)
    {
        if result.get("usages").is_some() {
            // /info: the CA certificates differ; what is around them must not.
            result["certificate"] = json!(cert.ends_with('\n'));
        } else {
            result["certificate"] = describe_cert(&cert);
        }
    }
    out["body"] = body;
    out
}

#[tokio::test]
async fn answers_match_the_real_multirootca() {
    // Fails rather than skips without multirootca: a parity test that passes without its
    // reference server would check nothing.
    let lab = simple_cfssl::multirootca::Multirootca::start(false).expect("start multirootca");
    let real = lab.url.clone();
    let mut config = simple_cfssl::Config::test_default(KEY);
    // Stock multirootca knows no `bundle` field.
    config.bundle_support = false;
    // The lab's default profile lacks the client auth of the project's test default.
    config.profiles[0].usages.retain(|u| u != "client auth");
    let ours = simple_cfssl::spawn(config).await.unwrap();
    let http = http(None);
    // No URI SAN: the 2016 multirootca drops those (newer cfssl and simple-cfssl keep them).
    let csr = common::csr(
        "svc.example.org",
        &["svc.example.org", "10.0.0.1", "ops@example.org"],
    );
    let mut mismatches = Vec::new();
    let requests = requests(&csr);
    for (name, method, path, body) in &requests {
        let want = comparable(&call(&http, method, &format!("{real}{path}"), body.clone()).await);
        let got = comparable(&call(&http, method, &format!("{}{path}", ours.url), body.clone()).await);
        if want != got {
            mismatches.push(format!("{name}:\n  multirootca  {want}\n  simple-cfssl {got}"));
        }
    }
    // The one deliberate difference: simple-cfssl has `cfssl serve`'s health check.
    let health = HEALTH;
    let real_health = call(&http, "GET", &format!("{real}{health}"), vec![]).await;
    assert_eq!(
        (real_health.status, real_health.text().as_str()),
        (404, "404 page not found\n")
    );
    let our_health = call(&http, "GET", &format!("{}{health}", ours.url), vec![]).await;
    assert_eq!(our_health.status, 200);
    assert!(
        mismatches.is_empty(),
        "{} of {} differ:\n{}",
        mismatches.len(),
        requests.len(),
        mismatches.join("\n")
    );
}
