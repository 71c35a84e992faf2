//! A scripted Kubernetes API (tower-test) and object builders, for driving one reconcile and
//! checking every request it makes.

use std::sync::Arc;
use std::time::Duration;

use cfssl_issuer::api::certmanager::{CertificateRequest, CertificateRequestSpec, IssuerRef};
use cfssl_issuer::api::{ClusterIssuer, Issuer, IssuerSpec};
use cfssl_issuer::controllers::{self, Config, Contexts, Recheck};
use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tower_test::mock::{Handle, SendResponse};

pub const CLUSTER_NS: &str = "cfssl-system";

pub type ApiHandle = Handle<Request<Body>, Response<Body>>;

pub fn clock() -> controllers::Clock {
    Arc::new(|| "2026-11-22T10:00:00Z".parse().unwrap())
}

pub fn store<K>(objects: Vec<K>) -> Store<K>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (reader, mut writer) = reflector::store();
    for obj in objects {
        writer.apply_watcher_event(&watcher::Event::Apply(obj));
    }
    reader
}

pub fn context(issuers: Vec<Issuer>, cluster_issuers: Vec<ClusterIssuer>) -> (Arc<Contexts>, ApiHandle) {
    let (ctx, handle, _) = context_with_rechecks(issuers, cluster_issuers);
    (ctx, handle)
}

pub fn context_with_rechecks(
    issuers: Vec<Issuer>,
    cluster_issuers: Vec<ClusterIssuer>,
) -> (Arc<Contexts>, ApiHandle, mpsc::UnboundedReceiver<Recheck>) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "default");
    let (ctx, rechecks) = Contexts::new(
        client,
        Config::new(CLUSTER_NS),
        clock(),
        store(issuers),
        store(cluster_issuers),
        Arc::new(cfssl_issuer::telemetry::Metrics::default()),
    );
    (Arc::new(ctx), handle, rechecks)
}

pub fn spec(url: &str) -> IssuerSpec {
    IssuerSpec {
        url: url.into(),
        auth_secret_name: "creds".into(),
        label: "intermediate1".into(),
        ..Default::default()
    }
}

pub fn issuer(ns: &str, name: &str, url: &str) -> Issuer {
    let mut i = Issuer::new(name, spec(url));
    i.metadata.namespace = Some(ns.into());
    i.metadata.generation = Some(3);
    i.metadata.uid = Some(format!("uid-{name}"));
    i
}

pub fn cluster_issuer(name: &str, url: &str) -> ClusterIssuer {
    let mut i = ClusterIssuer::new(name, spec(url));
    i.metadata.generation = Some(1);
    i.metadata.uid = Some(format!("uid-{name}"));
    i
}

pub fn request(name: &str, group: &str, kind: &str, conditions: Value) -> CertificateRequest {
    let mut cr = CertificateRequest::new(
        name,
        CertificateRequestSpec {
            request: k8s_openapi::ByteString(b"-----BEGIN CERTIFICATE REQUEST-----\n".to_vec()),
            issuer_ref: IssuerRef {
                name: "ca".into(),
                kind: kind.into(),
                group: group.into(),
                ..Default::default()
            },
            ..Default::default()
        },
    );
    cr.metadata.namespace = Some("apps".into());
    cr.metadata.uid = Some(format!("uid-{name}"));
    cr.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-11-22T09:59:00Z".parse().unwrap(),
    ));
    cr.status = serde_json::from_value(json!({ "conditions": conditions })).unwrap();
    cr
}

/// How long one scripted scenario may take. A reconcile that makes a request the script does not
/// answer waits for ever on the mock; the bound turns that hang into a failure.
pub const SCENARIO_LIMIT: Duration = Duration::from_secs(20);

/// Awaits `work`, failing the test if it does not finish within [`SCENARIO_LIMIT`].
pub async fn bounded<F: std::future::Future>(work: F) -> F::Output {
    tokio::time::timeout(SCENARIO_LIMIT, work)
        .await
        .expect("the reconcile did not finish: it made an API request the script does not answer")
}

/// Joins a spawned reconcile under [`SCENARIO_LIMIT`], propagating its panic.
pub async fn finish<T>(task: tokio::task::JoinHandle<T>) -> T {
    bounded(task).await.expect("the reconcile task panicked")
}

