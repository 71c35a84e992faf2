//! A renewal's Kubernetes calls, request by request, against a scripted API (tower-test): the
//! new request and its watch, the old request deleted only once the new files are written,
//! the key reused or not, a refused renewal that keeps the files, and a start that asks
//! nothing of a volume not yet due.

use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};
use x509_parser::prelude::{FromDer, X509CertificationRequest};

use super::*;
use crate::certificates::decode::public_keys_equal;
use crate::certificates::fixtures;
use crate::csi::issue::shape::certificate_spec;
use crate::csi::node::Issued;
use crate::csi::testing::{ApiHandle, answer, next_call, pod_context, publish_request};
use crate::pki::keys::{Encoding, Key};

const STEP: Duration = Duration::from_secs(30);
const REQUESTS: &str = "/apis/cert-manager.io/v1/namespaces/shop/certificaterequests";
const VOLUME: &str = "csi-0b9d";
const SELECTOR: &str =
    "csi.cert-manager.io%2Fnode-id-hash%3D9bd6bbf5f%2Ccsi.cert-manager.io%2Fvolume-id-hash%3D6d5c58c744";

struct Scripted {
    renewer: Renewer,
    handle: ApiHandle,
    store: Store,
    publish: Publish,
    _dir: tempfile::TempDir,
}

/// An issued volume (ECDSA, `extra` attributes) whose files hold the first fixture key's
/// certificate, with a renewer on a scripted API and a clock at 2026-11-27T12:00:00Z.
fn issued_volume(extra: &[(&str, &str)]) -> Scripted {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut attributes = vec![(key::KEY_ALGORITHM, "ECDSA"), (key::DNS_NAMES, "web.shop.svc")];
    attributes.extend_from_slice(extra);
    let request = publish_request(VOLUME, "/var/lib/kubelet/t", pod_context(&attributes));
    let publish = decide::publish(&request).unwrap();
    let old = fixtures::ec();
    let issued = Issued {
        private_key_pem: old.to_pem(Encoding::Pkcs8).unwrap(),
        certificate_pem: "OLD CERTIFICATE".into(),
        ca_pem: "CA".into(),
        keystores: Vec::new(),
        next_issuance_time: "2026-11-27T11:00:00Z".parse().unwrap(),
        not_after: "2026-11-27T12:00:00Z".parse().unwrap(),
    };
    let mut metadata = publish.metadata.clone();
    metadata.next_issuance_time = Some(issued.next_issuance_time);
    store.put_metadata(&metadata).unwrap();
    store
        .write_files(VOLUME, &files(&publish, &issued), None)
        .unwrap();
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "default");
    let clock = crate::clock::fixed_clock("2026-11-27T12:00:00Z".parse().unwrap());
    let plugin = CertificateRequests::new(client, store.clone(), "node-1", STEP, clock.clone());
    Scripted {
        renewer: Renewer::new(Arc::new(plugin), store.clone(), clock),
        handle,
        store,
        publish,
        _dir: dir,
    }
}

fn file(store: &Store, name: &str) -> String {
    std::fs::read_to_string(store.data_dir(VOLUME).unwrap().join(name)).unwrap()
}

/// The key of the CSR in a created request.
fn csr_is_for(created: &Value, key: &Key) -> bool {
    let b64 = created["spec"]["request"].as_str().unwrap();
    let pem = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b64).unwrap();
    let der = ::pem::parse(pem).unwrap().into_contents();
    let (_, csr) = X509CertificationRequest::from_der(&der).unwrap();
    public_keys_equal(&csr.certification_request_info.subject_pki, key).unwrap()
}

/// Creates the new request (no delete first) and answers its watch with a certificate for
/// the pending key valid 2026-11-01..2027-11-01; returns the created request and the PEM.
async fn issue_new(s: &mut Scripted) -> (Value, Vec<u8>) {
    let (method, uri, created, send) = next_call(&mut s.handle, STEP).await;
    assert_eq!((method, uri.as_str()), (Method::POST, &*format!("{REQUESTS}?")));
    answer(send, StatusCode::CREATED, &created);
    let pending = s.store.pending(VOLUME).unwrap().expect("the renewal's key");
    let key = Key::from_pem(pending.private_key_pem.as_bytes()).unwrap();
    let spec = certificate_spec(&s.publish.attributes);
    let certificate = fixtures::certificate_pem(&spec, &key, (2026, 11, 1), (2027, 11, 1));
    let b64 = |bytes: &[u8]| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bytes);
    let mut issued = created.clone();
    issued["metadata"]["resourceVersion"] = json!("10");
    issued["status"] = json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Issued", "message": ""}],
                              "certificate": b64(&certificate), "ca": b64(b"CA")});
    let (method, uri, _, send) = next_call(&mut s.handle, STEP).await;
    assert_eq!(method, Method::GET);
    assert!(uri.contains("fieldSelector=metadata.name%3D"), "{uri}");
    let list = json!({"apiVersion": "cert-manager.io/v1", "kind": "CertificateRequestList",
                      "metadata": {"resourceVersion": "10"}, "items": [issued]});
    answer(send, StatusCode::OK, &list);
    (created, certificate)
}

