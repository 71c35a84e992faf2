//! The act step of each reconciler, checked request by request against a scripted API server
//! (tower-test): exact paths, server-side apply bodies, Secrets read from the right namespace,
//! nothing written for requests that are not ours.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

mod support;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use cfssl_issuer::api::GROUP;
use cfssl_issuer::controllers::{certificaterequest, issuer};
use http::{Method, StatusCode};
use serde_json::json;
use support::apimock::*;

#[tokio::test]
async fn foreign_requests_are_never_touched() {
    let (ctx, mut handle) = context(vec![], vec![]);
    for (group, kind) in [
        ("cert-manager.io", "Issuer"),
        ("example.com", "ClusterIssuer"),
        ("", ""),
    ] {
        let cr = request(
            "foreign",
            group,
            kind,
            json!([{"type": "Approved", "status": "True"}]),
        );
        bounded(certificaterequest::reconcile(Arc::new(cr), ctx.requests.clone()))
            .await
            .unwrap();
    }
    no_more_requests(&mut handle).await;
}

/// An unapproved request gets no status write, and one Normal `WaitingForApproval` Event, not
/// one per reconcile.
#[tokio::test]
async fn unapproved_requests_wait_without_a_write_and_say_so_once() {
    let (ctx, mut handle) = context(vec![], vec![]);
    let cr = Arc::new(request("waiting", GROUP, "Issuer", json!([])));
    let task = tokio::spawn(certificaterequest::reconcile(cr.clone(), ctx.requests.clone()));
    let (_, _, body, send) = next(&mut handle).await;
    assert_eq!(
        (
            body["reason"].as_str(),
            body["type"].as_str(),
            body["regarding"]["name"].as_str()
        ),
        (Some("WaitingForApproval"), Some("Normal"), Some("waiting"))
    );
    answer(send, StatusCode::CREATED, &body);
    finish(task).await.unwrap();
    for _ in 0..3 {
        bounded(certificaterequest::reconcile(cr.clone(), ctx.requests.clone()))
            .await
            .unwrap();
    }
    no_more_requests(&mut handle).await;
}

#[tokio::test]
async fn denied_request_fails_with_one_apply_that_leaves_approval_conditions_alone() {
    let (ctx, mut handle) = context(vec![], vec![]);
    let cr = request(
        "denied",
        GROUP,
        "",
        json!([{"type": "Denied", "status": "True", "reason": "Policy", "message": "no"}]),
    );
    let task = tokio::spawn(certificaterequest::reconcile(Arc::new(cr), ctx.requests.clone()));
    let (method, uri, body, send) = next(&mut handle).await;
    assert_eq!(method, Method::PATCH);
    assert_eq!(
        uri,
        "/apis/cert-manager.io/v1/namespaces/apps/certificaterequests/denied/status?&force=true&fieldManager=cfssl-issuer-certificaterequest"
    );
    assert_eq!(body["apiVersion"], "cert-manager.io/v1");
    assert_eq!(body["kind"], "CertificateRequest");
    let conditions = body["status"]["conditions"].as_array().unwrap();
    assert_eq!(conditions.len(), 1, "only our Ready condition is applied: {body}");
    assert_eq!(conditions[0]["type"], "Ready");
    assert_eq!(conditions[0]["status"], "False");
    assert_eq!(conditions[0]["reason"], "Denied");
    assert_eq!(body["status"]["failureTime"], "2026-11-22T10:00:00Z");
    assert!(body["status"].get("certificate").is_none());
    answer(
        send,
        StatusCode::OK,
        &serde_json::to_value(request("denied", GROUP, "", json!([]))).unwrap(),
    );
    expect_event(&mut handle, "apps", "Denied").await;
    finish(task).await.unwrap();
    no_more_requests(&mut handle).await;
}

