//! What the CSI scenarios share: the plugin run in this process on a unix socket, its mounts a
//! fake (the real ones need root: `tests/csi_mounts.rs`), driven over gRPC as kubelet drives it; it
//! renews the volumes it issued, as `cfssl-issuer csi` does.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use cfssl_issuer::csi::identity::{IdentityService, Ready};
use cfssl_issuer::csi::issue::CertificateRequests;
use cfssl_issuer::csi::node::NodeService;
use cfssl_issuer::csi::renew::Renewer;
use cfssl_issuer::csi::server::{listen, serve};
use cfssl_issuer::csi::store::{Mounter, Store};
use kube_testserver::TestServer;
use tonic::transport::Channel;

pub const GROUP: &str = "cfssl-issuer.wikimedia.org";

/// Every line the plugins of this test binary log, at debug level for every crate (the kube
/// client's own lines included): a scenario reads it back to check what never reaches a log.
pub fn logged() -> String {
    String::from_utf8_lossy(&LOG.get_or_init(Default::default).lock().expect("log")).into_owned()
}

static LOG: OnceLock<Mutex<Vec<u8>>> = OnceLock::new();

/// Appends to [`LOG`].
struct Capture;

impl std::io::Write for Capture {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        LOG.get_or_init(Default::default)
            .lock()
            .expect("log")
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the capturing subscriber once per test binary.
fn capture_logs() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("debug"))
            .with_writer(|| Capture)
            .with_ansi(false)
            .try_init();
    });
}

/// Records mounts; kubelet's target is never touched.
#[derive(Default)]
pub struct FakeMounts(Mutex<Vec<PathBuf>>);

impl Mounter for FakeMounts {
    fn mount(&self, _: &Path, target: &Path) -> std::io::Result<()> {
        self.0.lock().expect("mounts").push(target.to_path_buf());
        Ok(())
    }
    fn unmount(&self, target: &Path) -> std::io::Result<()> {
        self.0.lock().expect("mounts").retain(|t| t != target);
        Ok(())
    }
    fn is_mounted(&self, _: &Path, target: &Path) -> std::io::Result<bool> {
        Ok(self.0.lock().expect("mounts").iter().any(|t| t == target))
    }
}

/// Where a plugin runs: its files under `dir`, named `name`, as user `user` of `server` (its
/// own, so the audit tells its requests apart), on node `node`.
pub struct Plugin<'a> {
    pub server: &'a TestServer,
    pub dir: &'a Path,
    pub name: &'a str,
    pub user: &'a str,
    pub node: &'a str,
}

impl Plugin<'_> {
    /// Starts the plugin waiting `wait` for each request; its channel and its store's root.
    pub async fn start(&self, wait: Duration) -> anyhow::Result<(Channel, PathBuf)> {
        capture_logs();
        let kubeconfig = self.dir.join(format!("{}.kubeconfig", self.name));
        self.server.add_user(self.user, &kubeconfig)?;
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&kubeconfig)?,
            &kube::config::KubeConfigOptions::default(),
        )
        .await?;
        let client = kube::Client::try_from(config)?;
        let root = self.dir.join(self.name).join("volumes");
        let store = Store::open(&root)?;
        let clock = cfssl_issuer::clock::system_clock();
        let issuer = Arc::new(CertificateRequests::new(
            client,
            store.clone(),
            self.node,
            wait,
            clock.clone(),
        ));
        let renewer = Renewer::new(issuer.clone(), store.clone(), clock);
        let node =
            NodeService::new(self.node, store, Arc::new(FakeMounts::default()), issuer).with_renewer(renewer);
        let socket = self.dir.join(format!("{}.sock", self.name));
        let identity = IdentityService::new(GROUP, Ready::default());
        tokio::spawn(serve(listen(&socket)?, identity, node, std::future::pending()));
        Ok((e2e::harness::csi::connect(socket).await?, root))
    }
}
