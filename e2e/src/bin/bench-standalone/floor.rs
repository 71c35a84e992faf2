//! The floor under the manager's CPU per Certificate: the API traffic one issuance makes (the
//! manager's requests, counted per verb and resource in phase 1, and the watch events they
//! cause on the manager's four watches), replayed by a process of its own with the manager's
//! client stack (kube's client over TLS, JSON, a one-thread Tokio runtime, mimalloc) and no
//! decisions, no keys and no CA call. What the manager spends above it is what its own code
//! costs; the floor is what any manager talking to an API server this way pays.
//!
//! The bench runs this binary again as the replay (`BENCH_FLOOR_NAMESPACE` set), after the
//! manager has stopped, against Certificates it created beforehand; the replay measures its
//! own CPU from its first write until the Certificate watch shows its last one, and prints it
//! as one JSON line.

mod writes;

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client, Resource, ResourceExt};

use cfssl_issuer::api::certmanager::{Certificate, CertificateRequest};
use cfssl_issuer::pki::keys::KeySpec;
use e2e::harness::{Cluster, cpu, env_or, fleet};
use kube_testserver::Counts;

const NAMESPACE: &str = "BENCH_FLOOR_NAMESPACE";
const COUNT: &str = "BENCH_FLOOR_N";
const CONCURRENCY: &str = "BENCH_FLOOR_CONCURRENCY";
const WAIT: Duration = Duration::from_secs(300);

/// What the replay measured.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct Floor {
    pub n: usize,
    pub cpu_secs: f64,
    pub wall_secs: f64,
    /// The replay's API requests per Certificate, as the test server counted them.
    #[serde(default)]
    pub requests_per: f64,
}

impl Floor {
    pub fn ms_per(&self) -> f64 {
        self.cpu_secs * 1e3 / self.n as f64
    }
}

/// Whether this process was started as the replay.
pub fn is_replay() -> bool {
    std::env::var_os(NAMESPACE).is_some()
}

/// The bench's side: `n` Certificates created (nothing acts on them: the manager has stopped),
/// then the replay run over them as a child process. `counts` reads the test server's counts.
pub async fn measure(
    cluster: &Cluster,
    issuer: &str,
    n: usize,
    concurrency: usize,
    counts: impl Fn() -> Counts,
) -> anyhow::Result<Floor> {
    let namespace = cluster.namespace("floor").await?;
    let certificates = (0..n)
        .map(|i| fleet::certificate(&namespace, &format!("crt-{i:05}"), issuer, KeySpec::Ecdsa(256)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    fleet::create_all(&cluster.client, &namespace, &certificates, 32).await?;
    let before = counts().total();
    let output = tokio::process::Command::new(std::env::current_exe()?)
        .env("KUBECONFIG", &cluster.kubeconfig)
        .env(NAMESPACE, &namespace)
        .env(COUNT, n.to_string())
        .env(CONCURRENCY, concurrency.to_string())
        .output()
        .await?;
    anyhow::ensure!(
        output.status.success(),
        "the replay failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let mut floor: Floor = serde_json::from_slice(&output.stdout)?;
    // Its watches' lists and watches count too; a handful against 17 n.
    floor.requests_per = (counts().total() - before) as f64 / n as f64;
    Ok(floor)
}

/// The replay's side, on a one-thread runtime as the manager's.
pub fn replay() -> anyhow::Result<()> {
    cfssl_issuer::install_crypto_provider();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let floor = runtime.block_on(run())?;
    println!("{}", serde_json::to_string(&floor)?);
    Ok(())
}

async fn run() -> anyhow::Result<Floor> {
    let namespace = std::env::var(NAMESPACE)?;
    let n: usize = env_or(COUNT, 0)?;
    let concurrency: usize = env_or(CONCURRENCY, 8)?;
    let client = Client::try_default().await?;
    let certificates = watches(&client).await?;
    let owned = wait_for(&certificates, &namespace, n, |_| true).await?;
    let material = writes::Material::new()?;
    let meter = cpu::Meter::start(std::process::id()).ok_or(anyhow::anyhow!("no /proc"))?;
    let start = std::time::Instant::now();
    futures::stream::iter(owned.iter())
        .map(|crt| writes::issuance(&client, crt, &material))
        .buffer_unordered(concurrency)
        .try_collect::<()>()
        .await?;
    wait_for(&certificates, &namespace, n, writes::is_done).await?;
    Ok(Floor {
        n,
        cpu_secs: meter.used().unwrap_or_default().as_secs_f64(),
        wall_secs: start.elapsed().as_secs_f64(),
        requests_per: 0.0,
    })
}

/// The manager's four watches in standalone mode, each into a store as its reflectors keep
/// them: Certificates (without managedFields), CertificateRequests, labelled Secrets whole,
/// every Secret's metadata. The Certificate store is returned; the others run on their own.
async fn watches(client: &Client) -> anyhow::Result<Store<Certificate>> {
    let (certificates, writer) = reflector::store();
    let stream = watcher(
        Api::<Certificate>::all(client.clone()),
        watcher::Config::default(),
    )
    .modify(|crt| crt.metadata.managed_fields = None);
    tokio::spawn(reflector::reflector(writer, stream).for_each(|_| async {}));
    let (requests, writer) = reflector::store::<CertificateRequest>();
    let stream = watcher(Api::all(client.clone()), watcher::Config::default());
    tokio::spawn(reflector::reflector(writer, stream).for_each(|_| async {}));
    let (secrets, writer) = reflector::store::<Secret>();
    let labelled = watcher::Config::default().labels("controller.cert-manager.io/fao=true");
    let stream = watcher(Api::all(client.clone()), labelled);
    tokio::spawn(reflector::reflector(writer, stream).for_each(|_| async {}));
    let (metadata, writer) = reflector::store::<PartialObjectMeta<Secret>>();
    let stream = watcher(Api::all(client.clone()), watcher::Config::default());
    tokio::spawn(reflector::reflector(writer, stream).for_each(|_| async {}));
    certificates.wait_until_ready().await?;
    requests.wait_until_ready().await?;
    secrets.wait_until_ready().await?;
    metadata.wait_until_ready().await?;
    Ok(certificates)
}

/// The `n` Certificates of `namespace` once `done` holds for each, as the store shows them.
async fn wait_for(
    store: &Store<Certificate>,
    namespace: &str,
    n: usize,
    done: impl Fn(&Certificate) -> bool,
) -> anyhow::Result<Vec<std::sync::Arc<Certificate>>> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let ready: Vec<_> = store
            .state()
            .into_iter()
            .filter(|c| c.namespace().as_deref() == Some(namespace) && done(c))
            .collect();
        if ready.len() >= n {
            return Ok(ready);
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "{} of {n} {} in {WAIT:?}",
            ready.len(),
            Certificate::plural(&())
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
