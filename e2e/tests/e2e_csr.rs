//! Kubernetes CertificateSigningRequests signed by our issuers, through the real manager
//! binary: approval with `kubectl certificate approve`, what is left alone, waiting for an
//! issuer, refusals, the retry window, a restart, and namespaced Issuers behind a
//! SubjectAccessReview.
//!
//! By default each test starts the in-process API server, simple-cfssl and the manager; with
//! `E2E_KUBECONFIG` the scenarios that need no fault injection run against that cluster.

use std::time::Duration;

use e2e::harness::csr::{self as kcsr, KubeCsr, Outcome};
use e2e::harness::objects::{self, Kind};
use e2e::harness::{
    Ca, Cluster, Manager, ManagerOptions, cert_matches_key, eventually, openssl_verify, unique,
};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::events::v1::Event;
use kube::Api;

const WAIT: Duration = Duration::from_secs(60);
const CLUSTER_SIGNERS: &str = "clusterissuers.cfssl-issuer.wikimedia.org";
const FIELD_MANAGER: &str = "cfssl-issuer-certificatesigningrequest";

struct Env {
    cluster: Cluster,
    ca: Ca,
    manager: Option<Manager>,
    options: ManagerOptions,
    system: String,
}

impl Env {
    async fn start(args: &[&str]) -> anyhow::Result<Env> {
        let cluster = Cluster::start().await?;
        let ca = Ca::simple(cluster.is_external()).await?;
        let system = std::env::var("E2E_SYSTEM_NAMESPACE").unwrap_or_else(|_| "cfssl-issuer-system".into());
        cluster.ensure_namespace(&system).await?;
        let mut options = ManagerOptions::new(cluster.manager_kubeconfig(), &system);
        for arg in args {
            options = options.arg(*arg);
        }
        let manager = match cluster.is_external() {
            true => None,
            false => Some(Manager::start(options.clone()).await?),
        };
        Ok(Env {
            cluster,
            ca,
            manager,
            options,
            system,
        })
    }

    fn client(&self) -> &kube::Client {
        &self.cluster.client
    }

    /// Creates the ClusterIssuer `name` (and its Secret) without waiting for it.
    async fn create_cluster_issuer(&self, name: &str) -> anyhow::Result<()> {
        self.cluster
            .put_key_secret(&self.system, name, &self.ca.key_hex)
            .await?;
        self.cluster.track_cluster_issuer(name);
        let spec = objects::issuer_spec(&self.ca, name, "server");
        objects::create_issuer(self.client(), Kind::ClusterIssuer, "", name, spec).await
    }

    /// A Ready ClusterIssuer named `name`; returns its signer name.
    async fn cluster_issuer(&self, name: &str) -> anyhow::Result<String> {
        self.create_cluster_issuer(name).await?;
        objects::wait_issuer_reason(self.client(), Kind::ClusterIssuer, "", name, "Checked", WAIT).await?;
        Ok(format!("{CLUSTER_SIGNERS}/{name}"))
    }

    async fn get(&self, name: &str) -> anyhow::Result<CertificateSigningRequest> {
        Ok(Api::<CertificateSigningRequest>::all(self.client().clone())
            .get(name)
            .await?)
    }

    /// `result`, with the manager's log when it is an error.
    fn logged<T>(&self, result: anyhow::Result<T>) -> anyhow::Result<T> {
        result.map_err(|e| match &self.manager {
            Some(manager) => e.context(format!("manager log:\n{}", manager.log())),
            None => e,
        })
    }

    /// Checks a signed CSR: the leaf holds the CSR's key, the chain verifies to the CA's root
    /// with openssl, and no root is in `status.certificate`.
    fn verify(&self, request: &KubeCsr, pem: &str) -> anyhow::Result<()> {
        assert!(
            cert_matches_key(pem.as_bytes(), &request.csr.key)?,
            "the CSR's key"
        );
        if let Some(root) = &self.ca.root_pem {
            openssl_verify(pem.as_bytes(), root)?;
            assert!(
                !pem.contains(root.trim()),
                "the root is not part of status.certificate"
            );
        }
        Ok(())
    }
}