#[tokio::test]
async fn unknown_kind_of_our_group_fails() {
    let (ctx, mut handle) = context(vec![], vec![]);
    let cr = request(
        "odd",
        GROUP,
        "Signer",
        json!([{"type": "Approved", "status": "True"}]),
    );
    let task = tokio::spawn(certificaterequest::reconcile(
        Arc::new(cr.clone()),
        ctx.requests.clone(),
    ));
    let (_, uri, body, send) = next(&mut handle).await;
    assert!(uri.contains("/certificaterequests/odd/status"));
    assert_eq!(body["status"]["conditions"][0]["reason"], "Failed");
    assert!(
        body["status"]["conditions"][0]["message"]
            .as_str()
            .unwrap()
            .contains("Signer")
    );
    answer(send, StatusCode::OK, &serde_json::to_value(&cr).unwrap());
    expect_event(&mut handle, "apps", "PermanentError").await;
    finish(task).await.unwrap();
}

#[tokio::test]
async fn missing_issuer_leaves_the_request_pending() {
    let (ctx, mut handle) = context(vec![], vec![]);
    let cr = request(
        "orphan",
        GROUP,
        "ClusterIssuer",
        json!([{"type": "Approved", "status": "True"}]),
    );
    let task = tokio::spawn(certificaterequest::reconcile(
        Arc::new(cr.clone()),
        ctx.requests.clone(),
    ));
    let (_, _, body, send) = next(&mut handle).await;
    let ready = &body["status"]["conditions"][0];
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str()),
        (Some("False"), Some("Pending"))
    );
    assert!(
        ready["message"]
            .as_str()
            .unwrap()
            .contains("ClusterIssuer \"ca\" not found")
    );
    assert!(body["status"].get("failureTime").is_none());
    answer(send, StatusCode::OK, &serde_json::to_value(&cr).unwrap());
    expect_event(&mut handle, "apps", "IssuerNotFound").await;
    finish(task).await.unwrap();

    // Reconciling the same state again writes nothing.
    let mut pending = cr.clone();
    pending.status = serde_json::from_value(json!({"conditions": [
        {"type": "Approved", "status": "True"},
        body["status"]["conditions"][0].clone(),
    ]}))
    .unwrap();
    bounded(certificaterequest::reconcile(
        Arc::new(pending),
        ctx.requests.clone(),
    ))
    .await
    .unwrap();
    no_more_requests(&mut handle).await;
}

#[tokio::test]
async fn issuer_secret_is_read_from_the_issuer_namespace() {
    let (ctx, mut handle) = context(vec![], vec![]);
    let issuer = issuer("team-a", "ca", "http://127.0.0.1:1");
    let task = tokio::spawn(issuer::reconcile(Arc::new(issuer.clone()), ctx.issuers.clone()));
    let (method, uri, _, send) = next(&mut handle).await;
    assert_eq!(
        (method, uri.as_str()),
        (Method::GET, "/api/v1/namespaces/team-a/secrets/creds")
    );
    not_found(send);
    let (method, uri, body, send) = next(&mut handle).await;
    assert_eq!(method, Method::PATCH);
    assert_eq!(
        uri,
        "/apis/cfssl-issuer.wikimedia.org/v1alpha1/namespaces/team-a/issuers/ca/status?&force=true&fieldManager=cfssl-issuer-issuer"
    );
    let ready = &body["status"]["conditions"][0];
    assert_eq!(ready["reason"], "SecretNotFound");
    assert_eq!(ready["observedGeneration"], 3);
    assert!(ready["message"].as_str().unwrap().contains("team-a/creds"));
    answer(send, StatusCode::OK, &serde_json::to_value(&issuer).unwrap());
    expect_event(&mut handle, "team-a", "SecretNotFound").await;
    let action = finish(task).await.unwrap();
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(Duration::from_secs(1)),
        "backoff starts at 1 s"
    );
}

#[tokio::test]
async fn cluster_issuer_secret_is_read_from_the_cluster_resource_namespace() {
    let (ctx, mut handle) = context(vec![], vec![]);
    let issuer = cluster_issuer("shared", "http://127.0.0.1:1");
    let task = tokio::spawn(issuer::reconcile(Arc::new(issuer.clone()), ctx.issuers.clone()));
    let (_, uri, _, send) = next(&mut handle).await;
    assert_eq!(uri, format!("/api/v1/namespaces/{CLUSTER_NS}/secrets/creds"));
    answer(
        send,
        StatusCode::OK,
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "resourceVersion": "7"},
                "data": {"key": "bm90LWhleA=="}}),
    );
    let (_, uri, body, send) = next(&mut handle).await;
    assert_eq!(
        uri,
        "/apis/cfssl-issuer.wikimedia.org/v1alpha1/clusterissuers/shared/status?&force=true&fieldManager=cfssl-issuer-clusterissuer"
    );
    assert_eq!(body["kind"], "ClusterIssuer");
    assert_eq!(body["status"]["conditions"][0]["reason"], "InvalidCredentials");
    answer(send, StatusCode::OK, &serde_json::to_value(&issuer).unwrap());
    // Events for cluster-scoped objects go to the default namespace.
    expect_event(&mut handle, "default", "InvalidCredentials").await;
    finish(task).await.unwrap();
}

