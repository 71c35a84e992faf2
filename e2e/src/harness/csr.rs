//! Kubernetes `certificates.k8s.io/v1` CertificateSigningRequests as workloads and people
//! write them: created by a requester, approved or denied with `kubectl certificate`, and the
//! RBAC a requester needs to name one of our namespaced issuers as its signer.

use std::{collections::BTreeMap, path::Path, time::Duration};

use anyhow::Context as _;
use k8s_openapi::{
    ByteString,
    api::{
        certificates::v1::CertificateSigningRequest,
        rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
    },
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use serde_json::json;

use super::{Cluster, Csr, eventually, kubectl_bin};
use kube_testserver::AccessRule;

/// The API group of our issuers, where `signers` are referenced.
pub const SIGNER_GROUP: &str = "cfssl-issuer.wikimedia.org";

/// A CertificateSigningRequest to create, for a fresh P-256 key.
pub struct KubeCsr {
    pub name: String,
    pub signer_name: String,
    /// The key and PEM request (CN and DNS SAN `<name>.example.com`).
    pub csr: Csr,
    /// Who creates it: the CSR's `spec.username` (and `groups`), by impersonation; None
    /// creates it as the cluster's own user.
    pub username: Option<String>,
    pub groups: Vec<String>,
    pub usages: Vec<String>,
    pub annotations: BTreeMap<String, String>,
    pub expiration_seconds: Option<i32>,
}

impl KubeCsr {
    /// A request named `csr-<random>` for `signer_name`, usages `digital signature`, `key
    /// encipherment` and `server auth`.
    pub fn new(signer_name: &str) -> anyhow::Result<KubeCsr> {
        let name = super::unique("csr");
        let csr = Csr::new(&format!("{name}.example.com"))?;
        Ok(KubeCsr {
            name,
            signer_name: signer_name.into(),
            csr,
            username: None,
            groups: Vec::new(),
            usages: ["digital signature", "key encipherment", "server auth"]
                .map(String::from)
                .to_vec(),
            annotations: BTreeMap::new(),
            expiration_seconds: None,
        })
    }

    /// Created as `username` (in `groups`, plus `system:authenticated`).
    pub fn requester(mut self, username: &str, groups: &[&str]) -> Self {
        self.username = Some(username.into());
        self.groups = groups.iter().map(|g| g.to_string()).collect();
        self
    }

    pub fn usages(mut self, usages: &[&str]) -> Self {
        self.usages = usages.iter().map(|u| u.to_string()).collect();
        self
    }

    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.into(), value.into());
        self
    }

    pub fn expiration_seconds(mut self, seconds: i32) -> Self {
        self.expiration_seconds = Some(seconds);
        self
    }

    /// The object to create (the API server fills in the requester).
    pub fn object(&self) -> anyhow::Result<CertificateSigningRequest> {
        let mut obj = json!({
            "apiVersion": "certificates.k8s.io/v1",
            "kind": "CertificateSigningRequest",
            "metadata": { "name": self.name },
            "spec": {
                "request": base64_of(self.csr.pem.as_bytes()),
                "signerName": self.signer_name,
                "usages": self.usages,
            },
        });
        if !self.annotations.is_empty() {
            obj["metadata"]["annotations"] = json!(self.annotations);
        }
        if let Some(secs) = self.expiration_seconds {
            obj["spec"]["expirationSeconds"] = secs.into();
        }
        Ok(serde_json::from_value(obj)?)
    }

    /// Creates it in `cluster` as [`KubeCsr::requester`] (impersonated, which the in-process
    /// server and a kind cluster's admin both allow), removed again when a real cluster's
    /// scenario ends.
    pub async fn create(&self, cluster: &Cluster) -> anyhow::Result<CertificateSigningRequest> {
        let client = match &self.username {
            Some(user) => {
                allow_creating_csrs(cluster, user).await?;
                impersonating(&cluster.kubeconfig, user, &self.groups).await?
            }
            None => cluster.client.clone(),
        };
        let created = Api::<CertificateSigningRequest>::all(client)
            .create(&PostParams::default(), &self.object()?)
            .await
            .with_context(|| format!("create CertificateSigningRequest {}", self.name))?;
        cluster.track_csr(&self.name);
        Ok(created)
    }
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A client for `kubeconfig` that acts as `user` in `groups`.
async fn impersonating(kubeconfig: &Path, user: &str, groups: &[String]) -> anyhow::Result<Client> {
    let parsed = Kubeconfig::read_from(kubeconfig).context("read the kubeconfig")?;
    let mut config = kube::Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default()).await?;
    config.auth_info.impersonate = Some(user.into());
    config.auth_info.impersonate_groups = (!groups.is_empty()).then(|| groups.to_vec());
    Ok(Client::try_from(config)?)
}

