//! The same CFSSL client cases against a real multirootca and against simple-cfssl.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

mod support;

use std::time::{Duration, Instant};

use cfssl_issuer::cfssl::{AuthKey, Class, Client, ClientConfig, Error, Failure, IssuerFault};
use cfssl_issuer::pki::{CsrError, KeyType};
use support::{
    Backend, Ca, KEY_HEX, Misbehaviour, WRONG_KEY_HEX, csr, csr_with, misbehaving_server, openssl_verify,
    other_cert_manager_keys, recording_server,
};

fn config(ca: &Ca, url: &str, label: &str, profile: &str, key_hex: &str) -> ClientConfig {
    let mut config = ClientConfig::new(url, label, AuthKey::from_hex(key_hex).unwrap());
    config.profile = profile.to_string();
    config.ca_bundle_pem = ca.tls_ca_pem.clone().map(String::into_bytes);
    config
}

fn client(ca: &Ca, label: &str, profile: &str, key_hex: &str) -> Client {
    Client::new(config(ca, &ca.url, label, profile, key_hex)).unwrap()
}

fn assert_class(result: Result<impl std::fmt::Debug, Error>, want: Class) -> Error {
    let err = result.expect_err("expected an error");
    assert_eq!(err.class(), want, "{err}");
    let text = err.to_string();
    assert!(
        !text.contains(KEY_HEX) && !text.contains(WRONG_KEY_HEX),
        "key leaked into {text}"
    );
    err
}

async fn sign_ok(backend: Backend) {
    let ca = Ca::start(backend, false).await;
    let client = client(&ca, "intermediate1", "server", KEY_HEX);
    let (csr, key) = csr("svc.example.org");
    let signed = client.sign(csr.as_bytes()).await.unwrap();
    let certs = pem::parse_many(&signed.chain.certificates).unwrap();
    assert_eq!(certs.len(), 2, "leaf then the intermediate");
    openssl_verify(&signed.chain.certificates, &ca.root_pem).unwrap();
    let (_, leaf) = x509_parser::parse_x509_certificate(certs[0].contents()).unwrap();
    assert_eq!(
        leaf.public_key().raw,
        rcgen::PublicKeyData::subject_public_key_info(&key)
    );
    let san = leaf.subject_alternative_name().unwrap().unwrap().value;
    assert!(format!("{:?}", san.general_names).contains("svc.example.org"));
    let days = (leaf.validity().not_after.timestamp() - leaf.validity().not_before.timestamp()) / 86400;
    assert!(
        (29..=31).contains(&days),
        "server profile is 720h, got {days} days"
    );
}

async fn check_ok(backend: Backend) {
    let ca = Ca::start(backend, false).await;
    let health = client(&ca, "intermediate2", "server-short", KEY_HEX)
        .check()
        .await
        .unwrap();
    assert_eq!(health.info.expiry, "600s");
    assert_eq!(health.info.endpoint, ca.url);
    assert!(health.info.certificate.contains("BEGIN CERTIFICATE"));
}

async fn wrong_key(backend: Backend) {
    let ca = Ca::start(backend, false).await;
    let client = client(&ca, "intermediate1", "", WRONG_KEY_HEX);
    let err = assert_class(client.check().await, Class::Issuer(IssuerFault::Credentials));
    assert!(err.to_string().contains("invalid token"), "{err}");
    assert_class(
        client.sign(csr("a.example").0.as_bytes()).await,
        Class::Issuer(IssuerFault::Credentials),
    );
}

async fn unknown_label(backend: Backend) {
    let ca = Ca::start(backend, false).await;
    let client = client(&ca, "nope", "", KEY_HEX);
    assert_class(client.check().await, Class::Issuer(IssuerFault::Config));
    let err = assert_class(
        client.sign(csr("a.example").0.as_bytes()).await,
        Class::Issuer(IssuerFault::Config),
    );
    assert!(err.to_string().contains("\"nope\""), "names the label: {err}");
}

async fn unknown_profile(backend: Backend) {
    let ca = Ca::start(backend, false).await;
    let client = client(&ca, "intermediate1", "doesnotexist", KEY_HEX);
    // /info alone would pass (multirootca falls back to the default profile): the credential
    // probe is what finds it.
    let err = assert_class(client.check().await, Class::Issuer(IssuerFault::Config));
    assert!(err.to_string().contains("invalid profile"), "{err}");
    assert_class(
        client.sign(csr("a.example").0.as_bytes()).await,
        Class::Issuer(IssuerFault::Config),
    );
}