#[tokio::test]
async fn healthy_issuer_is_rechecked_at_the_interval_and_unchanged_status_is_not_rewritten() {
    let ca = simple_cfssl::spawn(simple_cfssl::Config::test_default(
        "0123456789abcdef0123456789abcdef",
    ))
    .await
    .unwrap();
    let (ctx, mut handle) = context(vec![], vec![]);
    let mut issuer = issuer("team-a", "ca", &ca.url);
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "resourceVersion": "1"},
                        "data": {"key": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWYK"}});
    let task = tokio::spawn(issuer::reconcile(Arc::new(issuer.clone()), ctx.issuers.clone()));
    let (_, _, _, send) = next(&mut handle).await;
    answer(send, StatusCode::OK, &secret);
    let (_, _, body, send) = next(&mut handle).await;
    let ready = body["status"]["conditions"][0].clone();
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str()),
        (Some("True"), Some("Checked"))
    );
    answer(send, StatusCode::OK, &serde_json::to_value(&issuer).unwrap());
    // Ready over plain http:// (this CA): the Event is the Warning that says so.
    expect_event(&mut handle, "team-a", "InsecureTransport").await;
    let action = finish(task).await.unwrap();
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(Duration::from_secs(60))
    );

    // Next round: same answer, so only the Secret read happens.
    issuer.status = serde_json::from_value(json!({"conditions": [ready]})).unwrap();
    let task = tokio::spawn(issuer::reconcile(Arc::new(issuer), ctx.issuers.clone()));
    let (_, _, _, send) = next(&mut handle).await;
    answer(send, StatusCode::OK, &secret);
    finish(task).await.unwrap();
    no_more_requests(&mut handle).await;
    ca.shutdown();
}

// ---------------------------------------------------------------------------------------------
// The Go issuer's CRDs: conditions without observedGeneration.

use cfssl_issuer::api::IssuerKind;
use cfssl_issuer::controllers::kit::status::schema::ObservedGeneration;

/// One issuer reconcile whose Secret is missing; returns the status apply body.
async fn issuer_status_apply(
    ctx: &Arc<cfssl_issuer::controllers::Contexts>,
    handle: &mut ApiHandle,
    answer_with: (StatusCode, serde_json::Value),
) -> (serde_json::Value, bool) {
    let issuer = issuer("team-a", "ca", "http://127.0.0.1:1");
    let task = tokio::spawn(issuer::reconcile(Arc::new(issuer.clone()), ctx.issuers.clone()));
    let (_, uri, _, send) = next(handle).await;
    assert_eq!(uri, "/api/v1/namespaces/team-a/secrets/creds");
    not_found(send);
    let (method, uri, body, send) = next(handle).await;
    assert_eq!(method, Method::PATCH);
    assert!(
        uri.starts_with("/apis/cfssl-issuer.wikimedia.org/v1alpha1/namespaces/team-a/issuers/ca/status?")
    );
    let ok = answer_with.0 == StatusCode::OK;
    answer(send, answer_with.0, &answer_with.1);
    if ok {
        expect_event(handle, "team-a", "SecretNotFound").await;
    }
    let result = task.await.unwrap();
    assert_eq!(result.is_ok(), ok, "{result:?}");
    (body["status"]["conditions"][0].clone(), ok)
}

