//! The reconcilers end to end against real CAs (multirootca and simple-cfssl), with the API
//! server scripted: an issuer is checked, a request is signed, and every failure lands on the
//! right resource with the right outcome.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

mod support;

use std::sync::Arc;

use base64::Engine;
use cfssl_issuer::api::GROUP;
use cfssl_issuer::api::certmanager::CertificateRequest;
use cfssl_issuer::controllers::{Recheck, certificaterequest, issuer};
use kube::runtime::controller::Action;
use serde_json::{Value, json};
use support::apimock::*;
use support::{Backend, Ca, KEY_HEX, WRONG_KEY_HEX, csr, openssl_verify};

const CR_PATH: &str = "/apis/cert-manager.io/v1/namespaces/apps/certificaterequests/web";
const ISSUER_PATH: &str = "/apis/cfssl-issuer.wikimedia.org/v1alpha1/namespaces/apps/issuers/ca";

fn approved_request(csr_pem: &str) -> CertificateRequest {
    with_csr(
        request(
            "web",
            GROUP,
            "Issuer",
            json!([{"type": "Approved", "status": "True", "reason": "cert-manager.io"}]),
        ),
        csr_pem,
    )
}

fn ca_issuer(ca: &Ca, profile: &str) -> cfssl_issuer::api::Issuer {
    let mut i = issuer("apps", "ca", &ca.url);
    i.spec.profile = Some(profile.into());
    i
}

fn decode(field: &Value) -> String {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(field.as_str().unwrap())
        .unwrap();
    String::from_utf8(bytes).unwrap()
}

async fn issuer_check(backend: Backend, key: &str, profile: &str) -> (Value, Action) {
    let ca = Ca::start(backend, false).await;
    let (ctx, mut api) = context(vec![], vec![]);
    let issuer = ca_issuer(&ca, profile);
    let task = tokio::spawn(issuer::reconcile(Arc::new(issuer.clone()), ctx.issuers.clone()));
    expect_secret_read(&mut api, "apps", &secret(key, "1")).await;
    let body = expect_status_apply(&mut api, ISSUER_PATH, &serde_json::to_value(&issuer).unwrap()).await;
    let condition = body["status"]["conditions"][0].clone();
    // The Event repeats the reason, except that a Ready issuer over plain http:// (these CAs)
    // gets a Warning saying so.
    let event = match (condition["status"].as_str(), ca.url.starts_with("http://")) {
        (Some("True"), true) => "InsecureTransport",
        _ => condition["reason"].as_str().unwrap(),
    };
    expect_event(&mut api, "apps", event).await;
    (condition, finish(task).await.unwrap())
}

async fn happy_path(backend: Backend) {
    let ca = Ca::start(backend, false).await;
    let (ctx, mut api) = context(vec![checked(ca_issuer(&ca, "server"))], vec![]);
    let (csr_pem, key) = csr("web.apps.example.org");
    let cr = approved_request(&csr_pem);
    let task = tokio::spawn(certificaterequest::reconcile(
        Arc::new(cr.clone()),
        ctx.requests.clone(),
    ));
    expect_secret_read(&mut api, "apps", &secret(KEY_HEX, "1")).await;
    let body = expect_status_apply(&mut api, CR_PATH, &serde_json::to_value(&cr).unwrap()).await;
    expect_event(&mut api, "apps", "Issued").await;
    assert_eq!(finish(task).await.unwrap(), Action::await_change());

    let ready = &body["status"]["conditions"][0];
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str()),
        (Some("True"), Some("Issued"))
    );
    let chain = decode(&body["status"]["certificate"]);
    assert!(
        !chain.contains('\r'),
        "status.certificate uses LF line endings: {chain:?}"
    );
    openssl_verify(&chain, &ca.root_pem).expect("chain verifies to the CFSSL root");
    let leaf = pem::parse_many(&chain).unwrap().remove(0);
    let (_, cert) = x509_parser::parse_x509_certificate(leaf.contents()).unwrap();
    assert_eq!(
        cert.public_key().raw,
        rcgen::PublicKeyData::subject_public_key_info(&key)
    );
    assert_eq!(ca.issued_count().unwrap_or(1), 1);
}

