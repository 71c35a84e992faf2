//! The standalone Certificate controllers' act steps, request by request against a scripted
//! API server (tower-test): each writes under its own field manager (`cfssl-issuer-<name>`),
//! status by server-side apply with force, Secrets by create (the next key) or apply with force
//! (the issued Secret, before the status), requests by create, deletes by name and UID, and
//! reads the target Secret live only when the cache lacks it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

mod support;

use std::sync::Arc;
use std::time::Duration;

use cfssl_issuer::api::certmanager::{Certificate, CertificateRequest};
use cfssl_issuer::controllers::certificate::{
    CertificateContext, Settings, approver, issuing, keymanager, readiness, requestmanager, revisionmanager,
    trigger,
};
use cfssl_issuer::pki::keys::{Encoding, Key, KeySpec};
use http::{Method, StatusCode};
use k8s_openapi::api::core::v1::Secret;
use serde_json::{Value, json};
use support::apimock::*;

fn settings() -> Settings {
    Settings {
        approve_own_requests: true,
        minimum_backoff: Duration::from_secs(3600),
        maximum_backoff: Duration::from_secs(32 * 3600),
        cert_manager_lease_namespace: "kube-system".into(),
        owner_reference: false,
        copied_annotation_prefixes: vec!["*".into()],
        renewal_jitter: cfssl_issuer::certificates::renewal::Jitter::OFF,
    }
}

fn certificate(conditions: Value, status: Value) -> Certificate {
    let mut status = status;
    status["conditions"] = conditions;
    serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": {"name": "web", "namespace": "apps", "uid": "uid-web", "generation": 2},
        "spec": {
            "secretName": "web-tls", "dnsNames": ["web.example.com"],
            "issuerRef": {"name": "ca", "kind": "Issuer", "group": cfssl_issuer::api::GROUP},
            "privateKey": {"algorithm": "ECDSA"},
        },
        "status": status,
    }))
    .unwrap()
}

fn ctx(
    certificates: Vec<Certificate>,
    requests: Vec<CertificateRequest>,
) -> (Arc<CertificateContext>, ApiHandle) {
    ctx_with_secrets(certificates, requests, vec![])
}

fn ctx_with_secrets(
    certificates: Vec<Certificate>,
    requests: Vec<CertificateRequest>,
    secrets: Vec<Secret>,
) -> (Arc<CertificateContext>, ApiHandle) {
    let (contexts, handle) = context(vec![], vec![]);
    let stores = (store(certificates), store(requests), store(secrets));
    (
        Arc::new(CertificateContext::new(
            contexts.shared.clone(),
            settings(),
            stores,
        )),
        handle,
    )
}

const CERTIFICATE: &str = "/apis/cert-manager.io/v1/namespaces/apps/certificates/web";

/// A new Certificate: the Secret is not cached, so it is read live (twice: once to decide,
/// once more before issuing), then `Issuing=True` is applied as the trigger, then the Event.
#[tokio::test]
async fn the_trigger_applies_issuing_as_its_own_manager() {
    let crt = certificate(json!([]), json!({}));
    let (ctx, mut handle) = ctx(vec![crt.clone()], vec![]);
    let task = tokio::spawn(trigger::reconcile(Arc::new(crt), ctx.clone()));
    for _ in 0..2 {
        let (method, uri, _, send) = next(&mut handle).await;
        assert_eq!(
            (method, uri.as_str()),
            (Method::GET, "/api/v1/namespaces/apps/secrets/web-tls")
        );
        not_found(send);
    }
    let (method, uri, body, send) = next(&mut handle).await;
    assert_eq!(method, Method::PATCH);
    assert_eq!(
        uri,
        format!("{CERTIFICATE}/status?&force=true&fieldManager=cfssl-issuer-trigger")
    );
    assert_eq!(
        body["status"],
        json!({"conditions": [{
            "type": "Issuing", "status": "True", "reason": "DoesNotExist",
            "message": "Issuing certificate as Secret does not exist",
            "lastTransitionTime": "2026-11-22T10:00:00Z", "observedGeneration": 2,
        }]})
    );
    answer(send, StatusCode::OK, &body);
    expect_event(&mut handle, "apps", "Issuing").await;
    finish(task).await.unwrap();
    no_more_requests(&mut handle).await;
}

