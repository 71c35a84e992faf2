//! Issued certificates: chain, subject, SANs, usages, lifetime and backdating, serial, key
//! identifiers; `/info`; bundles; TLS; CAs loaded from files; the CA files on disk.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use simple_cfssl::{Config, Label, Profile, RootFiles};
use time::OffsetDateTime;
use x509_parser::certificate::X509Certificate;
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::oid_registry;
use x509_parser::prelude::FromDer;

async fn sign(url: &str, http: &reqwest::Client, inner: Value) -> Value {
    let reply = call(http, "POST", &format!("{url}{AUTHSIGN}"), signed(&inner, KEY)).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.content_type, "text/plain; charset=utf-8");
    reply.json()["result"].clone()
}

fn der(pem_text: &str) -> Vec<u8> {
    pem::parse(pem_text).unwrap().into_contents()
}

fn parse(der: &[u8]) -> X509Certificate<'_> {
    x509_parser::parse_x509_certificate(der).unwrap().1
}

/// `openssl verify` of `leaf` through `intermediate` to `root`, independent of our own code.
fn openssl_verify(leaf: &str, intermediate: &str, root: &str) {
    let dir = tempfile::tempdir().unwrap();
    for (name, pem) in [("leaf.pem", leaf), ("int.pem", intermediate), ("root.pem", root)] {
        std::fs::write(dir.path().join(name), pem).unwrap();
    }
    openssl(
        &[
            "verify",
            "-CAfile",
            "root.pem",
            "-untrusted",
            "int.pem",
            "leaf.pem",
        ],
        dir.path(),
    );
}

fn intermediate(ca: &simple_cfssl::Running, label: &str) -> String {
    ca.intermediates
        .iter()
        .find(|(l, _)| l == label)
        .unwrap()
        .1
        .clone()
}

fn sans(cert: &X509Certificate<'_>) -> Vec<String> {
    let Some(ext) = cert.subject_alternative_name().unwrap() else {
        return vec![];
    };
    ext.value
        .general_names
        .iter()
        .map(|name| match name {
            GeneralName::DNSName(d) => format!("DNS:{d}"),
            GeneralName::RFC822Name(e) => format!("email:{e}"),
            GeneralName::URI(u) => format!("URI:{u}"),
            GeneralName::IPAddress(ip) => format!("IP:{ip:?}"),
            other => format!("{other:?}"),
        })
        .collect()
}

fn eku(cert: &X509Certificate<'_>) -> (bool, bool) {
    let eku = cert.extended_key_usage().unwrap().unwrap().value;
    (eku.server_auth, eku.client_auth)
}

fn key_identifier(cert: &X509Certificate<'_>, authority: bool) -> Vec<u8> {
    cert.extensions()
        .iter()
        .find_map(|ext| match ext.parsed_extension() {
            ParsedExtension::AuthorityKeyIdentifier(aki) if authority => {
                aki.key_identifier.as_ref().map(|k| k.0.to_vec())
            }
            ParsedExtension::SubjectKeyIdentifier(ski) if !authority => Some(ski.0.to_vec()),
            _ => None,
        })
        .expect("key identifier")
}