async fn profile_without_auth(backend: Backend) {
    let ca = Ca::start(backend, false).await;
    let client = client(&ca, "intermediate1", "noauth", KEY_HEX);
    let err = assert_class(client.check().await, Class::Issuer(IssuerFault::Config));
    assert!(err.to_string().contains("authorisation required"), "{err}");
}

async fn empty_and_garbage_csr(backend: Backend) {
    let ca = Ca::start(backend, false).await;
    let client = client(&ca, "intermediate1", "", KEY_HEX);
    for bad in [
        "",
        "garbage",
        "-----BEGIN CERTIFICATE REQUEST-----\naGVsbG8=\n-----END CERTIFICATE REQUEST-----\n",
    ] {
        let err = assert_class(client.sign(bad.as_bytes()).await, Class::Permanent);
        assert!(matches!(err, Error::Csr(_)), "{err}");
    }
    assert_eq!(ca.issued_count().unwrap_or(0), 0);
}

async fn failover_from_dead_first_url(backend: Backend) {
    let ca = Ca::start(backend, false).await;
    let closed = support::ClosedPort::new();
    let dead = format!("{}/", closed.url());
    let list = format!(" {dead} , {}/ ", ca.url);
    let client = Client::new(config(&ca, &list, "intermediate1", "", KEY_HEX)).unwrap();
    let signed = client.sign(csr("a.example").0.as_bytes()).await.unwrap();
    assert_eq!(signed.endpoint, ca.url);
    // A definite refusal from the first live CA is final: no failover to a second URL.
    let twice = format!("{},{}", ca.url, ca.url);
    let wrong = Client::new(config(&ca, &twice, "intermediate1", "", WRONG_KEY_HEX)).unwrap();
    assert_class(wrong.check().await, Class::Issuer(IssuerFault::Credentials));
}

async fn all_urls_dead_is_retryable(backend: Backend) {
    let ca = Ca::start(backend, false).await;
    let closed = [support::ClosedPort::new(), support::ClosedPort::new()];
    let list = format!("{},{}", closed[0].url(), closed[1].url());
    let client = Client::new(config(&ca, &list, "intermediate1", "", KEY_HEX)).unwrap();
    let err = assert_class(client.sign(csr("a.example").0.as_bytes()).await, Class::Retryable);
    assert!(matches!(err.failure(), Some(Failure::Unreachable(_))), "{err}");
}

async fn tls_with_and_without_ca_bundle(backend: Backend) {
    let ca = Ca::start(backend, true).await;
    assert!(ca.url.starts_with("https://"));
    let trusted = client(&ca, "intermediate1", "", KEY_HEX);
    let signed = trusted.sign(csr("tls.example").0.as_bytes()).await.unwrap();
    openssl_verify(&signed.chain.certificates, &ca.root_pem).unwrap();

    let mut untrusted_config = config(&ca, &ca.url, "intermediate1", "", KEY_HEX);
    untrusted_config.ca_bundle_pem = None;
    let untrusted = Client::new(untrusted_config).unwrap();
    let err = assert_class(untrusted.check().await, Class::Issuer(IssuerFault::Tls));
    assert!(matches!(err.failure(), Some(Failure::Tls(_))), "{err}");
}

/// A 404 from a path that is not the CFSSL API is not the CA's verdict: the next URL is
/// tried, and with none left the issuer is unreachable (retryable), not misconfigured.
async fn url_that_is_not_cfssl(backend: Backend) {
    let ca = Ca::start(backend, false).await;
    let wrong = format!("{}/not/here", ca.url);
    let client = Client::new(config(&ca, &wrong, "intermediate1", "", KEY_HEX)).unwrap();
    let err = assert_class(client.check().await, Class::Retryable);
    assert!(
        matches!(err.failure(), Some(Failure::Http { status: 404, .. })),
        "{err}"
    );
    let list = format!("{wrong},{}", ca.url);
    let client = Client::new(config(&ca, &list, "intermediate1", "", KEY_HEX)).unwrap();
    assert_eq!(client.check().await.unwrap().info.endpoint, ca.url);
    let signed = client.sign(csr("a.example").0.as_bytes()).await.unwrap();
    assert_eq!(signed.endpoint, ca.url);
}

