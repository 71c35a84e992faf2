//! Issuer → CertificateRequest → signed certificate, through the real manager binary.
//!
//! By default each test starts the in-process API server, simple-cfssl (or multirootca) and
//! the manager; with `E2E_KUBECONFIG` the same scenarios run against an existing cluster.

use std::time::Duration;

use e2e::harness::objects::{self, Kind};
use e2e::harness::{Ca, Cluster, Csr, IssuerCrds, Manager, ManagerOptions, cert_matches_key, openssl_verify};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_testserver::{Fault, FaultKind, Verb};

const GROUP: &str = "cfssl-issuer.wikimedia.org";
const WAIT: Duration = Duration::from_secs(60);

/// A cluster, a CA, a running manager (in-process mode) and a namespace for the scenario.
struct Env {
    cluster: Cluster,
    ca: Ca,
    _manager: Option<Manager>,
    /// The manager's cluster resource namespace: ClusterIssuer Secrets go here.
    system: String,
    ns: String,
    /// Where the CA's TLS root is written when the manager trusts it through SSL_CERT_FILE.
    _trust: tempfile::TempDir,
}

impl Env {
    async fn start(ca: Option<Ca>) -> anyhow::Result<Env> {
        Self::start_with(IssuerCrds::Ours, ca).await
    }

    async fn start_with(issuer_crds: IssuerCrds, ca: Option<Ca>) -> anyhow::Result<Env> {
        Self::on(Cluster::start_with(issuer_crds).await?, issuer_crds, ca).await
    }

    /// The scenario on `cluster`, which has `issuer_crds` installed.
    async fn on(cluster: Cluster, issuer_crds: IssuerCrds, ca: Option<Ca>) -> anyhow::Result<Env> {
        Self::allowing(cluster, issuer_crds, ca, None).await
    }

    /// [`Env::on`] with a manager that lets namespaced Issuers reach only `allowed_hosts`
    /// (`--namespaced-issuer-allowed-hosts`), when set.
    async fn allowing(
        cluster: Cluster,
        issuer_crds: IssuerCrds,
        ca: Option<Ca>,
        allowed_hosts: Option<&str>,
    ) -> anyhow::Result<Env> {
        let ca = match ca {
            Some(ca) => ca,
            None => Ca::simple(cluster.is_external()).await?,
        };
        let system = std::env::var("E2E_SYSTEM_NAMESPACE").unwrap_or_else(|_| "cfssl-issuer-system".into());
        cluster.ensure_namespace(&system).await?;
        let trust = tempfile::tempdir()?;
        let mut options = ManagerOptions::new(cluster.manager_kubeconfig(), &system);
        // The Go CRDs have no `spec.caBundle` (a create prunes it): their users make the
        // manager trust the CA through its trust store.
        if issuer_crds == IssuerCrds::Go
            && let Some(file) = ca.tls_ca_file(trust.path())?
        {
            options = options.env("SSL_CERT_FILE", file.display().to_string());
        }
        if let Some(hosts) = allowed_hosts {
            options = options.env("NAMESPACED_ISSUER_ALLOWED_HOSTS", hosts);
        }
        let manager = if cluster.is_external() {
            None
        } else {
            Some(Manager::start(options).await?)
        };
        let ns = cluster.namespace("e2e").await?;
        Ok(Env {
            cluster,
            ca,
            _manager: manager,
            system,
            ns,
            _trust: trust,
        })
    }

    fn client(&self) -> &kube::Client {
        &self.cluster.client
    }

    /// An Issuer in the scenario namespace with its Secret, and the name of both.
    async fn issuer(&self, name: &str, key: &str) -> anyhow::Result<()> {
        self.cluster.put_key_secret(&self.ns, name, key).await?;
        let spec = objects::issuer_spec(&self.ca, name, "server");
        objects::create_issuer(self.client(), Kind::Issuer, &self.ns, name, spec).await
    }

    /// Issues a request to `kind`/`issuer` and checks the result end to end.
    async fn issue_and_verify(&self, name: &str, kind: Kind, issuer: &str) -> anyhow::Result<()> {
        self.issue_key_and_verify(name, kind, issuer, rcgen::KeyPair::generate()?)
            .await
    }