/// The old requests deleted, the new one kept; asserted once the new files are written.
async fn expect_others_deleted(s: &mut Scripted, keep: &str, certificate: &[u8]) {
    let (method, uri, _, send) = next_call(&mut s.handle, STEP).await;
    assert_eq!(method, Method::DELETE);
    assert_eq!(
        uri,
        format!("{REQUESTS}?&fieldSelector=metadata.name%21%3D{keep}&labelSelector={SELECTOR}")
    );
    assert_eq!(
        file(&s.store, "tls.crt").as_bytes(),
        certificate,
        "written before"
    );
    let none = json!({"apiVersion": "cert-manager.io/v1", "kind": "CertificateRequestList",
                      "metadata": {}, "items": []});
    answer(send, StatusCode::OK, &none);
}

async fn renew_due_volume(extra: &[(&str, &str)]) -> (Scripted, Value) {
    let mut s = issued_volume(extra);
    // Due an hour ago: the timer fires at once.
    s.renewer.arm(VOLUME, "2026-11-27T11:00:00Z".parse().unwrap());
    let (created, certificate) = issue_new(&mut s).await;
    let name = created["metadata"]["name"].as_str().unwrap().to_string();
    expect_others_deleted(&mut s, &name, &certificate).await;
    // The timer sleeps until the new certificate is due: no request meanwhile.
    let quiet = tokio::time::timeout(Duration::from_millis(300), s.handle.next_request()).await;
    assert!(quiet.is_err(), "no request before the next due time");
    let metadata = s.store.metadata(VOLUME).unwrap().unwrap();
    let due = metadata.next_issuance_time.unwrap();
    assert!(due > "2027-06-01T00:00:00Z".parse().unwrap() && due < "2027-07-02T00:00:00Z".parse().unwrap());
    assert_eq!(s.store.pending(VOLUME).unwrap(), None);
    assert!(s.renewer.is_armed(VOLUME));
    (s, created)
}

#[tokio::test]
async fn a_due_volume_is_renewed_with_a_new_key_and_its_old_request_deleted_after() {
    let (s, created) = renew_due_volume(&[]).await;
    assert!(!csr_is_for(&created, fixtures::ec()), "a new key");
    let written = Key::from_pem(file(&s.store, "tls.key").as_bytes()).unwrap();
    assert!(csr_is_for(&created, &written), "the files hold the new key");
}

#[tokio::test]
async fn reuse_private_key_renews_with_the_volumes_current_key() {
    let (s, created) = renew_due_volume(&[(key::REUSE_PRIVATE_KEY, "true")]).await;
    assert!(csr_is_for(&created, fixtures::ec()), "the same key");
    assert_eq!(
        file(&s.store, "tls.key"),
        fixtures::ec().to_pem(Encoding::Pkcs8).unwrap()
    );
}

#[tokio::test]
async fn a_failed_renewal_keeps_the_files_and_deletes_only_its_own_request() {
    let mut s = issued_volume(&[]);
    s.renewer.arm(VOLUME, "2027-01-01T00:00:00Z".parse().unwrap());
    let renewer = s.renewer.clone();
    let renewing = tokio::spawn(async move { renewer.renew_now(VOLUME).await });
    let (_, _, created, send) = next_call(&mut s.handle, STEP).await;
    answer(send, StatusCode::CREATED, &created);
    let name = created["metadata"]["name"].as_str().unwrap().to_string();
    let mut failed = created.clone();
    failed["metadata"]["resourceVersion"] = json!("10");
    failed["status"] = json!({"conditions": [{"type": "Ready", "status": "False", "reason": "Failed", "message": "CA down"}]});
    let (_, _, _, send) = next_call(&mut s.handle, STEP).await;
    let list = json!({"apiVersion": "cert-manager.io/v1", "kind": "CertificateRequestList",
                      "metadata": {"resourceVersion": "10"}, "items": [failed]});
    answer(send, StatusCode::OK, &list);
    let (method, uri, _, send) = next_call(&mut s.handle, STEP).await;
    assert_eq!((method, uri), (Method::DELETE, format!("{REQUESTS}/{name}?")));
    answer(send, StatusCode::OK, &created);

    let error = renewing.await.unwrap().unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("CertificateRequest shop/{name} failed: CA down")
    );
    assert_eq!(file(&s.store, "tls.crt"), "OLD CERTIFICATE");
    let metadata = s.store.metadata(VOLUME).unwrap().unwrap();
    assert_eq!(
        metadata.next_issuance_time,
        Some("2026-11-27T11:00:00Z".parse().unwrap())
    );
    assert_eq!(s.store.pending(VOLUME).unwrap(), None);
}