/// P-384, P-521 (ecdsa-with-SHA512) and RSA 4096 requests are signed, and the certificates
/// verify with openssl against the CA root.
async fn sign_every_key_type(backend: Backend) {
    let ca = Ca::start(backend, false).await;
    let client = client(&ca, "intermediate1", "server", KEY_HEX);
    for (name, key) in other_cert_manager_keys() {
        let (csr, key) = csr_with("keys.example.org", key);
        let signed = client
            .sign(csr.as_bytes())
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        openssl_verify(&signed.chain.certificates, &ca.root_pem).unwrap_or_else(|e| panic!("{name}: {e}"));
        let leaf = pem::parse_many(&signed.chain.certificates).unwrap().remove(0);
        let (_, cert) = x509_parser::parse_x509_certificate(leaf.contents()).unwrap();
        assert_eq!(
            cert.public_key().raw,
            rcgen::PublicKeyData::subject_public_key_info(&key),
            "{name}"
        );
    }
}

/// CFSSL built before Go 1.13 (Debian's 2016 multirootca) cannot sign Ed25519 keys and
/// answers `bad request`; the error says so.
async fn ed25519_is_refused_with_a_clear_message(backend: Backend) {
    let ca = Ca::start(backend, false).await;
    let client = client(&ca, "intermediate1", "server", KEY_HEX);
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    let (csr, _) = csr_with("ed.example.org", key);
    let err = assert_class(client.sign(csr.as_bytes()).await, Class::Permanent);
    assert!(
        matches!(err.failure(), Some(Failure::UnsupportedKey { key_type: KeyType::Ed25519, message }) if message == "bad request"),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("the CA does not sign Ed25519 keys"),
        "{err}"
    );
    assert_eq!(ca.issued_count().unwrap_or(0), 0);
}

async fn bundle_gives_chain_and_root(backend: Backend) {
    let ca = Ca::start(backend, false).await;
    let mut config = config(&ca, &ca.url, "intermediate2", "", KEY_HEX);
    config.bundle = true;
    let signed = Client::new(config)
        .unwrap()
        .sign(csr("bundle.example").0.as_bytes())
        .await
        .unwrap();
    assert_eq!(pem::parse_many(&signed.chain.certificates).unwrap().len(), 2);
    openssl_verify(&signed.chain.certificates, &ca.root_pem).unwrap();
    if ca.supports_bundle {
        let root = signed.chain.ca.expect("the CA sent its root");
        assert_eq!(pem::parse(root).unwrap(), pem::parse(&ca.root_pem).unwrap());
    } else {
        // Stock multirootca ignores `bundle`: the chain is completed from /info, root unknown.
        assert_eq!(signed.chain.ca, None);
    }
}

macro_rules! conformance {
    ($backend_mod:ident, $backend:ident, [$($case:ident),* $(,)?]) => {
        mod $backend_mod {
            $(
                #[tokio::test]
                async fn $case() {
                    super::$case(super::Backend::$backend).await
                }
            )*
        }
    };
}

conformance!(
    multirootca,
    Multirootca,
    [
        sign_ok,
        check_ok,
        wrong_key,
        unknown_label,
        unknown_profile,
        profile_without_auth,
        empty_and_garbage_csr,
        failover_from_dead_first_url,
        all_urls_dead_is_retryable,
        tls_with_and_without_ca_bundle,
        url_that_is_not_cfssl,
        bundle_gives_chain_and_root,
        sign_every_key_type,
        ed25519_is_refused_with_a_clear_message,
    ]
);

conformance!(
    simple_cfssl,
    SimpleCfssl,
    [
        sign_ok,
        check_ok,
        wrong_key,
        unknown_label,
        unknown_profile,
        profile_without_auth,
        empty_and_garbage_csr,
        failover_from_dead_first_url,
        all_urls_dead_is_retryable,
        tls_with_and_without_ca_bundle,
        url_that_is_not_cfssl,
        bundle_gives_chain_and_root,
        sign_every_key_type,
        ed25519_is_refused_with_a_clear_message,
    ]
);

/// Servers that misbehave are independent of the CA implementation.
mod misbehaving {
    use super::*;

    fn client_for(url: &str, timeout: Duration) -> Client {
        cfssl_issuer::install_crypto_provider();
        let mut config = ClientConfig::new(url, "intermediate1", AuthKey::from_hex(KEY_HEX).unwrap());
        config.timeout = timeout;
        Client::new(config).unwrap()
    }