    /// Creates and approves a request for `key` to `kind`/`issuer`; returns its CSR.
    async fn request_for(
        &self,
        name: &str,
        kind: Kind,
        issuer: &str,
        key: rcgen::KeyPair,
    ) -> anyhow::Result<Csr> {
        let dns = format!("{name}.{}.svc", self.ns);
        let csr = Csr::with_key(&dns, key)?;
        objects::create_request(
            self.client(),
            &self.ns,
            name,
            GROUP,
            kind.as_str(),
            issuer,
            &csr.pem,
        )
        .await?;
        objects::approve(self.client(), &self.ns, name).await?;
        Ok(csr)
    }

    /// Issues a request for `key` and checks the result end to end.
    async fn issue_key_and_verify(
        &self,
        name: &str,
        kind: Kind,
        issuer: &str,
        key: rcgen::KeyPair,
    ) -> anyhow::Result<()> {
        let csr = self.request_for(name, kind, issuer, key).await?;
        let dns = format!("{name}.{}.svc", self.ns);
        let issued = objects::wait_request_reason(self.client(), &self.ns, name, "Issued", WAIT).await?;
        let status = issued.status.expect("status");
        let chain = status.certificate.expect("status.certificate").0;
        // CFSSL's PEM uses `\n`; so must ours, in both fields.
        let ca = status.ca.map(|c| c.0).unwrap_or_default();
        assert!(!chain.contains(&b'\r') && !ca.contains(&b'\r'), "CRLF in status");
        assert!(
            cert_matches_key(&chain, &csr.key)?,
            "certificate is not for the CSR's key"
        );
        let leaf = e2e::harness::parse_leaf(&chain)?;
        assert_eq!(leaf.dns_names, vec![dns]);
        if let Some(root) = &self.ca.root_pem {
            openssl_verify(&chain, root)?;
        }
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issuer_and_cluster_issuer_sign_requests() -> anyhow::Result<()> {
    let env = Env::start(None).await?;
    both_kinds_sign(&env).await
}

/// Users who keep the Go issuer's CRDs (their conditions have no `observedGeneration`, and
/// server-side apply refuses a status that sets it): issuers become Ready, requests Issued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_go_issuer_crds_both_kinds_sign_requests() -> anyhow::Result<()> {
    let env = Env::start_with(IssuerCrds::Go, None).await?;
    if env.cluster.is_external() {
        return Ok(()); // a real cluster keeps the CRDs it has
    }
    env.with_manager_log(both_kinds_sign(&env).await)?;
    let issuer = kube::Api::<cfssl_issuer::api::Issuer>::namespaced(env.client().clone(), &env.ns)
        .get("team-ca")
        .await?;
    let ready = cfssl_issuer::api::ready_condition(issuer.status.as_ref()).expect("Ready");
    assert_eq!(ready.observed_generation, None, "the Go schema cannot hold it");
    Ok(())
}

/// Replacing the Go CRDs with ours while the manager runs: it notices the CRD change and
/// checks its issuers again at once (not at the next health check, a minute away), so their
/// conditions say again which generation they were computed for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrading_from_the_go_crds_rewrites_conditions_at_once() -> anyhow::Result<()> {
    let env = Env::start_with(IssuerCrds::Go, None).await?;
    if env.cluster.is_external() {
        return Ok(());
    }
    env.issuer("team-ca", &env.ca.key_hex).await?;
    objects::wait_issuer_reason(env.client(), Kind::Issuer, &env.ns, "team-ca", "Checked", WAIT).await?;
    let crds = kube::Api::<CustomResourceDefinition>::all(env.client().clone());
    for mut ours in cfssl_issuer::api::crds() {
        let name = ours.metadata.name.clone().expect("named");
        ours.metadata.resource_version = crds.get(&name).await?.metadata.resource_version;
        crds.replace(&name, &Default::default(), &ours).await?;
    }
    let issuers = kube::Api::<cfssl_issuer::api::Issuer>::namespaced(env.client().clone(), &env.ns);
    let rewritten =
        e2e::harness::eventually(Duration::from_secs(15), "observedGeneration written", || async {
            let issuer = issuers.get("team-ca").await.ok()?;
            let ready = cfssl_issuer::api::ready_condition(issuer.status.as_ref())?;
            (ready.observed_generation.is_some() && ready.observed_generation == issuer.metadata.generation)
                .then_some(())
        })
        .await;
    env.with_manager_log(rewritten)?;
    let issued = env
        .issue_and_verify("after-upgrade", Kind::Issuer, "team-ca")
        .await;
    env.with_manager_log(issued)
}