async fn wrong_key_makes_the_issuer_not_ready(backend: Backend) {
    let (condition, action) = issuer_check(backend, WRONG_KEY_HEX, "server").await;
    assert_eq!(
        (condition["status"].as_str(), condition["reason"].as_str()),
        (Some("False"), Some("InvalidCredentials"))
    );
    assert!(condition["message"].as_str().unwrap().contains("invalid token"));
    assert_eq!(action, Action::requeue(std::time::Duration::from_secs(1)));
}

async fn unknown_profile_makes_the_issuer_not_ready(backend: Backend) {
    let (condition, _) = issuer_check(backend, KEY_HEX, "no-such-profile").await;
    assert_eq!(condition["reason"], "InvalidConfig", "{condition}");
}

async fn right_key_makes_the_issuer_ready(backend: Backend) {
    let (condition, action) = issuer_check(backend, KEY_HEX, "server").await;
    assert_eq!(
        (condition["status"].as_str(), condition["reason"].as_str()),
        (Some("True"), Some("Checked"))
    );
    assert_eq!(action, Action::requeue(std::time::Duration::from_secs(60)));
}

async fn garbage_csr_fails_for_good(backend: Backend) {
    let ca = Ca::start(backend, false).await;
    let (ctx, mut api) = context(vec![checked(ca_issuer(&ca, "server"))], vec![]);
    let cr = approved_request(
        "-----BEGIN CERTIFICATE REQUEST-----\nZ2FyYmFnZQ==\n-----END CERTIFICATE REQUEST-----\n",
    );
    let task = tokio::spawn(certificaterequest::reconcile(
        Arc::new(cr.clone()),
        ctx.requests.clone(),
    ));
    expect_secret_read(&mut api, "apps", &secret(KEY_HEX, "1")).await;
    let body = expect_status_apply(&mut api, CR_PATH, &serde_json::to_value(&cr).unwrap()).await;
    expect_event(&mut api, "apps", "PermanentError").await;
    assert_eq!(finish(task).await.unwrap(), Action::await_change(), "not retried");
    assert_eq!(body["status"]["conditions"][0]["reason"], "Failed");
    assert!(body["status"]["failureTime"].is_string());
    assert_eq!(ca.issued_count().unwrap_or(0), 0);
}

async fn key_rotated_at_the_ca_blames_the_issuer(backend: Backend) {
    let ca = Ca::start(backend, false).await;
    let (ctx, mut api, mut rechecks) = context_with_rechecks(vec![checked(ca_issuer(&ca, "server"))], vec![]);
    let (csr_pem, _) = csr("web.apps.example.org");
    let cr = approved_request(&csr_pem);
    let task = tokio::spawn(certificaterequest::reconcile(
        Arc::new(cr.clone()),
        ctx.requests.clone(),
    ));
    expect_secret_read(&mut api, "apps", &secret(WRONG_KEY_HEX, "2")).await;
    let body = expect_status_apply(&mut api, CR_PATH, &serde_json::to_value(&cr).unwrap()).await;
    expect_event(&mut api, "apps", "IssuerNotReady").await;
    finish(task).await.unwrap();
    let ready = &body["status"]["conditions"][0];
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str()),
        (Some("False"), Some("Pending"))
    );
    assert!(
        body["status"].get("failureTime").is_none(),
        "an issuer fault never fails the request"
    );
    let recheck = rechecks.try_recv().expect("the issuer is re-checked at once");
    assert_eq!(recheck.name, "ca");
    assert!(matches!(
        recheck,
        Recheck {
            kind: cfssl_issuer::api::IssuerKind::Issuer,
            ..
        }
    ));
}

macro_rules! scenarios {
    ($module:ident, $backend:ident, [$($case:ident),* $(,)?]) => {
        mod $module {
            $(
                #[tokio::test]
                async fn $case() {
                    super::$case(super::Backend::$backend).await;
                }
            )*
        }
    };
}

scenarios!(
    multirootca,
    Multirootca,
    [
        happy_path,
        wrong_key_makes_the_issuer_not_ready,
        unknown_profile_makes_the_issuer_not_ready,
        right_key_makes_the_issuer_ready,
        garbage_csr_fails_for_good,
        key_rotated_at_the_ca_blames_the_issuer,
    ]
);
scenarios!(
    simple_cfssl,
    SimpleCfssl,
    [
        happy_path,
        wrong_key_makes_the_issuer_not_ready,
        unknown_profile_makes_the_issuer_not_ready,
        right_key_makes_the_issuer_ready,
        garbage_csr_fails_for_good,
        key_rotated_at_the_ca_blames_the_issuer,
    ]
);