/// Issuing with no key Secret: the Secret is created under the derived name by the key manager,
/// labelled and controlled by the Certificate, and no status is written (the name is found by
/// derivation, never in status): the create, its Event, nothing more.
#[tokio::test]
async fn the_key_manager_creates_the_next_key_secret_without_a_status_write() {
    let issuing = json!([{"type": "Issuing", "status": "True", "reason": "DoesNotExist"}]);
    let crt = certificate(issuing, json!({}));
    let (ctx, mut handle) = ctx(vec![crt.clone()], vec![]);
    let name = keymanager::next_key_name(&crt);
    let task = tokio::spawn(keymanager::reconcile(Arc::new(crt), ctx.clone()));
    let (method, uri, body, send) = next(&mut handle).await;
    assert_eq!(
        (method, uri.as_str()),
        (
            Method::POST,
            "/api/v1/namespaces/apps/secrets?&fieldManager=cfssl-issuer-keymanager"
        )
    );
    assert_eq!(body["metadata"]["name"], json!(name));
    assert_eq!(
        body["metadata"]["labels"],
        json!({"cert-manager.io/next-private-key": "true", "controller.cert-manager.io/fao": "true"})
    );
    assert_eq!(body["metadata"]["ownerReferences"][0]["uid"], "uid-web");
    assert_eq!(body["metadata"]["ownerReferences"][0]["controller"], true);
    assert!(body["data"]["tls.key"].is_string(), "{body}");
    answer(send, StatusCode::CREATED, &body);
    expect_event(&mut handle, "apps", "Generated").await;
    finish(task).await.unwrap();
    no_more_requests(&mut handle).await;
}

/// A retry whose create meets the Secret an earlier attempt made (not cached yet): nothing
/// more is written.
#[tokio::test]
async fn the_key_manager_accepts_the_secret_it_made_before() {
    let issuing = json!([{"type": "Issuing", "status": "True", "reason": "DoesNotExist"}]);
    let crt = certificate(issuing, json!({}));
    let name = keymanager::next_key_name(&crt);
    let (ctx, mut handle) = ctx(vec![crt.clone()], vec![]);
    let task = tokio::spawn(keymanager::reconcile(Arc::new(crt), ctx.clone()));
    let (method, _, body, send) = next(&mut handle).await;
    assert_eq!(
        (method, body["metadata"]["name"].as_str()),
        (Method::POST, Some(name.as_str()))
    );
    answer(
        send,
        StatusCode::CONFLICT,
        &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "AlreadyExists", "code": 409}),
    );
    finish(task).await.unwrap();
    no_more_requests(&mut handle).await;
}

/// Not issuing, with a `nextPrivateKeySecretName` an earlier version of the key manager applied:
/// one status apply as the key manager, with no `nextPrivateKeySecretName`, drops it; with none
/// in status, nothing is written.
#[tokio::test]
async fn the_key_manager_drops_a_name_an_earlier_version_wrote() {
    let ready = json!([{"type": "Ready", "status": "True", "reason": "Ready"}]);
    let crt = certificate(ready.clone(), json!({"nextPrivateKeySecretName": "web-old"}));
    let (ctx, mut handle) = ctx(vec![crt.clone()], vec![]);
    let task = tokio::spawn(keymanager::reconcile(Arc::new(crt), ctx.clone()));
    let (method, uri, body, send) = next(&mut handle).await;
    assert_eq!(
        (method, uri),
        (
            Method::PATCH,
            format!("{CERTIFICATE}/status?&force=true&fieldManager=cfssl-issuer-keymanager")
        )
    );
    assert_eq!(body["status"], json!({}));
    answer(send, StatusCode::OK, &body);
    finish(task).await.unwrap();
    no_more_requests(&mut handle).await;

    let crt = certificate(ready, json!({}));
    let (quiet, mut handle) = self::ctx(vec![crt.clone()], vec![]);
    finish(tokio::spawn(keymanager::reconcile(Arc::new(crt), quiet.clone())))
        .await
        .unwrap();
    no_more_requests(&mut handle).await;
}