/// The same where RBAC does not let the manager read the CRDs: it writes observedGeneration as
/// with ours, learns from the API server's refusal not to, and says once that it cannot read
/// the CRDs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_go_issuer_crds_unreadable_both_kinds_sign_requests() -> anyhow::Result<()> {
    let cluster = Cluster::start_with(IssuerCrds::Go).await?;
    let Some(server) = cluster.server() else {
        return Ok(()); // a real cluster's RBAC is what it is
    };
    for verb in [Verb::Get, Verb::List, Verb::Watch] {
        let denied = Fault::new(FaultKind::Forbidden)
            .verb(verb)
            .resource("customresourcedefinitions")
            .times(u32::MAX);
        server.inject(denied);
    }
    let env = Env::on(cluster, IssuerCrds::Go, None).await?;
    env.with_manager_log(both_kinds_sign(&env).await)?;
    let log = env._manager.as_ref().map(Manager::log).unwrap_or_default();
    assert_eq!(log.matches("cannot read the CRD").count(), 1, "{log}");
    // One refused write per kind teaches it for good; the watch's retries must not undo that.
    let refused = log.matches("no longer writing it").count();
    assert!((1..=2).contains(&refused), "{refused} refusals learned:\n{log}");
    Ok(())
}

impl Env {
    /// `result`, with the manager's log attached when it is an error.
    fn with_manager_log(&self, result: anyhow::Result<()>) -> anyhow::Result<()> {
        result.map_err(|err| {
            let log = self._manager.as_ref().map(Manager::log).unwrap_or_default();
            err.context(format!("manager log:\n{log}"))
        })
    }
}

/// An Issuer and a ClusterIssuer become Ready and each signs a request.
async fn both_kinds_sign(env: &Env) -> anyhow::Result<()> {
    env.issuer("team-ca", &env.ca.key_hex).await?;
    objects::wait_issuer_reason(env.client(), Kind::Issuer, &env.ns, "team-ca", "Checked", WAIT).await?;

    // A ClusterIssuer reads its Secret from the cluster resource namespace only: a Secret of the
    // same name in the request's namespace does not count.
    let cluster_issuer = e2e::harness::unique("platform-ca");
    env.cluster
        .put_key_secret(&env.ns, &cluster_issuer, &env.ca.key_hex)
        .await?;
    let spec = objects::issuer_spec(&env.ca, &cluster_issuer, "server");
    objects::create_issuer(env.client(), Kind::ClusterIssuer, "", &cluster_issuer, spec).await?;
    env.cluster.track_cluster_issuer(&cluster_issuer);
    objects::wait_issuer_reason(
        env.client(),
        Kind::ClusterIssuer,
        "",
        &cluster_issuer,
        "SecretNotFound",
        WAIT,
    )
    .await?;
    env.cluster
        .put_key_secret(&env.system, &cluster_issuer, &env.ca.key_hex)
        .await?;
    objects::wait_issuer_reason(
        env.client(),
        Kind::ClusterIssuer,
        "",
        &cluster_issuer,
        "Checked",
        WAIT,
    )
    .await?;

    env.issue_and_verify("by-issuer", Kind::Issuer, "team-ca").await?;
    env.issue_and_verify("by-cluster-issuer", Kind::ClusterIssuer, &cluster_issuer)
        .await?;
    Ok(())
}

