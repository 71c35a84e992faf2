//! Every refusal of the API: HTTP status, error code, message, content type and envelope, with
//! the values read back from Debian's multirootca for the same request (see `parity.rs` for the
//! live comparison).

mod common;

use common::*;
use serde_json::json;

struct Case {
    name: &'static str,
    method: &'static str,
    path: &'static str,
    body: Vec<u8>,
    status: u16,
    code: i64,
    message: &'static str,
}

fn case(
    name: &'static str,
    method: &'static str,
    path: &'static str,
    body: impl Into<Vec<u8>>,
    status: u16,
    code: i64,
    message: &'static str,
) -> Case {
    Case {
        name,
        method,
        path,
        body: body.into(),
        status,
        code,
        message,
    }
}

fn authsign_cases(csr: &str) -> Vec<Case> {
    let inner =
        |label: &str, profile: &str| json!({"certificate_request": csr, "label": label, "profile": profile});
    let a = AUTHSIGN;
    vec![
        case("GET", "GET", a, "", 405, 1, "only POST is permitted"),
        case("PUT", "PUT", a, "", 405, 1, "only POST is permitted"),
        case(
            "not JSON",
            "POST",
            a,
            "xx",
            400,
            1,
            "invalid character 'x' looking for beginning of value",
        ),
        case(
            "empty body",
            "POST",
            a,
            "",
            400,
            1,
            "unexpected end of JSON input",
        ),
        case(
            "trailing data",
            "POST",
            a,
            "{} x",
            400,
            1,
            "invalid character 'x' after top-level value",
        ),
        case(
            "array",
            "POST",
            a,
            "[1]",
            400,
            1,
            "json: cannot unmarshal array into Go value of type auth.AuthenticatedRequest",
        ),
        case(
            "null: no request",
            "POST",
            a,
            "null",
            400,
            1,
            "unexpected end of JSON input",
        ),
        case(
            "{}: no request",
            "POST",
            a,
            "{}",
            400,
            1,
            "unexpected end of JSON input",
        ),
        case(
            "token is a number",
            "POST",
            a,
            r#"{"token":1,"request":"e30="}"#,
            400,
            1,
            "json: cannot unmarshal number into Go struct field AuthenticatedRequest.token of type []uint8",
        ),
        case(
            "request not base64",
            "POST",
            a,
            r#"{"token":"AAAA","request":"!!!"}"#,
            400,
            1,
            "illegal base64 data at input byte 0",
        ),
        case(
            "token not base64",
            "POST",
            a,
            r#"{"token":"!!!","request":"e30="}"#,
            400,
            1,
            "illegal base64 data at input byte 0",
        ),
        case(
            "request unpadded",
            "POST",
            a,
            r#"{"token":"AAAA","request":"e30"}"#,
            400,
            1,
            "illegal base64 data at input byte 0",
        ),
        case(
            "timestamp is text",
            "POST",
            a,
            r#"{"timestamp":"x","request":"e30="}"#,
            400,
            1,
            "json: cannot unmarshal string into Go struct field AuthenticatedRequest.timestamp of type int64",
        ),
        case(
            "inner not JSON",
            "POST",
            a,
            r#"{"token":"AAAA","request":"eHg="}"#,
            400,
            1,
            "invalid character 'x' looking for beginning of value",
        ),
        case(
            "inner label is a number",
            "POST",
            a,
            signed_bytes(br#"{"label":5}"#, KEY),
            400,
            1,
            "json: cannot unmarshal number into Go struct field SignRequest.label of type string",
        ),
        case(
            "unknown label",
            "POST",
            a,
            signed(&inner("nope", ""), KEY),
            400,
            1,
            "bad request",
        ),
        case(
            "empty label, no default",
            "POST",
            a,
            signed(&inner("", ""), KEY),
            400,
            1,
            "bad request",
        ),
        case(
            "unknown label wins over a bad token",
            "POST",
            a,
            unsigned(&inner("nope", "")),
            400,
            1,
            "bad request",
        ),
        case(
            "unknown profile",
            "POST",
            a,
            signed(&inner("intermediate1", "nope"), KEY),
            400,
            1,
            "invalid profile",
        ),
        case(
            "default by name",
            "POST",
            a,
            signed(&inner("intermediate1", "default"), KEY),
            400,
            1,
            "invalid profile",
        ),
        case(
            "unknown profile wins over a bad token",
            "POST",
            a,
            unsigned(&inner("intermediate1", "nope")),
            400,
            1,
            "invalid profile",
        ),
        case(
            "profile without key",
            "POST",
            a,
            unsigned(&inner("intermediate1", "noauth")),
            401,
            1,
            "authorisation required",
        ),
        case(
            "wrong key",
            "POST",
            a,
            signed(&inner("intermediate1", "server"), WRONG_KEY),
            400,
            1,
            "invalid token",
        ),
        case(
            "garbage token",
            "POST",
            a,
            unsigned(&inner("intermediate1", "")),
            400,
            1,
            "invalid token",
        ),
        case(
            "empty CSR",
            "POST",
            a,
            signed(&json!({"certificate_request": "", "label": "intermediate1"}), KEY),
            400,
            1,
            "invalid request",
        ),
        case(
            "garbage CSR",
            "POST",
            a,
            signed(
                &json!({"certificate_request": "garbage", "label": "intermediate1"}),
                KEY,
            ),
            400,
            1,
            "bad request",
        ),
        case(
            "certificate instead of CSR",
            "POST",
            a,
            signed(
                &json!({"certificate_request": rcgen_cert_pem(), "label": "intermediate1"}),
                KEY,
            ),
            400,
            1,
            "bad request",
        ),
        case(
            "tampered CSR",
            "POST",
            a,
            signed(
                &json!({"certificate_request": tamper(csr), "label": "intermediate1"}),
                KEY,
            ),
            400,
            1,
            "bad request",
        ),
        case(
            "extensions requested",
            "POST",
            a,
            signed(
                &json!({"certificate_request": csr, "label": "intermediate1",
                        "extensions": [{"id": "1.2.3", "critical": false, "value": "0500"}]}),
                KEY,
            ),
            400,
            1,
            "bad request",
        ),
        case(
            "serial is text",
            "POST",
            a,
            signed(
                &json!({"certificate_request": csr, "label": "intermediate1", "serial": "5"}),
                KEY,
            ),
            400,
            1,
            r#"math/big: cannot unmarshal "\"5\"" into a *big.Int"#,
        ),
        case(
            "bundle is not a bool (the fork's field)",
            "POST",
            a,
            signed(
                &json!({"certificate_request": csr, "label": "intermediate1", "bundle": "x"}),
                KEY,
            ),
            400,
            1,
            "json: cannot unmarshal string into Go struct field SignRequest.bundle of type bool",
        ),
    ]
}

fn info_cases() -> Vec<Case> {
    let i = INFO;
    vec![
        case(
            "info GET",
            "GET",
            i,
            "",
            405,
            405,
            "Method is not allowed:\"GET\"",
        ),
        case(
            "info not JSON",
            "POST",
            i,
            "xx",
            400,
            400,
            "invalid character 'x' looking for beginning of value",
        ),
        case(
            "info empty body",
            "POST",
            i,
            "",
            400,
            400,
            "unexpected end of JSON input",
        ),
        case("info without label", "POST", i, "{}", 400, 400, "bad label"),
        case("info null", "POST", i, "null", 400, 400, "bad label"),
        case(
            "info unknown label",
            "POST",
            i,
            r#"{"label":"nope"}"#,
            400,
            400,
            "bad label",
        ),
        case(
            "info label is a number",
            "POST",
            i,
            r#"{"label":5}"#,
            400,
            400,
            "json: cannot unmarshal number into Go struct field Req.label of type string",
        ),
        case(
            "info array",
            "POST",
            i,
            "[]",
            400,
            400,
            "json: cannot unmarshal array into Go value of type info.Req",
        ),
        case(
            "health POST",
            "POST",
            HEALTH,
            "",
            405,
            405,
            "Method is not allowed:\"POST\"",
        ),
    ]
}

fn rcgen_cert_pem() -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["x.example".to_string()]).unwrap();
    params.self_signed(&key).unwrap().pem()
}