/// The approver approves a request its Certificate controls, as its own manager, so the
/// request controller's applies of Ready never remove Approved.
#[tokio::test]
async fn the_approver_applies_approved_as_its_own_manager() {
    let (crt, secret, key) = issuing_with_key();
    let cr = requestmanager::request(&crt, &key, 1, &secret.metadata.name.clone().unwrap(), &[]).unwrap();
    let (ctx, mut handle) = ctx_with_secrets(vec![crt], vec![cr.clone()], vec![secret]);
    let task = tokio::spawn(approver::reconcile(Arc::new(cr), ctx.clone()));
    let (method, uri, body, send) = next(&mut handle).await;
    assert_eq!(method, Method::PATCH);
    assert_eq!(
        uri,
        "/apis/cert-manager.io/v1/namespaces/apps/certificaterequests/web-1/status?&force=true&fieldManager=cfssl-issuer-approver"
    );
    assert_eq!(body["status"]["conditions"][0]["type"], "Approved");
    answer(send, StatusCode::OK, &body);
    // cert-manager's approver records the approval as a Normal Event on the request too.
    let (reason, note) = event_note(&mut handle).await;
    assert_eq!(reason, approver::REASON);
    assert_eq!(note, approver::MESSAGE);
    finish(task).await.unwrap();
    no_more_requests(&mut handle).await;
}

/// A request controlled by the Certificate but made from another key: no approval, one
/// Warning Event on the request, nothing else.
#[tokio::test]
async fn the_approver_only_warns_about_a_request_it_did_not_make() {
    let (crt, secret, _) = issuing_with_key();
    let other = Key::generate(KeySpec::Ecdsa(256)).unwrap();
    let cr = requestmanager::request(&crt, &other, 1, &secret.metadata.name.clone().unwrap(), &[]).unwrap();
    let (ctx, mut handle) = ctx_with_secrets(vec![crt], vec![cr.clone()], vec![secret]);
    let task = tokio::spawn(approver::reconcile(Arc::new(cr), ctx.clone()));
    let (reason, note) = event_note(&mut handle).await;
    assert_eq!(reason, "NotApproved");
    assert_eq!(
        note,
        "Not the next request of Certificate \"web\" (its CSR is not signed by the Certificate's next \
         private key: not approved by cfssl-issuer)"
    );
    finish(task).await.unwrap();
    no_more_requests(&mut handle).await;
}

const REQUESTS: &str = "/apis/cert-manager.io/v1/namespaces/apps/certificaterequests";

/// An issuing Certificate whose next key Secret (of the derived name, made by the key manager;
/// no name in status) is cached, and that key.
fn issuing_with_key() -> (Certificate, Secret, Key) {
    let issuing = json!([{"type": "Issuing", "status": "True", "reason": "DoesNotExist"}]);
    let crt = certificate(issuing, json!({}));
    let name = keymanager::next_key_name(&crt);
    let key = Key::generate(KeySpec::Ecdsa(256)).unwrap();
    let pem = key.to_pem(Encoding::Pkcs8).unwrap().into_bytes();
    let secret = keymanager::key_secret(&crt, &name, pem);
    (crt, secret, key)
}

/// The next Event: its reason and note.
async fn event_note(handle: &mut ApiHandle) -> (String, String) {
    let (method, uri, body, send) = next(handle).await;
    assert_eq!(
        (method, uri.as_str()),
        (Method::POST, "/apis/events.k8s.io/v1/namespaces/apps/events?")
    );
    answer(send, StatusCode::CREATED, &body);
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (text(&body["reason"]), text(&body["note"]))
}