#[tokio::test]
async fn issuer_status_holds_observed_generation_only_where_the_schema_declares_it() {
    bounded(async {
        let cases = [
            (ObservedGeneration::Assumed, Some(3)),
            (ObservedGeneration::Declared, Some(3)),
            (ObservedGeneration::Unreadable, Some(3)),
            (ObservedGeneration::NotDeclared, None),
        ];
        for (schema, want) in cases {
            let (ctx, mut handle) = context(vec![], vec![]);
            ctx.shared.status_schemas.set(IssuerKind::Issuer, schema);
            let ok = (
                StatusCode::OK,
                serde_json::to_value(issuer("team-a", "ca", "x")).unwrap(),
            );
            let (ready, _) = issuer_status_apply(&ctx, &mut handle, ok).await;
            assert_eq!(ready["reason"], "SecretNotFound", "{schema:?}");
            assert_eq!(
                ready
                    .get("observedGeneration")
                    .and_then(serde_json::Value::as_i64),
                want,
                "{schema:?}: {ready}"
            );
            no_more_requests(&mut handle).await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_refused_observed_generation_is_not_written_again() {
    bounded(async {
        let (ctx, mut handle) = context(vec![], vec![]);
        ctx.shared.status_schemas.set(IssuerKind::Issuer, ObservedGeneration::Unreadable);
        // What kube-apiserver answers an apply of a field the Go CRD does not declare.
        let refused = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 500,
            "message": "failed to create typed patch object (team-a/ca; cfssl-issuer.wikimedia.org/v1alpha1, Kind=Issuer): .status.conditions[0].observedGeneration: field not declared in schema"});
        let (first, _) = issuer_status_apply(&ctx, &mut handle, (StatusCode::INTERNAL_SERVER_ERROR, refused)).await;
        assert_eq!(first["observedGeneration"], 3);
        assert_eq!(
            ctx.shared.status_schemas.get(IssuerKind::Issuer),
            ObservedGeneration::NotDeclared
        );
        let ok = (StatusCode::OK, serde_json::to_value(issuer("team-a", "ca", "x")).unwrap());
        let (second, _) = issuer_status_apply(&ctx, &mut handle, ok).await;
        assert!(second.get("observedGeneration").is_none(), "{second}");
        no_more_requests(&mut handle).await;
    })
    .await;
}

/// A Ready issuer whose condition has no observedGeneration: unchecked where the schema holds
/// the field (the request waits, one status write), current where it cannot (the request goes
/// on to signing, whose first step reads the issuer's Secret).
#[tokio::test]
async fn a_condition_without_observed_generation_is_current_only_where_the_schema_lacks_it() {
    bounded(async {
        let mut go_written = issuer("apps", "ca", "http://127.0.0.1:1");
        go_written.status = serde_json::from_value(json!({"conditions": [{
            "type": "Ready", "status": "True", "reason": "Checked", "message": "ok",
            "lastTransitionTime": "2026-11-22T09:00:00Z",
        }]}))
        .unwrap();
        let approved = json!([{"type": "Approved", "status": "True"}]);
        for schema in [ObservedGeneration::Declared, ObservedGeneration::Assumed] {
            let (ctx, mut handle) = context(vec![go_written.clone()], vec![]);
            ctx.shared.status_schemas.set(IssuerKind::Issuer, schema);
            let cr = request("waits", GROUP, "Issuer", approved.clone());
            let task = tokio::spawn(certificaterequest::reconcile(
                Arc::new(cr.clone()),
                ctx.requests.clone(),
            ));
            let (method, uri, body, send) = next(&mut handle).await;
            assert_eq!(method, Method::PATCH, "{schema:?}: {uri}");
            assert_eq!(body["status"]["conditions"][0]["reason"], "Pending", "{schema:?}");
            answer(send, StatusCode::OK, &serde_json::to_value(&cr).unwrap());
            let (_, _, event, send) = next(&mut handle).await;
            answer(send, StatusCode::CREATED, &event);
            finish(task).await.unwrap();
        }
        for schema in [ObservedGeneration::NotDeclared, ObservedGeneration::Unreadable] {
            let (ctx, mut handle) = context(vec![go_written.clone()], vec![]);
            ctx.shared.status_schemas.set(IssuerKind::Issuer, schema);
            let cr = with_csr(request("signs", GROUP, "Issuer", approved.clone()), "not a CSR");
            let task = tokio::spawn(certificaterequest::reconcile(Arc::new(cr), ctx.requests.clone()));
            let (method, uri, _, send) = next(&mut handle).await;
            assert_eq!(
                (method, uri.as_str()),
                (Method::GET, "/api/v1/namespaces/apps/secrets/creds"),
                "{schema:?}: the request goes on to signing"
            );
            not_found(send);
            task.abort();
        }
    })
    .await;
}

// Signing exactly once: the cache the controller reconciles from can lag behind our own writes.

const WEB_PATH: &str = "/apis/cert-manager.io/v1/namespaces/apps/certificaterequests/web";

/// A context whose Issuer cache the test can change, as the reflector does.
fn context_with_issuer_cache(
    issuer: cfssl_issuer::api::Issuer,
) -> (
    Arc<cfssl_issuer::controllers::Contexts>,
    ApiHandle,
    kube::runtime::reflector::store::Writer<cfssl_issuer::api::Issuer>,
) {
    let (service, handle) = tower_test::mock::pair();
    let (reader, mut writer) = kube::runtime::reflector::store();
    writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(issuer));
    let (ctx, _) = cfssl_issuer::controllers::Contexts::new(
        kube::Client::new(service, "default"),
        cfssl_issuer::controllers::Config::new(CLUSTER_NS),
        clock(),
        reader,
        store(vec![]),
        Arc::new(cfssl_issuer::telemetry::Metrics::default()),
    );
    (Arc::new(ctx), handle, writer)
}

fn not_ready(issuer: cfssl_issuer::api::Issuer) -> cfssl_issuer::api::Issuer {
    with_ready(issuer, "False", "CAUnreachable", "down")
}

/// `cr` as the API server returns it after `applied` (the status body of our apply).
fn after_apply(
    cr: &cfssl_issuer::api::certmanager::CertificateRequest,
    applied: &serde_json::Value,
    version: &str,
) -> serde_json::Value {
    let mut echo = serde_json::to_value(cr).unwrap();
    echo["metadata"]["resourceVersion"] = version.into();
    let mut conditions = cr
        .status
        .as_ref()
        .map(|s| serde_json::to_value(&s.conditions).unwrap())
        .unwrap_or(json!([]));
    conditions.as_array_mut().unwrap().extend(
        applied["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .cloned(),
    );
    echo["status"] = applied["status"].clone();
    echo["status"]["conditions"] = conditions;
    echo
}

async fn signing_setup() -> (
    support::Ca,
    Arc<cfssl_issuer::controllers::Contexts>,
    ApiHandle,
    kube::runtime::reflector::store::Writer<cfssl_issuer::api::Issuer>,
    cfssl_issuer::api::certmanager::CertificateRequest,
) {
    let ca = support::Ca::start(support::Backend::SimpleCfssl, false).await;
    let (ctx, api, writer) = context_with_issuer_cache(checked(issuer("apps", "ca", &ca.url)));
    let (csr_pem, _) = support::csr("web.apps.example.org");
    let mut cr = with_csr(
        request(
            "web",
            GROUP,
            "Issuer",
            json!([{"type": "Approved", "status": "True", "reason": "cert-manager.io"}]),
        ),
        &csr_pem,
    );
    cr.metadata.resource_version = Some("5".into());
    (ca, ctx, api, writer, cr)
}

#[tokio::test]
async fn stale_cache_replay_after_issued_neither_signs_again_nor_drops_the_certificate() {
    let (ca, ctx, mut api, mut issuers, stale) = signing_setup().await;
    let task = tokio::spawn(certificaterequest::reconcile(
        Arc::new(stale.clone()),
        ctx.requests.clone(),
    ));
    expect_secret_read(&mut api, "apps", &secret(support::KEY_HEX, "1")).await;
    let (_, uri, applied, send) = next(&mut api).await;
    assert!(uri.starts_with(&format!("{WEB_PATH}/status?")), "{uri}");
    assert_eq!(applied["status"]["conditions"][0]["reason"], "Issued");
    answer(send, StatusCode::OK, &after_apply(&stale, &applied, "6"));
    expect_event(&mut api, "apps", "Issued").await;
    bounded(task).await.unwrap().unwrap();
    assert_eq!(ca.issued_count(), Some(1));

    // The issuer's status churns; the request cache still shows the request before our write.
    let replay = bounded(certificaterequest::reconcile(
        Arc::new(stale.clone()),
        ctx.requests.clone(),
    ))
    .await;
    assert_eq!(replay.unwrap(), kube::runtime::controller::Action::await_change());
    no_more_requests(&mut api).await;
    assert_eq!(ca.issued_count(), Some(1), "signed twice");

    // Now the cached issuer is not Ready either: a Pending apply would remove the certificate.
    issuers.apply_watcher_event(&kube::runtime::watcher::Event::Apply(not_ready(checked(issuer(
        "apps", "ca", &ca.url,
    )))));
    bounded(certificaterequest::reconcile(
        Arc::new(stale.clone()),
        ctx.requests.clone(),
    ))
    .await
    .unwrap();
    no_more_requests(&mut api).await;

    // The cache catches up: the request is Issued, nothing is written, nothing is kept.
    let fresh: cfssl_issuer::api::certmanager::CertificateRequest =
        serde_json::from_value(after_apply(&stale, &applied, "6")).unwrap();
    bounded(certificaterequest::reconcile(
        Arc::new(fresh),
        ctx.requests.clone(),
    ))
    .await
    .unwrap();
    no_more_requests(&mut api).await;
    assert!(
        ctx.requests.core.ledger.signings.snapshot().is_empty(),
        "the kept chain is dropped once seen"
    );
    assert_eq!(ca.issued_count(), Some(1));
}

#[tokio::test]
async fn lost_issued_write_is_retried_with_the_same_chain_even_when_the_issuer_is_not_ready() {
    let (ca, ctx, mut api, mut issuers, stale) = signing_setup().await;
    let task = tokio::spawn(certificaterequest::reconcile(
        Arc::new(stale.clone()),
        ctx.requests.clone(),
    ));
    expect_secret_read(&mut api, "apps", &secret(support::KEY_HEX, "1")).await;
    let (_, _, first, send) = next(&mut api).await;
    answer(
        send,
        StatusCode::INTERNAL_SERVER_ERROR,
        &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "InternalError", "code": 500}),
    );
    assert!(
        bounded(task).await.unwrap().is_err(),
        "a failed write is an error, retried"
    );
    assert_eq!(ca.issued_count(), Some(1));
    assert_eq!(unsaved_gauge(&ctx.requests), "1", "a signature at risk is shown");

    issuers.apply_watcher_event(&kube::runtime::watcher::Event::Apply(not_ready(checked(issuer(
        "apps", "ca", &ca.url,
    )))));
    let task = tokio::spawn(certificaterequest::reconcile(
        Arc::new(stale.clone()),
        ctx.requests.clone(),
    ));
    let (_, uri, again, send) = next(&mut api).await;
    assert!(
        uri.starts_with(&format!("{WEB_PATH}/status?")),
        "no Secret read, no sign: {uri}"
    );
    assert_eq!(again["status"]["conditions"][0]["reason"], "Issued");
    assert_eq!(
        again["status"]["certificate"], first["status"]["certificate"],
        "the kept chain"
    );
    answer(send, StatusCode::OK, &after_apply(&stale, &again, "6"));
    expect_event(&mut api, "apps", "Issued").await;
    bounded(task).await.unwrap().unwrap();
    assert_eq!(unsaved_gauge(&ctx.requests), "0", "saved");

    // A replay from the still-stale cache writes nothing more.
    bounded(certificaterequest::reconcile(
        Arc::new(stale),
        ctx.requests.clone(),
    ))
    .await
    .unwrap();
    no_more_requests(&mut api).await;
    assert_eq!(ca.issued_count(), Some(1), "signed twice");
}

