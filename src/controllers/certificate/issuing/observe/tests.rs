//! The live read of a signed request's chain, request by request against a scripted API.

use std::sync::Arc;
use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::json;

use super::with_chain;
use crate::api::certmanager::{Certificate, CertificateRequest, ISSUING};
use crate::certificates::fixtures;
use crate::controllers::certificate::testing::{scripted, with_condition};
use crate::csi::testing::{answer, next_call};

const STEP: Duration = Duration::from_secs(30);
const PATH: &str = "/apis/cert-manager.io/v1/namespaces/apps/certificaterequests/web-1";

fn issuing() -> Certificate {
    let mut crt = fixtures::certificate("web", fixtures::spec());
    crt.metadata.namespace = Some("apps".into());
    with_condition(crt, ISSUING, "True", "DoesNotExist", "2026-02-01T00:00:00Z")
}

/// The request of revision 1 as signed: Ready, Issued, its chain and CA.
fn signed(uid: &str) -> CertificateRequest {
    serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "CertificateRequest",
        "metadata": {"name": "web-1", "namespace": "apps", "uid": uid,
            "annotations": {"cert-manager.io/certificate-revision": "1"}},
        "spec": {"request": "", "issuerRef": {"name": "ca"}},
        "status": {"certificate": "Q0VSVA==", "ca": "Q0E=", "conditions": [
            {"type": "Ready", "status": "True", "reason": "Issued", "message": "ok"}]},
    }))
    .unwrap()
}

fn cached(uid: &str) -> Arc<CertificateRequest> {
    let mut cr = signed(uid);
    let status = cr.status.as_mut().unwrap();
    (status.certificate, status.ca) = (None, None);
    Arc::new(cr)
}

fn chain_of(cr: &CertificateRequest) -> Option<Vec<u8>> {
    cr.status.as_ref()?.certificate.as_ref().map(|c| c.0.clone())
}

/// One GET of the request: its chain when the live object is the cached one; the cached copy
/// when it is gone or another object took its name.
#[tokio::test]
async fn the_signed_request_is_read_live_once() {
    let not_found =
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404});
    let rows = [
        (
            "the same request",
            StatusCode::OK,
            serde_json::to_value(signed("u-1")).unwrap(),
            Some(b"CERT".to_vec()),
        ),
        (
            "another request of that name",
            StatusCode::OK,
            serde_json::to_value(signed("u-2")).unwrap(),
            None,
        ),
        ("gone", StatusCode::NOT_FOUND, not_found, None),
    ];
    for (row, status, body, want) in rows {
        let (ctx, mut handle) = scripted();
        let run = tokio::spawn(async move { with_chain(&ctx, &issuing(), vec![cached("u-1")]).await });
        let (method, uri, _, send) = next_call(&mut handle, STEP).await;
        assert_eq!(
            (method, uri.split('?').next().unwrap()),
            (Method::GET, PATH),
            "{row}"
        );
        answer(send, status, &body);
        let requests = tokio::time::timeout(STEP, run)
            .await
            .unwrap()
            .unwrap()
            .expect(row);
        assert_eq!(requests.len(), 1, "{row}");
        assert_eq!(chain_of(&requests[0]), want, "{row}");
    }
}

/// Nothing is read when no request needs its chain; a failed read is the reconcile's error.
#[tokio::test]
async fn no_read_without_need_and_a_failed_read_is_an_error() {
    let (ctx, mut handle) = scripted();
    let whole = Arc::new(signed("u-1"));
    let not_issuing = fixtures::certificate("web", fixtures::spec());
    let kept = tokio::time::timeout(STEP, with_chain(&ctx, &not_issuing, vec![cached("u-1")]))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(chain_of(&kept[0]), None);
    let kept = tokio::time::timeout(STEP, with_chain(&ctx, &issuing(), vec![whole.clone()]))
        .await
        .unwrap()
        .unwrap();
    assert!(Arc::ptr_eq(&kept[0], &whole));

    let run = tokio::spawn(async move { with_chain(&ctx, &issuing(), vec![cached("u-1")]).await });
    let (method, _, _, send) = next_call(&mut handle, STEP).await;
    assert_eq!(method, Method::GET);
    answer(
        send,
        StatusCode::INTERNAL_SERVER_ERROR,
        &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 500}),
    );
    assert!(tokio::time::timeout(STEP, run).await.unwrap().unwrap().is_err());
}