    #[tokio::test]
    async fn hanging_server_times_out() {
        let url = misbehaving_server(Misbehaviour::Hang).await;
        let started = Instant::now();
        let err = assert_class(
            client_for(&url, Duration::from_millis(300)).check().await,
            Class::Retryable,
        );
        assert!(matches!(err.failure(), Some(Failure::Timeout { .. })), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5), "did not hang");
    }

    #[tokio::test]
    async fn non_json_answer_is_malformed_and_retryable() {
        let url = misbehaving_server(Misbehaviour::NotJson).await;
        let err = assert_class(
            client_for(&url, Duration::from_secs(5)).check().await,
            Class::Retryable,
        );
        assert!(matches!(err.failure(), Some(Failure::Malformed(_))), "{err}");
    }

    #[tokio::test]
    async fn oversized_answer_is_cut_off() {
        let url = misbehaving_server(Misbehaviour::Oversized(8 << 20)).await;
        let err = assert_class(
            client_for(&url, Duration::from_secs(5)).check().await,
            Class::Retryable,
        );
        assert!(
            matches!(err.failure(), Some(Failure::TooLarge { limit }) if *limit == 1 << 20),
            "{err}"
        );
    }

    #[tokio::test]
    async fn proxy_503_fails_over_to_the_next_url() {
        let bad = misbehaving_server(Misbehaviour::ServiceUnavailable).await;
        let ca = Ca::start(Backend::Multirootca, false).await;
        let client = client_for(&format!("{bad},{}", ca.url), Duration::from_secs(5));
        assert_eq!(client.check().await.unwrap().info.endpoint, ca.url);
        let only_bad = client_for(&bad, Duration::from_secs(5));
        let err = assert_class(only_bad.check().await, Class::Retryable);
        assert!(
            matches!(err.failure(), Some(Failure::Http { status: 503, .. })),
            "{err}"
        );
    }

    /// A proxy's 4xx/5xx page is not the CA's answer: the next URL signs; with no other URL the
    /// error is retryable (the issuer is CAUnreachable) and quotes the page's first 120
    /// characters of text.
    #[tokio::test]
    async fn proxy_answers_fail_over_to_the_next_url() {
        let ca = Ca::start(Backend::Multirootca, false).await;
        for status in [400, 404, 405, 413, 502] {
            let bad = misbehaving_server(Misbehaviour::Proxy(status)).await;
            let client = client_for(&format!("{bad},{}", ca.url), Duration::from_secs(5));
            let signed = client.sign(csr("a.example").0.as_bytes()).await;
            assert_eq!(
                signed.map(|s| s.endpoint).ok().as_ref(),
                Some(&ca.url),
                "{status}"
            );
            let only_bad = client_for(&bad, Duration::from_secs(5));
            let err = assert_class(only_bad.check().await, Class::Retryable);
            // The page's words, not its markup, up to 120 characters.
            let page = format!("{status} {status} from the proxy {}", "p".repeat(200));
            let want = &page[..120];
            assert!(
                matches!(err.failure(), Some(Failure::Http { status: s, snippet }) if *s == status && snippet == want),
                "{status}: {err:?}"
            );
            assert!(err.to_string().contains(want), "{err}");
            assert_eq!(
                cfssl_issuer::controllers::signing::blame(&err),
                cfssl_issuer::api::ReadyReason::CaUnreachable,
                "{status}"
            );
        }
    }

    /// `user:password@` in a URL is sent as basic auth and shown nowhere: not in any error
    /// (which is what conditions, Events and logs carry), nor in the client's Debug.
    #[tokio::test]
    async fn credentials_in_the_url_are_sent_but_never_shown() {
        const SECRET: &str = "s3cret-pw";
        let (recorder, heads) = recording_server().await;
        let creds = |base: &str| base.replacen("://", "://operator:s3cret-pw@", 1);
        let closed = support::ClosedPort::new();
        let dead = closed.url();
        let tls_to_plain = recorder.replacen("http://", "https://", 1);
        let urls = [
            creds(&dead),
            creds(&tls_to_plain),
            creds(&recorder),
            format!("{},{}", creds(&dead), creds(&recorder)),
        ];
        let mut errors = Vec::new();
        for url in &urls {
            let client = client_for(url, Duration::from_secs(5));
            assert!(!format!("{client:?}").contains(SECRET), "{client:?}");
            errors.push(client.check().await.unwrap_err());
            errors.push(client.sign(csr("a.example").0.as_bytes()).await.unwrap_err());
        }
        let mut bad_config = ClientConfig::new(
            "ftp://operator:s3cret-pw@ca",
            "l",
            AuthKey::from_hex(KEY_HEX).unwrap(),
        );
        bad_config.timeout = Duration::from_secs(1);
        errors.push(Client::new(bad_config).unwrap_err());
        let kinds: Vec<&str> = errors.iter().map(kind).collect();
        for want in ["Unreachable", "Tls", "Http", "Endpoints"] {
            assert!(kinds.contains(&want), "{want} not among {kinds:?}");
        }
        for err in &errors {
            let mut texts = vec![err.to_string(), format!("{err:?}")];
            let mut source = std::error::Error::source(err);
            while let Some(e) = source {
                texts.push(e.to_string());
                source = e.source();
            }
            for text in texts {
                assert!(!text.contains(SECRET), "password shown in {text}");
            }
            assert!(err.to_string().contains("***@"), "{err}");
        }
        let basic = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "operator:s3cret-pw");
        let heads = heads.lock().unwrap();
        assert!(
            heads.iter().any(|h| h
                .to_ascii_lowercase()
                .contains(&format!("authorization: basic {}", basic.to_ascii_lowercase()))),
            "basic auth not sent: {heads:?}"
        );
    }

    fn kind(err: &Error) -> &'static str {
        match (err, err.failure()) {
            (_, Some(Failure::Unreachable(_))) => "Unreachable",
            (_, Some(Failure::Tls(_))) => "Tls",
            (_, Some(Failure::Http { .. })) => "Http",
            (Error::Endpoints(_), _) => "Endpoints",
            _ => "other",
        }
    }

    /// A CSR over 64 KiB (here: 2,000 SANs) is refused before anything is sent.
    #[tokio::test]
    async fn csr_over_64_kib_never_reaches_the_ca() {
        let (url, heads) = recording_server().await;
        let names: Vec<String> = (0..2000)
            .map(|i| format!("host-{i:05}.a-rather-long-subdomain.example.org"))
            .collect();
        let key = rcgen::KeyPair::generate().unwrap();
        let pem = rcgen::CertificateParams::new(names)
            .unwrap()
            .serialize_request(&key)
            .unwrap()
            .pem()
            .unwrap();
        assert!(pem.len() > 64 * 1024, "{}", pem.len());
        let err = assert_class(
            client_for(&url, Duration::from_secs(5))
                .sign(pem.as_bytes())
                .await,
            Class::Permanent,
        );
        assert!(
            matches!(err, Error::Csr(CsrError::TooLarge { size }) if size == pem.len()),
            "{err:?}"
        );
        assert!(err.to_string().contains("over the 64 KiB limit"), "{err}");
        assert!(heads.lock().unwrap().is_empty(), "the CA was called");
    }
}