/// Requests the issuer must not sign: denied, not approved, another issuer's, an unknown kind
/// of ours, and a CSR that is not one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_that_must_not_be_signed() -> anyhow::Result<()> {
    let env = Env::start(None).await?;
    let client = env.client();
    env.issuer("team-ca", &env.ca.key_hex).await?;
    objects::wait_issuer_reason(client, Kind::Issuer, &env.ns, "team-ca", "Checked", WAIT).await?;
    let csr = Csr::new("nobody.example.com")?;
    let create = |name: &'static str, group: &'static str, kind: &'static str, pem: String| {
        let ns = env.ns.clone();
        async move { objects::create_request(client, &ns, name, group, kind, "team-ca", &pem).await }
    };

    create("unapproved", GROUP, "Issuer", csr.pem.clone()).await?;
    create("foreign", "cert-manager.io", "Issuer", csr.pem.clone()).await?;
    objects::approve(client, &env.ns, "foreign").await?;
    create("denied", GROUP, "Issuer", csr.pem.clone()).await?;
    objects::decide(client, &env.ns, "denied", false).await?;
    create("unknown-kind", GROUP, "SigningPolicy", csr.pem.clone()).await?;
    objects::approve(client, &env.ns, "unknown-kind").await?;
    create("garbage-csr", GROUP, "Issuer", "not a CSR at all".into()).await?;
    objects::approve(client, &env.ns, "garbage-csr").await?;

    let denied = objects::wait_request_reason(client, &env.ns, "denied", "Denied", WAIT).await?;
    assert!(
        denied.status.as_ref().unwrap().failure_time.is_some(),
        "failureTime set on denial"
    );
    assert!(
        denied.has_true("Denied"),
        "the approver's Denied condition survives our write"
    );
    let unknown = objects::wait_request_reason(client, &env.ns, "unknown-kind", "Failed", WAIT).await?;
    let message = &unknown.condition("Ready").unwrap().message;
    assert!(
        message.contains("SigningPolicy"),
        "message names the kind: {message}"
    );
    let garbage = objects::wait_request_reason(client, &env.ns, "garbage-csr", "Failed", WAIT).await?;
    assert!(garbage.status.as_ref().unwrap().failure_time.is_some());
    assert!(
        garbage.has_true("Approved"),
        "the Approved condition survives our write"
    );

    // The manager has handled every later request by now; give it a moment more, then the
    // unapproved and the foreign request must still carry nothing of ours.
    tokio::time::sleep(Duration::from_secs(1)).await;
    for name in ["unapproved", "foreign"] {
        let request = objects::get_request(client, &env.ns, name).await?;
        assert_eq!(objects::ready_of(&request), None, "{name} was touched");
        assert!(
            request.status.and_then(|s| s.certificate).is_none(),
            "{name} was signed"
        );
    }
    if let Some(count) = env.ca.issued_count() {
        assert_eq!(count, 0, "nothing may reach the CA");
    }
    Ok(())
}

/// A wrong key makes the issuer not Ready and holds its requests Pending; fixing the Secret
/// re-checks the issuer at once and the waiting request is issued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_key_then_fixed_by_updating_the_secret() -> anyhow::Result<()> {
    let env = Env::start(None).await?;
    let client = env.client();
    env.issuer("team-ca", e2e::harness::WRONG_KEY_HEX).await?;
    objects::wait_issuer_reason(
        client,
        Kind::Issuer,
        &env.ns,
        "team-ca",
        "InvalidCredentials",
        WAIT,
    )
    .await?;

    let csr = Csr::new("fixed.example.com")?;
    objects::create_request(client, &env.ns, "waits", GROUP, "Issuer", "team-ca", &csr.pem).await?;
    objects::approve(client, &env.ns, "waits").await?;
    objects::wait_request_reason(client, &env.ns, "waits", "Pending", WAIT).await?;

    env.cluster
        .put_key_secret(&env.ns, "team-ca", &env.ca.key_hex)
        .await?;
    // Well within the one-minute health-check interval: the Secret watch triggers the re-check.
    let quick = Duration::from_secs(20);
    objects::wait_issuer_reason(client, Kind::Issuer, &env.ns, "team-ca", "Checked", quick).await?;
    let issued = objects::wait_request_reason(client, &env.ns, "waits", "Issued", quick).await?;
    let chain = issued.status.unwrap().certificate.unwrap().0;
    assert!(cert_matches_key(&chain, &csr.key)?);
    Ok(())
}

