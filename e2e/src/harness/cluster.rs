//! The cluster a scenario runs in.

use std::path::PathBuf;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, CustomResourceExt};

use cfssl_issuer::api::certmanager::{Certificate, CertificateRequest};

use crate::apiserver::{Options, TestServer};

/// A cluster with our CRDs and cert-manager's installed: the in-process API server by default,
/// or the cluster `E2E_KUBECONFIG` points at.
pub struct Cluster {
    pub client: Client,
    pub kubeconfig: PathBuf,
    server: Option<TestServer>,
}

impl Cluster {
    pub async fn start() -> anyhow::Result<Cluster> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        if let Some(path) = std::env::var_os("E2E_KUBECONFIG") {
            let kubeconfig = PathBuf::from(path);
            let parsed = Kubeconfig::read_from(&kubeconfig).context("read E2E_KUBECONFIG")?;
            let config = kube::Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default()).await?;
            return Ok(Cluster {
                client: Client::try_from(config)?,
                kubeconfig,
                server: None,
            });
        }
        let server = TestServer::start(Options::default()).await?;
        let client = server.client()?;
        install_crds(&client).await?;
        Ok(Cluster {
            client,
            kubeconfig: server.kubeconfig_path().to_path_buf(),
            server: Some(server),
        })
    }

    /// The in-process server, for request counts and faults; `None` on a real cluster.
    pub fn server(&self) -> Option<&TestServer> {
        self.server.as_ref()
    }

    pub fn is_external(&self) -> bool {
        self.server.is_none()
    }

    /// Creates a namespace named `prefix-<random>` and returns its name.
    pub async fn namespace(&self, prefix: &str) -> anyhow::Result<String> {
        let name = super::unique(prefix);
        self.ensure_namespace(&name).await?;
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

    /// Deletes a namespace (and, on a real cluster, everything in it) at the end of a scenario.
    pub async fn delete_namespace(&self, name: &str) {
        let _ = Api::<Namespace>::all(self.client.clone())
            .delete(name, &DeleteParams::default())
            .await;
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

async fn install_crds(client: &Client) -> anyhow::Result<()> {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let mut crds = cfssl_issuer::api::crds();
    crds.push(CertificateRequest::crd());
    crds.push(Certificate::crd());
    for crd in crds {
        match api.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e).context("install CRD"),
        }
    }
    Ok(())
}
