//! The CSR controller's act step, request by request against a scripted API server
//! (tower-test): nothing sent for CSRs that are not ours or not ready to sign, Events in
//! `default` for the cluster-scoped CSR, the two SubjectAccessReviews of a namespaced signer,
//! the status apply under the controller's own field manager, and never a second sign.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

mod support;

use std::sync::Arc;

use base64::Engine as _;
use cfssl_issuer::controllers::{Config, Contexts, CsrSettings, csr};
use http::{Method, StatusCode};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::runtime::controller::Action;
use rcgen::PublicKeyData as _;
use serde_json::{Value, json};
use support::apimock::*;

const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
const SARS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews?";
const APPROVED: &str = r#"[{"type": "Approved", "status": "True", "reason": "KubectlApprove"}]"#;

fn kcsr(name: &str, signer: &str, conditions: &str, pem: &str) -> CertificateSigningRequest {
    serde_json::from_value(json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "5"},
        "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(pem),
            "signerName": signer,
            "usages": ["digital signature", "key encipherment", "client auth"],
            "username": "alice",
            "groups": ["team-a", "system:authenticated"],
        },
        "status": {"conditions": serde_json::from_str::<Value>(conditions).unwrap()},
    }))
    .unwrap()
}

fn contexts(
    config: Config,
    issuers: Vec<cfssl_issuer::api::Issuer>,
    cluster: Vec<cfssl_issuer::api::ClusterIssuer>,
) -> (Arc<Contexts>, ApiHandle) {
    let (service, handle) = tower_test::mock::pair();
    let (ctx, _) = Contexts::new(
        kube::Client::new(service, "default"),
        config,
        clock(),
        store(issuers),
        store(cluster),
        Arc::new(cfssl_issuer::telemetry::Metrics::default()),
    );
    (Arc::new(ctx), handle)
}

async fn reconcile(csr: &CertificateSigningRequest, ctx: &Contexts) -> Action {
    bounded(csr::reconcile(Arc::new(csr.clone()), ctx.csrs.clone()))
        .await
        .unwrap()
}

/// Answers one SubjectAccessReview for `name`, allowing it or not.
async fn expect_review(handle: &mut ApiHandle, name: &str, allowed: bool) {
    let (method, uri, body, send) = next(handle).await;
    assert_eq!((method, uri.as_str()), (Method::POST, SARS));
    let attributes = &body["spec"]["resourceAttributes"];
    assert_eq!(
        (
            &body["spec"]["user"],
            &body["spec"]["groups"][0],
            &attributes["verb"],
            &attributes["resource"]
        ),
        (
            &json!("alice"),
            &json!("team-a"),
            &json!("reference"),
            &json!("signers")
        )
    );
    assert_eq!(
        (
            &attributes["group"],
            &attributes["namespace"],
            &attributes["name"]
        ),
        (&json!("cfssl-issuer.wikimedia.org"), &json!("apps"), &json!(name))
    );
    let mut answer_body = body.clone();
    answer_body["status"] = json!({"allowed": allowed});
    answer(send, StatusCode::CREATED, &answer_body);
}

fn checked_cluster(mut issuer: cfssl_issuer::api::ClusterIssuer) -> cfssl_issuer::api::ClusterIssuer {
    issuer.status = checked(support::apimock::issuer("x", "x", "https://x")).status;
    issuer.status.as_mut().unwrap().conditions[0].observed_generation = issuer.metadata.generation;
    issuer
}