/// Runs `kubectl certificate <verb> <name>` (`approve` or `deny`) against the cluster.
async fn kubectl_certificate(cluster: &Cluster, verb: &str, name: &str) -> anyhow::Result<()> {
    let cache = tempfile::tempdir()?;
    let output = tokio::process::Command::new(kubectl_bin())
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .arg("--cache-dir")
        .arg(cache.path())
        .args(["certificate", verb, name])
        .output()
        .await
        .context("run kubectl")?;
    anyhow::ensure!(
        output.status.success(),
        "kubectl certificate {verb} {name}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// `kubectl certificate approve <name>`: adds the Approved condition through `/approval`.
pub async fn approve(cluster: &Cluster, name: &str) -> anyhow::Result<()> {
    kubectl_certificate(cluster, "approve", name).await
}

/// `kubectl certificate deny <name>`: adds the Denied condition through `/approval`.
pub async fn deny(cluster: &Cluster, name: &str) -> anyhow::Result<()> {
    kubectl_certificate(cluster, "deny", name).await
}

/// How a signer finished with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// `status.certificate`, as PEM.
    Issued(String),
    /// The `Failed` condition's reason and message.
    Failed { reason: String, message: String },
}

/// What the signer has done with `csr` so far: None while it has neither a certificate nor a
/// `Failed` condition.
pub fn outcome(csr: &CertificateSigningRequest) -> Option<Outcome> {
    let status = csr.status.as_ref()?;
    if let Some(ByteString(pem)) = status.certificate.as_ref().filter(|c| !c.0.is_empty()) {
        return Some(Outcome::Issued(String::from_utf8_lossy(pem).into_owned()));
    }
    let failed = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Failed" && c.status == "True")?;
    Some(Outcome::Failed {
        reason: failed.reason.clone().unwrap_or_default(),
        message: failed.message.clone().unwrap_or_default(),
    })
}

/// Waits until `name` has a certificate or a `Failed` condition.
pub async fn wait_outcome(cluster: &Cluster, name: &str, timeout: Duration) -> anyhow::Result<Outcome> {
    let api = Api::<CertificateSigningRequest>::all(cluster.client.clone());
    eventually(
        timeout,
        &format!("CertificateSigningRequest {name} to be signed or fail"),
        || {
            let api = api.clone();
            async move { api.get(name).await.ok().as_ref().and_then(outcome) }
        },
    )
    .await
}

/// Waits until `name` has a certificate and returns it (PEM); a `Failed` condition is an error.
pub async fn wait_issued(cluster: &Cluster, name: &str, timeout: Duration) -> anyhow::Result<String> {
    match wait_outcome(cluster, name, timeout).await? {
        Outcome::Issued(pem) => Ok(pem),
        Outcome::Failed { reason, message } => {
            anyhow::bail!("CertificateSigningRequest {name} failed: {reason}: {message}")
        }
    }
}

/// Lets `user` create CertificateSigningRequests, as a requester must be allowed to: a
/// ClusterRole and ClusterRoleBinding in a real cluster, an access rule in the in-process one.
async fn allow_creating_csrs(cluster: &Cluster, user: &str) -> anyhow::Result<()> {
    let (group, resource) = ("certificates.k8s.io", "certificatesigningrequests");
    if let Some(server) = cluster.server() {
        server.allow_access(AccessRule::new("create", group, resource).user(user));
        return Ok(());
    }
    let name = format!("e2e-csr-requester-{user}");
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": { "name": name },
        "rules": [{ "apiGroups": [group], "resources": [resource], "verbs": ["create"] }],
    }))?;
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": { "name": name },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }],
    }))?;
    let params = PatchParams::apply("e2e").force();
    Api::<ClusterRole>::all(cluster.client.clone())
        .patch(&name, &params, &Patch::Apply(&role))
        .await
        .context("apply the requester ClusterRole")?;
    Api::<ClusterRoleBinding>::all(cluster.client.clone())
        .patch(&name, &params, &Patch::Apply(&binding))
        .await
        .context("apply the requester ClusterRoleBinding")?;
    Ok(())
}

/// Lets `user` reference our signers in `namespace`: the Issuer `issuer`, or all of them
/// (None). In the in-process server through its SubjectAccessReview allow-list; in a real
/// cluster with a Role and RoleBinding (apiGroups [cfssl-issuer.wikimedia.org], resources
/// [signers], verbs [reference], resourceNames [issuer]) in `namespace`.
pub async fn allow_reference(
    cluster: &Cluster,
    namespace: &str,
    issuer: Option<&str>,
    user: &str,
) -> anyhow::Result<()> {
    if let Some(server) = cluster.server() {
        let mut rule = AccessRule::new("reference", SIGNER_GROUP, "signers")
            .user(user)
            .namespace(namespace);
        rule.name = issuer.map(String::from);
        server.allow_access(rule);
        return Ok(());
    }
    let name = super::unique("signer-reference");
    let mut rule = json!({ "apiGroups": [SIGNER_GROUP], "resources": ["signers"], "verbs": ["reference"] });
    if let Some(issuer) = issuer {
        rule["resourceNames"] = json!([issuer]);
    }
    let role: Role = serde_json::from_value(json!({
        "metadata": { "name": name, "namespace": namespace }, "rules": [rule],
    }))?;
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": { "name": name, "namespace": namespace },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }],
    }))?;
    let params = PatchParams::apply("e2e").force();
    Api::<Role>::namespaced(cluster.client.clone(), namespace)
        .patch(&name, &params, &Patch::Apply(&role))
        .await
        .context("apply the Role")?;
    Api::<RoleBinding>::namespaced(cluster.client.clone(), namespace)
        .patch(&name, &params, &Patch::Apply(&binding))
        .await
        .context("apply the RoleBinding")?;
    Ok(())
}