/// Issuing with the next key ready and no request: the request for revision 1 is created by
/// the request manager, then the Event names it.
#[tokio::test]
async fn the_request_manager_creates_the_request_as_its_own_manager() {
    let (crt, secret, _) = issuing_with_key();
    let (ctx, mut handle) = ctx_with_secrets(vec![crt.clone()], vec![], vec![secret]);
    let task = tokio::spawn(requestmanager::reconcile(Arc::new(crt), ctx.clone()));
    let (method, uri, body, send) = next(&mut handle).await;
    assert_eq!(
        (method, uri),
        (
            Method::POST,
            format!("{REQUESTS}?&fieldManager=cfssl-issuer-requestmanager")
        )
    );
    assert_eq!(body["metadata"]["name"], "web-1");
    assert_eq!(
        body["metadata"]["annotations"]["cert-manager.io/certificate-revision"],
        "1"
    );
    answer(send, StatusCode::CREATED, &body);
    assert_eq!(
        event_note(&mut handle).await,
        (
            "Requested".into(),
            "Created new CertificateRequest resource \"web-1\"".into()
        )
    );
    finish(task).await.unwrap();
    no_more_requests(&mut handle).await;
}

/// The request's name is taken by one another Certificate of that name left behind: it is
/// read, found not ours, and the request is made under a generated name, which the Event
/// gives.
#[tokio::test]
async fn a_request_name_taken_by_another_is_worked_around() {
    let (crt, secret, _) = issuing_with_key();
    let (ctx, mut handle) = ctx_with_secrets(vec![crt.clone()], vec![], vec![secret]);
    let task = tokio::spawn(requestmanager::reconcile(Arc::new(crt), ctx.clone()));
    let (method, _, first, send) = next(&mut handle).await;
    assert_eq!(
        (method, &first["metadata"]["name"]),
        (Method::POST, &json!("web-1"))
    );
    answer(
        send,
        StatusCode::CONFLICT,
        &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "AlreadyExists", "code": 409}),
    );
    let (method, uri, _, send) = next(&mut handle).await;
    assert_eq!((method, uri), (Method::GET, format!("{REQUESTS}/web-1")));
    let mut theirs = first.clone();
    theirs["metadata"]["ownerReferences"][0]["uid"] = "uid-of-an-earlier-web".into();
    answer(send, StatusCode::OK, &theirs);
    let (method, uri, body, send) = next(&mut handle).await;
    assert_eq!(
        (method, uri),
        (
            Method::POST,
            format!("{REQUESTS}?&fieldManager=cfssl-issuer-requestmanager")
        )
    );
    assert_eq!(
        (&body["metadata"]["name"], &body["metadata"]["generateName"]),
        (&Value::Null, &json!("web-1-"))
    );
    let mut made = body.clone();
    made["metadata"]["name"] = "web-1-x7k2p".into();
    answer(send, StatusCode::CREATED, &made);
    assert_eq!(
        event_note(&mut handle).await,
        (
            "Requested".into(),
            "Created new CertificateRequest resource \"web-1-x7k2p\"".into()
        )
    );
    finish(task).await.unwrap();
    no_more_requests(&mut handle).await;
}

/// The request of the next revision signed: the target Secret (not cached, read live) is
/// applied by the issuing controller first, then the status ending the issuance, then the Event.
#[tokio::test]
async fn issuing_applies_the_secret_then_the_status_as_its_own_manager() {
    let (crt, secret, key) = issuing_with_key();
    let mut cr = requestmanager::request(&crt, &key, 1, &secret.metadata.name.clone().unwrap(), &[]).unwrap();
    let pair = rcgen::KeyPair::from_pem(&key.to_pem(Encoding::Pkcs8).unwrap()).unwrap();
    let chain = rcgen::CertificateParams::new(vec!["web.example.com".to_string()])
        .unwrap()
        .self_signed(&pair)
        .unwrap()
        .pem();
    cr.status = serde_json::from_value(json!({
        "conditions": [{"type": "Ready", "status": "True", "reason": "Issued"}],
        "certificate": k8s_openapi::ByteString(chain.into_bytes()),
    }))
    .unwrap();
    let (ctx, mut handle) = ctx_with_secrets(vec![crt.clone()], vec![cr], vec![secret]);
    let task = tokio::spawn(issuing::reconcile(Arc::new(crt), ctx.clone()));
    let (method, uri, _, send) = next(&mut handle).await;
    assert_eq!(
        (method, uri.as_str()),
        (Method::GET, "/api/v1/namespaces/apps/secrets/web-tls")
    );
    not_found(send);
    let (method, uri, body, send) = next(&mut handle).await;
    assert_eq!(
        (method, uri.as_str()),
        (
            Method::PATCH,
            "/api/v1/namespaces/apps/secrets/web-tls?&force=true&fieldManager=cfssl-issuer-issuing"
        )
    );
    assert_eq!(
        (&body["kind"], &body["type"]),
        (&json!("Secret"), &json!("kubernetes.io/tls"))
    );
    assert!(body["data"]["tls.crt"].is_string(), "{body}");
    answer(send, StatusCode::OK, &body);
    let (method, uri, body, send) = next(&mut handle).await;
    assert_eq!(
        (method, uri),
        (
            Method::PATCH,
            format!("{CERTIFICATE}/status?&force=true&fieldManager=cfssl-issuer-issuing")
        )
    );
    assert_eq!(
        (
            &body["status"]["revision"],
            &body["status"]["conditions"][0]["reason"]
        ),
        (&json!(1), &json!("Issued"))
    );
    answer(send, StatusCode::OK, &body);
    expect_event(&mut handle, "apps", "Issuing").await;
    finish(task).await.unwrap();
    no_more_requests(&mut handle).await;
}

