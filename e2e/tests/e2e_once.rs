//! Signing exactly once, one leader at a time: issuer churn while hundreds of requests are
//! signed, three replicas with a leader killed mid-load, and SIGTERM while a slow CA signs.
//! Each counts the certificates the CA issued against the requests.
//!
//! These run their own managers and read the in-process API server's audit of each replica,
//! so none runs against a real cluster (`E2E_KUBECONFIG`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kube::api::{Api, ListParams, Patch, PatchParams};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use cfssl_issuer::api::Issuer;
use cfssl_issuer::api::certmanager::CertificateRequest;
use e2e::harness::objects;
use e2e::harness::{Manager, ManagerOptions, OwnManagers, SYSTEM, eventually, load};
use kube_testserver::{AuditEntry, Verb};

const WAIT: Duration = Duration::from_secs(120);
const ISSUER: &str = "team-ca";
const LEASE_NAME: &str = "51059ce8.wikimedia.org";
const LEASE_SECONDS: u64 = 3;

/// The shared scenario, plus what these tests do with it.
struct Env(OwnManagers);

impl std::ops::Deref for Env {
    type Target = OwnManagers;
    fn deref(&self) -> &OwnManagers {
        &self.0
    }
}

impl Env {
    /// `None` against a real cluster.
    async fn start() -> anyhow::Result<Option<Env>> {
        Ok(OwnManagers::start("once").await?.map(Env))
    }

    /// Every request in the namespace, once all `n` are Issued (polling the API, not a manager).
    async fn wait_all_issued(&self, n: usize) -> anyhow::Result<Vec<CertificateRequest>> {
        let api = Api::<CertificateRequest>::namespaced(self.client().clone(), &self.ns);
        eventually(WAIT, &format!("{n} requests Issued"), || async {
            let listed = api.list(&ListParams::default()).await.ok()?.items;
            (listed.iter().filter(|r| load::is_issued(r)).count() >= n).then_some(listed)
        })
        .await
    }
}

/// Each request has a certificate, and the CA signed exactly one per request.
fn assert_signed_once(env: &Env, requests: &[CertificateRequest], n: usize) {
    assert_eq!(requests.len(), n);
    assert_eq!(
        env.ca.issued_count(),
        Some(n as u64),
        "the CA signed once per request"
    );
    for request in requests {
        let has = request.status.as_ref().and_then(|s| s.certificate.as_ref());
        assert!(
            has.is_some_and(|c| !c.0.is_empty()),
            "{:?} has no certificate",
            request.metadata.name
        );
    }
    assert_eq!(
        env.ca.issued_count(),
        Some(n as u64),
        "the CA signed once per request"
    );
}

