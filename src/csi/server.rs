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
use super::metrics::CsiMetrics;
use super::mount::{MountError, Mounts, size};
use super::node::{Issue, NodeService};
use super::proto::identity_server::IdentityServer;
use super::proto::node_server::NodeServer;
use super::rediscover::{Stale, rediscover, stale_event};
use super::renew::Renewer;
use super::store::{Metadata, Mounter, Store, StoreError};
use crate::clock::Clock;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, PostParams};

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
    /// The most volumes this node holds; a Publish past it is refused RESOURCE_EXHAUSTED with a
    /// Warning Event on its Pod. The scheduler does not count inline CSI volumes: size it as the
    /// node's pod limit times the certificate volumes a pod mounts.
    #[arg(long, default_value_t = super::node::DEFAULT_MAX_VOLUMES as u32, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_volumes: u32,
    /// Address of the Prometheus `/metrics` endpoint; `0` (the port) picks a free one.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub metrics_addr: std::net::SocketAddr,
    /// The size limit of the tmpfs that holds the volumes (a Kubernetes quantity, 1Mi to
    /// 1Ti): a volume's files take a few KiB; the limit keeps a flood of volumes from
    /// taking the node's memory. A tmpfs found mounted (a restart) is kept with its size.
    #[arg(long, default_value = "64Mi", value_parser = tmpfs_size)]
    pub tmpfs_size: u64,
    /// The SELinux context of the tmpfs's files (`context=` mount option), so confined pods
    /// can read them through their bind mounts; empty for none.
    #[arg(long, default_value = "")]
    pub mount_context: String,
    /// How many issuances (key, CertificateRequest, wait) run at once, Publishes and renewals
    /// together; the others wait their turn (a Publish within its `--issuance-timeout`).
    #[arg(long, default_value_t = DEFAULT_MAX_CONCURRENT, value_parser = max_concurrent)]
    pub max_concurrent_issuances: usize,
}

