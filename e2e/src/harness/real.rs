//! A real etcd and kube-apiserver (built by `scripts/real-peers.sh`) on loopback, one pair per
//! cluster, started as envtest starts them: serving certificates of their own, a
//! service-account signing key, RBAC authorization, and static tokens for the admin and the
//! test users. Selected by `E2E_REAL_PEERS` (the directory holding the binaries); each
//! scenario gets a cluster no other scenario touches, so both CRD sets and many managers can
//! run side by side.

use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context as _;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::process::{Child, Command};

/// The token of the cluster's admin (group `system:masters`).
const ADMIN_TOKEN: &str = "e2e-admin-token";
/// The manager runs as the service account `config/` installs it with, authenticated by a
/// static token: RBAC then grants it exactly what the install grants.
const MANAGER_NAMESPACE: &str = "cfssl-issuer-system";
const MANAGER_USER: &str = "system:serviceaccount:cfssl-issuer-system:cfssl-issuer-controller-manager";
const MANAGER_TOKEN: &str = "e2e-manager-token";

/// The directory with the real peers' binaries, when `make e2e-real` runs the suite.
pub fn peers_dir() -> Option<PathBuf> {
    std::env::var_os("E2E_REAL_PEERS").map(PathBuf::from)
}

/// A running etcd and kube-apiserver; dropping it stops both and removes their data.
pub struct RealServer {
    pub kubeconfig: PathBuf,
    /// As the manager's service account (see [`RealServer::install_manager_rbac`]).
    pub manager_kubeconfig: PathBuf,
    pub url: String,
    apiserver: Child,
    etcd: Child,
    dir: tempfile::TempDir,
}

impl RealServer {
    /// Starts etcd and kube-apiserver from `peers` and waits until the API server is ready.
    /// The ports are free when chosen, not when the peers bind them: another scenario starting
    /// beside this one can take one in between, and then this start is tried again.
    pub async fn start(peers: &Path) -> anyhow::Result<RealServer> {
        let mut tries = 3;
        loop {
            match Self::start_once(peers).await {
                Err(err) if tries > 1 && err.to_string().contains("address already in use") => {
                    tries -= 1;
                }
                started => return started,
            }
        }
    }

    async fn start_once(peers: &Path) -> anyhow::Result<RealServer> {
        let dir = tempfile::tempdir()?;
        let pki = Pki::write(dir.path())?;
        // Chosen together, so that no two of them are the same port.
        let [client_port, peer_port, port] = free_ports()?;
        let etcd = spawn(
            peers,
            "etcd",
            &etcd_args(dir.path(), client_port, peer_port),
            dir.path(),
        )?;
        let args = apiserver_args(&pki, client_port, port);
        let apiserver = spawn(peers, "kube-apiserver", &args, dir.path())?;
        let url = format!("https://127.0.0.1:{port}");
        let kubeconfig = dir.path().join("kubeconfig");
        kube_testserver::write_kubeconfig(
            &kubeconfig,
            &url,
            Some(&pki.ca_pem),
            Some(ADMIN_TOKEN),
            "default",
        )?;
        let manager_kubeconfig = dir.path().join("manager-kubeconfig");
        let (ca, token) = (Some(pki.ca_pem.as_str()), Some(MANAGER_TOKEN));
        kube_testserver::write_kubeconfig(&manager_kubeconfig, &url, ca, token, MANAGER_NAMESPACE)?;
        let mut server = RealServer {
            kubeconfig,
            manager_kubeconfig,
            url,
            apiserver,
            etcd,
            dir,
        };
        server.wait_ready(Duration::from_secs(120)).await?;
        Ok(server)
    }