#[tokio::test]
async fn signed_leaf_follows_csr_and_profile() {
    let ca = simple_cfssl::spawn(Config::test_default(KEY)).await.unwrap();
    let http = http(None);
    let csr = csr(
        "svc.example.org",
        &[
            "svc.example.org",
            "10.0.0.1",
            "ops@example.org",
            "spiffe://example.org/svc",
            "::1",
        ],
    );
    let before = OffsetDateTime::now_utc();
    let result = sign(
        &ca.url,
        &http,
        json!({"certificate_request": csr, "label": "intermediate2", "profile": "server"}),
    )
    .await;
    let after = OffsetDateTime::now_utc();
    assert_eq!(
        result.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["certificate"]
    );
    let pem_text = result["certificate"].as_str().unwrap();
    assert!(pem_text.ends_with("-----END CERTIFICATE-----\n"));
    let intermediate = intermediate(&ca, "intermediate2");
    openssl_verify(pem_text, &intermediate, &ca.root_pem);

    let leaf_der = der(pem_text);
    let leaf = parse(&leaf_der);
    let int_der = der(&intermediate);
    let int = parse(&int_der);
    assert_eq!(leaf.subject().to_string(), "CN=svc.example.org");
    assert_eq!(leaf.issuer(), int.subject());
    // Go's order: DNS names, emails, IP addresses, URIs.
    assert_eq!(
        sans(&leaf),
        [
            "DNS:svc.example.org",
            "email:ops@example.org",
            "IP:[10, 0, 0, 1]",
            "IP:[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]",
            "URI:spiffe://example.org/svc",
        ]
    );
    let ku = leaf.key_usage().unwrap().unwrap();
    assert!(ku.critical);
    assert!(ku.value.digital_signature() && ku.value.key_encipherment());
    assert!(!ku.value.key_cert_sign());
    assert_eq!(eku(&leaf), (true, false));
    let bc = leaf.basic_constraints().unwrap().unwrap();
    assert!(bc.critical && !bc.value.ca);
    assert_eq!(key_identifier(&leaf, true), key_identifier(&int, false));
    assert!(!key_identifier(&leaf, false).is_empty());
    let serial = leaf.raw_serial();
    assert!(serial.len() <= 20 && serial[0] & 0x80 == 0, "{serial:?}");

    // notBefore: the current minute, rounded, less five minutes; the lifetime is the expiry.
    let not_before = leaf.validity().not_before.to_datetime();
    let not_after = leaf.validity().not_after.to_datetime();
    assert_eq!(not_before.second(), 0);
    assert!(
        not_before >= before - Duration::from_secs(5 * 60 + 30),
        "{not_before}"
    );
    assert!(
        not_before <= after - Duration::from_secs(5 * 60 - 30),
        "{not_before}"
    );
    assert_eq!(not_after - not_before, time::Duration::hours(720));
    assert_eq!(ca.issued_count(), 1);
}

#[tokio::test]
async fn each_profile_sets_its_usages_and_lifetime() {
    let ca = simple_cfssl::spawn(Config::test_default(KEY)).await.unwrap();
    let http = http(None);
    for (profile, hours, server, client) in [
        ("", 8760.0, true, true),
        ("server", 720.0, true, false),
        ("server-short", 600.0 / 3600.0, true, false),
        ("renewing", 105.0 / 3600.0, true, false),
        ("renewing-150s", 150.0 / 3600.0, true, false),
        ("client", 720.0, false, true),
    ] {
        let csr = csr("p.example", &["p.example"]);
        let result = sign(
            &ca.url,
            &http,
            json!({"certificate_request": csr, "label": "intermediate1", "profile": profile}),
        )
        .await;
        let leaf_der = der(result["certificate"].as_str().unwrap());
        let leaf = parse(&leaf_der);
        let lifetime = leaf.validity().not_after.timestamp() - leaf.validity().not_before.timestamp();
        assert_eq!(lifetime as f64, hours * 3600.0, "{profile}");
        assert_eq!(eku(&leaf), (server, client), "{profile}");
    }
    assert_eq!(ca.issued_count(), 6);
}

#[tokio::test]
async fn a_profile_backdate_replaces_the_five_minutes() {
    let ca = simple_cfssl::spawn(Config::test_default(KEY)).await.unwrap();
    let http = http(None);
    let csr = csr("b.example", &["b.example"]);
    let before = time::OffsetDateTime::now_utc();
    let result = sign(
        &ca.url,
        &http,
        json!({"certificate_request": csr, "label": "intermediate1", "profile": "renewing"}),
    )
    .await;
    let after = time::OffsetDateTime::now_utc();
    let leaf_der = der(result["certificate"].as_str().unwrap());
    let leaf = parse(&leaf_der);
    let not_before = leaf.validity().not_before.to_datetime();
    // The signing minute, rounded as Go's Time.Round does, less the profile's 31 s.
    let minutes = |t: time::OffsetDateTime| (t.unix_timestamp() + 30).div_euclid(60) * 60 - 31;
    let allowed = minutes(before)..=minutes(after);
    assert!(
        allowed.contains(&not_before.unix_timestamp()),
        "{not_before} not in {allowed:?}"
    );
    assert_eq!(not_before.second(), 29);
}

