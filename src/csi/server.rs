//! `cfssl-issuer csi`: the Identity and Node services on kubelet's unix socket.

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use std::time::Duration;

use tokio::net::UnixListener;

use super::collect::Collector;
use super::identity::{DRIVER_NAME, IdentityService, Ready};
use super::issue::{CertificateRequests, DEFAULT_MAX_CONCURRENT};
use super::node::{Issue, NodeService};
use super::proto::identity_server::IdentityServer;
use super::proto::node_server::NodeServer;
use super::renew::Renewer;
use super::store::{Mounter, Store, StoreError};

/// The node plugin's flags, named as csi-driver names them.
#[derive(Debug, clap::Args)]
pub struct CsiArgs {
    /// The gRPC endpoint kubelet and the sidecars reach: `unix:///path/csi.sock`.
    #[arg(long, env = "CSI_ENDPOINT", default_value = "unix:///plugin/csi.sock")]
    pub endpoint: String,
    /// This node's name (the pod's `spec.nodeName`), answered by NodeGetInfo. It must be the
    /// name: standalone mode's approver checks a request's node label against the hash of its
    /// Pod's `spec.nodeName`.
    #[arg(long, env = "NODE_ID")]
    pub node_id: String,
    /// Where the volumes are kept; on a host, never under /tmp (cleaners delete it).
    #[arg(long, default_value = "/csi-data-dir")]
    pub data_root: PathBuf,
    /// The CSI driver name (the CSIDriver object's, and a pod's `csi.driver`).
    #[arg(long, default_value = DRIVER_NAME)]
    pub driver_name: String,
    /// How long a Publish waits for its CertificateRequest to be approved and issued (a Go
    /// duration). Below kubelet's 2-minute limit on a CSI call, so the plugin answers
    /// DEADLINE_EXCEEDED itself and kubelet's retry resumes the same request and key.
    #[arg(long, default_value = "60s", value_parser = wait_duration)]
    pub issuance_timeout: Duration,
    /// How long a volume may wait for its first certificate (its request never approved or
    /// issued) before its request and store entry are collected; the pod's next Publish then
    /// asks again. A volume whose pod is gone is collected at the next pass (every 5m).
    #[arg(long, default_value = "1h", value_parser = max_age)]
    pub pending_max_age: Duration,
    /// How many issuances (key, CertificateRequest, wait) run at once, Publishes and renewals
    /// together; the others wait their turn (a Publish within its `--issuance-timeout`).
    #[arg(long, default_value_t = DEFAULT_MAX_CONCURRENT, value_parser = max_concurrent)]
    pub max_concurrent_issuances: usize,
}

/// A positive Go duration.
fn max_age(text: &str) -> Result<Duration, String> {
    let parsed = crate::certificates::go::parse_go_duration(text).map_err(|e| e.to_string())?;
    Duration::try_from(parsed)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("{text:?} is not a positive duration"))
}

/// A whole number of issuances, at least one.
fn max_concurrent(text: &str) -> Result<usize, String> {
    text.parse::<usize>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{text:?} is not a whole number of issuances, at least 1"))
}

/// The longest `--issuance-timeout`: kubelet gives up on a CSI call after 2 minutes, and an
/// answer it no longer waits for is lost.
pub const MAX_ISSUANCE_TIMEOUT: Duration = Duration::from_secs(110);

/// A Go duration between 1 s and [`MAX_ISSUANCE_TIMEOUT`].
pub fn wait_duration(text: &str) -> Result<Duration, String> {
    let parsed = crate::certificates::go::parse_go_duration(text).map_err(|e| e.to_string())?;
    let wait = Duration::try_from(parsed).map_err(|_| format!("{text:?} is negative"))?;
    if wait < Duration::from_secs(1) || wait > MAX_ISSUANCE_TIMEOUT {
        return Err(format!(
            "{text:?} is not between 1s and {}s (kubelet waits 2m for a Publish)",
            MAX_ISSUANCE_TIMEOUT.as_secs()
        ));
    }
    Ok(wait)
}

/// Why the plugin cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("--endpoint {0:?} is not unix://<path>")]
    Endpoint(String),
    #[error("cannot listen on {}: {source}", path.display())]
    Listen { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("gRPC server: {0}")]
    Serve(#[from] tonic::transport::Error),
    #[error("no Kubernetes client (in-cluster or KUBECONFIG): {0}")]
    Kube(#[from] kube::Error),
}

/// The socket path of `unix:///abs/path` (or `unix://rel/path`, as csi-driver's chart
/// writes it, relative to the working directory).
pub fn socket_path(endpoint: &str) -> Result<PathBuf, ServeError> {
    match endpoint.strip_prefix("unix://") {
        Some(path) if !path.is_empty() && path != "/" => Ok(PathBuf::from(path)),
        _ => Err(ServeError::Endpoint(endpoint.to_string())),
    }
}

/// Listens on `path`, replacing a socket a previous run left (a restarted plugin must
/// come back on the same path kubelet registered).
pub fn listen(path: &Path) -> Result<UnixListener, ServeError> {
    let failed = |source| ServeError::Listen {
        path: path.to_path_buf(),
        source,
    };
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(failed(e)),
    }
    UnixListener::bind(path).map_err(failed)
}