/// Every CSR the controller must leave alone, without a single request.
#[tokio::test]
async fn csrs_not_ours_or_not_ready_to_sign_get_no_request_at_all() {
    let (pem, _) = support::csr("client");
    let cluster = "clusterissuers.cfssl-issuer.wikimedia.org/ca";
    let cases = [
        ("example.com/x", APPROVED),
        ("kubernetes.io/kube-apiserver-client", APPROVED),
        ("clusterissuers.cert-manager.io/ca", APPROVED),
        (cluster, "[]"),
        (cluster, r#"[{"type": "Denied", "status": "True"}]"#),
        (
            cluster,
            r#"[{"type": "Approved", "status": "True"}, {"type": "Failed", "status": "True"}]"#,
        ),
        (cluster, r#"[{"type": "Approved", "status": "False"}]"#),
    ];
    let (ctx, mut handle) = context(vec![], vec![]);
    for (signer, conditions) in cases {
        let action = reconcile(&kcsr("c", signer, conditions, &pem), &ctx).await;
        assert_eq!(action, Action::await_change(), "{signer} {conditions}");
    }
    let mut signed = kcsr("c", cluster, APPROVED, &pem);
    signed.status.as_mut().unwrap().certificate = Some(k8s_openapi::ByteString(b"CERT".to_vec()));
    reconcile(&signed, &ctx).await;
    no_more_requests(&mut handle).await;

    // With namespaced signers off, an Issuer's signer name is another signer's: no review.
    let mut config = Config::new(CLUSTER_NS);
    config.kubernetes_csr = Some(CsrSettings {
        namespaced_signers: false,
    });
    let (ctx, mut handle) = contexts(config, vec![], vec![]);
    reconcile(
        &kcsr("n", "issuers.cfssl-issuer.wikimedia.org/apps.ca", APPROVED, &pem),
        &ctx,
    )
    .await;
    no_more_requests(&mut handle).await;
}

/// A missing ClusterIssuer: one Normal Event in `default` regarding the CSR, no status write,
/// no requeue (the ClusterIssuer's watch brings the CSR back).
#[tokio::test]
async fn a_missing_cluster_issuer_is_waited_for_with_an_event_only() {
    let (pem, _) = support::csr("client");
    let (ctx, mut handle) = context(vec![], vec![]);
    let csr = kcsr(
        "waits",
        "clusterissuers.cfssl-issuer.wikimedia.org/ca",
        APPROVED,
        &pem,
    );
    let task = tokio::spawn(csr::reconcile(Arc::new(csr), ctx.csrs.clone()));
    let (method, uri, body, send) = next(&mut handle).await;
    assert_eq!(
        (method, uri.as_str()),
        (Method::POST, "/apis/events.k8s.io/v1/namespaces/default/events?")
    );
    assert_eq!(
        (
            &body["reason"],
            &body["type"],
            &body["regarding"]["kind"],
            &body["regarding"]["name"]
        ),
        (
            &json!("WaitingForIssuerExist"),
            &json!("Normal"),
            &json!("CertificateSigningRequest"),
            &json!("waits")
        )
    );
    assert_eq!(
        body["note"],
        "clusterissuers.cfssl-issuer.wikimedia.org \"ca\" not found. Waiting for it to be created."
    );
    answer(send, StatusCode::CREATED, &body);
    assert_eq!(finish(task).await.unwrap(), Action::await_change());
    no_more_requests(&mut handle).await;
}

/// Neither SubjectAccessReview allows the requester: `Failed` with reason `DeniedReference`,
/// applied to `/status` as the CSR controller, then a Warning Event.
#[tokio::test]
async fn a_requester_who_may_not_reference_the_issuer_fails_with_denied_reference() {
    let (pem, _) = support::csr("client");
    let issuer = checked(issuer("apps", "ca", "https://ca.invalid"));
    let (ctx, mut handle) = context(vec![issuer], vec![]);
    let csr = kcsr(
        "refused",
        "issuers.cfssl-issuer.wikimedia.org/apps.ca",
        APPROVED,
        &pem,
    );
    let task = tokio::spawn(csr::reconcile(Arc::new(csr.clone()), ctx.csrs.clone()));
    expect_review(&mut handle, "ca", false).await;
    expect_review(&mut handle, "*", false).await;
    let applied = expect_status_apply(
        &mut handle,
        &format!("{CSRS}/refused"),
        &serde_json::to_value(&csr).unwrap(),
    )
    .await;
    let condition = &applied["status"]["conditions"][0];
    assert_eq!(
        (
            &applied["kind"],
            &condition["type"],
            &condition["status"],
            &condition["reason"]
        ),
        (
            &json!("CertificateSigningRequest"),
            &json!("Failed"),
            &json!("True"),
            &json!("DeniedReference")
        )
    );
    assert_eq!(
        applied["status"]["conditions"].as_array().unwrap().len(),
        1,
        "the approver's condition is not ours to send"
    );
    assert!(
        condition["message"]
            .as_str()
            .unwrap()
            .starts_with("Requester may not reference Namespaced Issuer apps/ca")
    );
    expect_event(&mut handle, "default", "DeniedReference").await;
    finish(task).await.unwrap();
    no_more_requests(&mut handle).await;
}

/// The manager may not create SubjectAccessReviews (RBAC switched off by hand): a Warning
/// Event on the CSR says so, nothing is written, and it is tried again after its backoff.
#[tokio::test]
async fn a_review_the_api_server_refuses_is_said_on_the_csr_and_retried() {
    let (pem, _) = support::csr("client");
    let issuer = checked(issuer("apps", "ca", "https://ca.invalid"));
    let (ctx, mut handle) = context(vec![issuer], vec![]);
    let csr = kcsr(
        "no-rbac",
        "issuers.cfssl-issuer.wikimedia.org/apps.ca",
        APPROVED,
        &pem,
    );
    let task = tokio::spawn(csr::reconcile(Arc::new(csr), ctx.csrs.clone()));
    let (method, uri, _, send) = next(&mut handle).await;
    assert_eq!((method, uri.as_str()), (Method::POST, SARS));
    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
        "message": "subjectaccessreviews.authorization.k8s.io is forbidden"});
    answer(send, StatusCode::FORBIDDEN, &status);
    let (_, uri, event, send) = next(&mut handle).await;
    assert_eq!(uri, "/apis/events.k8s.io/v1/namespaces/default/events?");
    assert_eq!(
        (&event["reason"], &event["type"]),
        (&json!("RetryableError"), &json!("Warning"))
    );
    assert_eq!(
        event["note"],
        "Cannot check whether the requester may reference the Issuer (a SubjectAccessReview), will retry: \
         subjectaccessreviews.authorization.k8s.io is forbidden (HTTP 403 Forbidden)"
    );
    answer(send, StatusCode::CREATED, &event);
    assert_eq!(
        finish(task).await.unwrap(),
        Action::requeue(std::time::Duration::from_secs(1))
    );
    no_more_requests(&mut handle).await;
}