#[tokio::test]
async fn hosts_and_subject_in_the_request_override_the_csr() {
    let ca = simple_cfssl::spawn(Config::test_default(KEY)).await.unwrap();
    let http = http(None);
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["csr.example".to_string()]).unwrap();
    params.distinguished_name.push(rcgen::DnType::CountryName, "US");
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "Acme");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "csr.example");
    let csr = params.serialize_request(&key).unwrap().pem().unwrap();

    let result = sign(
        &ca.url,
        &http,
        json!({"certificate_request": csr, "label": "intermediate1",
               "hosts": ["h.example", "10.1.1.1", "x@y.org", "spiffe://a/b"],
               "subject": {"CN": "override", "names": [{"O": "NewO", "OU": "Ops"}]}}),
    )
    .await;
    let leaf_der = der(result["certificate"].as_str().unwrap());
    let leaf = parse(&leaf_der);
    assert_eq!(
        sans(&leaf),
        [
            "DNS:h.example",
            "email:x@y.org",
            "IP:[10, 1, 1, 1]",
            "URI:spiffe://a/b"
        ]
    );
    assert_eq!(leaf.subject().to_string(), "C=US, O=NewO, OU=Ops, CN=override");

    // An empty list removes every SAN, as Go tells `[]` from absent.
    let result = sign(
        &ca.url,
        &http,
        json!({"certificate_request": csr, "label": "intermediate1", "hosts": []}),
    )
    .await;
    let leaf_der = der(result["certificate"].as_str().unwrap());
    assert!(sans(&parse(&leaf_der)).is_empty());
}

#[tokio::test]
async fn rsa_and_openssl_csrs_are_signed() {
    let ca = simple_cfssl::spawn(Config::test_default(KEY)).await.unwrap();
    let http = http(None);
    let dir = tempfile::tempdir().unwrap();
    openssl(&["genrsa", "-out", "rsa.key", "2048"], dir.path());
    openssl(
        &[
            "req",
            "-new",
            "-key",
            "rsa.key",
            "-subj",
            "/C=DE/O=Org/CN=rsa.example",
            "-addext",
            "subjectAltName=DNS:rsa.example",
            "-addext",
            "keyUsage=critical,keyCertSign",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-out",
            "rsa.csr",
        ],
        dir.path(),
    );
    let csr = std::fs::read_to_string(dir.path().join("rsa.csr")).unwrap();
    // Junk before the PEM block is skipped, as Go's pem.Decode does.
    let result = sign(
        &ca.url,
        &http,
        json!({"certificate_request": format!("junk\n{csr}"), "label": "intermediate1", "profile": "client"}),
    )
    .await;
    let pem_text = result["certificate"].as_str().unwrap();
    openssl_verify(pem_text, &intermediate(&ca, "intermediate1"), &ca.root_pem);
    let leaf_der = der(pem_text);
    let leaf = parse(&leaf_der);
    assert_eq!(leaf.subject().to_string(), "C=DE, O=Org, CN=rsa.example");
    // The CSR's own key usage and CA flag are not copied.
    assert!(!leaf.basic_constraints().unwrap().unwrap().value.ca);
    assert!(!leaf.key_usage().unwrap().unwrap().value.key_cert_sign());
    assert_eq!(
        leaf.public_key().algorithm.algorithm,
        oid_registry::OID_PKCS1_RSAENCRYPTION
    );
}

#[tokio::test]
async fn bundle_is_the_pr_1218_shape() {
    let ca = simple_cfssl::spawn(Config::test_default(KEY)).await.unwrap();
    let http = http(None);
    let csr = csr("bundle.example", &["bundle.example", "alt.example"]);
    let result = sign(
        &ca.url,
        &http,
        json!({"certificate_request": csr, "label": "intermediate2", "profile": "server", "bundle": true}),
    )
    .await;
    let keys: Vec<&String> = result.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["bundle", "certificate"]);
    let bundle = &result["bundle"];
    let bundle_keys: Vec<&String> = bundle.as_object().unwrap().keys().collect();
    assert_eq!(
        bundle_keys,
        [
            "bundle",
            "crl_support",
            "crt",
            "expires",
            "hostnames",
            "issuer",
            "key",
            "key_size",
            "key_type",
            "leaf_expires",
            "ocsp",
            "ocsp_support",
            "root",
            "signature",
            "status",
            "subject"
        ]
    );
    let leaf = result["certificate"].as_str().unwrap();
    let intermediate = intermediate(&ca, "intermediate2");
    assert_eq!(
        bundle["bundle"].as_str().unwrap(),
        format!("{leaf}{intermediate}").trim(),
        "leaf first, then the intermediate, no root"
    );
    assert_eq!(bundle["root"].as_str().unwrap(), ca.root_pem.trim());
    assert_eq!(bundle["crt"].as_str().unwrap(), leaf.trim());
    assert_eq!(bundle["hostnames"], json!(["bundle.example", "alt.example"]));
    assert_eq!(bundle["key_type"], "256-bit ECDSA");
    assert_eq!(bundle["key_size"], 256);
    assert_eq!(bundle["signature"], "ECDSAWithSHA256");
    assert_eq!(bundle["subject"], "/CommonName=bundle.example");
    assert_eq!(
        bundle["issuer"],
        "/Organization=simple-cfssl/CommonName=simple-cfssl intermediate2"
    );
    assert_eq!(bundle["expires"], bundle["leaf_expires"]);
    assert_eq!(bundle["key"], "");
    assert_eq!(bundle["status"]["code"], 0);
    assert!(bundle["ocsp"].is_null());

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("chain.pem"), bundle["bundle"].as_str().unwrap()).unwrap();
    std::fs::write(dir.path().join("root.pem"), bundle["root"].as_str().unwrap()).unwrap();
    openssl(
        &[
            "verify",
            "-CAfile",
            "root.pem",
            "-untrusted",
            "chain.pem",
            "chain.pem",
        ],
        dir.path(),
    );

    // Turned off, `bundle` is ignored as stock multirootca ignores it.
    let mut config = Config::test_default(KEY);
    config.bundle_support = false;
    let stock = simple_cfssl::spawn(config).await.unwrap();
    let result = sign(
        &stock.url,
        &http,
        json!({"certificate_request": csr, "label": "intermediate2", "bundle": "not even a bool"}),
    )
    .await;
    assert_eq!(
        result.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["certificate"]
    );
}