/// The next request the client makes: method, path with query, JSON body. Within
/// [`SCENARIO_LIMIT`]: a real sign (a key, a CA) may come between two requests.
pub async fn next(handle: &mut ApiHandle) -> (Method, String, Value, SendResponse<Response<Body>>) {
    let (req, send) = tokio::time::timeout(SCENARIO_LIMIT, handle.next_request())
        .await
        .expect("an API request")
        .expect("the client is alive");
    let method = req.method().clone();
    let uri = req.uri().to_string();
    let bytes = req.into_body().collect_bytes().await.unwrap();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into()))
    };
    (method, uri, body, send)
}

pub fn answer(send: SendResponse<Response<Body>>, status: StatusCode, body: &Value) {
    send.send_response(
        Response::builder()
            .status(status)
            .body(Body::from(serde_json::to_vec(body).unwrap()))
            .unwrap(),
    );
}

pub fn not_found(send: SendResponse<Response<Body>>) {
    answer(
        send,
        StatusCode::NOT_FOUND,
        &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}),
    );
}

/// Answers an Event create with the Event itself.
pub async fn expect_event(handle: &mut ApiHandle, namespace: &str, reason: &str) {
    let (method, uri, body, send) = next(handle).await;
    assert_eq!(method, Method::POST);
    assert_eq!(
        uri,
        format!("/apis/events.k8s.io/v1/namespaces/{namespace}/events?")
    );
    assert_eq!(body["reason"], reason, "{body}");
    let note = body["note"].as_str().unwrap_or_default();
    assert!(
        !note.contains("0123456789abcdef"),
        "no key material in events: {note}"
    );
    answer(send, StatusCode::CREATED, &body);
}

pub async fn no_more_requests(handle: &mut ApiHandle) {
    let extra = tokio::time::timeout(Duration::from_millis(300), handle.next_request()).await;
    assert!(
        extra.is_err(),
        "unexpected API request: {:?}",
        extra.map(|r| r.map(|(req, _)| req.uri().clone()))
    );
}

/// A credential Secret as the API server returns it, with `key` (and a trailing newline, as
/// `kubectl create secret --from-file` leaves one).
pub fn secret(key_hex: &str, resource_version: &str) -> Value {
    use base64::Engine;
    let key = base64::engine::general_purpose::STANDARD.encode(format!("{key_hex}\n"));
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": "creds", "resourceVersion": resource_version},
           "data": {"key": key}})
}

/// `issuer` as its reconciler leaves it after a passed check.
pub fn checked(issuer: Issuer) -> Issuer {
    with_ready(issuer, "True", "Checked", "ok")
}

/// `issuer` with a current `Ready` condition of `status`, `reason` and `message`.
pub fn with_ready(mut issuer: Issuer, status: &str, reason: &str, message: &str) -> Issuer {
    issuer.status = serde_json::from_value(json!({"conditions": [{
        "type": "Ready", "status": status, "reason": reason, "message": message,
        "lastTransitionTime": "2026-11-22T09:00:00Z",
        "observedGeneration": issuer.metadata.generation,
    }]}))
    .unwrap();
    issuer
}

/// The field manager of the controller that writes the status of the object at `path`: each
/// controller applies as its own manager.
pub fn field_manager_of(path: &str) -> &'static str {
    let plural = path.rsplit('/').nth(1).unwrap_or_default();
    match plural {
        "certificaterequests" => "cfssl-issuer-certificaterequest",
        "certificatesigningrequests" => "cfssl-issuer-certificatesigningrequest",
        "issuers" => "cfssl-issuer-issuer",
        "clusterissuers" => "cfssl-issuer-clusterissuer",
        "certificates" => panic!("five controllers write a Certificate's status: name the manager"),
        other => panic!("no controller writes {other}"),
    }
}

/// Answers the apply of a status with the object it was applied to.
pub async fn expect_status_apply(handle: &mut ApiHandle, path: &str, echo: &Value) -> Value {
    let (method, uri, body, send) = next(handle).await;
    assert_eq!(method, Method::PATCH, "{uri}");
    let manager = field_manager_of(path);
    assert_eq!(uri, format!("{path}/status?&force=true&fieldManager={manager}"));
    answer(send, StatusCode::OK, echo);
    body
}

pub async fn expect_secret_read(handle: &mut ApiHandle, namespace: &str, secret: &Value) {
    let (method, uri, _, send) = next(handle).await;
    assert_eq!(
        (method, uri),
        (
            Method::GET,
            format!("/api/v1/namespaces/{namespace}/secrets/creds")
        )
    );
    answer(send, StatusCode::OK, secret);
}

pub fn with_csr(mut cr: CertificateRequest, pem: &str) -> CertificateRequest {
    cr.spec.request = k8s_openapi::ByteString(pem.as_bytes().to_vec());
    cr
}