/// The value of `cfssl_issuer_signed_unsaved_certificates` as the metrics endpoint shows it.
fn unsaved_gauge(ctx: &certificaterequest::RequestContext) -> String {
    let text = ctx.core.shared.metrics.render().unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("cfssl_issuer_signed_unsaved_certificates "))
        .unwrap_or_else(|| panic!("no gauge in {text}"));
    line.rsplit(' ').next().unwrap().to_string()
}

#[tokio::test]
async fn a_request_with_a_certificate_never_gets_a_status_without_it() {
    // Ready lost (e.g. an older manager cleared it), certificate kept, issuer not Ready, and
    // denied since: the certificate is confirmed, never replaced by Pending or Denied.
    let ca = support::Ca::start(support::Backend::SimpleCfssl, false).await;
    let (ctx, mut api, _issuers) =
        context_with_issuer_cache(not_ready(checked(issuer("apps", "ca", &ca.url))));
    let mut cr = request(
        "web",
        GROUP,
        "Issuer",
        json!([{"type": "Denied", "status": "True", "reason": "Policy", "message": "no"}]),
    );
    cr.status.as_mut().unwrap().certificate =
        Some(k8s_openapi::ByteString(b"-----BEGIN CERTIFICATE-----\n".to_vec()));
    let task = tokio::spawn(certificaterequest::reconcile(
        Arc::new(cr.clone()),
        ctx.requests.clone(),
    ));
    let (_, _, body, send) = next(&mut api).await;
    assert_eq!(body["status"]["conditions"][0]["reason"], "Issued", "{body}");
    assert_eq!(
        body["status"]["certificate"],
        "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="
    );
    answer(send, StatusCode::OK, &serde_json::to_value(&cr).unwrap());
    expect_event(&mut api, "apps", "Issued").await;
    bounded(task).await.unwrap().unwrap();
    assert_eq!(ca.issued_count(), Some(0));
}