/// The CA goes away while requests wait; they complete once it is back, each signed once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ca_outage_and_recovery() -> anyhow::Result<()> {
    let env = Env::start(None).await?;
    if env.cluster.is_external() {
        eprintln!("skipped against a real cluster: the suite cannot stop the in-cluster CA");
        return Ok(());
    }
    let client = env.client();
    env.issuer("team-ca", &env.ca.key_hex).await?;
    objects::wait_issuer_reason(client, Kind::Issuer, &env.ns, "team-ca", "Checked", WAIT).await?;

    assert!(env.ca.set_available(false));
    let names = ["during-outage-1", "during-outage-2", "during-outage-3"];
    for name in names {
        let csr = Csr::new(&format!("{name}.example.com"))?;
        objects::create_request(client, &env.ns, name, GROUP, "Issuer", "team-ca", &csr.pem).await?;
        objects::approve(client, &env.ns, name).await?;
    }
    for name in names {
        let pending = objects::wait_request_reason(client, &env.ns, name, "Pending", WAIT).await?;
        let message = &pending.condition("Ready").unwrap().message;
        assert!(!message.is_empty(), "Pending says why");
    }
    assert!(env.ca.set_available(true));
    for name in names {
        objects::wait_request_reason(client, &env.ns, name, "Issued", WAIT).await?;
    }
    assert_eq!(
        env.ca.issued_count(),
        Some(names.len() as u64),
        "each request signed once"
    );
    objects::wait_issuer_reason(client, Kind::Issuer, &env.ns, "team-ca", "Checked", WAIT).await?;
    Ok(())
}

/// The same issuance against Debian's real multirootca (no bundles there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_multirootca_signs_for_both_kinds() -> anyhow::Result<()> {
    if std::env::var_os("E2E_KUBECONFIG").is_some() {
        eprintln!("skipped against a real cluster: multirootca runs on this machine only");
        return Ok(());
    }
    let env = Env::start(Some(Ca::multirootca()?)).await?;
    let client = env.client();
    env.issuer("team-ca", &env.ca.key_hex).await?;
    let cluster_issuer = e2e::harness::unique("platform-ca");
    env.cluster
        .put_key_secret(&env.system, &cluster_issuer, &env.ca.key_hex)
        .await?;
    let spec = objects::issuer_spec(&env.ca, &cluster_issuer, "server");
    objects::create_issuer(client, Kind::ClusterIssuer, "", &cluster_issuer, spec).await?;
    env.cluster.track_cluster_issuer(&cluster_issuer);
    objects::wait_issuer_reason(client, Kind::Issuer, &env.ns, "team-ca", "Checked", WAIT).await?;
    objects::wait_issuer_reason(client, Kind::ClusterIssuer, "", &cluster_issuer, "Checked", WAIT).await?;
    env.issue_and_verify("by-issuer", Kind::Issuer, "team-ca").await?;
    env.issue_and_verify("by-cluster-issuer", Kind::ClusterIssuer, &cluster_issuer)
        .await?;
    Ok(())
}

/// Every key type cert-manager makes, against the real multirootca: P-384, P-521 (signed with
/// ecdsa-with-SHA512) and RSA 4096 are issued and verify with openssl against the CA root;
/// Ed25519 is issued by a current CFSSL (`make e2e-real`), and with Debian's 2016 build, which
/// cannot sign it, fails with a message saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_multirootca_signs_every_key_type() -> anyhow::Result<()> {
    if std::env::var_os("E2E_KUBECONFIG").is_some() {
        eprintln!("skipped against a real cluster: multirootca runs on this machine only");
        return Ok(());
    }
    use rcgen::{KeyPair, RsaKeySize};
    let env = Env::start(Some(Ca::multirootca()?)).await?;
    env.issuer("team-ca", &env.ca.key_hex).await?;
    objects::wait_issuer_reason(env.client(), Kind::Issuer, &env.ns, "team-ca", "Checked", WAIT).await?;
    let keys = [
        (
            "ecdsa-p384",
            KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384)?,
        ),
        (
            "ecdsa-p521",
            KeyPair::generate_for(&rcgen::PKCS_ECDSA_P521_SHA512)?,
        ),
        (
            "rsa-4096",
            KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA512, RsaKeySize::_4096)?,
        ),
    ];
    for (name, key) in keys {
        env.issue_key_and_verify(name, Kind::Issuer, "team-ca", key)
            .await?;
    }

    let ed25519 = KeyPair::generate_for(&rcgen::PKCS_ED25519)?;
    if simple_cfssl::multirootca::Multirootca::signs_ed25519() {
        return env
            .issue_key_and_verify("ed25519", Kind::Issuer, "team-ca", ed25519)
            .await;
    }
    env.request_for("ed25519", Kind::Issuer, "team-ca", ed25519)
        .await?;
    let failed = objects::wait_request_reason(env.client(), &env.ns, "ed25519", "Failed", WAIT).await?;
    let ready = failed.condition(cfssl_issuer::api::READY).expect("Ready");
    assert_eq!(ready.status, "False");
    let message = &ready.message;
    assert!(message.contains("the CA does not sign Ed25519 keys"), "{message}");
    assert!(
        failed
            .status
            .as_ref()
            .and_then(|s| s.certificate.as_ref())
            .is_none(),
        "no certificate"
    );
    Ok(())
}