/// A plugin started beside another (a DaemonSet's surge) renews nothing while the other holds
/// the node's renewal lock, even a volume long due; once it has the lock, the renewal runs.
#[tokio::test]
async fn a_held_renewer_asks_nothing_until_it_holds_the_nodes_lock() {
    let mut s = issued_volume(&[]);
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    s.renewer.hold_until(async move {
        let _ = released.await;
    });
    s.renewer.arm(VOLUME, "2026-11-27T11:00:00Z".parse().unwrap());
    let quiet = tokio::time::timeout(Duration::from_millis(300), s.handle.next_request()).await;
    assert!(quiet.is_err(), "no request while another plugin renews");
    release.send(()).unwrap();
    let (created, certificate) = issue_new(&mut s).await;
    let name = created["metadata"]["name"].as_str().unwrap().to_string();
    expect_others_deleted(&mut s, &name, &certificate).await;
}

#[tokio::test]
async fn at_start_a_volume_not_yet_due_asks_nothing_and_unpublish_disarms() {
    let mut s = issued_volume(&[]);
    let mut metadata = s.store.metadata(VOLUME).unwrap().unwrap();
    metadata.next_issuance_time = Some("2027-01-01T00:00:00Z".parse().unwrap());
    s.store.put_metadata(&metadata).unwrap();
    // A volume never issued (pending) is the collector's, not the renewer's.
    let pending = Metadata::new("csi-pending", "/t", metadata.volume_context());
    s.store.put_metadata(&pending).unwrap();

    assert_eq!(s.renewer.arm_issued().unwrap(), 1);
    assert!(s.renewer.is_armed(VOLUME) && !s.renewer.is_armed("csi-pending"));
    let quiet = tokio::time::timeout(Duration::from_millis(300), s.handle.next_request()).await;
    assert!(quiet.is_err(), "no request at start");

    s.renewer.disarm(VOLUME);
    assert!(!s.renewer.is_armed(VOLUME));
    assert!(
        s.renewer.renew_now(VOLUME).await.unwrap().is_none(),
        "disarmed: nothing to renew"
    );
}

/// Issues a fixed certificate, due in 2027, without the API.
struct Fixed(Issued);

impl crate::csi::node::Issue for Fixed {
    async fn issue(&self, _: &Publish) -> Result<Issued, Status> {
        Ok(self.0.clone())
    }
}

/// Mounts nothing, and says so.
struct Unmounted;

impl crate::csi::store::Mounter for Unmounted {
    fn mount(&self, _: &std::path::Path, _: &std::path::Path) -> std::io::Result<()> {
        Ok(())
    }
    fn unmount(&self, _: &std::path::Path) -> std::io::Result<()> {
        Ok(())
    }
    fn is_mounted(&self, _: &std::path::Path, _: &std::path::Path) -> std::io::Result<bool> {
        Ok(false)
    }
}

#[tokio::test]
async fn publish_arms_the_volumes_timer_and_unpublish_disarms_it() {
    use crate::csi::node::NodeService;
    use crate::csi::proto::NodeUnpublishVolumeRequest;
    use crate::csi::proto::node_server::Node;
    let mut s = issued_volume(&[]);
    s.store.remove(VOLUME).unwrap();
    let issued = Issued {
        private_key_pem: fixtures::ec().to_pem(Encoding::Pkcs8).unwrap(),
        certificate_pem: "CERT".into(),
        ca_pem: "CA".into(),
        keystores: Vec::new(),
        next_issuance_time: "2027-01-01T00:00:00Z".parse().unwrap(),
        not_after: "2027-02-01T00:00:00Z".parse().unwrap(),
    };
    let node = NodeService::new(
        "node-1",
        s.store.clone(),
        Arc::new(Unmounted),
        Arc::new(Fixed(issued)),
    )
    .with_renewer(s.renewer.clone());
    let request = publish_request(VOLUME, "/var/lib/kubelet/t", pod_context(&[]));
    node.node_publish_volume(tonic::Request::new(request))
        .await
        .unwrap();
    assert!(s.renewer.is_armed(VOLUME));
    let unpublish = NodeUnpublishVolumeRequest {
        volume_id: VOLUME.into(),
        target_path: "/var/lib/kubelet/t".into(),
    };
    node.node_unpublish_volume(tonic::Request::new(unpublish))
        .await
        .unwrap();
    assert!(!s.renewer.is_armed(VOLUME));
    assert_eq!(s.store.metadata(VOLUME).unwrap(), None);
    let quiet = tokio::time::timeout(Duration::from_millis(300), s.handle.next_request()).await;
    assert!(quiet.is_err(), "no request: not due");
}
