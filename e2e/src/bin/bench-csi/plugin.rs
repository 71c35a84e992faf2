//! The node plugin as kubelet meets it: the real `cfssl-issuer csi` binary on a unix socket,
//! with its own user on the in-process API server (so the audit tells its requests apart),
//! killed and started again on the same data root; and the Pods whose volumes it serves.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cfssl_issuer::csi::approval::volume_handle;
use cfssl_issuer::csi::proto::identity_client::IdentityClient;
use cfssl_issuer::csi::proto::node_client::NodeClient;
use cfssl_issuer::csi::proto::{NodePublishVolumeRequest, ProbeRequest};
use e2e::harness::csi::{self, PodRef};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube_testserver::{TestServer, Verb};
use tokio::process::{Child, Command};
use tonic::transport::Channel;

pub const NODE: &str = "bench-node";
pub const PLUGIN_USER: &str = "csi-bench-node";

/// A running plugin and where it keeps its volumes.
pub struct Plugin {
    child: Child,
    pub channel: Channel,
    pub dir: PathBuf,
    pub started: Instant,
}

impl Plugin {
    /// Starts the plugin binary on `dir` (its socket, data root and kubelet's targets) and
    /// waits until its Probe says ready.
    pub async fn start(
        binary: &Path,
        dir: &Path,
        kubeconfig: &Path,
        max_volumes: usize,
    ) -> anyhow::Result<Plugin> {
        std::fs::create_dir_all(dir)?;
        let socket = dir.join("csi.sock");
        let started = Instant::now();
        let child = Command::new(binary)
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "warn")
            .args(["csi", "--node-id", NODE, "--metrics-addr", "127.0.0.1:0"])
            .arg(format!("--endpoint=unix://{}", socket.display()))
            .arg(format!("--data-root={}", dir.join("data").display()))
            .arg(format!("--max-volumes={max_volumes}"))
            .kill_on_drop(true)
            .spawn()?;
        let channel = ready(&socket).await?;
        Ok(Plugin {
            child,
            channel,
            dir: dir.to_path_buf(),
            started,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id().unwrap_or_default()
    }

    /// SIGKILL, as a node's OOM killer or a crashed container does.
    pub async fn kill(mut self) -> anyhow::Result<()> {
        self.child.kill().await?;
        Ok(())
    }

    pub fn node(&self) -> NodeClient<Channel> {
        NodeClient::new(self.channel.clone())
    }

    /// The resident set, from `/proc`.
    pub fn rss_mib(&self) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib / 1024.0)
    }

    /// kubelet's target for volume `tls` of the pod with `uid`.
    pub fn target(&self, uid: &str) -> String {
        let target = self.dir.join("kubelet/pods").join(uid).join("volumes/tls/mount");
        target.display().to_string()
    }
}

/// Connects once the socket exists and Probe answers ready.
async fn ready(socket: &Path) -> anyhow::Result<Channel> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if socket.exists()
            && let Ok(channel) = csi::connect(socket.to_path_buf()).await
        {
            let probe = IdentityClient::new(channel.clone()).probe(ProbeRequest {}).await;
            if probe.is_ok_and(|p| p.into_inner().ready == Some(true)) {
                return Ok(channel);
            }
        }
        anyhow::ensure!(Instant::now() < deadline, "the plugin is not ready after 30 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A Pod scheduled to [`NODE`] with inline volume `tls` of our driver, as the approver reads it.
pub struct PodVolume {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub issuer: String,
}

impl PodVolume {
    fn attributes(&self) -> std::collections::BTreeMap<String, String> {
        csi::attributes(&[
            ("csi.cert-manager.io/issuer-name", &self.issuer),
            (
                "csi.cert-manager.io/dns-names",
                "${POD_NAME}.${POD_NAMESPACE}.svc",
            ),
            ("csi.cert-manager.io/key-algorithm", "ECDSA"),
        ])
    }

    /// Creates the Pod.
    pub async fn create(
        client: &kube::Client,
        namespace: &str,
        name: String,
        issuer: &str,
    ) -> anyhow::Result<PodVolume> {
        let mut volume = PodVolume {
            name: name.clone(),
            namespace: namespace.into(),
            uid: String::new(),
            issuer: issuer.into(),
        };
        let pod = csi::pod_with_volume(&name, NODE, &volume.attributes())?;
        let created = Api::<Pod>::namespaced(client.clone(), namespace)
            .create(&PostParams::default(), &pod)
            .await?;
        volume.uid = created.metadata.uid.unwrap_or_default();
        Ok(volume)
    }

    pub fn volume_id(&self) -> String {
        volume_handle(&self.uid, "tls")
    }

    /// kubelet's Publish of the volume onto `target`.
    pub fn publish(&self, target: String) -> NodePublishVolumeRequest {
        let pod = PodRef {
            name: &self.name,
            namespace: &self.namespace,
            uid: &self.uid,
        };
        csi::publish_request(&self.volume_id(), target, pod, self.attributes())
    }
}

/// The plugin's API requests so far: all of them, and its writes.
pub fn plugin_requests(server: &TestServer) -> (usize, usize) {
    let audit = server.audit();
    let mine = audit.iter().filter(|e| e.user == PLUGIN_USER);
    let (mut all, mut writes) = (0, 0);
    for entry in mine {
        all += 1;
        if !matches!(entry.verb, Verb::Get | Verb::List | Verb::Watch) {
            writes += 1;
        }
    }
    (all, writes)
}

/// CertificateRequests the plugin created so far.
pub fn requests_created(server: &TestServer) -> usize {
    let audit = server.audit();
    audit
        .iter()
        .filter(|e| e.user == PLUGIN_USER && e.verb == Verb::Create && e.resource == "certificaterequests")
        .count()
}
