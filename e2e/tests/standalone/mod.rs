//! The standalone-mode scenario environment: the in-process API server (with cert-manager's
//! CRDs), simple-cfssl, and the manager started with `--certificate-controllers`.

#![allow(dead_code)]

use std::time::Duration;

use cfssl_issuer::api::certmanager::{Certificate, CertificateRequest};
use e2e::harness::objects::{self, Kind};
use e2e::harness::{Ca, Cluster, Manager, ManagerOptions, openssl_verify};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{ListParams, PostParams};

pub const GROUP: &str = "cfssl-issuer.wikimedia.org";

pub struct Env {
    pub cluster: Cluster,
    pub ca: Ca,
    pub manager: Option<Manager>,
    pub options: ManagerOptions,
    pub ns: String,
    /// The logs of managers killed by [`Env::restart_manager`].
    pub past_logs: std::sync::Mutex<Vec<String>>,
}

impl Env {
    /// Starts everything; `args` are added to the manager's flags.
    pub async fn start(args: &[&str]) -> anyhow::Result<Env> {
        let cluster = Cluster::start().await?;
        let ca = Ca::simple(cluster.is_external()).await?;
        let args: Vec<&str> = ["--certificate-controllers"]
            .into_iter()
            .chain(args.iter().copied())
            .collect();
        Self::start_on(cluster, ca, &args).await
    }