/// A loopback "proxy" that answers every request with a 404 HTML page; returns its base URL.
async fn proxy_404() -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                let _ = sock.read(&mut buf).await;
                let body = format!(
                    "<html><body><h1>404 Not Found</h1>{}</body></html>",
                    "x".repeat(200)
                );
                let answer = format!(
                    "HTTP/1.1 404 Not Found\r\ncontent-type: text/html\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(answer.as_bytes()).await;
            });
        }
    });
    Ok(url)
}

/// CA answers that are not CFSSL's, through the real binary: a proxy's 404 in front of the first
/// URL fails over to the CA and requests are issued; a proxy alone leaves the issuer
/// CAUnreachable quoting the page. Every URL carries `user:password@`, and the password shows in
/// no condition, Event, log line or metric.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_answers_fail_over_and_url_passwords_stay_hidden() -> anyhow::Result<()> {
    use cfssl_issuer::api::{AnyIssuer as _, Issuer};
    use k8s_openapi::api::events::v1::Event;
    if std::env::var_os("E2E_KUBECONFIG").is_some() {
        eprintln!("skipped against a real cluster: the proxy runs on this machine only");
        return Ok(());
    }
    const PASSWORD: &str = "s3cret-pw";
    // The proxy's host is on the allow-list: only then is its page quoted in a namespaced
    // Issuer's status.
    let cluster = Cluster::start_with(IssuerCrds::Ours).await?;
    let env = Env::allowing(cluster, IssuerCrds::Ours, None, Some("127.0.0.0/8")).await?;
    let client = env.client();
    let proxy = proxy_404().await?;
    let creds = |url: &str| url.replacen("://", "://operator:s3cret-pw@", 1);
    for (name, url) in [
        (
            "behind-proxy",
            format!("{},{}", creds(&proxy), creds(&env.ca.url)),
        ),
        ("proxy-only", creds(&proxy)),
    ] {
        env.cluster.put_key_secret(&env.ns, name, &env.ca.key_hex).await?;
        let mut spec = objects::issuer_spec(&env.ca, name, "server");
        spec["url"] = url.into();
        objects::create_issuer(client, Kind::Issuer, &env.ns, name, spec).await?;
    }
    objects::wait_issuer_reason(client, Kind::Issuer, &env.ns, "behind-proxy", "Checked", WAIT).await?;
    env.issue_and_verify("through-failover", Kind::Issuer, "behind-proxy")
        .await?;
    objects::wait_issuer_reason(client, Kind::Issuer, &env.ns, "proxy-only", "CAUnreachable", WAIT).await?;

    let issuers = kube::Api::<Issuer>::namespaced(client.clone(), &env.ns);
    let unreachable = issuers.get("proxy-only").await?;
    let message = &unreachable.conditions()[0].message;
    assert!(message.contains("HTTP 404"), "{message}");
    assert!(
        message.contains(r#"without a CFSSL answer: "404 Not Found xxx"#),
        "{message}"
    );
    assert!(
        message.contains("operator") || message.contains("***@"),
        "{message}"
    );

    let mut shown = vec![
        // The spec holds the user's own URL; what we write is the status.
        serde_json::to_string(
            &issuers
                .list(&Default::default())
                .await?
                .items
                .iter()
                .map(|i| &i.status)
                .collect::<Vec<_>>(),
        )?,
        serde_json::to_string(
            &kube::Api::<Event>::namespaced(client.clone(), &env.ns)
                .list(&Default::default())
                .await?
                .items,
        )?,
    ];
    if let Some(manager) = &env._manager {
        shown.push(manager.log());
        shown.push(manager.metrics().await?);
    }
    assert!(
        shown[1].contains("CAUnreachable"),
        "the Events were read: {}",
        shown[1]
    );
    for text in shown {
        assert!(!text.contains(PASSWORD), "password shown in: {text}");
    }
    Ok(())
}
