//! The standalone Certificate controllers' act steps, request by request against a scripted
//! API server (tower-test): each writes under its own field manager (`cfssl-issuer-<name>`),
//! status by server-side apply with force, Secrets by create (the next key) or apply with force
//! (the issued Secret), and reads the target Secret live only when the cache lacks it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

mod support;

use std::sync::Arc;
use std::time::Duration;

use cfssl_issuer::api::certmanager::{Certificate, CertificateRequest};
use cfssl_issuer::controllers::certificate::{CertificateContext, Settings, approver, keymanager, trigger};
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
    let (contexts, handle) = context(vec![], vec![]);
    let stores = (store(certificates), store(requests), store(Vec::<Secret>::new()));
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

/// Issuing with no key Secret: the name is recorded first (as the key manager), then the Secret
/// is created under it by the key manager, labelled and controlled by the Certificate.
#[tokio::test]
async fn the_key_manager_names_then_creates_the_next_key_secret() {
    let issuing = json!([{"type": "Issuing", "status": "True", "reason": "DoesNotExist"}]);
    let crt = certificate(issuing, json!({}));
    let (ctx, mut handle) = ctx(vec![crt.clone()], vec![]);
    let name = keymanager::next_key_name(&crt);
    let task = tokio::spawn(keymanager::reconcile(Arc::new(crt), ctx.clone()));
    let (method, uri, body, send) = next(&mut handle).await;
    assert_eq!(method, Method::PATCH);
    assert_eq!(
        uri,
        format!("{CERTIFICATE}/status?&force=true&fieldManager=cfssl-issuer-keymanager")
    );
    assert_eq!(body["status"], json!({"nextPrivateKeySecretName": name}));
    answer(send, StatusCode::OK, &body);
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

/// A retry whose create meets the Secret an earlier attempt made (the name is already in
/// status): nothing more is written.
#[tokio::test]
async fn the_key_manager_accepts_the_secret_it_made_before() {
    let issuing = json!([{"type": "Issuing", "status": "True", "reason": "DoesNotExist"}]);
    let mut crt = certificate(issuing, json!({}));
    let name = keymanager::next_key_name(&crt);
    crt.status.as_mut().unwrap().next_private_key_secret_name = Some(name.clone());
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

/// The approver approves a request its Certificate controls, as its own manager, so the
/// request controller's applies of Ready never remove Approved.
#[tokio::test]
async fn the_approver_applies_approved_as_its_own_manager() {
    let crt = certificate(json!([]), json!({}));
    let mut cr = request("web-1", cfssl_issuer::api::GROUP, "Issuer", json!([]));
    cr.metadata.owner_references = Some(vec![
        cfssl_issuer::certificates::secret::certificate_owner_reference(&crt),
    ]);
    let (ctx, mut handle) = ctx(vec![crt], vec![cr.clone()]);
    let task = tokio::spawn(approver::reconcile(Arc::new(cr), ctx.clone()));
    let (method, uri, body, send) = next(&mut handle).await;
    assert_eq!(method, Method::PATCH);
    assert_eq!(
        uri,
        "/apis/cert-manager.io/v1/namespaces/apps/certificaterequests/web-1/status?&force=true&fieldManager=cfssl-issuer-approver"
    );
    assert_eq!(body["status"]["conditions"][0]["type"], "Approved");
    answer(send, StatusCode::OK, &body);
    finish(task).await.unwrap();
    no_more_requests(&mut handle).await;
}