/// The issuer's Secret is gone: the issuer is at fault. A Warning Event on the CSR, the
/// ClusterIssuer is checked again at once, and the CSR after its backoff.
#[tokio::test]
async fn an_issuer_at_fault_is_rechecked_and_the_csr_retried() {
    let (pem, _) = support::csr("client");
    let cluster = checked_cluster(cluster_issuer("ca", "https://ca.invalid"));
    let (ctx, mut handle, mut rechecks) = context_with_rechecks(vec![], vec![cluster]);
    let csr = kcsr(
        "fault",
        "clusterissuers.cfssl-issuer.wikimedia.org/ca",
        APPROVED,
        &pem,
    );
    let task = tokio::spawn(csr::reconcile(Arc::new(csr), ctx.csrs.clone()));
    let (method, uri, _, send) = next(&mut handle).await;
    assert_eq!(
        (method, uri.as_str()),
        (Method::GET, "/api/v1/namespaces/cfssl-system/secrets/creds")
    );
    not_found(send);
    let (_, uri, event, send) = next(&mut handle).await;
    assert_eq!(uri, "/apis/events.k8s.io/v1/namespaces/default/events?");
    assert_eq!(event["reason"], "RetryableError");
    assert!(
        event["note"]
            .as_str()
            .unwrap()
            .starts_with("Failed to sign CertificateSigningRequest, will retry: "),
        "{event}"
    );
    answer(send, StatusCode::CREATED, &event);
    assert_eq!(
        finish(task).await.unwrap(),
        Action::requeue(std::time::Duration::from_secs(1))
    );
    let recheck = rechecks.try_recv().expect("a recheck");
    assert_eq!(
        (recheck.kind, recheck.namespace, recheck.name.as_str()),
        (cfssl_issuer::api::IssuerKind::ClusterIssuer, None, "ca")
    );
    no_more_requests(&mut handle).await;
}