/// simple-cfssl, which a test can take down and bring back, and a context whose checked Issuer
/// `apps/ca` signs with it.
async fn switchable_ca() -> (
    ::simple_cfssl::Running,
    Arc<cfssl_issuer::controllers::Contexts>,
    ApiHandle,
) {
    let ca = ::simple_cfssl::spawn(::simple_cfssl::Config::test_default(KEY_HEX))
        .await
        .unwrap();
    let mut issuer = issuer("apps", "ca", &ca.url);
    issuer.spec.profile = Some("server".into());
    let (ctx, api) = context(vec![checked(issuer)], vec![]);
    (ca, ctx, api)
}

/// CA outage and recovery: the request stays Pending with a retry, then is issued.
#[tokio::test]
async fn ca_down_then_up() {
    let (ca, ctx, mut api) = switchable_ca().await;
    let (csr_pem, _) = csr("web.apps.example.org");
    let cr = approved_request(&csr_pem);

    ca.set_available(false);
    let task = tokio::spawn(certificaterequest::reconcile(
        Arc::new(cr.clone()),
        ctx.requests.clone(),
    ));
    expect_secret_read(&mut api, "apps", &secret(KEY_HEX, "1")).await;
    let body = expect_status_apply(&mut api, CR_PATH, &serde_json::to_value(&cr).unwrap()).await;
    expect_event(&mut api, "apps", "RetryableError").await;
    assert_eq!(
        finish(task).await.unwrap(),
        Action::requeue(std::time::Duration::from_secs(1))
    );
    let pending = body["status"]["conditions"][0].clone();
    assert_eq!(pending["reason"], "Pending");
    assert!(
        pending["message"].as_str().unwrap().contains("will retry"),
        "{pending}"
    );

    ca.set_available(true);
    let mut retried = cr.clone();
    retried.status = serde_json::from_value(json!({"conditions": [
        {"type": "Approved", "status": "True"}, pending,
    ]}))
    .unwrap();
    let task = tokio::spawn(certificaterequest::reconcile(
        Arc::new(retried.clone()),
        ctx.requests.clone(),
    ));
    expect_secret_read(&mut api, "apps", &secret(KEY_HEX, "1")).await;
    let body = expect_status_apply(&mut api, CR_PATH, &serde_json::to_value(&retried).unwrap()).await;
    expect_event(&mut api, "apps", "Issued").await;
    finish(task).await.unwrap();
    assert_eq!(body["status"]["conditions"][0]["reason"], "Issued");
    assert_eq!(ca.issued_count(), 1);
    ca.shutdown();
}

/// The request's Ready condition after one reconcile of `csr_pem` against `ca`.
async fn sign_once(ca: &Ca, csr_pem: &str, want_event: &str) -> Value {
    let (ctx, mut api) = context(vec![checked(ca_issuer(ca, "server"))], vec![]);
    let cr = approved_request(csr_pem);
    let task = tokio::spawn(certificaterequest::reconcile(
        Arc::new(cr.clone()),
        ctx.requests.clone(),
    ));
    expect_secret_read(&mut api, "apps", &secret(KEY_HEX, "1")).await;
    let body = expect_status_apply(&mut api, CR_PATH, &serde_json::to_value(&cr).unwrap()).await;
    expect_event(&mut api, "apps", want_event).await;
    assert_eq!(finish(task).await.unwrap(), Action::await_change());
    body["status"]["conditions"][0].clone()
}

/// The 2016 multirootca answers `bad request` to an Ed25519 CSR: the request fails, saying the
/// CA does not sign Ed25519 keys.
#[tokio::test]
async fn ed25519_request_fails_saying_the_ca_does_not_sign_it() {
    let ca = Ca::start(Backend::Multirootca, false).await;
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    let (csr_pem, _) = support::csr_with("web.apps.example.org", key);
    let ready = sign_once(&ca, &csr_pem, "PermanentError").await;
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str()),
        (Some("False"), Some("Failed"))
    );
    let message = ready["message"].as_str().unwrap();
    assert!(message.contains("the CA does not sign Ed25519 keys"), "{message}");
}

