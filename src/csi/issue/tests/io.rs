//! The plugin's Kubernetes calls, request by request, against a scripted API (tower-test):
//! a new volume's create and watch, a resumed one's read, a denial's Event, a deadline.

use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};
use tonic::Code;
use tower_test::mock::SendResponse;

use super::super::shape::{certificate_spec, hash_identifier};
use super::super::*;
use super::publish;
use crate::certificates::fixtures;
use crate::csi::attributes::key;
use crate::csi::testing::{ApiHandle, answer, next_call};
use crate::pki::keys::Encoding;

/// Longer than any one step can take (an RSA key is made between two requests).
const STEP: Duration = Duration::from_secs(30);
const REQUESTS: &str = "/apis/cert-manager.io/v1/namespaces/shop/certificaterequests";

struct Scripted {
    plugin: Arc<CertificateRequests>,
    handle: ApiHandle,
    store: Store,
    _dir: tempfile::TempDir,
}

fn scripted(wait: Duration) -> Scripted {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "default");
    let now = "2026-11-27T12:00:00Z".parse().unwrap();
    let plugin = CertificateRequests::new(
        client,
        store.clone(),
        "node-1",
        wait,
        crate::clock::fixed_clock(now),
    );
    Scripted {
        plugin: Arc::new(plugin),
        handle,
        store,
        _dir: dir,
    }
}

async fn next(handle: &mut ApiHandle) -> (Method, String, Value, SendResponse<Response<Body>>) {
    next_call(handle, STEP).await
}

fn list_of(item: Value) -> Value {
    json!({"apiVersion": "cert-manager.io/v1", "kind": "CertificateRequestList",
           "metadata": {"resourceVersion": "10"}, "items": [item]})
}

/// `object` as the API server keeps it, with `conditions` and `status` fields added.
fn stored(object: &Value, status: Value) -> Value {
    let mut object = object.clone();
    object["metadata"]["resourceVersion"] = json!("10");
    object["status"] = status;
    object
}

fn spawn_issue(scripted: &Scripted, publish: &Publish) -> tokio::task::JoinHandle<Result<Issued, Status>> {
    let (plugin, publish) = (scripted.plugin.clone(), publish.clone());
    tokio::spawn(async move { plugin.issue(&publish).await })
}

/// A new issuance first deletes the volume's earlier requests, by csi-lib's labels.
async fn expect_earlier_deleted(handle: &mut ApiHandle) {
    let (method, uri, _, send) = next(handle).await;
    assert_eq!(method, Method::DELETE);
    let selector =
        "csi.cert-manager.io%2Fnode-id-hash%3D9bd6bbf5f%2Ccsi.cert-manager.io%2Fvolume-id-hash%3D6d5c58c744";
    assert_eq!(uri, format!("{REQUESTS}?&labelSelector={selector}"));
    let none = json!({"apiVersion": "cert-manager.io/v1", "kind": "CertificateRequestList",
                      "metadata": {}, "items": []});
    answer(send, StatusCode::OK, &none);
}

/// The watch's first list of the one request: its name in the field selector.
async fn expect_list(handle: &mut ApiHandle, name: &str, item: Value) {
    let (method, uri, _, send) = next(handle).await;
    assert_eq!(method, Method::GET);
    assert!(
        uri.starts_with(&format!("{REQUESTS}?"))
            && uri.contains(&format!("fieldSelector=metadata.name%3D{name}")),
        "{uri}"
    );
    answer(send, StatusCode::OK, &list_of(item));
}

#[tokio::test]
async fn a_new_volume_creates_one_request_and_reads_it_through_its_watch() {
    let mut s = scripted(STEP);
    let publish = publish(&[(key::DNS_NAMES, "web.shop.svc"), (key::KEY_ALGORITHM, "ECDSA")]);
    s.store.put_metadata(&publish.metadata).unwrap();
    let issuing = spawn_issue(&s, &publish);

    expect_earlier_deleted(&mut s.handle).await;
    let (method, uri, created, send) = next(&mut s.handle).await;
    assert_eq!((method, uri.as_str()), (Method::POST, &*format!("{REQUESTS}?")));
    let pending = s
        .store
        .pending("csi-0b9d")
        .unwrap()
        .expect("recorded before the create");
    assert_eq!(created["metadata"]["name"], pending.request.as_str());
    assert_eq!(
        created["metadata"]["labels"]["csi.cert-manager.io/volume-id-hash"],
        hash_identifier("csi-0b9d")
    );
    answer(send, StatusCode::CREATED, &created);

    let key = Key::from_pem(pending.private_key_pem.as_bytes()).unwrap();
    let spec = certificate_spec(&publish.attributes);
    let certificate = fixtures::certificate_pem(&spec, &key, (2026, 1, 1), (2026, 1, 31));
    let b64 = |bytes: &[u8]| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bytes);
    let issued = stored(
        &created,
        json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Issued", "message": ""}],
               "certificate": b64(&certificate), "ca": b64(b"CA")}),
    );
    expect_list(&mut s.handle, &pending.request, issued).await;

    let got = issuing.await.unwrap().unwrap();
    assert_eq!(got.certificate_pem.as_bytes(), certificate);
    assert_eq!(got.private_key_pem, key.to_pem(Encoding::Pkcs8).unwrap());
    // Issued (by the fixed clock) after the certificate's end: the guard's floor, a minute on.
    assert_eq!(got.next_issuance_time, "2026-11-27T12:01:00Z".parse().unwrap());
    assert_eq!(s.store.pending("csi-0b9d").unwrap(), None);
    drop(s.plugin);
    assert!(s.handle.next_request().await.is_none(), "no further request");
}

