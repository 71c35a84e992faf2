//! The same CFSSL client cases against a real multirootca and against simple-cfssl.

mod support;

use std::time::{Duration, Instant};

use cfssl_issuer::cfssl::{AuthKey, Class, Client, ClientConfig, Error, IssuerFault};
use support::{Backend, Ca, KEY_HEX, Misbehaviour, WRONG_KEY_HEX, csr, misbehaving_server, openssl_verify};

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
    let dead = format!("http://127.0.0.1:{}/", support::free_port());
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
    let list = format!(
        "http://127.0.0.1:{},http://127.0.0.1:{}",
        support::free_port(),
        support::free_port()
    );
    let client = Client::new(config(&ca, &list, "intermediate1", "", KEY_HEX)).unwrap();
    let err = assert_class(client.sign(csr("a.example").0.as_bytes()).await, Class::Retryable);
    assert!(matches!(err, Error::Unreachable { .. }), "{err}");
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
    assert!(matches!(err, Error::Tls { .. }), "{err}");
}

async fn url_that_is_not_cfssl(backend: Backend) {
    let ca = Ca::start(backend, false).await;
    let client = Client::new(config(
        &ca,
        &format!("{}/not/here", ca.url),
        "intermediate1",
        "",
        KEY_HEX,
    ))
    .unwrap();
    let err = assert_class(client.check().await, Class::Issuer(IssuerFault::Config));
    assert!(matches!(err, Error::Http { status: 404, .. }), "{err}");
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
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5), "did not hang");
    }

    #[tokio::test]
    async fn non_json_answer_is_malformed_and_retryable() {
        let url = misbehaving_server(Misbehaviour::NotJson).await;
        let err = assert_class(
            client_for(&url, Duration::from_secs(5)).check().await,
            Class::Retryable,
        );
        assert!(matches!(err, Error::Malformed { .. }), "{err}");
    }

    #[tokio::test]
    async fn oversized_answer_is_cut_off() {
        let url = misbehaving_server(Misbehaviour::Oversized(8 << 20)).await;
        let err = assert_class(
            client_for(&url, Duration::from_secs(5)).check().await,
            Class::Retryable,
        );
        assert!(
            matches!(err, Error::TooLarge { limit, .. } if limit == 1 << 20),
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
        assert!(matches!(err, Error::Http { status: 503, .. }), "{err}");
    }
}
