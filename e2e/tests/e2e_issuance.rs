//! Issuer → CertificateRequest → signed certificate, through the real manager binary.
//!
//! By default each test starts the in-process API server, simple-cfssl (or multirootca) and
//! the manager; with `E2E_KUBECONFIG` the same scenarios run against an existing cluster.

use std::time::Duration;

use e2e::harness::objects::{self, Kind};
use e2e::harness::{Ca, Cluster, Csr, Manager, ManagerOptions, cert_matches_key, openssl_verify};

const GROUP: &str = "cfssl-issuer.wikimedia.org";
const WAIT: Duration = Duration::from_secs(60);

/// A cluster, a CA, a running manager (in-process mode) and a namespace for the scenario.
struct Env {
    cluster: Cluster,
    ca: Ca,
    manager: Option<Manager>,
    /// The manager's cluster resource namespace: ClusterIssuer Secrets go here.
    system: String,
    ns: String,
}

impl Env {
    async fn start(ca: Option<Ca>) -> anyhow::Result<Env> {
        let cluster = Cluster::start().await?;
        let ca = match ca {
            Some(ca) => ca,
            None => Ca::simple(cluster.is_external()).await?,
        };
        let system = std::env::var("E2E_SYSTEM_NAMESPACE").unwrap_or_else(|_| "cfssl-issuer-system".into());
        cluster.ensure_namespace(&system).await?;
        let manager = if cluster.is_external() {
            None
        } else {
            Some(Manager::start(ManagerOptions::new(&cluster.kubeconfig, &system)).await?)
        };
        let ns = cluster.namespace("e2e").await?;
        Ok(Env {
            cluster,
            ca,
            manager,
            system,
            ns,
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
        let dns = format!("{name}.{}.svc", self.ns);
        let csr = Csr::new(&dns)?;
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
        let issued = objects::wait_request_reason(self.client(), &self.ns, name, "Issued", WAIT).await?;
        let status = issued.status.expect("status");
        let chain = status.certificate.expect("status.certificate").0;
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

impl Drop for Env {
    fn drop(&mut self) {
        if self.cluster.is_external() {
            let client = self.cluster.client.clone();
            let ns = self.ns.clone();
            // Best effort: a real cluster keeps namespaces otherwise.
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
                if let Ok(rt) = rt {
                    rt.block_on(async {
                        let _ = kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(client)
                            .delete(&ns, &Default::default())
                            .await;
                    });
                }
            })
            .join()
            .ok();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issuer_and_cluster_issuer_sign_requests() -> anyhow::Result<()> {
    let env = Env::start(None).await?;
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
    let _ = &env.manager;
    Ok(())
}