#[tokio::test]
async fn a_resumed_volume_recreates_a_lost_request_and_reports_a_denial_on_the_pod() {
    let mut s = scripted(STEP);
    let publish = publish(&[(key::KEY_ALGORITHM, "ECDSA"), (key::DNS_NAMES, "web.shop.svc")]);
    s.store.put_metadata(&publish.metadata).unwrap();
    let key = fixtures::ec();
    let pending = Pending {
        request: "r-1".into(),
        private_key_pem: key.to_pem(Encoding::Pkcs8).unwrap(),
        since: "2026-11-27T11:59:00Z".parse().unwrap(),
    };
    s.store.put_pending("csi-0b9d", &pending).unwrap();
    let issuing = spawn_issue(&s, &publish);

    let (method, uri, _, send) = next(&mut s.handle).await;
    assert_eq!((method, uri.as_str()), (Method::GET, &*format!("{REQUESTS}/r-1")));
    answer(
        send,
        StatusCode::NOT_FOUND,
        &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}),
    );
    let (method, _, created, send) = next(&mut s.handle).await;
    assert_eq!(
        (method, created["metadata"]["name"].as_str()),
        (Method::POST, Some("r-1"))
    );
    answer(send, StatusCode::CREATED, &created);
    let denied = json!({"conditions": [{"type": "Denied", "status": "True", "reason": "policy", "message": "not this pod"}]});
    expect_list(&mut s.handle, "r-1", stored(&created, denied)).await;

    let (method, uri, event, send) = next(&mut s.handle).await;
    assert_eq!(
        (method, uri.as_str()),
        (Method::POST, "/apis/events.k8s.io/v1/namespaces/shop/events?")
    );
    assert_eq!(
        (&event["reason"], &event["note"], &event["regarding"]["uid"]),
        (
            &json!("CertificateRequestDenied"),
            &json!("volume csi-0b9d: CertificateRequest shop/r-1 was denied: not this pod"),
            &json!("0b9d")
        )
    );
    answer(send, StatusCode::CREATED, &event);

    let status = issuing.await.unwrap().unwrap_err();
    assert_eq!(
        (status.code(), status.message()),
        (
            Code::FailedPrecondition,
            "volume csi-0b9d: CertificateRequest shop/r-1 was denied: not this pod"
        )
    );
    assert_eq!(s.store.pending("csi-0b9d").unwrap(), None);
}

#[tokio::test]
async fn at_the_deadline_the_request_and_key_stay_for_the_next_publish() {
    let mut s = scripted(Duration::from_secs(2));
    let publish = publish(&[(key::KEY_ALGORITHM, "ECDSA"), (key::DNS_NAMES, "web.shop.svc")]);
    s.store.put_metadata(&publish.metadata).unwrap();
    let issuing = spawn_issue(&s, &publish);

    expect_earlier_deleted(&mut s.handle).await;
    let (_, _, created, send) = next(&mut s.handle).await;
    answer(send, StatusCode::CREATED, &created);
    let name = created["metadata"]["name"].as_str().unwrap().to_string();
    let waiting = json!({"conditions": [{"type": "Ready", "status": "False", "reason": "Pending", "message": "waiting for approval"}]});
    expect_list(&mut s.handle, &name, stored(&created, waiting)).await;
    // The watch that follows is never answered: nothing changes before the deadline.
    let (method, uri, _, _held) = next(&mut s.handle).await;
    assert_eq!(method, Method::GET);
    assert!(uri.contains("watch=true"), "{uri}");

    let status = issuing.await.unwrap().unwrap_err();
    assert_eq!(
        (status.code(), status.message().to_string()),
        (
            Code::DeadlineExceeded,
            format!(
                "volume csi-0b9d: CertificateRequest shop/{name} is not issued after 2s (not approved yet?); the next Publish waits for it again"
            )
        )
    );
    let kept = s.store.pending("csi-0b9d").unwrap().expect("kept");
    assert_eq!(kept.request, name);
}