/// Flips one base64 character in the middle of the CSR so its signature no longer verifies.
fn tamper(csr: &str) -> String {
    let lines: Vec<&str> = csr.lines().collect();
    let mut line = lines[2].to_string();
    let c = if line.as_bytes()[10] == b'A' { "B" } else { "A" };
    line.replace_range(10..11, c);
    let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    out[2] = line;
    out.join("\n") + "\n"
}

#[tokio::test]
async fn every_refusal_has_multirootca_status_code_and_message() {
    let ca = simple_cfssl::spawn(simple_cfssl::Config::test_default(KEY))
        .await
        .unwrap();
    let http = http(None);
    let csr = csr("svc.example.org", &["svc.example.org"]);
    let mut failures = Vec::new();
    let cases: Vec<_> = authsign_cases(&csr).into_iter().chain(info_cases()).collect();
    let sent = cases.len() as u64;
    for case in cases {
        let reply = call(&http, case.method, &format!("{}{}", ca.url, case.path), case.body).await;
        let want_body = format!(
            "{{\"success\":false,\"result\":null,\"errors\":[{{\"code\":{},\"message\":{}}}],\"messages\":[]}}\n",
            case.code,
            // Go escapes '<', '>' and '&'; none of the messages here contains one.
            serde_json::to_string(case.message).unwrap()
        );
        // authsign writes its errors itself; the generic handlers go through http.Error.
        let want_nosniff = case.path != AUTHSIGN;
        if reply.status != case.status
            || reply.text() != want_body
            || reply.content_type != "text/plain; charset=utf-8"
            || reply.nosniff != want_nosniff
        {
            failures.push(format!(
                "{}: want {} {want_body}     got {} {} nosniff={} {}",
                case.name,
                case.status,
                reply.status,
                reply.content_type,
                reply.nosniff,
                reply.text()
            ));
        }
    }
    assert_eq!(ca.issued_count(), 0);
    // Refused or not, each request counts as one reaching the CA.
    assert_eq!(ca.request_count(), sent);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn unknown_paths_are_go_s_404() {
    let ca = simple_cfssl::spawn(simple_cfssl::Config::test_default(KEY))
        .await
        .unwrap();
    let http = http(None);
    for (method, path) in [
        ("POST", "/api/v1/cfssl/sign"),
        ("GET", "/"),
        ("POST", "/api/v1/cfssl/bundle"),
    ] {
        let reply = call(&http, method, &format!("{}{path}", ca.url), b"{}".to_vec()).await;
        assert_eq!(reply.status, 404, "{path}");
        assert_eq!(reply.text(), "404 page not found\n");
        assert_eq!(reply.content_type, "text/plain; charset=utf-8");
        assert!(reply.nosniff);
    }
}

#[tokio::test]
async fn oversized_bodies_are_refused_unread() {
    let ca = simple_cfssl::spawn(simple_cfssl::Config::test_default(KEY))
        .await
        .unwrap();
    let http = http(None);
    let huge = vec![b' '; simple_cfssl::MAX_BODY + 1];
    let reply = call(&http, "POST", &format!("{}{AUTHSIGN}", ca.url), huge.clone()).await;
    assert_eq!(reply.status, 413);
    assert_eq!(reply.error(), (1, "request body too large".into()));
    let reply = call(&http, "POST", &format!("{}{INFO}", ca.url), huge).await;
    assert_eq!(reply.status, 413);
    assert_eq!(reply.error(), (413, "request body too large".into()));
    // Just under the limit is parsed (and is, here, an empty document).
    let fits = vec![b' '; simple_cfssl::MAX_BODY];
    let reply = call(&http, "POST", &format!("{}{AUTHSIGN}", ca.url), fits).await;
    assert_eq!(reply.error(), (1, "unexpected end of JSON input".into()));
}

/// Hostile bodies get an answer, never a dropped connection.
#[tokio::test]
async fn hostile_bodies_are_answered() {
    let ca = simple_cfssl::spawn(simple_cfssl::Config::test_default(KEY))
        .await
        .unwrap();
    let http = http(None);
    let deep = "[".repeat(200_000);
    let bodies: Vec<Vec<u8>> = vec![
        deep.clone().into_bytes(),
        b"\xff\xfe\x00".to_vec(),
        signed_bytes(deep.as_bytes(), KEY),
        signed_bytes(b"\"\\ud800\"", KEY),
        signed(
            &json!({"certificate_request": "-----BEGIN CERTIFICATE REQUEST-----\n!!\n-----END CERTIFICATE REQUEST-----\n", "label": "intermediate1"}),
            KEY,
        ),
        signed(
            &json!({"certificate_request": "-----BEGIN CERTIFICATE REQUEST-----\nMAA=\n-----END CERTIFICATE REQUEST-----\n", "label": "intermediate1"}),
            KEY,
        ),
        signed(
            &json!({"certificate_request": csr("a", &[]), "label": "intermediate1", "hosts": ["bücher.example"]}),
            KEY,
        ),
        signed(
            &json!({"certificate_request": csr("a", &[]), "label": "intermediate1", "subject": {"names": [{}, null, {"C": "ÜÜ"}]}}),
            KEY,
        ),
    ];
    for body in bodies {
        for path in [AUTHSIGN, INFO] {
            let reply = call(&http, "POST", &format!("{}{path}", ca.url), body.clone()).await;
            assert!(
                reply.status == 400 || reply.status == 200,
                "{path}: {}",
                reply.text()
            );
            reply.json();
        }
    }
    let deep_reply = call(&http, "POST", &format!("{}{INFO}", ca.url), deep.into_bytes()).await;
    assert_eq!(deep_reply.error().1, "invalid character '[' exceeded max depth");
}

#[tokio::test]
async fn outage_answers_503_without_a_cfssl_body() {
    let ca = simple_cfssl::spawn(simple_cfssl::Config::test_default(KEY))
        .await
        .unwrap();
    let http = http(None);
    let url = |path: &str| format!("{}{path}", ca.url);
    ca.set_available(false);
    for (method, path) in [
        ("POST", AUTHSIGN),
        ("POST", INFO),
        ("GET", HEALTH),
        ("GET", "/nope"),
    ] {
        let reply = call(&http, method, &url(path), b"{}".to_vec()).await;
        assert_eq!(reply.status, 503, "{path}");
        assert!(reply.content_type.starts_with("text/html"));
        assert!(serde_json::from_slice::<serde_json::Value>(&reply.body).is_err());
    }
    ca.set_available(true);
    let reply = call(&http, "GET", &url(HEALTH), vec![]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(ca.request_count(), 5, "requests during the outage count too");
}

#[tokio::test]
async fn health_is_cfssl_serve_s() {
    let ca = simple_cfssl::spawn(simple_cfssl::Config::test_default(KEY))
        .await
        .unwrap();
    let reply = call(&http(None), "GET", &format!("{}{HEALTH}", ca.url), vec![]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.content_type, "application/json");
    assert_eq!(
        reply.text(),
        "{\"success\":true,\"result\":{\"healthy\":true},\"errors\":[],\"messages\":[]}\n"
    );
}