/// Whether anything of ours is on the CSR: a certificate, a Failed condition, or our field
/// manager in managedFields.
fn touched(csr: &CertificateSigningRequest) -> bool {
    let ours = csr
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .any(|m| m.manager.as_deref() == Some(FIELD_MANAGER));
    ours || kcsr::outcome(csr).is_some()
}

/// The reasons of the Events regarding the CSR `name`.
async fn event_reasons(client: &kube::Client, name: &str) -> anyhow::Result<Vec<String>> {
    let events = Api::<Event>::namespaced(client.clone(), "default")
        .list(&Default::default())
        .await?;
    Ok(events
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter_map(|e| e.reason)
        .collect())
}

/// Approved → signed (key, chain, the approver's condition kept, an `Issued` Event); the CA
/// refuses → `Failed`; unapproved, denied and foreign CSRs are never touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approved_csrs_are_signed_and_the_rest_left_alone() -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    let issuer = unique("csr-ca");
    let signer = env.cluster_issuer(&issuer).await?;
    let unapproved = KubeCsr::new(&signer)?;
    let denied = KubeCsr::new(&signer)?;
    let foreign = KubeCsr::new("example.com/x")?;
    let approved = KubeCsr::new(&signer)?;
    for request in [&unapproved, &denied, &foreign, &approved] {
        request.create(&env.cluster).await?;
    }
    kcsr::deny(&env.cluster, &denied.name).await?;
    kcsr::approve(&env.cluster, &foreign.name).await?;
    kcsr::approve(&env.cluster, &approved.name).await?;

    let pem = env.logged(kcsr::wait_issued(&env.cluster, &approved.name, WAIT).await)?;
    env.verify(&approved, &pem)?;
    let signed = env.get(&approved.name).await?;
    let conditions = signed
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let approval = conditions
        .iter()
        .find(|c| c.type_ == "Approved")
        .expect("Approved kept");
    assert_eq!(
        (approval.status.as_str(), approval.reason.as_deref()),
        ("True", Some("KubectlApprove"))
    );
    assert_eq!(
        conditions.len(),
        1,
        "no condition of ours on success: {conditions:?}"
    );
    let reasons = eventually(WAIT, "the Issued Event", || async {
        let reasons = event_reasons(env.client(), &approved.name).await.ok()?;
        reasons.contains(&"Issued".to_string()).then_some(reasons)
    })
    .await?;
    assert_eq!(reasons, ["Issued"]);

    // An Ed25519 key: the CA refuses it for good.
    let ed25519 = KubeCsr {
        csr: e2e::harness::Csr::with_key(
            "ed.example.com",
            rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519)?,
        )?,
        ..KubeCsr::new(&signer)?
    };
    ed25519.create(&env.cluster).await?;
    kcsr::approve(&env.cluster, &ed25519.name).await?;
    match env.logged(kcsr::wait_outcome(&env.cluster, &ed25519.name, WAIT).await)? {
        Outcome::Failed { reason, message } => {
            assert_eq!(reason, "Failed");
            assert!(
                message.starts_with("CertificateSigningRequest has failed permanently: "),
                "{message}"
            );
            assert!(message.contains("Ed25519"), "{message}");
        }
        other => panic!("signed an Ed25519 CSR the CA refuses: {other:?}"),
    }
    let failed = env.get(&ed25519.name).await?;
    let types: Vec<_> = failed
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    assert_eq!(
        types,
        [
            ("Approved".into(), "True".into()),
            ("Failed".into(), "True".into())
        ],
        "the approver's condition survives our Failed apply"
    );

    // A duration annotation that does not parse fails at once, before the CA is asked.
    let bad_duration =
        KubeCsr::new(&signer)?.annotation("experimental.cert-manager.io/request-duration", "ten days");
    bad_duration.create(&env.cluster).await?;
    kcsr::approve(&env.cluster, &bad_duration.name).await?;
    match env.logged(kcsr::wait_outcome(&env.cluster, &bad_duration.name, WAIT).await)? {
        Outcome::Failed { reason, message } => {
            assert_eq!(reason, "ErrorParseDuration");
            assert!(message.contains("\"ten days\" is not a duration"), "{message}");
        }
        other => panic!("signed a CSR whose duration does not parse: {other:?}"),
    }

    // By now the manager has seen the others for as long as it took to sign two.
    for request in [&unapproved, &denied, &foreign] {
        let csr = env.get(&request.name).await?;
        assert!(
            !touched(&csr),
            "{} was touched: {:?}",
            request.name,
            kcsr::outcome(&csr)
        );
        assert!(
            event_reasons(env.client(), &request.name).await?.is_empty(),
            "{}",
            request.name
        );
    }
    if let Some(ca) = env.ca.issued_count() {
        assert_eq!(ca, 1, "only the approved CSR was signed");
    }
    if let Some(manager) = &env.manager {
        let metrics = e2e::harness::scrape::scrape(&manager.metrics_addr).await?;
        let label = format!("ClusterIssuer/{issuer}");
        let issued = metrics.value("cfssl_issuer_certificates_issued_total", &[("issuer", &label)]);
        assert_eq!(issued, Some(1.0), "a signed CSR counts as issued");
    }
    Ok(())
}