/// A CSR over 64 KiB fails at once with a message naming the limit; the CA signs nothing
/// (simple-cfssl would sign this CSR if it were sent).
#[tokio::test]
async fn csr_over_64_kib_fails_without_calling_the_ca() {
    let ca = Ca::start(Backend::SimpleCfssl, false).await;
    let (csr_pem, _) = csr("web.apps.example.org");
    let padded = format!("{}\n{csr_pem}", "#".repeat(64 * 1024));
    let ready = sign_once(&ca, &padded, "PermanentError").await;
    assert_eq!(ready["reason"], "Failed", "{ready}");
    let message = ready["message"].as_str().unwrap();
    assert!(message.contains("over the 64 KiB limit"), "{message}");
    assert_eq!(ca.issued_count(), Some(0));
}

/// A namespaced issuer whose URL carries `user:password@` and reaches a proxy's 404:
/// CAUnreachable with the status and size only (with no allow-list of CA hosts, nothing a
/// tenant's URL reaches is quoted), and the password in neither the condition nor the Event.
#[tokio::test]
async fn proxy_404_makes_the_issuer_unreachable_without_showing_the_password() {
    let proxy = support::misbehaving_server(support::Misbehaviour::Proxy(404)).await;
    let url = proxy.replacen("://", "://operator:s3cret-pw@", 1);
    let (ctx, mut api) = context(vec![], vec![]);
    let issuer = issuer("apps", "ca", &url);
    let task = tokio::spawn(issuer::reconcile(Arc::new(issuer.clone()), ctx.issuers.clone()));
    expect_secret_read(&mut api, "apps", &secret(KEY_HEX, "1")).await;
    let body = expect_status_apply(&mut api, ISSUER_PATH, &serde_json::to_value(&issuer).unwrap()).await;
    let (_, _, event, send) = next(&mut api).await;
    answer(send, http::StatusCode::CREATED, &event);
    finish(task).await.unwrap();
    let condition = &body["status"]["conditions"][0];
    assert_eq!(condition["reason"], "CAUnreachable", "{condition}");
    assert_eq!(event["reason"], "CAUnreachable", "{event}");
    let message = condition["message"].as_str().unwrap();
    assert!(message.contains("HTTP 404 without a CFSSL answer"), "{message}");
    assert!(message.contains("not quoted"), "{message}");
    assert!(!message.contains("404 from the proxy"), "{message}");
    for text in [body.to_string(), event.to_string()] {
        assert!(!text.contains("s3cret-pw"), "{text}");
        assert!(text.contains("***@127.0.0.1"), "{text}");
    }
}

/// The retry window starts at the first failed sign: a request created an hour ago (it waited
/// for approval) is retried when the CA is down, not failed at once.
#[tokio::test]
async fn an_old_request_gets_its_whole_retry_window() {
    let (ca, ctx, mut api) = switchable_ca().await;
    let (csr_pem, _) = csr("web.apps.example.org");
    let mut cr = approved_request(&csr_pem);
    cr.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-11-22T09:00:00Z".parse().unwrap(),
    ));
    let uid = cr.metadata.uid.clone().unwrap();

    ca.set_available(false);
    let task = tokio::spawn(certificaterequest::reconcile(
        Arc::new(cr.clone()),
        ctx.requests.clone(),
    ));
    expect_secret_read(&mut api, "apps", &secret(KEY_HEX, "1")).await;
    let body = expect_status_apply(&mut api, CR_PATH, &serde_json::to_value(&cr).unwrap()).await;
    let ready = &body["status"]["conditions"][0];
    assert_eq!(
        (ready["reason"].as_str(), body["status"].get("failureTime")),
        (Some("Pending"), None),
        "{body}"
    );
    expect_event(&mut api, "apps", "RetryableError").await;
    finish(task).await.unwrap();
    assert_eq!(
        ctx.requests.core.ledger.memory.first_failure(&uid),
        Some("2026-11-22T10:00:00Z".parse().unwrap()),
        "the window starts now, at the first failure"
    );

    ca.set_available(true);
    let task = tokio::spawn(certificaterequest::reconcile(
        Arc::new(cr.clone()),
        ctx.requests.clone(),
    ));
    expect_secret_read(&mut api, "apps", &secret(KEY_HEX, "1")).await;
    let body = expect_status_apply(&mut api, CR_PATH, &serde_json::to_value(&cr).unwrap()).await;
    expect_event(&mut api, "apps", "Issued").await;
    finish(task).await.unwrap();
    assert_eq!(body["status"]["conditions"][0]["reason"], "Issued");
    assert_eq!(
        ctx.requests.core.ledger.memory.first_failure(&uid),
        None,
        "closed on success"
    );
    ca.shutdown();
}
