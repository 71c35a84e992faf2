//! Standalone mode's check of cert-manager's Lease, request by request against a scripted API
//! server (tower-test): one GET at start (404 and a stale Lease let it start, a held one or a
//! 403 refuse at once, other errors are retried a bounded number of times), and the watch
//! that stops the manager when cert-manager takes the Lease later.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

mod support;

use std::time::Duration;

use cfssl_issuer::controllers::{Config, certificate::Settings};
use cfssl_issuer::manager::cert_manager::{self, Guard, Refusal, Retry};
use http::{Method, StatusCode};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use serde_json::{Value, json};
use support::apimock::*;

const GET: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/cert-manager-controller";
const RETRY: Retry = Retry {
    attempts: 3,
    delay: Duration::from_millis(10),
};

fn api() -> (Api<Lease>, ApiHandle) {
    let (service, handle) = tower_test::mock::pair();
    let client = kube::Client::new(service, "default");
    (Api::namespaced(client, "kube-system"), handle)
}

/// A Lease renewed `renewed` (the mock clock says 10:00:00) for 60 s.
fn lease(renewed: &str) -> Value {
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
           "metadata": {"name": "cert-manager-controller", "namespace": "kube-system", "resourceVersion": "7"},
           "spec": {"holderIdentity": "cert-manager-7d9f_4f1e", "leaseDurationSeconds": 60,
                    "renewTime": renewed}})
}

const HELD: &str = "2026-11-22T09:59:45.000000Z";
const STALE: &str = "2026-11-22T09:58:00.000000Z";

/// The Status the API server answers an error with (`reason` as kube-apiserver sets it).
fn status(code: u16) -> Value {
    let reason = match code {
        404 => "NotFound",
        403 => "Forbidden",
        503 => "ServiceUnavailable",
        _ => "InternalError",
    };
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason, "message": "m"})
}

/// Runs the start check while `script` answers its requests, one `(status, body)` each, and
/// asserts every request is the GET of the Lease and nothing more is asked.
async fn start_check(script: Vec<(StatusCode, Value)>) -> Result<(), Refusal> {
    let (api, mut handle) = api();
    let task = tokio::spawn(async move { cert_manager::check(&api, "kube-system", &clock(), RETRY).await });
    for (code, body) in script {
        let (method, uri, _, send) = next(&mut handle).await;
        assert_eq!((method, uri.as_str()), (Method::GET, GET));
        answer(send, code, &body);
    }
    let result = finish(task).await;
    // The check is over and its client dropped: the mock reports no request, not a new one.
    let extra = handle.next_request().await;
    assert!(
        extra.is_none(),
        "unexpected API request: {:?}",
        extra.map(|(r, _)| r.uri().clone())
    );
    result
}

#[tokio::test]
async fn no_lease_or_a_stale_one_starts_after_one_get() {
    start_check(vec![(StatusCode::NOT_FOUND, status(404))])
        .await
        .unwrap();
    start_check(vec![(StatusCode::OK, lease(STALE))]).await.unwrap();
}

#[tokio::test]
async fn a_held_lease_refuses_naming_it() {
    let refusal = start_check(vec![(StatusCode::OK, lease(HELD))])
        .await
        .unwrap_err();
    assert_eq!(
        refusal.to_string(),
        "standalone mode refused: cert-manager is running (Lease kube-system/cert-manager-controller held by cert-manager-7d9f_4f1e until 2026-11-22T10:00:45Z); run either cert-manager or --certificate-controllers, not both"
    );
}

#[tokio::test]
async fn forbidden_refuses_at_once_without_retrying() {
    let refusal = start_check(vec![(StatusCode::FORBIDDEN, status(403))])
        .await
        .unwrap_err();
    assert!(matches!(refusal, Refusal::Forbidden { .. }), "{refusal:?}");
    assert!(refusal.to_string().contains("RBAC"), "{refusal}");
}

#[tokio::test]
async fn other_errors_are_retried_then_refused() {
    let unavailable = (StatusCode::SERVICE_UNAVAILABLE, status(503));
    start_check(vec![
        unavailable.clone(),
        (StatusCode::INTERNAL_SERVER_ERROR, status(500)),
        (StatusCode::OK, lease(STALE)),
    ])
    .await
    .unwrap();
    let refusal = start_check(vec![unavailable.clone(), unavailable.clone(), unavailable])
        .await
        .unwrap_err();
    assert!(
        matches!(refusal, Refusal::Unreadable { attempts: 3, .. }),
        "{refusal:?}"
    );
}