/// `spec.caBundle` replaces the system roots for its issuer; without it the system roots and
/// `SSL_CERT_FILE` apply. Run through the binary's `check` (its `--ca-file` is the same client
/// setting as `spec.caBundle`) so that each case gets its own `SSL_CERT_FILE`.
mod trust {
    use super::*;

    #[tokio::test]
    async fn ca_bundle_replaces_the_system_roots() {
        let ca = Ca::start(Backend::SimpleCfssl, true).await;
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let right = write("tls-ca.pem", ca.tls_ca_pem.as_deref().unwrap());
        // Another CA: the signing root, which did not issue the TLS server certificate.
        let other = write("other-ca.pem", &ca.root_pem);
        let key = write("key", KEY_HEX);
        // (SSL_CERT_FILE, --ca-file / caBundle, trusted)
        let cases = [
            (&right, None, true),
            (&other, None, false),
            (&other, Some(&right), true),
            (&right, Some(&other), false),
        ];
        for (system, bundle, trusted) in cases {
            let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_cfssl-issuer"));
            cmd.args([
                "check",
                "--label",
                "intermediate1",
                "--timeout-seconds",
                "5",
                "--url",
            ])
            .arg(&ca.url)
            .arg("--key-file")
            .arg(&key)
            .env("SSL_CERT_FILE", system)
            .env_remove("SSL_CERT_DIR");
            if let Some(bundle) = bundle {
                cmd.arg("--ca-file").arg(bundle);
            }
            let out = cmd.output().await.unwrap();
            let row = format!("system {system:?} bundle {bundle:?}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.success(), trusted, "{row}: {stderr}");
            if !trusted {
                assert_eq!(out.status.code(), Some(1), "{row}");
                assert!(stderr.contains("TLS failure"), "{row}: {stderr}");
            }
        }
    }
}