#[tokio::test]
async fn a_second_reconcile_while_the_sign_is_in_flight_sends_nothing() {
    let (ca, ctx, mut api, _issuers, cr) = signing_setup().await;
    let first = tokio::spawn(certificaterequest::reconcile(
        Arc::new(cr.clone()),
        ctx.requests.clone(),
    ));
    // The first sign is under way (reading its credentials); the request comes round again.
    let (method, uri, _, send_secret) = next(&mut api).await;
    assert_eq!(
        (method, uri.as_str()),
        (Method::GET, "/api/v1/namespaces/apps/secrets/creds")
    );
    let second = bounded(certificaterequest::reconcile(
        Arc::new(cr.clone()),
        ctx.requests.clone(),
    ))
    .await;
    assert_eq!(second.unwrap(), kube::runtime::controller::Action::await_change());
    no_more_requests(&mut api).await;

    answer(send_secret, StatusCode::OK, &secret(support::KEY_HEX, "1"));
    let (_, _, applied, send) = next(&mut api).await;
    assert_eq!(applied["status"]["conditions"][0]["reason"], "Issued");
    answer(send, StatusCode::OK, &after_apply(&cr, &applied, "6"));
    expect_event(&mut api, "apps", "Issued").await;
    bounded(first).await.unwrap().unwrap();
    assert_eq!(ca.issued_count(), Some(1));
}