/// No Secret (read live): readiness applies `Ready=False` as its own manager, and no Event.
#[tokio::test]
async fn readiness_applies_ready_as_its_own_manager() {
    let crt = certificate(json!([]), json!({}));
    let (ctx, mut handle) = ctx(vec![crt.clone()], vec![]);
    let task = tokio::spawn(readiness::reconcile(Arc::new(crt), ctx.clone()));
    let (method, uri, _, send) = next(&mut handle).await;
    assert_eq!(
        (method, uri.as_str()),
        (Method::GET, "/api/v1/namespaces/apps/secrets/web-tls")
    );
    not_found(send);
    let (method, uri, body, send) = next(&mut handle).await;
    assert_eq!(
        (method, uri),
        (
            Method::PATCH,
            format!("{CERTIFICATE}/status?&force=true&fieldManager=cfssl-issuer-readiness")
        )
    );
    assert_eq!(
        (
            &body["status"]["conditions"][0]["type"],
            &body["status"]["conditions"][0]["status"]
        ),
        (&json!("Ready"), &json!("False"))
    );
    answer(send, StatusCode::OK, &body);
    finish(task).await.unwrap();
    no_more_requests(&mut handle).await;
}

/// Ready with two revisions and the default history of one: the older request is deleted by
/// name and UID; a precondition the API server refuses (another request under that name now)
/// is not an error.
#[tokio::test]
async fn the_revision_manager_deletes_an_old_request_by_uid() {
    let crt = certificate(
        json!([{"type": "Ready", "status": "True", "reason": "Ready"}]),
        json!({}),
    );
    let owned = |name: &str, revision: &str| {
        let mut cr = request(name, cfssl_issuer::api::GROUP, "Issuer", json!([]));
        cr.metadata.owner_references = Some(vec![
            cfssl_issuer::certificates::secret::certificate_owner_reference(&crt),
        ]);
        cr.metadata.annotations = Some(
            [(
                "cert-manager.io/certificate-revision".to_string(),
                revision.to_string(),
            )]
            .into(),
        );
        cr
    };
    let (ctx, mut handle) = ctx(vec![crt.clone()], vec![owned("web-1", "1"), owned("web-2", "2")]);
    let task = tokio::spawn(revisionmanager::reconcile(Arc::new(crt), ctx.clone()));
    let (method, uri, body, send) = next(&mut handle).await;
    assert_eq!((method, uri), (Method::DELETE, format!("{REQUESTS}/web-1?")));
    assert_eq!(
        (&body["propagationPolicy"], &body["preconditions"]),
        (&json!("Background"), &json!({"uid": "uid-web-1"}))
    );
    answer(
        send,
        StatusCode::CONFLICT,
        &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409}),
    );
    finish(task).await.unwrap();
    no_more_requests(&mut handle).await;
}