/// The issuer's status and metadata churn (re-checked every 100 ms, touched every 100 ms, so
/// every pending request is reconciled again from a cache that may not have seen its own
/// Issued write): 500 requests, 500 signatures, no certificate lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issuer_churn_during_500_requests_signs_each_once() -> anyhow::Result<()> {
    const N: usize = 500;
    let Some(env) = Env::start().await? else {
        return Ok(());
    };
    let options = env.options().arg("--health-check-interval=100ms");
    let manager = Manager::start(options).await?;
    env.create_issuer(ISSUER, None).await?;
    let requests = load::requests("churn", N)?;

    let toucher = {
        let api = Api::<Issuer>::namespaced(env.client().clone(), &env.ns);
        tokio::spawn(async move {
            for i in 0u64.. {
                let patch = serde_json::json!({"metadata": {"labels": {"e2e-churn": i.to_string()}}});
                let _ = api
                    .patch(ISSUER, &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    load::create_requests(env.client(), &env.ns, ISSUER, &requests, true, 16).await?;
    let done = env.wait_all_issued(N).await;
    toucher.abort();
    let done = done?;
    // Settle: a late duplicate would show up here.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let reissued = env.ca.issued_count();
    eprintln!("{N} requests under issuer churn: CA signed {reissued:?}");
    assert_signed_once(&env, &done, N);
    let still = Api::<CertificateRequest>::namespaced(env.client().clone(), &env.ns)
        .list(&ListParams::default())
        .await?
        .items;
    assert_eq!(
        still.iter().filter(|r| load::is_issued(r)).count(),
        N,
        "a certificate was dropped after Issued:\n{}",
        manager.log()
    );
    Ok(())
}

/// Per replica, verb and resource, how many requests it made: what a failure needs to show.
fn requests_per_replica(audit: &[AuditEntry]) -> BTreeMap<(String, String, String), usize> {
    let mut counts = BTreeMap::new();
    for e in audit {
        let key = (e.user.clone(), format!("{:?}", e.verb), e.resource.clone());
        *counts.entry(key).or_insert(0) += 1;
    }
    counts
}

/// Per replica, when it first and last wrote anything but its Lease.
fn write_spans(audit: &[AuditEntry]) -> BTreeMap<String, (Instant, Instant)> {
    let mut spans: BTreeMap<String, (Instant, Instant)> = BTreeMap::new();
    let writes = audit.iter().filter(|e| {
        matches!(
            e.verb,
            Verb::Create | Verb::Update | Verb::Patch | Verb::Delete | Verb::DeleteCollection
        ) && e.resource != "leases"
    });
    for e in writes {
        let span = spans.entry(e.user.clone()).or_insert((e.at, e.at));
        span.0 = span.0.min(e.at);
        span.1 = span.1.max(e.at);
    }
    spans
}

/// Three replicas with leader election; the leader is stopped during a load of requests,
/// first as Kubernetes stops a pod (SIGTERM: in-flight signs finish and are saved, then the
/// Lease is released), then the next leader is killed outright (SIGKILL). Only one replica
/// writes at any time. No request is signed twice, except those the killed replica had signed
/// and not yet saved: the CA cannot be asked what it signed, so those are signed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_one_writer_at_a_time_none_signs_twice() -> anyhow::Result<()> {
    const N: usize = 150;
    let Some(env) = Env::start().await? else {
        return Ok(());
    };
    let dir = tempfile::tempdir()?;
    let mut managers = BTreeMap::new();
    for name in ["replica-a", "replica-b", "replica-c"] {
        let kubeconfig = dir.path().join(format!("{name}.kubeconfig"));
        env.server().add_user(name, &kubeconfig)?;
        let options = ManagerOptions::new(&kubeconfig, SYSTEM)
            .arg("--enable-leader-election")
            .arg(format!("--leader-election-namespace={SYSTEM}"))
            .arg(format!("--leader-election-lease-duration={LEASE_SECONDS}s"))
            .env("POD_NAME", name);
        managers.insert(name.to_string(), Manager::start(options).await?);
    }
    let first = eventually(WAIT, "a leader", || holder(&env)).await?;
    env.create_issuer(ISSUER, None).await?;

    // Slow API calls keep the load going across each handover.
    env.server().set_latency(Duration::from_millis(30));
    // Stopped as Kubernetes stops a pod.
    let requests = load::requests("graceful", N)?;
    load::create_requests(env.client(), &env.ns, ISSUER, &requests, true, 16).await?;
    wait_signed(&env, N as u64 / 3).await?;
    let leader = managers.get_mut(&first).expect("the leader is ours");
    let status = leader.terminate(Duration::from_secs(45)).await?;
    assert!(status.success(), "{}", leader.log());
    let left = N - issued_in(&env).await?;
    assert!(left > 0, "the load outlasts the first leader");
    let second = eventually(WAIT, "a new leader", || async {
        holder(&env).await.filter(|h| *h != first)
    })
    .await?;
    let done = env.wait_all_issued(N).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_signed_once(&env, &done, N);

    // Killed outright.
    let requests = load::requests("killed", N)?;
    load::create_requests(env.client(), &env.ns, ISSUER, &requests, true, 16).await?;
    wait_signed(&env, N as u64 + N as u64 / 3).await?;
    managers
        .get_mut(&second)
        .expect("the leader is ours")
        .kill()
        .await?;
    // What the killed replica had sent reaches the CA and the API server, or never will.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let signed_at_kill = env.ca.issued_count().expect("simple-cfssl");
    let saved_at_kill = issued_in(&env).await? as u64;
    let unsaved = signed_at_kill - saved_at_kill;
    let third = eventually(WAIT, "a third leader", || async {
        holder(&env).await.filter(|h| *h != first && *h != second)
    })
    .await?;
    let done = env.wait_all_issued(2 * N).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        saved_at_kill < 2 * N as u64,
        "the load outlasts the second leader"
    );
    eprintln!(
        "leaders {first} (SIGTERM, {left} requests left), {second} (SIGKILL, {} left, {unsaved} \
         signed but unsaved), {third}",
        2 * N as u64 - saved_at_kill
    );
    assert_eq!(done.len(), 2 * N);
    assert_eq!(
        env.ca.issued_count(),
        Some(2 * N as u64 + unsaved),
        "signed twice beyond what the killed replica had not saved"
    );

    let audit = env.server().audit();
    let spans = write_spans(&audit);
    eprintln!("write spans per replica: {spans:?}");
    assert_eq!(
        spans.len(),
        3,
        "each replica led in turn: {spans:?}\nrequests per replica: {:?}",
        requests_per_replica(&audit)
    );
    let mut ordered: Vec<_> = spans.iter().collect();
    ordered.sort_by_key(|(_, (first, _))| *first);
    let order: Vec<&str> = ordered.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(order, [first.as_str(), second.as_str(), third.as_str()]);
    for pair in ordered.windows(2) {
        let ((a, (_, a_last)), (b, (b_first, _))) = (pair[0], pair[1]);
        assert!(a_last < b_first, "{a} and {b} wrote at the same time: {spans:?}");
    }
    Ok(())
}

/// The pod name of the Lease holder (identities are `<pod name>_<random>`).
async fn holder(env: &Env) -> Option<String> {
    let lease = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(env.client().clone(), SYSTEM)
        .get_opt(LEASE_NAME)
        .await
        .ok()
        .flatten()?;
    let identity = lease.spec?.holder_identity?;
    let (name, _) = identity.split_once('_')?;
    Some(name.to_string())
}

async fn wait_signed(env: &Env, n: u64) -> anyhow::Result<()> {
    eventually(WAIT, &format!("{n} certificates signed"), || async {
        (env.ca.issued_count() >= Some(n)).then_some(())
    })
    .await
}

/// Requests in the namespace that are Issued now.
async fn issued_in(env: &Env) -> anyhow::Result<usize> {
    let api = Api::<CertificateRequest>::namespaced(env.client().clone(), &env.ns);
    let listed = api.list(&ListParams::default()).await?.items;
    Ok(listed.iter().filter(|r| load::is_issued(r)).count())
}

/// A TCP proxy in front of the CA that holds each chunk from the manager for `delay`.
struct SlowProxy {
    url: String,
    delay_ms: Arc<AtomicU64>,
    /// Chunks held so far.
    held: Arc<AtomicU64>,
}

impl SlowProxy {
    async fn start(upstream_url: &str) -> anyhow::Result<SlowProxy> {
        let (scheme, rest) = upstream_url.split_once("://").expect("a URL");
        let upstream = rest.trim_end_matches('/').to_string();
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("{scheme}://{}", listener.local_addr()?);
        let (delay_ms, held) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (d, h) = (delay_ms.clone(), held.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (upstream, d, h) = (upstream.clone(), d.clone(), h.clone());
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(&upstream).await {
                        let _ = forward(client, server, d, h).await;
                    }
                });
            }
        });
        Ok(SlowProxy { url, delay_ms, held })
    }

    fn set_delay(&self, delay: Duration) {
        self.delay_ms.store(delay.as_millis() as u64, Ordering::SeqCst);
    }
}