/// The signer reads the credential Secret to build a client, then reuses the client without
/// reading the Secret while the Secret metadata watch shows it at the same resourceVersion;
/// a new version means one fresh read and a new client.
#[tokio::test]
async fn the_credential_secret_is_read_again_only_when_its_version_changes() {
    use kube::runtime::watcher::Event;
    let ca = issuer("apps", "ca", "http://127.0.0.1:1");
    let (ctx, mut handle) = context(vec![ca.clone()], vec![]);
    let signer = ctx.signer.clone();
    let seen = |version: &str| {
        let mut meta = cfssl_issuer::controllers::kit::secrets::SecretMeta::default();
        meta.metadata.namespace = Some("apps".into());
        meta.metadata.name = Some("creds".into());
        meta.metadata.resource_version = Some(version.into());
        meta
    };
    let index = signer.secret_index();
    for event in [Event::Init, Event::InitApply(seen("5")), Event::InitDone] {
        index.apply(&event);
    }
    let spawn_client_for = || {
        let (signer, ca) = (signer.clone(), ca.clone());
        tokio::spawn(async move { signer.client_for(&ca).await.map_err(|e| e.to_string()) })
    };
    // First use: nothing cached, so the Secret is read.
    let task = spawn_client_for();
    answer_secret(&mut handle, "5").await;
    let first = finish(task).await.unwrap();
    // Same version: the cached client, no request.
    let again = bounded(signer.client_for(&ca)).await.unwrap();
    assert!(Arc::ptr_eq(&first, &again));
    no_more_requests(&mut handle).await;
    // The Secret changed: read once more, a new client.
    index.apply(&Event::Apply(seen("6")));
    let task = spawn_client_for();
    answer_secret(&mut handle, "6").await;
    let changed = finish(task).await.unwrap();
    assert!(!Arc::ptr_eq(&first, &changed));
    no_more_requests(&mut handle).await;
}

