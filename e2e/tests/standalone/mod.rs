//! The standalone-mode scenario environment: the in-process API server (with cert-manager's
//! CRDs), simple-cfssl, and the manager started with `--certificate-controllers`.

#![allow(dead_code)]

use std::time::Duration;

use cfssl_issuer::api::certmanager::Certificate;
use e2e::harness::objects::{self, Kind};
use e2e::harness::{Ca, Cluster, Manager, ManagerOptions, openssl_verify};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;

pub const GROUP: &str = "cfssl-issuer.wikimedia.org";

pub struct Env {
    pub cluster: Cluster,
    pub ca: Ca,
    pub manager: Option<Manager>,
    pub options: ManagerOptions,
    pub ns: String,
}

impl Env {
    /// Starts everything; `args` are added to the manager's flags.
    pub async fn start(args: &[&str]) -> anyhow::Result<Env> {
        let cluster = Cluster::start().await?;
        let ca = Ca::simple(cluster.is_external()).await?;
        let system = "cfssl-issuer-system";
        cluster.ensure_namespace(system).await?;
        let mut options = ManagerOptions::new(&cluster.kubeconfig, system).arg("--certificate-controllers");
        for arg in args {
            options = options.arg(*arg);
        }
        let manager = if cluster.is_external() {
            None
        } else {
            Some(Manager::start(options.clone()).await?)
        };
        let ns = cluster.namespace("standalone").await?;
        Ok(Env {
            cluster,
            ca,
            manager,
            options,
            ns,
        })
    }

    pub fn client(&self) -> &kube::Client {
        &self.cluster.client
    }

    pub fn certificates(&self) -> Api<Certificate> {
        Api::namespaced(self.client().clone(), &self.ns)
    }

    pub fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.client().clone(), &self.ns)
    }

    /// An Issuer `name` with its key Secret, signing with `profile`.
    pub async fn issuer_with_profile(&self, name: &str, profile: &str) -> anyhow::Result<()> {
        self.cluster
            .put_key_secret(&self.ns, name, &self.ca.key_hex)
            .await?;
        let spec = objects::issuer_spec(&self.ca, name, profile);
        objects::create_issuer(self.client(), Kind::Issuer, &self.ns, name, spec).await
    }

    pub async fn issuer(&self, name: &str) -> anyhow::Result<()> {
        self.issuer_with_profile(name, "server").await
    }

    /// A Certificate `name` for `<name>.example.com` into `secret`, from Issuer `issuer`;
    /// `extra` is merged into its spec.
    pub async fn certificate(
        &self,
        name: &str,
        secret: &str,
        issuer: &str,
        extra: serde_json::Value,
    ) -> anyhow::Result<()> {
        let mut spec = serde_json::json!({
            "secretName": secret,
            "dnsNames": [format!("{name}.example.com")],
            "issuerRef": { "name": issuer, "kind": "Issuer", "group": GROUP },
        });
        if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                spec.insert(k.clone(), v.clone());
            }
        }
        let crt: Certificate = serde_json::from_value(serde_json::json!({
            "apiVersion": "cert-manager.io/v1",
            "kind": "Certificate",
            "metadata": { "name": name, "namespace": self.ns },
            "spec": spec,
        }))?;
        self.certificates().create(&PostParams::default(), &crt).await?;
        Ok(())
    }

    /// Waits until the Certificate reads Ready=True and returns it.
    pub async fn wait_ready(&self, name: &str, timeout: Duration) -> anyhow::Result<Certificate> {
        self.wait_condition(name, "Ready", "True", None, timeout).await
    }

    /// Waits until condition `type_` has `status` (and `reason`, when given).
    pub async fn wait_condition(
        &self,
        name: &str,
        type_: &str,
        status: &str,
        reason: Option<&str>,
        timeout: Duration,
    ) -> anyhow::Result<Certificate> {
        let api = self.certificates();
        e2e::harness::eventually(
            timeout,
            &format!("{name} {type_}={status} {reason:?}"),
            || async {
                let crt = api.get(name).await.ok()?;
                let c = crt.condition(type_)?;
                (c.status == status && reason.is_none_or(|r| c.reason == r)).then_some(crt.clone())
            },
        )
        .await
    }

    pub async fn secret(&self, name: &str) -> anyhow::Result<Secret> {
        Ok(self.secrets().get(name).await?)
    }

    /// The Secret's chain verifies to the root, its key matches, the names are `dns`.
    pub fn verify_secret(&self, secret: &Secret, dns: &[&str]) -> anyhow::Result<()> {
        let data = secret.data.clone().unwrap_or_default();
        let chain = &data.get("tls.crt").expect("tls.crt").0;
        let key = &data.get("tls.key").expect("tls.key").0;
        if let Some(root) = &self.ca.root_pem {
            openssl_verify(chain, root)?;
        }
        anyhow::ensure!(
            e2e::harness::pem_key_matches(chain, key)?,
            "tls.key does not match tls.crt"
        );
        let leaf = e2e::harness::parse_leaf(chain)?;
        assert_eq!(
            leaf.dns_names,
            dns.iter().map(|d| d.to_string()).collect::<Vec<_>>()
        );
        Ok(())
    }

    /// `result`, with the manager's log attached when it failed.
    pub fn with_manager_log<T>(&self, result: anyhow::Result<T>) -> anyhow::Result<T> {
        result.map_err(|err| match &self.manager {
            Some(m) => err.context(format!("manager log:\n{}", m.log())),
            None => err,
        })
    }
}