async fn forward(
    client: TcpStream,
    server: TcpStream,
    delay_ms: Arc<AtomicU64>,
    held: Arc<AtomicU64>,
) -> std::io::Result<()> {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let up = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = client_read.read(&mut buf).await?;
            if n == 0 {
                return server_write.shutdown().await;
            }
            let delay = delay_ms.load(Ordering::SeqCst);
            if delay > 0 {
                held.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }
            server_write.write_all(&buf[..n]).await?;
        }
    };
    let down = tokio::io::copy(&mut server_read, &mut client_write);
    let (up, down) = tokio::join!(up, down);
    up.and(down.map(drop))
}

/// SIGTERM while a slow CA is signing: the manager waits for the signature, saves it and exits
/// 0; the next manager finds the request Issued and signs nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_a_slow_ca_signs_saves_the_certificate() -> anyhow::Result<()> {
    let Some(env) = Env::start().await? else {
        return Ok(());
    };
    let proxy = SlowProxy::start(&env.ca.url).await?;
    let mut first = Manager::start(env.options()).await?;
    env.create_issuer(ISSUER, Some(&proxy.url)).await?;

    proxy.set_delay(Duration::from_secs(3));
    let requests = load::requests("slow", 1)?;
    load::create_requests(env.client(), &env.ns, ISSUER, &requests, true, 1).await?;
    eventually(WAIT, "the sign on its way to the CA", || async {
        (proxy.held.load(Ordering::SeqCst) > 0).then_some(())
    })
    .await?;
    assert_eq!(
        env.ca.issued_count(),
        Some(0),
        "SIGTERM goes out before the CA signs"
    );
    let sent = Instant::now();
    let status = first.terminate(Duration::from_secs(45)).await?;
    eprintln!("exit {status} {:?} after SIGTERM", sent.elapsed());
    assert!(status.success(), "{}", first.log());
    let request = objects::get_request(env.client(), &env.ns, &requests[0].0).await?;
    assert!(
        load::is_issued(&request),
        "saved before exit: {:?}\n{}",
        objects::ready_of(&request),
        first.log()
    );
    assert_eq!(env.ca.issued_count(), Some(1));

    proxy.set_delay(Duration::ZERO);
    let second = Manager::start(env.options()).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let again = objects::get_request(env.client(), &env.ns, &requests[0].0).await?;
    assert_eq!(
        again.status,
        request.status,
        "the next manager leaves it as it is:\n{}",
        second.log()
    );
    assert_eq!(env.ca.issued_count(), Some(1), "never a second signature");
    Ok(())
}