/// Expects the GET of `apps/creds` and answers with the test key at `version`.
async fn answer_secret(handle: &mut ApiHandle, version: &str) {
    let (method, uri, _, send) = next(handle).await;
    assert_eq!(
        (method, uri.as_str()),
        (Method::GET, "/api/v1/namespaces/apps/secrets/creds")
    );
    let key = base64::engine::general_purpose::STANDARD.encode("0123456789abcdef0123456789abcdef");
    answer(
        send,
        StatusCode::OK,
        &json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "creds", "namespace": "apps", "resourceVersion": version},
                "data": {"key": key}}),
    );
}

/// An issuance budget of 1 sign/s whose token another request took: each request joining the
/// line gets Ready=False/Pending with its place and one Event; the soonest renew-by goes ahead
/// of the one that joined before it; looking again before its turn writes nothing.
#[tokio::test]
async fn requests_over_the_issuance_budget_wait_in_urgency_order_and_say_so_once() {
    use cfssl_issuer::controllers::kit::rate::Settings;
    use cfssl_issuer::controllers::signing::IssuerName;
    use cfssl_issuer::controllers::signing::budget::{RENEW_BY, Turn, Urgency};
    let (service, mut handle) = tower_test::mock::pair();
    let mut config = cfssl_issuer::controllers::Config::new(CLUSTER_NS);
    config.issuance_budget = Some(Settings {
        rate: "1".parse().unwrap(),
        burst: 1,
    });
    let (ctx, _) = cfssl_issuer::controllers::Contexts::new(
        kube::Client::new(service, "default"),
        config,
        clock(),
        store(vec![checked(issuer("apps", "ca", "https://ca.invalid"))]),
        store(vec![]),
        Arc::new(cfssl_issuer::telemetry::Metrics::default()),
    );
    let ctx = Arc::new(ctx);
    let name = IssuerName {
        kind: cfssl_issuer::api::IssuerKind::Issuer,
        namespace: Some("apps".into()),
        name: "ca".into(),
    };
    let now = (clock())();
    let other = Urgency::of("another", None, None, now);
    assert_eq!(ctx.requests.core.signer.budget.turn(&name, &other, now), Turn::Go);
    let approved = json!([{"type": "Approved", "status": "True"}]);
    let renewing = |cr_name: &str, by: &str| {
        let mut cr = request(cr_name, GROUP, "Issuer", approved.clone());
        cr.metadata.annotations = Some([(RENEW_BY.to_string(), by.to_string())].into());
        cr
    };
    let later = renewing("later", "2026-11-22T12:00:00Z");
    let sooner = renewing("sooner", "2026-11-22T11:00:00Z");
    for (cr, place, after) in [(&later, "1 of 1", 1), (&sooner, "1 of 2", 1)] {
        let task = tokio::spawn(certificaterequest::reconcile(
            Arc::new(cr.clone()),
            ctx.requests.clone(),
        ));
        let (method, _, body, send) = next(&mut handle).await;
        assert_eq!(method, Method::PATCH);
        let ready = &body["status"]["conditions"][0];
        let message = format!(
            "Waiting for Issuer apps/ca's issuance budget of 1 signs/s (burst 1): number {place} \
             in line, soonest expiry first"
        );
        assert_eq!(
            (&ready["status"], &ready["reason"], &ready["message"]),
            (&json!("False"), &json!("Pending"), &json!(message))
        );
        answer(send, StatusCode::OK, &serde_json::to_value(cr).unwrap());
        expect_event(&mut handle, "apps", "WaitingForIssuanceBudget").await;
        assert_eq!(
            finish(task).await.unwrap(),
            kube::runtime::controller::Action::requeue(Duration::from_secs(after))
        );
    }
    let again = bounded(certificaterequest::reconcile(
        Arc::new(later),
        ctx.requests.clone(),
    ))
    .await
    .unwrap();
    assert_eq!(
        again,
        kube::runtime::controller::Action::requeue(Duration::from_secs(2)),
        "now second in line"
    );
    no_more_requests(&mut handle).await;
}