fn tmpfs_size(text: &str) -> Result<u64, String> {
    size::parse(text).map_err(|e| e.to_string())
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
    #[error("cannot open the renewal lock {}: {source}", path.display())]
    Lock { path: PathBuf, source: io::Error },
    #[error("cannot serve /metrics on {addr}: {source}")]
    Metrics {
        addr: std::net::SocketAddr,
        source: io::Error,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("gRPC server: {0}")]
    Serve(#[from] tonic::transport::Error),
    #[error(transparent)]
    Mount(#[from] MountError),
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

/// Mounts the store's tmpfs (or finds it), then sorts the volumes an earlier run left; the
/// issued volumes with a live mount, for their renewal.
async fn restart(
    mounts: &Mounts,
    store: &Store,
    args: &CsiArgs,
    client: &kube::Client,
    metrics: &CsiMetrics,
    clock: &Clock,
) -> Result<Vec<(String, Metadata)>, ServeError> {
    let tmpfs = mounts.ensure_tmpfs(args.tmpfs_size, &args.mount_context)?;
    let root = tmpfs.entry.mount_point.display().to_string();
    tracing::info!(%root, reused = tmpfs.reused, "volume store's tmpfs");
    let found = rediscover(store, &mounts.table()?, &tmpfs.entry)?;
    for (volume, fate) in &found.removed {
        tracing::info!(%volume, ?fate, "removed a volume left by an earlier run");
    }
    for volume in &found.foreign {
        tracing::warn!(%volume, "not a volume of this store (no metadata); left untouched");
    }
    for stale in &found.stale {
        metrics.stale_mount();
        report_stale(stale, &args.node_id, client, clock()).await;
    }
    tracing::info!(
        live = found.live.len(),
        pending = found.pending.len(),
        "volumes rediscovered"
    );
    Ok(found.live)
}

/// A warning, and an Event on the pod when its metadata names it (a courtesy: a failure to
/// post it is logged, never a reason not to start).
async fn report_stale(stale: &Stale, node_id: &str, client: &kube::Client, now: jiff::Timestamp) {
    let target = stale.target.display().to_string();
    tracing::warn!(volume = %stale.volume, %target, "stale mount: the pod does not see its volume's current files");
    let Some(pod) = &stale.pod else {
        return;
    };
    let event = stale_event(stale, pod, node_id, now);
    let events: Api<Event> = Api::namespaced(client.clone(), &pod.namespace);
    if let Err(error) = events.create(&PostParams::default(), &event).await {
        tracing::warn!(%error, volume = %stale.volume, "cannot post the stale mount's Event on the pod");
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
    let root = args.data_root.join("volumes");
    let store = Store::open(&root)?;
    let client = kube::Client::try_default().await?;
    let mounts = Mounts::new(&root)?;
    let clock = crate::clock::system_clock();
    let metrics = Arc::new(CsiMetrics::new(store.clone(), clock.clone()));
    let live = restart(&mounts, &store, &args, &client, &metrics, &clock).await?;
    let collector = Collector::new(client.clone(), store.clone(), args.pending_max_age, clock.clone());
    tokio::spawn(collector.run());
    let metrics_at = super::metrics::serve(args.metrics_addr, metrics.clone())
        .await
        .map_err(|source| ServeError::Metrics {
            addr: args.metrics_addr,
            source,
        })?;
    let issuer = CertificateRequests::new(
        client,
        store.clone(),
        &args.node_id,
        args.issuance_timeout,
        clock.clone(),
    )
    .with_max_concurrent(args.max_concurrent_issuances)
    .with_metrics(metrics.clone());
    let issuer = Arc::new(issuer);
    let renewer = Renewer::new(issuer.clone(), store.clone(), clock).with_metrics(metrics.clone());
    renewer.hold_until(renewal_lock(&args.data_root)?);
    // Each live volume's timer at its stored time (rediscovery removed the orphans and left
    // the stale ones out): none due yet asks the API anything.
    let armed = arm(&renewer, &live);
    ready.set();
    tracing::info!(endpoint = %args.endpoint, node = %args.node_id, metrics = %metrics_at, armed, "CSI plugin serving");
    let identity = IdentityService::new(&args.driver_name, ready);
    let node = NodeService::new(&args.node_id, store, Arc::new(mounts), issuer)
        .with_max_volumes(args.max_volumes as usize)
        .with_metrics(metrics)
        .with_renewer(renewer);
    serve(listener, identity, node, terminated()).await
}

/// The node's renewal lock, `<data-root>/renew.lock` (an flock, on the host's data directory
/// beside the tmpfs): taken for the plugin's life, so a plugin started beside another (a
/// DaemonSet's surge) renews nothing until the other has exited; the kernel releases it
/// however a plugin ends. The future completes once it is held.
fn renewal_lock(data_root: &Path) -> Result<impl Future<Output = ()> + Send + 'static, ServeError> {
    use rustix::fs::{FlockOperation, flock};
    let path = data_root.join("renew.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| ServeError::Lock { path, source })?;
    Ok(async move {
        let taken = tokio::task::spawn_blocking(move || {
            if flock(&file, FlockOperation::NonBlockingLockExclusive).is_err() {
                tracing::info!(
                    "another plugin on this node holds the renewal lock; renewals wait for it to exit"
                );
                flock(&file, FlockOperation::LockExclusive)?;
            }
            // Held until the process exits.
            std::mem::forget(file);
            Ok::<_, rustix::io::Errno>(())
        });
        match taken.await {
            Ok(Ok(())) => tracing::info!("renewal lock held"),
            Ok(Err(error)) => tracing::warn!(%error, "cannot take the renewal lock; renewing anyway"),
            Err(error) => tracing::warn!(%error, "cannot take the renewal lock; renewing anyway"),
        }
    })
}

/// Arms the renewal of each issued volume of `live`; how many.
fn arm(renewer: &Renewer, live: &[(String, Metadata)]) -> usize {
    let due = live
        .iter()
        .filter_map(|(id, m)| m.next_issuance_time.map(|due| (id, due)));
    due.map(|(id, due)| renewer.arm(id, due)).count()
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

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        csi: CsiArgs,
    }

    #[test]
    fn the_tmpfs_flags_default_to_64mi_and_no_context() {
        use clap::Parser as _;
        let parse = |args: &[&str]| {
            Cli::try_parse_from([&["csi", "--node-id", "n"], args].concat())
                .map(|c| (c.csi.tmpfs_size, c.csi.mount_context))
        };
        assert_eq!(parse(&[]).unwrap(), (64 << 20, String::new()));
        let context = "system_u:object_r:container_file_t:s0";
        assert_eq!(
            parse(&["--tmpfs-size", "1Gi", "--mount-context", context]).unwrap(),
            (1 << 30, context.to_string())
        );
        let error = parse(&["--tmpfs-size", "64MB"]).unwrap_err().to_string();
        assert!(error.contains("\"64MB\" is not a quantity like 64Mi"), "{error}");
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

    /// Rediscovery's report of a stale mount: one Warning Event on the pod its metadata names,
    /// through events.k8s.io; a refused post is only logged (the plugin starts anyway), and a
    /// stale mount whose volume names no pod posts nothing.
    #[tokio::test]
    async fn a_stale_mount_posts_one_warning_event_on_its_pod() {
        use crate::csi::attributes::PodInfo;
        use crate::csi::testing::{answer, next_call};
        const STEP: Duration = Duration::from_secs(5);
        let (service, mut handle) =
            tower_test::mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
        let client = kube::Client::new(service, "default");
        let pod = PodInfo {
            name: "web-0".into(),
            namespace: "shop".into(),
            uid: "u-1".into(),
            service_account: "web".into(),
        };
        let mut stale = Stale {
            volume: "csi-1".into(),
            target: "/var/lib/kubelet/pods/u-1/volumes/kubernetes.io~csi/tls/mount".into(),
            pod: Some(pod),
        };
        let reporter = client.clone();
        // The restart's clock, not the system's: the Event says when it was seen.
        let at: jiff::Timestamp = "2026-05-01T10:00:00Z".parse().unwrap();
        let report = tokio::spawn(async move {
            report_stale(&stale, "node-1", &reporter, at).await;
            stale
        });
        let (method, uri, body, send) = next_call(&mut handle, STEP).await;
        assert_eq!(
            (method, uri.as_str()),
            (
                http::Method::POST,
                "/apis/events.k8s.io/v1/namespaces/shop/events?"
            )
        );
        let said = |key: &str| body.pointer(key).and_then(serde_json::Value::as_str);
        assert_eq!(
            [
                said("/type"),
                said("/reason"),
                said("/regarding/uid"),
                said("/reportingInstance"),
                said("/eventTime")
            ],
            [
                Some("Warning"),
                Some("StaleVolumeMount"),
                Some("u-1"),
                Some("cfssl-issuer-csi-node-1"),
                Some("2026-05-01T10:00:00.000000Z")
            ]
        );
        let refused =
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "code": 500, "reason": "InternalError"});
        answer(send, http::StatusCode::INTERNAL_SERVER_ERROR, &refused);
        stale = tokio::time::timeout(STEP, report)
            .await
            .expect("done in time")
            .unwrap();

        stale.pod = None;
        tokio::time::timeout(STEP, report_stale(&stale, "node-1", &client, at))
            .await
            .expect("done in time");
        drop(client);
        assert!(handle.next_request().await.is_none(), "no further call");
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