/// Serves Identity and Node on `listener` until `shutdown`; every other CSI method is
/// answered UNIMPLEMENTED by the router, as the spec asks of a plugin without it.
pub async fn serve<I: Issue, M: Mounter>(
    listener: UnixListener,
    identity: IdentityService,
    node: NodeService<I, M>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let incoming = futures::stream::unfold(listener, |listener| async move {
        let next = listener.accept().await.map(|(stream, _)| stream);
        Some((next, listener))
    });
    tonic::transport::Server::builder()
        .add_service(IdentityServer::new(identity))
        .add_service(NodeServer::new(node))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await?;
    Ok(())
}

/// Real mounts (tmpfs, read-only binds) come next; this mounter mounts nothing, so a Publish
/// issues and writes the volume, then fails at the mount.
pub struct NoMounts;

impl Mounter for NoMounts {
    fn mount(&self, _: &Path, _: &Path) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this build cannot mount volumes yet",
        ))
    }

    fn unmount(&self, _: &Path) -> io::Result<()> {
        Ok(())
    }

    fn is_mounted(&self, _: &Path) -> io::Result<bool> {
        Ok(false)
    }
}

async fn terminated() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

async fn start(args: CsiArgs) -> Result<(), ServeError> {
    let path = socket_path(&args.endpoint)?;
    let listener = listen(&path)?;
    let ready = Ready::default();
    let store = Store::open(&args.data_root.join("volumes"))?;
    let client = kube::Client::try_default().await?;
    let clock = crate::clock::system_clock();
    let collector = Collector::new(client.clone(), store.clone(), args.pending_max_age, clock.clone());
    tokio::spawn(collector.run());
    let issuer = CertificateRequests::new(
        client,
        store.clone(),
        &args.node_id,
        args.issuance_timeout,
        clock.clone(),
    )
    .with_max_concurrent(args.max_concurrent_issuances);
    let issuer = Arc::new(issuer);
    let renewer = Renewer::new(issuer.clone(), store.clone(), clock);
    // Each issued volume's timer at its stored time: none due yet asks the API anything.
    let armed = renewer.arm_issued()?;
    ready.set();
    tracing::info!(endpoint = %args.endpoint, node = %args.node_id, armed, "CSI plugin serving");
    let identity = IdentityService::new(&args.driver_name, ready);
    let node = NodeService::new(&args.node_id, store, Arc::new(NoMounts), issuer).with_renewer(renewer);
    serve(listener, identity, node, terminated()).await
}

/// `cfssl-issuer csi`.
pub async fn run(args: CsiArgs) -> ExitCode {
    match start(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issuance_timeouts_stay_under_kubelets_limit() {
        let cases = [
            ("60s", Ok(Duration::from_secs(60))),
            ("1s", Ok(Duration::from_secs(1))),
            ("1m50s", Ok(Duration::from_secs(110))),
            (
                "2m",
                Err("\"2m\" is not between 1s and 110s (kubelet waits 2m for a Publish)".to_string()),
            ),
            (
                "500ms",
                Err("\"500ms\" is not between 1s and 110s (kubelet waits 2m for a Publish)".to_string()),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(wait_duration(text), want, "{text}");
        }
        assert!(wait_duration("soon").is_err());
    }

    #[test]
    fn max_concurrent_issuances_are_at_least_one() {
        let cases = [
            ("32", Ok(32)),
            ("1", Ok(1)),
            (
                "0",
                Err("\"0\" is not a whole number of issuances, at least 1".to_string()),
            ),
            (
                "-1",
                Err("\"-1\" is not a whole number of issuances, at least 1".to_string()),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(max_concurrent(text), want, "{text}");
        }
    }

    #[test]
    fn pending_max_ages_are_positive() {
        let cases = [
            ("1h", Ok(Duration::from_secs(3600))),
            ("0s", Err("\"0s\" is not a positive duration".to_string())),
            ("-1h", Err("\"-1h\" is not a positive duration".to_string())),
        ];
        for (text, want) in cases {
            assert_eq!(max_age(text), want, "{text}");
        }
    }
}