    /// The manager with `args` (no `--certificate-controllers` unless given) on `cluster`,
    /// signing with `ca`.
    pub async fn start_on(cluster: Cluster, ca: Ca, args: &[&str]) -> anyhow::Result<Env> {
        let system = "cfssl-issuer-system";
        cluster.ensure_namespace(system).await?;
        let mut options = ManagerOptions::new(cluster.manager_kubeconfig(), system);
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
            past_logs: Default::default(),
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

    /// A Secret `store-pass` holding `password` under `password`; the `passwordSecretRef` a
    /// Certificate's keystores name it by.
    pub async fn keystore_password(&self, password: &str) -> anyhow::Result<serde_json::Value> {
        let secret: Secret = serde_json::from_value(serde_json::json!({
            "metadata": { "name": "store-pass", "namespace": self.ns },
            "stringData": { "password": password },
        }))?;
        self.secrets().create(&Default::default(), &secret).await?;
        Ok(serde_json::json!({ "name": "store-pass", "key": "password" }))
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

/// Helpers the scenarios after the first share: the server's counts, status patches as users
/// make them, requests and next-key Secrets of a Certificate, and restarts.
impl Env {
    /// The in-process server; `None` against a real cluster (scenarios needing it return early).
    pub fn server(&self) -> Option<&kube_testserver::TestServer> {
        self.cluster.server()
    }

    /// API hygiene, checked at the end of each scenario: the manager never sends a PUT for a
    /// Certificate (status is written by server-side apply only), and never met a conflict
    /// (409 `Conflict`, which its log would show). The suite itself sends no PUT either.
    pub fn assert_api_hygiene(&self) {
        let Some(server) = self.server() else {
            return;
        };
        let counts = server.counts();
        for resource in ["certificates/status", "certificates"] {
            assert_eq!(
                counts.get(kube_testserver::Verb::Update, resource),
                0,
                "PUT on {resource}"
            );
        }
        let logs = self.past_logs.lock().expect("logs").join("\n");
        let log = format!(
            "{logs}\n{}",
            self.manager.as_ref().map(Manager::log).unwrap_or_default()
        );
        assert!(
            !e2e::harness::load::log_has_conflict(&log),
            "the manager met a conflict:\n{log}"
        );
    }

    /// A merge patch on the Certificate's status under field manager `manager`, as `cmctl
    /// renew` or a user with `kubectl patch --subresource=status` sends it.
    pub async fn patch_status(
        &self,
        name: &str,
        manager: &str,
        status: serde_json::Value,
    ) -> anyhow::Result<()> {
        let params = kube::api::PatchParams {
            field_manager: Some(manager.into()),
            ..Default::default()
        };
        let body = serde_json::json!({ "status": status });
        self.certificates()
            .patch_status(name, &params, &kube::api::Patch::Merge(&body))
            .await?;
        Ok(())
    }

    /// Sets `Issuing=True` with reason `ManuallyTriggered`, keeping the other conditions, as
    /// `cmctl renew` does.
    pub async fn trigger_manually(&self, name: &str) -> anyhow::Result<()> {
        let crt = self.certificates().get(name).await?;
        let mut conditions: Vec<serde_json::Value> = crt
            .status
            .map(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.type_ != "Issuing")
            .map(|c| serde_json::to_value(c).expect("condition"))
            .collect();
        conditions.push(serde_json::json!({
            "type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
            "message": "Certificate re-issuance manually triggered",
            "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().to_string(),
        }));
        self.patch_status(name, "cmctl", serde_json::json!({ "conditions": conditions }))
            .await
    }

    /// The CertificateRequests controlled by Certificate `name` (by UID).
    pub async fn requests_of(&self, name: &str) -> anyhow::Result<Vec<CertificateRequest>> {
        let uid = self.certificates().get(name).await?.metadata.uid;
        let all = Api::<CertificateRequest>::namespaced(self.client().clone(), &self.ns)
            .list(&ListParams::default())
            .await?;
        Ok(all
            .items
            .into_iter()
            .filter(|cr| controlled_by(&cr.metadata, uid.as_deref()))
            .collect())
    }

    /// The next-private-key Secrets of Certificate `name`: labelled, controlled by it.
    pub async fn next_key_secrets(&self, name: &str) -> anyhow::Result<Vec<Secret>> {
        let uid = self.certificates().get(name).await?.metadata.uid;
        let labelled = self
            .secrets()
            .list(&ListParams::default().labels("cert-manager.io/next-private-key=true"))
            .await?;
        Ok(labelled
            .items
            .into_iter()
            .filter(|s| controlled_by(&s.metadata, uid.as_deref()))
            .collect())
    }

    /// Waits until Certificate `name` is Ready at `revision` and returns it.
    pub async fn wait_revision(
        &self,
        name: &str,
        revision: i64,
        timeout: Duration,
    ) -> anyhow::Result<Certificate> {
        let api = self.certificates();
        let result = e2e::harness::eventually(
            timeout,
            &format!("{name} Ready at revision {revision}"),
            || async {
                let crt = api.get(name).await.ok()?;
                let at = crt.status.as_ref().and_then(|s| s.revision);
                (at == Some(revision) && crt.has_true("Ready")).then_some(crt)
            },
        )
        .await;
        let result = match result {
            Ok(crt) => Ok(crt),
            Err(err) => Err(err.context(self.describe(name).await)),
        };
        self.with_manager_log(result)
    }

    /// What a failed wait shows: the Certificate's status, its requests' conditions and its
    /// next-key Secrets.
    pub async fn describe(&self, name: &str) -> String {
        let status = match self.certificates().get(name).await {
            Ok(crt) => serde_json::to_string_pretty(&crt.status).unwrap_or_default(),
            Err(err) => err.to_string(),
        };
        let requests: Vec<String> = self
            .requests_of(name)
            .await
            .unwrap_or_default()
            .iter()
            .map(|cr| {
                let conditions = cr
                    .status
                    .as_ref()
                    .map(|s| s.conditions.clone())
                    .unwrap_or_default();
                format!(
                    "{:?} revision {:?}: {}",
                    cr.metadata.name,
                    revision_of(cr),
                    serde_json::to_string(&conditions).unwrap_or_default()
                )
            })
            .collect();
        let keys: Vec<Option<String>> = self
            .next_key_secrets(name)
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|s| s.metadata.name)
            .collect();
        format!(
            "{name} status: {status}\nrequests:\n{}\nnext-key Secrets: {keys:?}",
            requests.join("\n")
        )
    }

    /// Kills the manager (SIGKILL) and starts a new one, keeping the old one's log.
    pub async fn restart_manager(&mut self) -> anyhow::Result<()> {
        if let Some(mut old) = self.manager.take() {
            old.kill().await?;
            self.past_logs.lock().expect("logs").push(old.log());
        }
        self.manager = Some(Manager::start(self.options.clone()).await?);
        Ok(())
    }

    /// `kubectl get certificates` in the scenario's namespace, as a user runs it.
    pub async fn kubectl_get_certificates(&self) -> anyhow::Result<String> {
        let cache = tempfile::tempdir()?;
        let out = tokio::process::Command::new(e2e::harness::kubectl_bin())
            .arg("--kubeconfig")
            .arg(&self.cluster.kubeconfig)
            .arg("--cache-dir")
            .arg(cache.path())
            .args(["get", "certificates", "-n", &self.ns])
            .output()
            .await?;
        anyhow::ensure!(
            out.status.success(),
            "kubectl failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8(out.stdout)?)
    }
}

/// Whether `meta` has a controller owner reference with `uid`.
pub fn controlled_by(meta: &ObjectMeta, uid: Option<&str>) -> bool {
    let Some(uid) = uid else {
        return false;
    };
    meta.owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && r.uid == uid)
}

/// The revision a request was made for (its `cert-manager.io/certificate-revision`).
pub fn revision_of(cr: &CertificateRequest) -> Option<i64> {
    cr.metadata
        .annotations
        .as_ref()?
        .get("cert-manager.io/certificate-revision")?
        .parse()
        .ok()
}

/// The bytes of `key` in the Secret's data.
pub fn data(secret: &Secret, key: &str) -> Vec<u8> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| b.0.clone())
        .unwrap_or_default()
}

