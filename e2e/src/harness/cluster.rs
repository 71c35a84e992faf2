//! The cluster a scenario runs in.

use std::path::PathBuf;

use anyhow::Context as _;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

use cfssl_issuer::api::ClusterIssuer;

use super::IssuerCrds;
use super::real::{self, RealServer};
use kube_testserver::{Options, TestServer};

/// A cluster with our CRDs and cert-manager's installed: the in-process API server by default,
/// a real kube-apiserver of its own with `E2E_REAL_PEERS`, or the cluster `E2E_KUBECONFIG`
/// points at.
pub struct Cluster {
    pub client: Client,
    pub kubeconfig: PathBuf,
    server: Option<TestServer>,
    real: Option<RealServer>,
    /// What `namespace` and `track_cluster_issuer` made, removed on drop from a real cluster
    /// (the in-process one goes away whole).
    created: std::sync::Mutex<Created>,
}

#[derive(Default)]
struct Created {
    namespaces: Vec<String>,
    cluster_issuers: Vec<String>,
    csrs: Vec<String>,
}

impl Cluster {
    pub async fn start() -> anyhow::Result<Cluster> {
        Self::start_with(IssuerCrds::Ours).await
    }

    /// A cluster whose Issuer and ClusterIssuer CRDs are `issuer_crds` (in-process only: a
    /// real cluster keeps the CRDs it has).
    pub async fn start_with(issuer_crds: IssuerCrds) -> anyhow::Result<Cluster> {
        Self::start_installing(issuer_crds, &["certificate-controllers"]).await
    }

    /// A cluster whose manager, on a real kube-apiserver, has only the RBAC of `config/default`
    /// with the kustomize `components` (elsewhere as [`Cluster::start`]).
    pub async fn start_with_rbac(components: &[&str]) -> anyhow::Result<Cluster> {
        Self::start_installing(IssuerCrds::Ours, components).await
    }

    async fn start_installing(issuer_crds: IssuerCrds, rbac: &[&str]) -> anyhow::Result<Cluster> {
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        if let Some(path) = std::env::var_os("E2E_KUBECONFIG") {
            let kubeconfig = PathBuf::from(path);
            let parsed = Kubeconfig::read_from(&kubeconfig).context("read E2E_KUBECONFIG")?;
            let config = kube::Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default()).await?;
            return Ok(Cluster {
                client: Client::try_from(config)?,
                kubeconfig,
                server: None,
                real: None,
                created: Default::default(),
            });
        }
        if let Some(peers) = real::peers_dir() {
            let real = RealServer::start(&peers).await?;
            let client = real.client().await?;
            install_crds(&client, issuer_crds).await?;
            real.install_manager_rbac_with(rbac).await?;
            return Ok(Cluster {
                client,
                kubeconfig: real.kubeconfig.clone(),
                server: None,
                real: Some(real),
                created: Default::default(),
            });
        }
        let server = TestServer::start(Options::default()).await?;
        let client = server.client()?;
        install_crds(&client, issuer_crds).await?;
        Ok(Cluster {
            client,
            kubeconfig: server.kubeconfig_path().to_path_buf(),
            server: Some(server),
            real: None,
            created: Default::default(),
        })
    }

    /// The in-process server, for request counts and faults; `None` on a real cluster.
    pub fn server(&self) -> Option<&TestServer> {
        self.server.as_ref()
    }

    /// The kubeconfig a manager the suite starts runs with: on a real kube-apiserver the
    /// manager's service account, with the RBAC `config/` installs; elsewhere the admin's.
    pub fn manager_kubeconfig(&self) -> &std::path::Path {
        match &self.real {
            Some(real) => &real.manager_kubeconfig,
            None => &self.kubeconfig,
        }
    }

    /// The real kube-apiserver this scenario started (`E2E_REAL_PEERS`); `None` otherwise.
    pub fn real(&self) -> Option<&RealServer> {
        self.real.as_ref()
    }

    /// A cluster where the manager and the CA are deployed (`E2E_KUBECONFIG`): the suite
    /// starts neither, and cannot stop them.
    pub fn is_external(&self) -> bool {
        self.server.is_none() && self.real.is_none()
    }

    /// Creates a namespace named `prefix-<random>` and returns its name.
    pub async fn namespace(&self, prefix: &str) -> anyhow::Result<String> {
        let name = super::unique(prefix);
        self.ensure_namespace(&name).await?;
        self.created.lock().expect("lock").namespaces.push(name.clone());
        Ok(name)
    }

    /// Creates `name` unless it exists.
    pub async fn ensure_namespace(&self, name: &str) -> anyhow::Result<()> {
        let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))?;
        match Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &ns)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Marks a ClusterIssuer for removal when the scenario ends.
    pub fn track_cluster_issuer(&self, name: &str) {
        self.created
            .lock()
            .expect("lock")
            .cluster_issuers
            .push(name.into());
    }

    /// Marks a CertificateSigningRequest (cluster-scoped) for removal when the scenario ends.
    pub fn track_csr(&self, name: &str) {
        self.created.lock().expect("lock").csrs.push(name.into());
    }

    /// Creates or replaces the credential Secret `name` with `key` (hex) in `namespace`.
    pub async fn put_key_secret(&self, namespace: &str, name: &str, key: &str) -> anyhow::Result<()> {
        let secret: Secret = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": namespace},
            "stringData": {"key": key},
        }))?;
        let api = Api::<Secret>::namespaced(self.client.clone(), namespace);
        let params = kube::api::PatchParams::apply("e2e").force();
        api.patch(name, &params, &kube::api::Patch::Apply(&secret))
            .await?;
        Ok(())
    }
}

impl Drop for Cluster {
    /// On a real cluster, removes what the scenario made; best effort, on a thread of its own
    /// because Drop cannot await.
    fn drop(&mut self) {
        if !self.is_external() {
            return;
        }
        let created = std::mem::take(&mut *self.created.lock().expect("lock"));
        let client = self.client.clone();
        let cleanup = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                return;
            };
            rt.block_on(async {
                let dp = DeleteParams::default();
                for name in &created.cluster_issuers {
                    let _ = Api::<ClusterIssuer>::all(client.clone()).delete(name, &dp).await;
                }
                for name in &created.csrs {
                    let api = Api::<CertificateSigningRequest>::all(client.clone());
                    let _ = api.delete(name, &dp).await;
                }
                for name in &created.namespaces {
                    let _ = Api::<Namespace>::all(client.clone()).delete(name, &dp).await;
                }
            });
        });
        let _ = cleanup.join();
    }
}

async fn install_crds(client: &Client, issuer_crds: IssuerCrds) -> anyhow::Result<()> {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let mut crds = issuer_crds.crds()?;
    crds.extend(super::crds::cert_manager_crds()?);
    for crd in &crds {
        match api.create(&PostParams::default(), crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e).context("install CRD"),
        }
    }
    // A real API server serves a CRD's resource only once it is Established.
    for crd in &crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let established = kube::runtime::conditions::is_crd_established();
        let wait = kube::runtime::wait::await_condition(api.clone(), &name, established);
        tokio::time::timeout(std::time::Duration::from_secs(30), wait)
            .await
            .with_context(|| format!("CRD {name} not Established after 30s"))??;
    }
    Ok(())
}