    /// A client acting as the admin.
    pub async fn client(&self) -> anyhow::Result<Client> {
        let parsed = Kubeconfig::read_from(&self.kubeconfig)?;
        let config = kube::Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default()).await?;
        Ok(Client::try_from(config)?)
    }

    /// A client acting as the admin impersonating `user` (no groups but `system:authenticated`):
    /// RBAC and admission policies then judge that user's requests.
    pub async fn impersonating(&self, user: &str) -> anyhow::Result<Client> {
        let parsed = Kubeconfig::read_from(&self.kubeconfig)?;
        let mut config = kube::Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default()).await?;
        config.auth_info.impersonate = Some(user.to_string());
        config.auth_info.impersonate_groups = Some(vec!["system:authenticated".to_string()]);
        Ok(Client::try_from(config)?)
    }

    /// Grants the manager's service account what a user's install grants it: the RBAC of
    /// `config/default` with the `certificate-controllers` component, rendered by kubectl's
    /// kustomize and applied as the admin.
    pub async fn install_manager_rbac(&self) -> anyhow::Result<()> {
        self.install_manager_rbac_with(&["certificate-controllers"]).await
    }

    /// Grants the manager's service account the RBAC of `config/default` with `components`
    /// (more grants add to those already installed: RBAC only ever allows).
    pub async fn install_manager_rbac_with(&self, components: &[&str]) -> anyhow::Result<()> {
        use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
        let client = self.client().await?;
        let docs = super::rbac::render(self.dir.path(), components)?;
        // The manager's, and those the Roles live in (a namespace-scoped install's served ones).
        let mut wanted: std::collections::BTreeSet<&str> = docs
            .iter()
            .filter_map(|d| d["metadata"]["namespace"].as_str())
            .collect();
        wanted.insert(MANAGER_NAMESPACE);
        let namespaces = kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone());
        for name in wanted {
            let ns: k8s_openapi::api::core::v1::Namespace =
                serde_json::from_value(serde_json::json!({ "metadata": { "name": name } }))?;
            match namespaces.create(&Default::default(), &ns).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(err) => return Err(err.into()),
            }
        }
        let params = PatchParams::apply("e2e").force();
        for doc in docs {
            let object: DynamicObject = serde_json::from_value(doc.clone())?;
            let types = object.types.as_ref().context("apiVersion and kind")?;
            let gvk = GroupVersionKind::try_from(types)?;
            let resource = ApiResource::from_gvk(&gvk);
            let name = object.metadata.name.clone().unwrap_or_default();
            let api: kube::Api<DynamicObject> = match &object.metadata.namespace {
                Some(ns) => kube::Api::namespaced_with(client.clone(), ns, &resource),
                None => kube::Api::all_with(client.clone(), &resource),
            };
            api.patch(&name, &params, &Patch::Apply(&doc))
                .await
                .with_context(|| format!("apply {} {name}", gvk.kind))?;
        }
        Ok(())
    }

    /// What the two processes wrote, for a failure message.
    pub fn logs(&self) -> String {
        let read = |name: &str| {
            std::fs::read_to_string(self.dir.path().join(format!("{name}.log"))).unwrap_or_default()
        };
        let tail = |s: String| {
            s.lines()
                .rev()
                .take(40)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n")
        };
        format!(
            "--- etcd\n{}\n--- kube-apiserver\n{}",
            tail(read("etcd")),
            tail(read("kube-apiserver"))
        )
    }

    /// Polls `/readyz` (every post-start hook, the RBAC bootstrap among them) until it
    /// answers `ok`.
    async fn wait_ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let client = self.client().await?;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let exited = [
                ("etcd", self.etcd.try_wait()?),
                ("kube-apiserver", self.apiserver.try_wait()?),
            ];
            if let Some((name, Some(status))) = exited.into_iter().find(|(_, status)| status.is_some()) {
                anyhow::bail!("{name} exited with {status}:\n{}", self.logs());
            }
            let request = http::Request::get("/readyz").body(Vec::new())?;
            if let Ok(body) = client.request_text(request).await
                && body.trim() == "ok"
            {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                anyhow::bail!("kube-apiserver not ready after {timeout:?}:\n{}", self.logs());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

fn spawn(peers: &Path, name: &str, args: &[String], dir: &Path) -> anyhow::Result<Child> {
    let log = std::fs::File::create(dir.join(format!("{name}.log")))?;
    Command::new(peers.join(name))
        .args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| {
            format!(
                "start {} (built by scripts/real-peers.sh)",
                peers.join(name).display()
            )
        })
}

/// Ports free now, each different: every listener is held until all are bound.
fn free_ports<const N: usize>() -> anyhow::Result<[u16; N]> {
    let listeners = (0..N)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut ports = [0; N];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener.local_addr()?.port();
    }
    Ok(ports)
}

fn etcd_args(dir: &Path, client: u16, peer: u16) -> Vec<String> {
    let client_url = format!("http://127.0.0.1:{client}");
    let peer_url = format!("http://127.0.0.1:{peer}");
    vec![
        format!("--data-dir={}", dir.join("etcd").display()),
        format!("--listen-client-urls={client_url}"),
        format!("--advertise-client-urls={client_url}"),
        format!("--listen-peer-urls={peer_url}"),
        format!("--initial-advertise-peer-urls={peer_url}"),
        format!("--initial-cluster=default={peer_url}"),
        // A test cluster lives for one scenario: no fsync, no metrics port.
        "--unsafe-no-fsync".into(),
        "--log-level=warn".into(),
    ]
}

