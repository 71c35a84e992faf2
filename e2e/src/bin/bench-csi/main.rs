//! `cargo run --release -p e2e --bin bench-csi`: the CSI node plugin under a node's load. One
//! run: the in-process API server, simple-cfssl, the manager binary in standalone mode (its
//! approver approves the plugin's requests on what the live Pods say, then it signs them), and
//! the plugin binary with real mounts, all on this machine:
//! 1. new volumes published one after another with a Ready issuer: Publish latency;
//! 2. each published again: latency, and the plugin's API requests (none expected);
//! 3. 110 Publishes at once (a node's default pod limit): time, and requests created;
//! 4. volumes added up to `BENCH_CSI_VOLUMES`, then the plugin idle: its RSS and CPU;
//! 5. the plugin killed (SIGKILL) and started again: time to a ready Probe, and requests made
//!    for volumes not due (none expected);
//! 6. `BENCH_CSI_RENEW` volumes from an issuer whose profile lasts 150 s, all due within a
//!    minute: each renewed before 5/6 of its lifetime, and the plugin's writes per renewal.
//!
//! Figures are printed with their targets and ok/MISSED, never asserted. Mounts need root
//! (CAP_SYS_ADMIN): the bench re-runs itself in a private mount namespace (`unshare -m`), so
//! nothing it mounts outlives it; without root it says so and stops.
//!
//! Environment: `BENCH_CSI_SEQUENTIAL` (100), `BENCH_CSI_VOLUMES` (1000), `BENCH_CSI_RENEW`
//! (1000; 0 skips the renewal phase), `BENCH_CSI_IDLE_SECS` (10).

mod phases;
mod plugin;
mod renewal;

use std::time::Duration;

use e2e::harness::objects::{self, Kind};
use e2e::harness::{Ca, Cluster, Manager, ManagerOptions, env_or, manager_binary};

const SYSTEM: &str = "cfssl-issuer-system";
const WAIT: Duration = Duration::from_secs(60);
/// Set in the re-run inside the private mount namespace.
const IN_NAMESPACE: &str = "BENCH_CSI_MOUNT_NAMESPACE";

/// What the phases share.
pub struct Env {
    pub cluster: Cluster,
    pub _ca: Ca,
    pub manager: Manager,
    pub ns: String,
    pub dir: tempfile::TempDir,
    pub kubeconfig: std::path::PathBuf,
}

impl Env {
    pub fn server(&self) -> &kube_testserver::TestServer {
        self.cluster.server().expect("in-process server")
    }
}

/// Issuers `fast` (profile `server`, 720h) and `renewing` (150 s) in the bench's namespace.
async fn start() -> anyhow::Result<Env> {
    let cluster = Cluster::start().await?;
    anyhow::ensure!(
        cluster.server().is_some(),
        "bench-csi runs on the in-process API server"
    );
    let ca = Ca::simple(false).await?;
    cluster.ensure_namespace(SYSTEM).await?;
    let dir = tempfile::tempdir()?;
    let manager_config = dir.path().join("manager.kubeconfig");
    cluster
        .server()
        .expect("in-process")
        .add_user("manager", &manager_config)?;
    let options = ManagerOptions::new(&manager_config, SYSTEM)
        .arg("--certificate-controllers")
        .arg("--concurrency=16");
    let manager = Manager::start(options).await?;
    let ns = cluster.namespace("bench-csi").await?;
    cluster.put_key_secret(&ns, "ca-key", &ca.key_hex).await?;
    for (issuer, profile) in [("fast", "server"), ("renewing", "renewing-150s")] {
        let spec = objects::issuer_spec(&ca, "ca-key", profile);
        objects::create_issuer(&cluster.client, Kind::Issuer, &ns, issuer, spec).await?;
        objects::wait_issuer_reason(&cluster.client, Kind::Issuer, &ns, issuer, "Checked", WAIT).await?;
    }
    let kubeconfig = dir.path().join("plugin.kubeconfig");
    cluster
        .server()
        .expect("in-process")
        .add_user(plugin::PLUGIN_USER, &kubeconfig)?;
    Ok(Env {
        cluster,
        _ca: ca,
        manager,
        ns,
        dir,
        kubeconfig,
    })
}

/// Runs this binary again in a private mount namespace, once: its mounts end with it.
fn in_own_mount_namespace() -> anyhow::Result<Option<std::process::ExitStatus>> {
    if std::env::var_os(IN_NAMESPACE).is_some() {
        return Ok(None);
    }
    let status = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private"])
        .arg(std::env::current_exe()?)
        .env(IN_NAMESPACE, "1")
        .status()?;
    Ok(Some(status))
}

fn main() -> anyhow::Result<()> {
    if !is_root() {
        println!(
            "bench-csi: skipped, not root (the plugin mounts tmpfs and binds, which needs CAP_SYS_ADMIN)"
        );
        return Ok(());
    }
    if let Some(status) = in_own_mount_namespace()? {
        anyhow::ensure!(status.success(), "bench-csi in its mount namespace: {status}");
        return Ok(());
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

/// The effective user is root, from `/proc` (the `Uid:` line's second field).
fn is_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let uid = status.lines().find_map(|l| l.strip_prefix("Uid:"));
    uid.and_then(|ids| ids.split_whitespace().nth(1)) == Some("0")
}

async fn run() -> anyhow::Result<()> {
    let sequential: usize = env_or("BENCH_CSI_SEQUENTIAL", 100)?;
    let volumes: usize = env_or("BENCH_CSI_VOLUMES", 1000)?;
    let renew: usize = env_or("BENCH_CSI_RENEW", 1000)?;
    let idle = Duration::from_secs(env_or("BENCH_CSI_IDLE_SECS", 10)?);
    let env = start().await?;
    let binary = manager_binary();
    println!(
        "bench-csi: plugin {}, {} CPUs",
        binary.display(),
        std::thread::available_parallelism().map_or(1, usize::from)
    );
    let max = volumes + renew + 110 + sequential;
    let node = plugin::Plugin::start(&binary, &env.dir.path().join("node"), &env.kubeconfig, max).await?;
    let mut pods = phases::sequential(&env, &node, sequential).await?;
    let again = format!("2. the same {sequential} volumes published again");
    phases::republish(&env, &node, &pods, &again).await?;
    pods.extend(phases::burst(&env, &node, 110).await?);
    phases::fill(&env, &node, &mut pods, volumes).await?;
    let full = format!(
        "2b. the same {sequential} again, {} volumes on the node",
        pods.len()
    );
    phases::republish(&env, &node, &pods[..sequential], &full).await?;
    phases::idle(&node, idle)?;
    let node = phases::restart(&env, node, &binary, max).await?;
    if renew > 0 {
        renewal::renewal(&env, &node, renew).await?;
    }
    node.kill().await
}