/// An approved CSR for a ClusterIssuer that does not exist yet: a `WaitingForIssuerExist`
/// Event, no condition; signed once the ClusterIssuer is created and Ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_cluster_issuer_is_waited_for_then_signs() -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    let name = unique("late-ca");
    let request = KubeCsr::new(&format!("{CLUSTER_SIGNERS}/{name}"))?;
    request.create(&env.cluster).await?;
    kcsr::approve(&env.cluster, &request.name).await?;
    let waited = eventually(WAIT, "the WaitingForIssuerExist Event", || async {
        let reasons = event_reasons(env.client(), &request.name).await.ok()?;
        reasons
            .contains(&"WaitingForIssuerExist".to_string())
            .then_some(())
    })
    .await;
    env.logged(waited)?;
    assert!(!touched(&env.get(&request.name).await?), "waiting writes nothing");
    env.create_cluster_issuer(&name).await?;
    let pem = env.logged(kcsr::wait_issued(&env.cluster, &request.name, WAIT).await)?;
    env.verify(&request, &pem)
}

/// The CA is down for longer than `--max-retry-duration`: the CSR fails, after retrying.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ca_down_past_the_retry_window_fails_the_csr() -> anyhow::Result<()> {
    let env = Env::start(&["--max-retry-duration", "3s"]).await?;
    if env.cluster.is_external() {
        eprintln!("skipped against a real cluster: the suite cannot stop the in-cluster CA");
        return Ok(());
    }
    let signer = env.cluster_issuer(&unique("down-ca")).await?;
    assert!(env.ca.set_available(false));
    let request = KubeCsr::new(&signer)?;
    request.create(&env.cluster).await?;
    kcsr::approve(&env.cluster, &request.name).await?;
    match env.logged(kcsr::wait_outcome(&env.cluster, &request.name, WAIT).await)? {
        Outcome::Failed { reason, message } => {
            assert_eq!(reason, "Failed");
            assert!(message.contains("gave up after retrying for 3s"), "{message}");
        }
        other => panic!("signed while the CA was down: {other:?}"),
    }
    // The PermanentError Event is posted beside the Failed condition, not before it: wait for it.
    let deadline = tokio::time::Instant::now() + WAIT;
    let reasons = loop {
        let reasons = event_reasons(env.client(), &request.name).await?;
        let permanent = reasons.last().map(String::as_str) == Some("PermanentError");
        if permanent || tokio::time::Instant::now() > deadline {
            break reasons;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        reasons.iter().filter(|r| *r == "RetryableError").count() >= 2,
        "{reasons:?}"
    );
    assert_eq!(
        reasons.last().map(String::as_str),
        Some("PermanentError"),
        "{reasons:?}"
    );
    Ok(())
}

