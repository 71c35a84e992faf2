//! cert-manager itself drives this issuer: cert-manager's controller (its approver and its
//! Certificate controllers, built from cert-manager's module by `scripts/real-peers.sh`) on a
//! real kube-apiserver, this manager as the external issuer (no `--certificate-controllers`),
//! and a real multirootca as the CA. Certificates go in; verified Secrets come out, renewal
//! follows `cmctl renew`'s condition, and a policy's denial stops issuance.
//!
//! Runs only in `make e2e-real` (`E2E_REAL_PEERS`); elsewhere each test says so and passes.

mod standalone;

use std::time::Duration;

use e2e::harness::real::{self, CertManager};
use e2e::harness::{Ca, Cluster, objects};
use standalone::{Env, data, serial_of};

const WAIT: Duration = Duration::from_secs(120);

/// The scenario's environment and cert-manager's controller in its namespace, with
/// cert-manager's `--controllers` list `controllers`; `None` outside `make e2e-real`.
async fn start(controllers: &str) -> anyhow::Result<Option<(Env, CertManager)>> {
    let Some(peers) = real::peers_dir() else {
        eprintln!("skipped: needs E2E_REAL_PEERS (make e2e-real)");
        return Ok(None);
    };
    let cluster = Cluster::start().await?;
    let env = Env::start_on(cluster, Ca::multirootca()?, &[]).await?;
    let cert_manager = CertManager::start(&peers, &env.cluster.kubeconfig, &env.ns, controllers)?;
    env.issuer("ca").await?;
    objects::wait_issuer_reason(
        env.client(),
        objects::Kind::Issuer,
        &env.ns,
        "ca",
        "Checked",
        WAIT,
    )
    .await?;
    Ok(Some((env, cert_manager)))
}

/// `result`, with cert-manager's log attached when it failed.
fn with_log<T>(cert_manager: &mut CertManager, result: anyhow::Result<T>) -> anyhow::Result<T> {
    result.map_err(|err| err.context(format!("cert-manager log:\n{}", cert_manager.log())))
}

#[tokio::test]
async fn cert_manager_issues_and_renews_through_this_issuer() -> anyhow::Result<()> {
    let Some((env, mut cert_manager)) = start("*").await? else {
        return Ok(());
    };
    env.certificate("web", "web-tls", "ca", serde_json::json!({}))
        .await?;
    let first = env.wait_revision("web", 1, WAIT).await;
    with_log(&mut cert_manager, first)?;
    let secret = env.secret("web-tls").await?;
    env.verify_secret(&secret, &["web.example.com"])?;

    // cert-manager's approver approved the request, this issuer signed it, and cert-manager's
    // issuing controller stored exactly what the request carries.
    let requests = env.requests_of("web").await?;
    assert_eq!(requests.len(), 1, "one request for revision 1");
    let approved = requests[0].condition("Approved").expect("Approved condition");
    assert_eq!(
        (approved.status.as_str(), approved.reason.as_str()),
        ("True", "cert-manager.io")
    );
    let status = requests[0].status.clone().expect("status");
    assert_eq!(
        data(&secret, "tls.crt"),
        status.certificate.expect("certificate").0
    );
    assert_eq!(
        data(&secret, "ca.crt"),
        status.ca.map(|ca| ca.0).unwrap_or_default()
    );

    let before = serial_of(&data(&secret, "tls.crt"))?;
    env.trigger_manually("web").await?;
    let second = env.wait_revision("web", 2, WAIT).await;
    with_log(&mut cert_manager, second)?;
    let renewed = env.secret("web-tls").await?;
    env.verify_secret(&renewed, &["web.example.com"])?;
    assert_ne!(
        serial_of(&data(&renewed, "tls.crt"))?,
        before,
        "renewal issued a new certificate"
    );
    Ok(())
}

#[tokio::test]
async fn a_policy_denial_fails_issuance_and_nothing_is_signed() -> anyhow::Result<()> {
    // cert-manager without its approver: a policy (here the suite) decides instead.
    let Some((env, mut cert_manager)) = start("*,-certificaterequests-approver").await? else {
        return Ok(());
    };
    env.certificate("denied", "denied-tls", "ca", serde_json::json!({}))
        .await?;
    let request = e2e::harness::eventually(WAIT, "the CertificateRequest", || async {
        env.requests_of("denied").await.ok()?.into_iter().next()
    })
    .await;
    let request = with_log(&mut cert_manager, request)?;
    let name = request.metadata.name.clone().expect("name");
    objects::decide(env.client(), &env.ns, &name, false).await?;

    let failed = objects::wait_request_reason(env.client(), &env.ns, &name, "Denied", WAIT).await;
    with_log(&mut cert_manager, failed)?;
    // cert-manager fails the issuance with the denial's own reason.
    let issuing = env
        .wait_condition("denied", "Issuing", "False", Some("e2e.denied"), WAIT)
        .await;
    let issuing = match issuing {
        Err(err) => Err(err.context(env.describe("denied").await)),
        ok => ok,
    };
    let crt = with_log(&mut cert_manager, issuing)?;
    let status = crt.status.expect("status");
    assert_eq!(status.failed_issuance_attempts, Some(1));
    let denied = objects::get_request(env.client(), &env.ns, &name).await?;
    assert!(
        denied.status.and_then(|s| s.certificate).is_none(),
        "a denied request carries no certificate"
    );
    assert!(
        env.secrets().get_opt("denied-tls").await?.is_none(),
        "no Secret was written"
    );
    Ok(())
}

/// The manager in these scenarios is no admin: it runs as the service account `config/`
/// installs, with that install's RBAC and nothing more, so every scenario above also proves
/// the RBAC sufficient; the real authorizer refuses it anything else.
#[tokio::test]
async fn the_manager_runs_with_the_installed_rbac_only() -> anyhow::Result<()> {
    use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
    if real::peers_dir().is_none() {
        eprintln!("skipped: needs E2E_REAL_PEERS (make e2e-real)");
        return Ok(());
    }
    let cluster = Cluster::start().await?;
    let parsed = kube::config::Kubeconfig::read_from(cluster.manager_kubeconfig())?;
    let config = kube::Config::from_custom_kubeconfig(parsed, &Default::default()).await?;
    let manager = kube::Api::<SelfSubjectAccessReview>::all(kube::Client::try_from(config)?);
    let rows = [
        ("patch", "cert-manager.io", "certificaterequests", "status", true),
        ("create", "authorization.k8s.io", "subjectaccessreviews", "", true),
        ("create", "", "namespaces", "", false),
        ("delete", "cfssl-issuer.wikimedia.org", "issuers", "", false),
        ("update", "rbac.authorization.k8s.io", "clusterroles", "", false),
    ];
    for (verb, group, resource, subresource, want) in rows {
        let review: SelfSubjectAccessReview = serde_json::from_value(serde_json::json!({
            "spec": { "resourceAttributes": {
                "verb": verb, "group": group, "resource": resource, "subresource": subresource } },
        }))?;
        let answer = manager.create(&Default::default(), &review).await?;
        let allowed = answer.status.map(|s| s.allowed);
        assert_eq!(
            allowed,
            Some(want),
            "{verb} {resource}/{subresource} in {group:?}"
        );
    }
    Ok(())
}