#[tokio::test]
async fn outside_standalone_mode_the_lease_is_never_read() {
    let (service, mut handle) = tower_test::mock::pair();
    let client = kube::Client::new(service, "default");
    let guard = bounded(Guard::start(&client, &Config::new(CLUSTER_NS), clock()))
        .await
        .unwrap();
    no_more_requests(&mut handle).await;
    let code = guard.exit_code(std::process::ExitCode::SUCCESS);
    assert_eq!(code, std::process::ExitCode::SUCCESS);
}

fn standalone() -> Config {
    let mut config = Config::new(CLUSTER_NS);
    config.standalone = Some(Settings {
        approve_own_requests: true,
        minimum_backoff: Duration::from_secs(3600),
        maximum_backoff: Duration::from_secs(32 * 3600),
        cert_manager_lease_namespace: "kube-system".into(),
        owner_reference: false,
        copied_annotation_prefixes: vec!["*".into()],
        renewal_jitter: cfssl_issuer::certificates::renewal::Jitter::OFF,
    });
    config
}

/// The watch's list answered with the stale Lease, then cert-manager renews it: the guard's
/// stop future resolves and the exit code turns to failure.
#[tokio::test]
async fn the_lease_taken_while_running_stops_the_manager_with_failure() {
    let (service, mut handle) = tower_test::mock::pair();
    let client = kube::Client::new(service, "default");
    let start = tokio::spawn(async move { Guard::start(&client, &standalone(), clock()).await });
    let (method, uri, _, send) = next(&mut handle).await;
    assert_eq!((method, uri.as_str()), (Method::GET, GET));
    answer(send, StatusCode::OK, &lease(STALE));
    let guard = finish(start).await.unwrap();

    let (method, uri, _, send) = next(&mut handle).await;
    assert_eq!(method, Method::GET);
    assert!(
        uri.starts_with("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases?")
            && uri.contains("fieldSelector=metadata.name%3Dcert-manager-controller"),
        "the watch asks for the one Lease its Role names: {uri}"
    );
    let list = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "LeaseList",
                      "metadata": {"resourceVersion": "7"}, "items": [lease(STALE)]});
    answer(send, StatusCode::OK, &list);

    let stopped = guard.or(std::future::pending());
    tokio::pin!(stopped);
    assert!(
        tokio::time::timeout(Duration::from_millis(200), &mut stopped)
            .await
            .is_err(),
        "a stale Lease does not stop the manager"
    );
    assert_eq!(
        guard.exit_code(std::process::ExitCode::SUCCESS),
        std::process::ExitCode::SUCCESS
    );

    let (method, uri, _, send) = next(&mut handle).await;
    assert_eq!(method, Method::GET);
    assert!(
        uri.contains("watch=true") && uri.contains("fieldSelector=metadata.name%3Dcert-manager-controller"),
        "{uri}"
    );
    let mut renewed = lease(HELD);
    renewed["metadata"]["resourceVersion"] = "8".into();
    let event = json!({"type": "MODIFIED", "object": renewed});
    send.send_response(
        http::Response::builder()
            .status(StatusCode::OK)
            .body(kube::client::Body::from(format!("{event}\n").into_bytes()))
            .unwrap(),
    );
    bounded(stopped).await;
    assert_eq!(
        guard.exit_code(std::process::ExitCode::SUCCESS),
        std::process::ExitCode::FAILURE
    );
}

/// Started (no Lease), then the watch's list is forbidden: the manager would run blind, so
/// it stops with failure too.
#[tokio::test]
async fn a_watch_rbac_forbids_stops_the_manager_with_failure() {
    let (service, mut handle) = tower_test::mock::pair();
    let client = kube::Client::new(service, "default");
    let start = tokio::spawn(async move { Guard::start(&client, &standalone(), clock()).await });
    let (method, uri, _, send) = next(&mut handle).await;
    assert_eq!((method, uri.as_str()), (Method::GET, GET));
    answer(send, StatusCode::NOT_FOUND, &status(404));
    let guard = finish(start).await.unwrap();
    let (method, uri, _, send) = next(&mut handle).await;
    assert_eq!(method, Method::GET);
    assert!(
        uri.contains("fieldSelector=metadata.name%3Dcert-manager-controller"),
        "{uri}"
    );
    answer(send, StatusCode::FORBIDDEN, &status(403));
    bounded(guard.or(std::future::pending())).await;
    assert_eq!(
        guard.exit_code(std::process::ExitCode::SUCCESS),
        std::process::ExitCode::FAILURE
    );
}