#[tokio::test]
async fn info_describes_label_and_profile() {
    let ca = simple_cfssl::spawn(Config::test_default(KEY)).await.unwrap();
    let http = http(None);
    let url = format!("{}{INFO}", ca.url);
    let info = |body: &'static str| call(&http, "POST", &url, body.into());
    let reply = info(r#"{"label":"intermediate1","profile":"client"}"#).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.content_type, "application/json");
    assert!(!reply.nosniff);
    let certificate = intermediate(&ca, "intermediate1").trim_end().to_string();
    let want = json!({"success": true, "result": {"certificate": certificate,
        "usages": ["signing", "key encipherment", "client auth"], "expiry": "720h"},
        "errors": [], "messages": []});
    assert_eq!(reply.json(), want);
    assert!(
        reply
            .text()
            .starts_with("{\"success\":true,\"result\":{\"certificate\":")
    );
    assert!(
        reply
            .text()
            .ends_with(",\"expiry\":\"720h\"},\"errors\":[],\"messages\":[]}\n")
    );
    // Unknown profiles and `default` by name describe the default profile.
    for body in [
        r#"{"label":"intermediate1","profile":"nope"}"#,
        r#"{"LABEL":"intermediate1"}"#,
    ] {
        assert_eq!(info(body).await.json()["result"]["expiry"], "8760h", "{body}");
    }
}

#[tokio::test]
async fn default_label_serves_empty_labels() {
    let mut config = Config::test_default(KEY);
    config.default_label = Some("intermediate2".into());
    let ca = simple_cfssl::spawn(config).await.unwrap();
    let http = http(None);
    let reply = call(&http, "POST", &format!("{}{INFO}", ca.url), b"{}".to_vec()).await;
    assert_eq!(
        reply.json()["result"]["certificate"],
        intermediate(&ca, "intermediate2").trim_end()
    );
    let result = sign(
        &ca.url,
        &http,
        json!({"certificate_request": csr("d.example", &[])}),
    )
    .await;
    openssl_verify(
        result["certificate"].as_str().unwrap(),
        &intermediate(&ca, "intermediate2"),
        &ca.root_pem,
    );
}

#[tokio::test]
async fn additional_data_is_part_of_the_token() {
    let mut config = Config::test_default(KEY);
    let mut profile = Profile::new("with-ad", "1h", &["signing", "server auth"], Some(KEY));
    profile.additional_data = Some("extra".into());
    config.profiles.push(profile);
    config.labels.push(Label::generated("added"));
    let ca = simple_cfssl::spawn(config).await.unwrap();
    let http = http(None);
    let inner = serde_json::to_vec(
        &json!({"certificate_request": csr("ad.example", &[]), "label": "added", "profile": "with-ad"}),
    )
    .unwrap();
    let url = format!("{}{AUTHSIGN}", ca.url);
    let without = call(&http, "POST", &url, signed_bytes(&inner, KEY)).await;
    assert_eq!(without.error(), (1, "invalid token".into()));
    // The token signs the request bytes followed by the additional data.
    let mut with_ad = signed_bytes(&[&inner[..], b"extra"].concat(), KEY);
    let mut outer: Value = serde_json::from_slice(&with_ad).unwrap();
    outer["request"] = json!(base64_of(&inner));
    with_ad = serde_json::to_vec(&outer).unwrap();
    let reply = call(&http, "POST", &url, with_ad).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[tokio::test]
async fn tls_serves_loopback_names_from_a_separate_ca() {
    let mut config = Config::test_default(KEY);
    config.tls = true;
    let ca = simple_cfssl::spawn(config).await.unwrap();
    assert!(ca.url.starts_with("https://127.0.0.1:"), "{}", ca.url);
    let tls_ca = ca.tls_ca_pem.clone().unwrap();
    assert_ne!(tls_ca, ca.root_pem);
    let trusted = http(Some(&tls_ca));
    for base in [ca.url.clone(), format!("https://localhost:{}", ca.addr.port())] {
        let reply = call(&trusted, "GET", &format!("{base}{HEALTH}"), vec![]).await;
        assert_eq!(reply.status, 200, "{base}");
    }
    let result = sign(
        &ca.url,
        &trusted,
        json!({"certificate_request": csr("tls.example", &["tls.example"]), "label": "intermediate1"}),
    )
    .await;
    openssl_verify(
        result["certificate"].as_str().unwrap(),
        &intermediate(&ca, "intermediate1"),
        &ca.root_pem,
    );
    // The signing root does not vouch for the server.
    let wrong = http(Some(&ca.root_pem));
    assert!(wrong.get(format!("{}{HEALTH}", ca.url)).send().await.is_err());
    // Plain HTTP on the TLS port gets Go's answer.
    let plain = raw_exchange(ca.addr, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(
        plain,
        "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
    );
    // And the server still serves TLS afterwards.
    let reply = call(&trusted, "GET", &format!("{}{HEALTH}", ca.url), vec![]).await;
    assert_eq!(reply.status, 200);
}

async fn raw_exchange(addr: std::net::SocketAddr, request: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

/// A root and intermediates made by openssl, keys in the formats cfssl and openssl write.
fn openssl_pki(dir: &Path) {
    let run = |args: &[&str]| openssl(args, dir);
    std::fs::write(
        dir.join("ca.ext"),
        "basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign\n\
         subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n",
    )
    .unwrap();
    run(&[
        "ecparam",
        "-name",
        "prime256v1",
        "-genkey",
        "-noout",
        "-out",
        "root.key",
    ]);
    run(&[
        "req",
        "-x509",
        "-new",
        "-key",
        "root.key",
        "-subj",
        "/O=Lab/CN=Lab Root",
        "-days",
        "30",
        "-out",
        "root.pem",
    ]);
    // SEC1 "EC PRIVATE KEY", as cfssl writes.
    run(&[
        "ecparam",
        "-name",
        "prime256v1",
        "-genkey",
        "-noout",
        "-out",
        "ec.key",
    ]);
    // PKCS#1 "RSA PRIVATE KEY".
    run(&["genrsa", "-traditional", "-out", "rsa.key", "2048"]);
    for name in ["ec", "rsa"] {
        let key = format!("{name}.key");
        let csr = format!("{name}.csr");
        let cert = format!("{name}.pem");
        let subject = format!("/O=Lab/CN=Lab {name} intermediate");
        run(&["req", "-new", "-key", &key, "-subj", &subject, "-out", &csr]);
        run(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "root.pem",
            "-CAkey",
            "root.key",
            "-CAcreateserial",
            "-days",
            "30",
            "-extfile",
            "ca.ext",
            "-out",
            &cert,
        ]);
    }
}

#[tokio::test]
async fn labels_and_root_load_from_pem_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    openssl_pki(d);
    let mut config = Config::test_default(KEY);
    config.root = Some(RootFiles {
        cert: d.join("root.pem"),
        key: Some(d.join("root.key")),
    });
    let files = |name: &str| Label {
        name: name.into(),
        cert: Some(d.join(format!("{name}.pem"))),
        key: Some(d.join(format!("{name}.key"))),
    };
    config.labels = vec![files("ec"), files("rsa"), Label::generated("generated")];
    let ca = simple_cfssl::spawn(config.clone()).await.unwrap();
    let root = std::fs::read_to_string(d.join("root.pem")).unwrap();
    assert_eq!(pem::parse(&ca.root_pem).unwrap(), pem::parse(&root).unwrap());
    let http = http(None);
    for label in ["ec", "rsa", "generated"] {
        let result = sign(
            &ca.url,
            &http,
            json!({"certificate_request": csr("f.example", &["f.example"]), "label": label}),
        )
        .await;
        openssl_verify(
            result["certificate"].as_str().unwrap(),
            &intermediate(&ca, label),
            &root,
        );
    }
    let loaded = std::fs::read_to_string(d.join("ec.pem")).unwrap();
    assert_eq!(
        pem::parse(intermediate(&ca, "ec")).unwrap(),
        pem::parse(&loaded).unwrap()
    );

    // A key that is not the certificate's, and an intermediate from another root, are refused.
    let mut mismatched = config.clone();
    mismatched.labels = vec![Label {
        key: Some(d.join("rsa.key")),
        ..files("ec")
    }];
    let err = simple_cfssl::spawn(mismatched).await.err().unwrap();
    assert!(err.to_string().contains("does not match"), "{err}");
    let mut foreign = config.clone();
    foreign.root = Some(RootFiles {
        cert: d.join("ec.pem"),
        key: None,
    });
    foreign.labels = vec![files("rsa")];
    let err = simple_cfssl::spawn(foreign).await.err().unwrap();
    assert!(err.to_string().contains("not signed by the root"), "{err}");
    let mut keyless = config;
    keyless.root = Some(RootFiles {
        cert: d.join("root.pem"),
        key: None,
    });
    let err = simple_cfssl::spawn(keyless).await.err().unwrap();
    assert!(err.to_string().contains("root has no key"), "{err}");
}

#[tokio::test]
async fn ca_files_are_written_and_shutdown_stops_serving() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::test_default(KEY);
    config.tls = true;
    config.dir = Some(dir.path().join("ca"));
    let ca = simple_cfssl::spawn(config).await.unwrap();
    let files = ca.files.clone().unwrap();
    assert_eq!(std::fs::read_to_string(&files.root).unwrap(), ca.root_pem);
    assert_eq!(
        std::fs::read_to_string(files.tls_ca.as_ref().unwrap()).unwrap(),
        ca.tls_ca_pem.clone().unwrap()
    );
    for (label, path) in &files.labels {
        assert_eq!(path, &dir.path().join("ca/labels").join(format!("{label}.pem")));
        assert_eq!(std::fs::read_to_string(path).unwrap(), intermediate(&ca, label));
    }
    let addr = ca.addr;
    ca.shutdown();
    tokio::time::timeout(Duration::from_secs(5), ca.stopped())
        .await
        .unwrap();
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn bad_configs_fail_to_start() {
    let mut config = Config::test_default("not hex");
    assert!(simple_cfssl::spawn(config.clone()).await.is_err());
    config = Config::test_default(KEY);
    config.listen = "256.0.0.1:1".into();
    assert!(simple_cfssl::spawn(config).await.is_err());
}

/// The e2e fault scenarios count signatures per request (each has a key of its own) and slow
/// the CA down; neither changes what is signed.
#[tokio::test]
async fn signatures_are_counted_per_key_and_a_sign_delay_holds_each_answer() {
    let ca = simple_cfssl::spawn(Config::test_default(KEY)).await.unwrap();
    let http = http(None);
    let (once, twice) = (csr("once.example", &[]), csr("twice.example", &[]));
    let spki = |csr_pem: &str| {
        let der = der(csr_pem);
        let (_, req) = X509CertificationRequest::from_der(&der).unwrap();
        req.certification_request_info.subject_pki.raw.to_vec()
    };
    for pem in [&once, &twice, &twice] {
        sign(
            &ca.url,
            &http,
            json!({"certificate_request": pem, "label": "intermediate1"}),
        )
        .await;
    }
    assert_eq!(ca.signatures_for(&spki(&once)), 1);
    assert_eq!(ca.signatures_for(&spki(&twice)), 2);
    assert_eq!(ca.signatures_for(&spki(&csr("never.example", &[]))), 0);

    // A delay far above a sign's own time, so the delay-free sign after it is told apart
    // however busy the machine.
    ca.set_sign_delay(Duration::from_secs(3));
    let started = std::time::Instant::now();
    sign(
        &ca.url,
        &http,
        json!({"certificate_request": once, "label": "intermediate1"}),
    )
    .await;
    assert!(
        started.elapsed() >= Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(ca.signatures_for(&spki(&once)), 2);
    ca.set_sign_delay(Duration::ZERO);
    let started = std::time::Instant::now();
    sign(
        &ca.url,
        &http,
        json!({"certificate_request": once, "label": "intermediate1"}),
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(ca.issued_count(), 5);
}
