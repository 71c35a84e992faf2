//! The approver's calls for a CSI volume's request, request by request, against a scripted
//! API (tower-test): the Pod read live, the approval, the one Event of a failure, a failed read.

use std::sync::Arc;
use std::time::Duration;

use http::{Method, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};
use tower_test::mock::SendResponse;

use super::genuine;
use crate::api::certmanager::CertificateRequest;
use crate::controllers::certificate::approver::{self, MESSAGE};
use crate::controllers::certificate::testing::scripted;
use crate::csi::testing::{ApiHandle, answer, next_call, pod};

const STEP: Duration = Duration::from_secs(30);
const POD: &str = "/api/v1/namespaces/shop/pods/web-0";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/shop/events";

/// The plugin's request as the API server keeps it: named, with a UID.
fn stored() -> Arc<CertificateRequest> {
    let mut cr = genuine();
    cr.metadata.namespace = Some("shop".into());
    cr.metadata.uid = Some("cr-1".into());
    Arc::new(cr)
}

/// The next request, by path (its query left out).
async fn next(handle: &mut ApiHandle) -> (Method, String, Value, SendResponse<Response<Body>>) {
    let (method, uri, body, send) = next_call(handle, STEP).await;
    let path = uri.split('?').next().unwrap_or_default().to_string();
    (method, path, body, send)
}

fn not_found() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404})
}

#[tokio::test]
async fn a_genuine_request_is_approved_after_reading_its_pod() {
    let (ctx, mut handle) = scripted();
    let cr = stored();
    let name = cr.metadata.name.clone().unwrap();
    let run = tokio::spawn(approver::reconcile(cr.clone(), ctx));
    let (method, path, _, send) = next(&mut handle).await;
    assert_eq!((method, path.as_str()), (Method::GET, POD));
    answer(
        send,
        StatusCode::OK,
        &serde_json::to_value(pod(&super::ASKED)).unwrap(),
    );
    let (method, path, body, send) = next(&mut handle).await;
    let status = format!("/apis/cert-manager.io/v1/namespaces/shop/certificaterequests/{name}/status");
    assert_eq!((method, path.as_str()), (Method::PATCH, status.as_str()));
    let condition = &body["status"]["conditions"][0];
    assert_eq!(
        (&condition["type"], &condition["status"], &condition["message"]),
        (&json!("Approved"), &json!("True"), &json!(MESSAGE))
    );
    answer(send, StatusCode::OK, &serde_json::to_value(&*cr).unwrap());
    let (method, path, body, send) = next(&mut handle).await;
    assert_eq!(
        (method, path.as_str(), &body["type"]),
        (Method::POST, EVENTS, &json!("Normal"))
    );
    answer(send, StatusCode::CREATED, &json!({}));
    tokio::time::timeout(STEP, run)
        .await
        .unwrap()
        .unwrap()
        .expect("approved");
}

#[tokio::test]
async fn a_missing_pod_is_told_once() {
    let (ctx, mut handle) = scripted();
    let cr = stored();
    let run = tokio::spawn(approver::reconcile(cr.clone(), ctx.clone()));
    let (method, path, _, send) = next(&mut handle).await;
    assert_eq!((method, path.as_str()), (Method::GET, POD));
    answer(send, StatusCode::NOT_FOUND, &not_found());
    let (method, path, body, send) = next(&mut handle).await;
    assert_eq!(
        (method, path.as_str(), &body["type"]),
        (Method::POST, EVENTS, &json!("Warning"))
    );
    let note = "Not a request of the CSI driver's for a volume of its Pod (its Pod \"web-0\" does \
                not exist): not approved by cfssl-issuer";
    assert_eq!(body["note"], json!(note));
    answer(send, StatusCode::CREATED, &json!({}));
    tokio::time::timeout(STEP, run)
        .await
        .unwrap()
        .unwrap()
        .expect("left unapproved");

    // The next reconcile (a status write of the request controller) reads the Pod again and
    // says nothing more.
    let run = tokio::spawn(approver::reconcile(cr, ctx.clone()));
    let (method, path, _, send) = next(&mut handle).await;
    assert_eq!((method, path.as_str()), (Method::GET, POD));
    answer(send, StatusCode::NOT_FOUND, &not_found());
    tokio::time::timeout(STEP, run)
        .await
        .unwrap()
        .unwrap()
        .expect("left unapproved");
    let more = tokio::time::timeout(Duration::from_millis(200), handle.next_request()).await;
    assert!(more.is_err(), "no request after the read");
    drop(ctx);
}

#[tokio::test]
async fn a_failed_read_is_an_error_retried_with_backoff() {
    let (ctx, mut handle) = scripted();
    let run = tokio::spawn(approver::reconcile(stored(), ctx));
    let (method, path, _, send) = next(&mut handle).await;
    assert_eq!((method, path.as_str()), (Method::GET, POD));
    let unavailable = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 503});
    answer(send, StatusCode::SERVICE_UNAVAILABLE, &unavailable);
    let result = tokio::time::timeout(STEP, run).await.unwrap().unwrap();
    let error = result.expect_err("no verdict without the Pod").to_string();
    assert!(error.starts_with("reading Pod shop/web-0: "), "{error}");
}