/// A manager restarted after signing neither signs again nor rewrites the CSR.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_after_signing_does_not_sign_again() -> anyhow::Result<()> {
    let mut env = Env::start(&[]).await?;
    if env.cluster.is_external() {
        eprintln!("skipped against a real cluster: the suite does not restart the deployed manager");
        return Ok(());
    }
    let signer = env.cluster_issuer(&unique("restart-ca")).await?;
    let request = KubeCsr::new(&signer)?;
    request.create(&env.cluster).await?;
    kcsr::approve(&env.cluster, &request.name).await?;
    env.logged(kcsr::wait_issued(&env.cluster, &request.name, WAIT).await)?;
    let before = env.get(&request.name).await?;
    assert_eq!(env.ca.issued_count(), Some(1));

    if let Some(mut old) = env.manager.take() {
        old.kill().await?;
    }
    env.manager = Some(Manager::start(env.options.clone()).await?);
    // A reconcile of every CSR follows the new manager's first list; give it time to act.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = env.get(&request.name).await?;
    assert_eq!(
        after.metadata.resource_version, before.metadata.resource_version,
        "not written again"
    );
    assert_eq!(env.ca.issued_count(), Some(1), "signed once");
    Ok(())
}

/// `issuers.<group>/<namespace>.<name>`: signed for a requester who may `reference` the
/// Issuer; `Failed`/`DeniedReference` for one who may not, naming the permission.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaced_signer_allowed_and_refused() -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    let ns = env.cluster.namespace("csr").await?;
    env.cluster
        .put_key_secret(&ns, "team-ca", &env.ca.key_hex)
        .await?;
    let spec = objects::issuer_spec(&env.ca, "team-ca", "server");
    objects::create_issuer(env.client(), Kind::Issuer, &ns, "team-ca", spec).await?;
    objects::wait_issuer_reason(env.client(), Kind::Issuer, &ns, "team-ca", "Checked", WAIT).await?;
    let signer = format!("issuers.cfssl-issuer.wikimedia.org/{ns}.team-ca");
    kcsr::allow_reference(&env.cluster, &ns, Some("team-ca"), "alice").await?;

    let allowed = KubeCsr::new(&signer)?.requester("alice", &["developers"]);
    let refused = KubeCsr::new(&signer)?.requester("bob", &["developers"]);
    for request in [&allowed, &refused] {
        request.create(&env.cluster).await?;
        kcsr::approve(&env.cluster, &request.name).await?;
    }
    let pem = env.logged(kcsr::wait_issued(&env.cluster, &allowed.name, WAIT).await)?;
    env.verify(&allowed, &pem)?;
    match env.logged(kcsr::wait_outcome(&env.cluster, &refused.name, WAIT).await)? {
        Outcome::Failed { reason, message } => {
            assert_eq!(reason, "DeniedReference");
            assert!(
                message.starts_with(&format!(
                    "Requester may not reference Namespaced Issuer {ns}/team-ca: "
                )),
                "{message}"
            );
            assert!(message.contains("\"reference\" on \"signers\""), "{message}");
        }
        other => panic!("signed for a requester who may not reference the Issuer: {other:?}"),
    }
    if let Some(ca) = env.ca.issued_count() {
        assert_eq!(ca, 1, "bob's CSR never reached the CA");
    }
    Ok(())
}

/// With `--disable-kubernetes-csr-namespaced-signers`, an Issuer's signer name is another
/// signer's: approved, never touched; ClusterIssuers still sign.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaced_signers_off_leaves_their_csrs_alone() -> anyhow::Result<()> {
    let env = Env::start(&["--disable-kubernetes-csr-namespaced-signers"]).await?;
    if env.cluster.is_external() {
        eprintln!("skipped against a real cluster: the deployed manager's flags are its own");
        return Ok(());
    }
    let signer = env.cluster_issuer(&unique("only-ca")).await?;
    let namespaced = KubeCsr::new("issuers.cfssl-issuer.wikimedia.org/default.team-ca")?;
    let cluster = KubeCsr::new(&signer)?;
    for request in [&namespaced, &cluster] {
        request.create(&env.cluster).await?;
        kcsr::approve(&env.cluster, &request.name).await?;
    }
    env.logged(kcsr::wait_issued(&env.cluster, &cluster.name, WAIT).await)?;
    assert!(!touched(&env.get(&namespaced.name).await?));
    if let Some(server) = env.cluster.server() {
        assert!(server.access_reviews().is_empty(), "no SubjectAccessReview");
    }
    Ok(())
}