fn apiserver_args(pki: &Pki, etcd_port: u16, port: u16) -> Vec<String> {
    let path = |p: &PathBuf| p.display().to_string();
    vec![
        format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
        "--bind-address=127.0.0.1".into(),
        "--advertise-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
        format!("--cert-dir={}", path(&pki.dir)),
        format!("--tls-cert-file={}", path(&pki.serving_cert)),
        format!("--tls-private-key-file={}", path(&pki.serving_key)),
        format!("--client-ca-file={}", path(&pki.ca)),
        format!("--token-auth-file={}", path(&pki.tokens)),
        format!("--service-account-key-file={}", path(&pki.service_account_pub)),
        format!(
            "--service-account-signing-key-file={}",
            path(&pki.service_account_key)
        ),
        "--service-account-issuer=https://kubernetes.default.svc".into(),
        "--service-cluster-ip-range=10.0.0.0/24".into(),
        "--authorization-mode=RBAC".into(),
        "--allow-privileged=true".into(),
        // No controller-manager runs to create service accounts for pods; no pods run.
        "--disable-admission-plugins=ServiceAccount".into(),
        "--v=1".into(),
    ]
}

/// The files kube-apiserver is started with.
struct Pki {
    dir: PathBuf,
    ca: PathBuf,
    ca_pem: String,
    serving_cert: PathBuf,
    serving_key: PathBuf,
    service_account_key: PathBuf,
    service_account_pub: PathBuf,
    tokens: PathBuf,
}

impl Pki {
    fn write(root: &Path) -> anyhow::Result<Pki> {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, SanType};
        let dir = root.join("pki");
        std::fs::create_dir_all(&dir)?;
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::new())?;
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "e2e real-peers CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_pem = ca_params.self_signed(&ca_key)?.pem();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let serving_key = KeyPair::generate()?;
        let mut serving = CertificateParams::new(vec!["localhost".into(), "kubernetes.default.svc".into()])?;
        serving
            .subject_alt_names
            .push(SanType::IpAddress(Ipv4Addr::LOCALHOST.into()));
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        let serving_pem = serving.signed_by(&serving_key, &issuer)?.pem();
        let pki = Pki {
            ca: dir.join("ca.crt"),
            serving_cert: dir.join("apiserver.crt"),
            serving_key: dir.join("apiserver.key"),
            service_account_key: dir.join("sa.key"),
            service_account_pub: dir.join("sa.pub"),
            tokens: dir.join("tokens.csv"),
            ca_pem,
            dir,
        };
        std::fs::write(&pki.ca, &pki.ca_pem)?;
        std::fs::write(&pki.serving_cert, serving_pem)?;
        std::fs::write(&pki.serving_key, serving_key.serialize_pem())?;
        let service_account = KeyPair::generate()?;
        std::fs::write(&pki.service_account_key, service_account.serialize_pem())?;
        std::fs::write(&pki.service_account_pub, service_account.public_key_pem())?;
        std::fs::write(
            &pki.tokens,
            format!(
                "{ADMIN_TOKEN},e2e-admin,e2e-admin,\"system:masters\"\n\
                 {MANAGER_TOKEN},{MANAGER_USER},e2e-manager,\"system:serviceaccounts,system:serviceaccounts:{MANAGER_NAMESPACE}\"\n"
            ),
        )?;
        Ok(pki)
    }
}

/// cert-manager's controller (`cert-manager-controller`, built by `scripts/real-peers.sh`)
/// acting in one namespace; dropping it stops the process.
pub struct CertManager {
    child: Child,
    dir: tempfile::TempDir,
}

impl CertManager {
    /// Starts it against `kubeconfig` in `namespace` with cert-manager's `--controllers` list
    /// (`*` for all, `-name` to leave one out).
    pub fn start(
        peers: &Path,
        kubeconfig: &Path,
        namespace: &str,
        controllers: &str,
    ) -> anyhow::Result<CertManager> {
        let dir = tempfile::tempdir()?;
        let args = [
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--namespace={namespace}"),
            format!("--controllers={controllers}"),
        ];
        let child = spawn(peers, "cert-manager-controller", &args, dir.path())?;
        Ok(CertManager { child, dir })
    }

    /// Its log so far, and whether it exited.
    pub fn log(&mut self) -> String {
        let path = self.dir.path().join("cert-manager-controller.log");
        let exited = match self.child.try_wait() {
            Ok(Some(status)) => format!("(exited: {status})\n"),
            _ => String::new(),
        };
        format!("{exited}{}", std::fs::read_to_string(path).unwrap_or_default())
    }
}