/// The DER SubjectPublicKeyInfo of a PEM private key, through openssl.
pub fn public_key_of(key_pem: &[u8]) -> anyhow::Result<Vec<u8>> {
    openssl(&["pkey", "-pubout", "-outform", "DER"], key_pem)
}

/// The DER SubjectPublicKeyInfo of the leaf of a PEM chain, through openssl.
pub fn public_key_of_leaf(chain_pem: &[u8]) -> anyhow::Result<Vec<u8>> {
    let pem = openssl(&["x509", "-pubkey", "-noout"], chain_pem)?;
    openssl(&["pkey", "-pubin", "-outform", "DER"], &pem)
}

/// The leaf's serial (hex), through openssl.
pub fn serial_of(chain_pem: &[u8]) -> anyhow::Result<String> {
    Ok(
        String::from_utf8(openssl(&["x509", "-noout", "-serial"], chain_pem)?)?
            .trim()
            .to_string(),
    )
}

/// Runs `openssl args` with `input` on stdin; its stdout.
pub fn openssl(args: &[&str], input: &[u8]) -> anyhow::Result<Vec<u8>> {
    use std::io::Write as _;
    let mut child = std::process::Command::new("openssl")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    child.stdin.take().expect("stdin").write_all(input)?;
    let out = child.wait_with_output()?;
    anyhow::ensure!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(out.stdout)
}

impl Env {
    /// The Events regarding Certificate `name`, as `(reason, note)`, oldest first.
    pub async fn events_of(&self, name: &str) -> anyhow::Result<Vec<(String, String)>> {
        self.events_regarding("Certificate", name).await
    }

    /// The Events regarding the `kind` object `name`, as `(reason, note)`, oldest first.
    pub async fn events_regarding(&self, kind: &str, name: &str) -> anyhow::Result<Vec<(String, String)>> {
        let api = Api::<k8s_openapi::api::events::v1::Event>::namespaced(self.client().clone(), &self.ns);
        let mut events: Vec<_> = api
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| {
                e.regarding
                    .as_ref()
                    .is_some_and(|r| r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name))
            })
            .collect();
        events.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
        Ok(events
            .into_iter()
            .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
            .collect())
    }

    /// Signatures simple-cfssl has made so far (0 against an external CA).
    pub fn signed(&self) -> u64 {
        self.ca.issued_count().unwrap_or(0)
    }
}

/// A time as Go's `%s` prints a `metav1.Time` (cert-manager's messages).
pub fn go_time(at: k8s_openapi::jiff::Timestamp) -> String {
    at.strftime("%Y-%m-%d %H:%M:%S +0000 UTC").to_string()
}

/// The status times of a Certificate: (notBefore, notAfter, renewalTime).
pub fn times(
    crt: &Certificate,
) -> (
    k8s_openapi::jiff::Timestamp,
    k8s_openapi::jiff::Timestamp,
    k8s_openapi::jiff::Timestamp,
) {
    let status = crt.status.as_ref().expect("status");
    let at = |t: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| t.as_ref().expect("time").0;
    (
        at(&status.not_before),
        at(&status.not_after),
        at(&status.renewal_time),
    )
}