/// Allowed by `*`: signed by the namespaced Issuer with its Secret from its namespace; the
/// certificate is written once, with the chain and no root; a replay from a stale cache sends
/// nothing and signs nothing.
#[tokio::test]
async fn allowed_requester_is_signed_once_and_a_stale_replay_does_nothing() {
    let ca = support::Ca::start(support::Backend::SimpleCfssl, false).await;
    let (pem, key) = support::csr("client");
    let issuer = checked(issuer("apps", "ca", &ca.url));
    let (ctx, mut handle) = context(vec![issuer], vec![]);
    let csr = kcsr(
        "signed",
        "issuers.cfssl-issuer.wikimedia.org/apps.ca",
        APPROVED,
        &pem,
    );
    let task = tokio::spawn(csr::reconcile(Arc::new(csr.clone()), ctx.csrs.clone()));
    expect_review(&mut handle, "ca", false).await;
    expect_review(&mut handle, "*", true).await;
    expect_secret_read(&mut handle, "apps", &secret(support::KEY_HEX, "1")).await;
    let mut echo = serde_json::to_value(&csr).unwrap();
    echo["metadata"]["resourceVersion"] = json!("6");
    let applied = expect_status_apply(&mut handle, &format!("{CSRS}/signed"), &echo).await;
    assert_eq!(
        applied["status"].as_object().unwrap().len(),
        1,
        "only the certificate: {applied}"
    );
    let der = base64::engine::general_purpose::STANDARD
        .decode(applied["status"]["certificate"].as_str().unwrap())
        .unwrap();
    let pems = pem::parse_many(&der).unwrap();
    let certs: Vec<_> = pems
        .iter()
        .map(|p| x509_parser::parse_x509_certificate(p.contents()).unwrap().1)
        .collect();
    assert_eq!(
        certs[0].public_key().raw,
        key.subject_public_key_info().as_slice(),
        "the leaf holds the CSR's key"
    );
    for pair in certs.windows(2) {
        assert_eq!(
            pair[0].issuer(),
            pair[1].subject(),
            "each certificate is signed by the next"
        );
    }
    let last = certs.last().unwrap();
    assert_ne!(
        last.issuer(),
        last.subject(),
        "no self-signed root in status.certificate"
    );
    expect_event(&mut handle, "default", "Issued").await;
    assert_eq!(finish(task).await.unwrap(), Action::await_change());
    assert_eq!(ca.issued_count(), Some(1));

    // The cache still shows the CSR before the write: nothing is asked, written or signed.
    assert_eq!(reconcile(&csr, &ctx).await, Action::await_change());
    assert_eq!(
        ctx.csrs.core.ledger.signings.snapshot().len(),
        1,
        "held until the cache shows the write"
    );
    ctx.csrs.core.ledger.forget("uid-signed");
    assert!(
        ctx.csrs.core.ledger.signings.snapshot().is_empty(),
        "a deleted CSR leaves nothing behind"
    );
    no_more_requests(&mut handle).await;
    assert_eq!(ca.issued_count(), Some(1), "signed twice");
}

/// The certificate write is lost (the API server fails it): the next reconcile writes the same
/// chain without a second sign.
#[tokio::test]
async fn a_lost_certificate_write_is_written_again_without_a_second_sign() {
    let ca = support::Ca::start(support::Backend::SimpleCfssl, false).await;
    let (pem, _) = support::csr("client");
    let cluster = checked_cluster(cluster_issuer("ca", &ca.url));
    let (ctx, mut handle) = context(vec![], vec![cluster]);
    let csr = kcsr(
        "lost",
        "clusterissuers.cfssl-issuer.wikimedia.org/ca",
        APPROVED,
        &pem,
    );
    let task = tokio::spawn(csr::reconcile(Arc::new(csr.clone()), ctx.csrs.clone()));
    expect_secret_read(&mut handle, CLUSTER_NS, &secret(support::KEY_HEX, "1")).await;
    let (_, uri, first, send) = next(&mut handle).await;
    assert!(uri.starts_with(&format!("{CSRS}/lost/status?")), "{uri}");
    answer(
        send,
        StatusCode::INTERNAL_SERVER_ERROR,
        &json!({"kind": "Status", "code": 500, "message": "etcd"}),
    );
    assert!(
        finish(task).await.is_err(),
        "the failed write is the reconcile's error"
    );
    let task = tokio::spawn(csr::reconcile(Arc::new(csr.clone()), ctx.csrs.clone()));
    let again = expect_status_apply(
        &mut handle,
        &format!("{CSRS}/lost"),
        &serde_json::to_value(&csr).unwrap(),
    )
    .await;
    assert_eq!(again, first, "the same chain");
    expect_event(&mut handle, "default", "Issued").await;
    finish(task).await.unwrap();
    no_more_requests(&mut handle).await;
    assert_eq!(ca.issued_count(), Some(1));
}