/// A leader that loses its Lease (here another holder takes it) stops writing at once, even
/// with a sign in flight: the other replica may be writing already.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_loses_the_lease_writes_nothing_more() -> anyhow::Result<()> {
    let Some(env) = Env::start().await? else {
        return Ok(());
    };
    let proxy = SlowProxy::start(&env.ca.url).await?;
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("replica-a.kubeconfig");
    env.server().add_user("replica-a", &kubeconfig)?;
    let options = ManagerOptions::new(&kubeconfig, SYSTEM)
        .arg("--enable-leader-election")
        .arg(format!("--leader-election-namespace={SYSTEM}"))
        .arg(format!("--leader-election-lease-duration={LEASE_SECONDS}s"))
        .env("POD_NAME", "replica-a");
    let mut manager = Manager::start(options).await?;
    eventually(WAIT, "replica-a leads", || async {
        holder(&env).await.filter(|h| h == "replica-a")
    })
    .await?;
    env.create_issuer(ISSUER, Some(&proxy.url)).await?;

    // The leader learns of the theft at its next renewal, up to two seconds later (a 3 s Lease,
    // renewed 1 s before it ends); the sign is held well past that.
    proxy.set_delay(Duration::from_secs(10));
    let requests = load::requests("stolen", 1)?;
    load::create_requests(env.client(), &env.ns, ISSUER, &requests, true, 1).await?;
    eventually(WAIT, "the sign on its way to the CA", || async {
        (proxy.held.load(Ordering::SeqCst) > 0).then_some(())
    })
    .await?;
    let now = serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
        k8s_openapi::jiff::Timestamp::now(),
    ))?;
    let steal = serde_json::json!({"spec": {
        "holderIdentity": "thief_0", "leaseDurationSeconds": 3600, "acquireTime": now, "renewTime": now,
    }});
    Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(env.client().clone(), SYSTEM)
        .patch(LEASE_NAME, &PatchParams::default(), &Patch::Merge(&steal))
        .await?;
    let stolen = Instant::now();
    let status = manager.wait_exit(Duration::from_secs(30)).await?;
    eprintln!("exit {status} {:?} after the Lease was taken", stolen.elapsed());
    assert!(
        !status.success(),
        "losing the Lease is an error exit:\n{}",
        manager.log()
    );
    let late: Vec<_> = env
        .server()
        .audit()
        .into_iter()
        .filter(|e| e.at > stolen && e.resource.starts_with("certificaterequests"))
        .filter(|e| matches!(e.verb, Verb::Create | Verb::Update | Verb::Patch))
        .collect();
    assert_eq!(
        late,
        vec![],
        "request writes after the Lease was lost:\n{}",
        manager.log()
    );
    Ok(())
}
