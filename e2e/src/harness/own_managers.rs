//! Scenarios that start, stop and kill managers themselves: an in-process cluster, simple-cfssl,
//! the cluster resource namespace (where the Lease lives) and a namespace for the test. Against a
//! real cluster (`E2E_KUBECONFIG`) the suite cannot run managers of its own, so these scenarios
//! return early there.

use super::objects::{self, Kind};
use super::{Ca, Cluster, ManagerOptions};
use kube_testserver::TestServer;

/// The cluster resource namespace the scenarios' managers use.
pub const SYSTEM: &str = "cfssl-issuer-system";

pub struct OwnManagers {
    pub cluster: Cluster,
    pub ca: Ca,
    /// The test's namespace.
    pub ns: String,
}

impl OwnManagers {
    /// `None` against a real cluster. `prefix` names the test namespace.
    pub async fn start(prefix: &str) -> anyhow::Result<Option<Self>> {
        if std::env::var_os("E2E_KUBECONFIG").is_some() {
            eprintln!("skipped against a real cluster: this scenario runs its own managers");
            return Ok(None);
        }
        let cluster = Cluster::start().await?;
        let ca = Ca::simple(false).await?;
        cluster.ensure_namespace(SYSTEM).await?;
        let ns = cluster.namespace(prefix).await?;
        Ok(Some(Self { cluster, ca, ns }))
    }

    pub fn client(&self) -> &kube::Client {
        &self.cluster.client
    }

    pub fn server(&self) -> &TestServer {
        self.cluster.server().expect("in-process API server")
    }

    /// The Issuer `name` for this CA in the test namespace, with its key Secret of the same
    /// name (`url` overrides the CA's), once it is Ready.
    pub async fn create_issuer(&self, name: &str, url: Option<&str>) -> anyhow::Result<()> {
        self.cluster
            .put_key_secret(&self.ns, name, &self.ca.key_hex)
            .await?;
        let mut spec = objects::issuer_spec(&self.ca, name, "server");
        if let Some(url) = url {
            spec["url"] = url.into();
        }
        objects::create_issuer(self.client(), Kind::Issuer, &self.ns, name, spec).await?;
        let wait = std::time::Duration::from_secs(120);
        objects::wait_issuer_reason(self.client(), Kind::Issuer, &self.ns, name, "Checked", wait).await?;
        Ok(())
    }

    /// A manager against this cluster, with [`SYSTEM`] as its cluster resource namespace.
    pub fn options(&self) -> ManagerOptions {
        ManagerOptions::new(self.cluster.manager_kubeconfig(), SYSTEM)
    }
}