/// What the manager keeps of CSRs follows the watch: a delete forgets one; a relist forgets
/// every CSR it does not bring (deleted while the watch was away). No API request either way.
#[tokio::test]
async fn deleted_csrs_are_forgotten_on_delete_and_on_relist() {
    use cfssl_issuer::controllers::kit::wiring::Relist;
    use cfssl_issuer::controllers::signing::once::Signing;
    use kube::runtime::watcher::Event;
    let (pem, _) = support::csr("client");
    let (ctx, mut handle) = context(vec![], vec![]);
    let signer = "clusterissuers.cfssl-issuer.wikimedia.org/ca";
    let (a, b, c) = (
        kcsr("a", signer, APPROVED, &pem),
        kcsr("b", signer, APPROVED, &pem),
        kcsr("c", signer, APPROVED, &pem),
    );
    for uid in ["uid-a", "uid-b", "uid-c"] {
        ctx.csrs.core.ledger.signings.insert(uid, Signing::InFlight);
        ctx.csrs
            .core
            .ledger
            .memory
            .failed(uid, "2026-11-22T10:00:00Z".parse().unwrap());
    }
    let kept = |ctx: &Contexts| {
        let mut uids: Vec<String> = ctx.csrs.core.ledger.signings.snapshot().into_keys().collect();
        uids.sort();
        let windows: Vec<bool> = uids
            .iter()
            .map(|u| ctx.csrs.core.ledger.memory.first_failure(u).is_some())
            .collect();
        (uids, windows)
    };
    let mut relist = Relist::default();
    ctx.csrs.follow(&Event::Delete(c), &mut relist);
    assert_eq!(
        kept(&ctx),
        (vec!["uid-a".into(), "uid-b".into()], vec![true, true])
    );
    for event in [Event::Init, Event::InitApply(a), Event::InitDone] {
        ctx.csrs.follow(&event, &mut relist);
    }
    assert_eq!(
        kept(&ctx),
        (vec!["uid-a".into()], vec![true]),
        "b was deleted while away"
    );
    ctx.csrs.follow(&Event::Apply(b), &mut relist);
    assert_eq!(
        kept(&ctx),
        (vec!["uid-a".into()], vec![true]),
        "an update forgets nothing"
    );
    no_more_requests(&mut handle).await;
}

/// An issuance budget of 1 sign/s whose token another request took: one Normal
/// `WaitingForIssuanceBudget` Event in `default` with the CSR's place, a requeue for its turn,
/// no sign; looking again before its turn sends nothing.
#[tokio::test]
async fn a_csr_over_the_issuance_budget_waits_with_one_event() {
    use cfssl_issuer::controllers::kit::rate::Settings;
    use cfssl_issuer::controllers::signing::IssuerName;
    use cfssl_issuer::controllers::signing::budget::{Turn, Urgency};
    let (pem, _) = support::csr("client");
    let cluster = checked_cluster(cluster_issuer("ca", "https://ca.invalid"));
    let mut config = Config::new(CLUSTER_NS);
    config.issuance_budget = Some(Settings {
        rate: "1".parse().unwrap(),
        burst: 1,
    });
    let (ctx, mut handle) = contexts(config, vec![], vec![cluster]);
    let name = IssuerName {
        kind: cfssl_issuer::api::IssuerKind::ClusterIssuer,
        namespace: None,
        name: "ca".into(),
    };
    let now = (clock())();
    let other = Urgency::of("another", None, None, now);
    assert_eq!(ctx.csrs.core.signer.budget.turn(&name, &other, now), Turn::Go);
    let csr = kcsr(
        "waits",
        "clusterissuers.cfssl-issuer.wikimedia.org/ca",
        APPROVED,
        &pem,
    );
    let task = tokio::spawn(csr::reconcile(Arc::new(csr.clone()), ctx.csrs.clone()));
    let (_, uri, event, send) = next(&mut handle).await;
    assert_eq!(uri, "/apis/events.k8s.io/v1/namespaces/default/events?");
    assert_eq!(
        (&event["reason"], &event["type"], &event["note"]),
        (
            &json!("WaitingForIssuanceBudget"),
            &json!("Normal"),
            &json!(
                "Waiting for ClusterIssuer ca's issuance budget of 1 signs/s (burst 1): number 1 of 1 in line, soonest expiry first"
            )
        )
    );
    answer(send, StatusCode::CREATED, &event);
    let turn = Action::requeue(std::time::Duration::from_secs(1));
    assert_eq!(finish(task).await.unwrap(), turn);
    assert_eq!(reconcile(&csr, &ctx).await, turn, "the clock stands still");
    no_more_requests(&mut handle).await;
}
