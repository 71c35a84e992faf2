//! Faults survived under load: N requests created at once (`FAULTS_N`, default 1,000; `make
//! chaos` runs 10,000) while the CA goes down for a minute, the API server fails writes and
//! drops watches, the manager is SIGKILLed three times, or the CA signs slowly. Each scenario
//! counts what the CA signed per request (simple-cfssl counts signatures per public key, and
//! each request has a key of its own) and prints one line of figures, `fault <name>: ...`,
//! which the README quotes.
//!
//! The first three scenarios run one at a time (a static lock): each signs N requests as fast
//! as the manager can, and on a two-core machine three at once starve each other, so the
//! figures (time to recover, signed-but-unsaved at a kill) would measure the contention. The
//! slow-CA scenario runs beside them: it waits on its CA (2 s a sign, 8 at a time), its short
//! bursts of work hardly load the machine, and its throughput, bound by the CA's latency,
//! tolerates the others' bursts; serialised, it would add its ~250 s to their ~90 s.
//!
//! These run their own managers, CAs and API servers, so none runs against a real cluster.

use std::fmt;
use std::io::Write as _;
use std::time::Duration;

use kube::api::{Api, ListParams};
use tokio::time::Instant;

use cfssl_issuer::api::certmanager::CertificateRequest;
use e2e::harness::{Csr, Manager, ManagerOptions, OwnManagers, SYSTEM, env_or, eventually, load};

const ISSUER: &str = "fault-ca";
/// The manager's `--concurrency` (its default): reconciles in flight per controller, so at
/// most this many requests can be signed and not yet saved when it is killed.
const CONCURRENCY: u64 = 8;
const CREATE_CONCURRENCY: usize = 16;

/// One scenario at a time (see the module docs).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn n() -> usize {
    env_or("FAULTS_N", 1000).expect("FAULTS_N is a number")
}

/// A wait that grows with N: `base` plus `per_thousand` for each 1,000 requests.
fn scaled(base: u64, per_thousand: u64) -> Duration {
    Duration::from_secs(base + per_thousand * n().div_ceil(1000) as u64)
}

/// What a scenario reports: the line the README quotes.
struct Figures {
    scenario: &'static str,
    requests: usize,
    signatures: u64,
    issued: usize,
    lost: usize,
    duplicates: u64,
    /// The scenario's own figures.
    extra: String,
}

impl fmt::Display for Figures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "fault {}: {} requests, {} signatures, {} issued, {} lost, {} duplicates, {}",
            self.scenario,
            self.requests,
            self.signatures,
            self.issued,
            self.lost,
            self.duplicates,
            self.extra
        )
    }
}

/// A scenario's cluster, CA, Issuer and requests (not yet created).
struct Scenario {
    env: OwnManagers,
    requests: Vec<(String, Csr)>,
    name: &'static str,
}

impl Scenario {
    /// `None` against a real cluster.
    async fn start(name: &'static str) -> anyhow::Result<Option<Scenario>> {
        let Some(env) = OwnManagers::start("faults").await? else {
            return Ok(None);
        };
        let requests = load::requests(name, n())?;
        Ok(Some(Scenario { env, requests, name }))
    }

    async fn create_requests(&self) -> anyhow::Result<()> {
        let env = &self.env;
        load::create_requests(
            env.client(),
            &env.ns,
            ISSUER,
            &self.requests,
            true,
            CREATE_CONCURRENCY,
        )
        .await
    }

    fn signed(&self) -> u64 {
        self.env.ca.issued_count().expect("simple-cfssl")
    }

    /// Waits for `at_least` signatures; on timeout prints the state.
    async fn wait_signed(&self, at_least: u64, timeout: Duration, manager: &Manager) -> anyhow::Result<()> {
        let waited = eventually(timeout, &format!("{at_least} signatures"), || async {
            (self.signed() >= at_least).then_some(())
        })
        .await;
        if waited.is_err() {
            self.print_state(manager).await;
        }
        waited
    }

    async fn list(&self) -> anyhow::Result<Vec<CertificateRequest>> {
        let api = Api::<CertificateRequest>::namespaced(self.env.client().clone(), &self.env.ns);
        Ok(api.list(&ListParams::default()).await?.items)
    }

    /// Waits until every request is Issued; on timeout prints what there is instead.
    async fn wait_all_issued(&self, timeout: Duration, manager: &Manager) -> anyhow::Result<()> {
        let env = &self.env;
        let waited = load::wait_all_issued(env.client(), &env.ns, self.requests.len(), timeout).await;
        if let Err(err) = &waited {
            eprintln!("fault {}: {err:#}", self.name);
            self.print_state(manager).await;
        }
        waited.map(drop)
    }

    /// Counts by Ready reason, the requests signed twice and the manager log's tail.
    async fn print_state(&self, manager: &Manager) {
        match self.list().await {
            Ok(listed) => eprintln!("requests by Ready: {:?}", load::by_ready_reason(&listed)),
            Err(err) => eprintln!("requests could not be listed: {err:#}"),
        }
        if let Some(tally) = load::signatures_per_request(&self.env.ca, &self.requests) {
            eprintln!(
                "signatures per request: {} once, {} never, more: {:?}",
                tally.once,
                tally.never.len(),
                &tally.more[..tally.more.len().min(20)]
            );
        }
        let log = manager.log();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(40)..].join("\n");
        eprintln!("manager log, last 40 lines:\n{tail}");
    }

    /// The figures once the run is over (after a short settle, so a late duplicate shows).
    async fn figures(&self, extra: String) -> anyhow::Result<(Figures, load::PerRequest)> {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let issued = self.list().await?.iter().filter(|r| load::is_issued(r)).count();
        let tally = load::signatures_per_request(&self.env.ca, &self.requests).expect("simple-cfssl");
        let figures = Figures {
            scenario: self.name,
            requests: self.requests.len(),
            signatures: self.signed(),
            issued,
            lost: self.requests.len() - issued,
            duplicates: tally.duplicates(),
            extra,
        };
        // Straight to stderr, past the test harness's capture, so `make test` shows it.
        let _ = writeln!(std::io::stderr().lock(), "{figures}");
        Ok((figures, tally))
    }
}

/// The CA down for 60 s in the middle of the run (every call gets a proxy's 503): nothing is
/// lost, every request is signed exactly once, and all are Issued within 60 s of its return.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ca_down_for_60s_loses_nothing_and_signs_each_once() -> anyhow::Result<()> {
    const OUTAGE: Duration = Duration::from_secs(60);
    let _serial = SERIAL.lock().await;
    let Some(s) = Scenario::start("ca-down-60s").await? else {
        return Ok(());
    };
    let started = Instant::now();
    let manager = Manager::start(s.env.options()).await?;
    s.env.create_issuer(ISSUER, None).await?;
    s.create_requests().await?;
    let n = s.requests.len() as u64;
    s.wait_signed(n / 3, scaled(60, 60), &manager).await?;
    assert!(s.env.ca.set_available(false));
    let down_at = s.signed();
    tokio::time::sleep(OUTAGE).await;
    let during = s.signed() - down_at;
    assert!(s.env.ca.set_available(true));
    let back = Instant::now();
    assert!(down_at < n, "the outage came before the last signature");
    let waited = s.wait_all_issued(OUTAGE + scaled(60, 60), &manager).await;
    let recovered = back.elapsed();
    let extra = format!(
        "all Issued {:.1} s after the CA returned (down 60 s after {down_at} signatures; {:.0} s in all)",
        recovered.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    let (figures, tally) = s.figures(extra).await?;
    waited?;
    assert!(
        during <= CONCURRENCY,
        "only signs already past the outage switch: {during}"
    );
    assert_eq!(figures.lost, 0);
    assert_eq!(
        (tally.once, tally.never.len(), tally.more.len()),
        (s.requests.len(), 0, 0),
        "each signed once: {tally:?}"
    );
    assert_eq!(figures.signatures, n);
    assert!(
        recovered <= OUTAGE,
        "all Issued within 60 s of the CA's return, not {recovered:?}"
    );
    Ok(())
}

/// The API server fails 5% of the manager's writes with 500 InternalError and 2% with 409
/// Conflict, and drops every watch every 5 s: nothing is lost and nothing signed twice (a
/// certificate whose status write failed is written again, not signed again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flaky_api_server_loses_nothing_and_signs_nothing_twice() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let Some(s) = Scenario::start("api-flaky").await? else {
        return Ok(());
    };
    let started = Instant::now();
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("manager.kubeconfig");
    let server = s.env.server();
    server.add_user("manager", &kubeconfig)?;
    let manager = Manager::start(ManagerOptions::new(&kubeconfig, SYSTEM)).await?;
    s.env.create_issuer(ISSUER, None).await?;
    server.set_fault_rates(Some(kube_testserver::FaultRates::new(5, 2, 15).user("manager")));
    server.drop_watches_every(Some(Duration::from_secs(5)));
    let watches_before = manager_watches(server);
    s.create_requests().await?;
    let waited = s.wait_all_issued(scaled(60, 90), &manager).await;
    let took = started.elapsed();
    let (tally, drops) = (server.rate_tally(), server.watch_closes());
    let rewatches = manager_watches(server) - watches_before;
    server.set_fault_rates(None);
    server.drop_watches_every(None);
    let extra = format!(
        "all Issued in {:.1} s; of {} manager writes {} answered 500 and {} 409; watches dropped {drops} times, the manager watched again {rewatches} times",
        took.as_secs_f64(),
        tally.writes,
        tally.internal_errors,
        tally.conflicts
    );
    let (figures, per) = s.figures(extra).await?;
    waited?;
    assert_eq!(figures.lost, 0);
    assert_eq!(figures.duplicates, 0, "signed twice: {:?}", per.more);
    assert_eq!(per.never, Vec::<String>::new());
    assert!(drops == 0 || rewatches > 0, "the manager resumed its watches");
    assert!(
        tally.internal_errors > 0 && tally.conflicts > 0,
        "faults were injected: {tally:?}"
    );
    Ok(())
}

/// Signatures per request now, in the order of `s.requests`.
fn signatures_now(s: &Scenario) -> Vec<u32> {
    s.requests
        .iter()
        .map(|(_, csr)| s.env.ca.signatures_for(csr).expect("simple-cfssl"))
        .collect()
}

/// Watch requests the added user `manager` made so far.
fn manager_watches(server: &kube_testserver::TestServer) -> usize {
    let audit = server.audit();
    audit
        .iter()
        .filter(|e| e.user == "manager" && e.verb == kube_testserver::Verb::Watch)
        .count()
}

/// What one SIGKILL left: the requests the killed manager had signed (their count went up
/// since `before`, the counts at the previous kill) that the API server does not show Issued.
/// A request left so by an earlier kill and not yet signed again is not counted twice.
fn signed_unsaved(s: &Scenario, before: &[u32], listed: &[CertificateRequest]) -> (Vec<String>, Vec<u32>) {
    let issued: std::collections::HashSet<&str> = listed
        .iter()
        .filter(|r| load::is_issued(r))
        .filter_map(|r| r.metadata.name.as_deref())
        .collect();
    let now = signatures_now(s);
    let unsaved = s
        .requests
        .iter()
        .zip(before.iter().zip(&now))
        .filter(|((name, _), (then, now))| now > then && !issued.contains(name.as_str()))
        .map(|((name, _), _)| name.clone())
        .collect();
    (unsaved, now)
}

/// The manager SIGKILLed three times during the run (at a quarter, half and three quarters of
/// the signatures) and started again: nothing is lost; a request is signed again only when a
/// killed manager had signed it and not saved it, and each kill leaves at most `--concurrency`
/// such requests (one per reconcile in flight).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_killed_three_times_loses_nothing() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let Some(s) = Scenario::start("manager-killed-3x").await? else {
        return Ok(());
    };
    let started = Instant::now();
    let options = s.env.options().arg(format!("--concurrency={CONCURRENCY}"));
    let mut manager = Manager::start(options.clone()).await?;
    s.env.create_issuer(ISSUER, None).await?;
    s.create_requests().await?;
    let n = s.requests.len() as u64;
    let (mut unsaved_per_kill, mut at_risk) = (Vec::new(), std::collections::BTreeSet::new());
    let mut counts = vec![0; s.requests.len()];
    for quarter in 1..=3 {
        s.wait_signed(n * quarter / 4, scaled(60, 60), &manager).await?;
        manager.kill().await?;
        // What the killed manager had sent reaches the CA and the API server, or never will.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (unsaved, now) = signed_unsaved(&s, &counts, &s.list().await?);
        counts = now;
        unsaved_per_kill.push(unsaved.len() as u64);
        at_risk.extend(unsaved);
        manager = Manager::start(options.clone()).await?;
    }
    let waited = s.wait_all_issued(scaled(60, 60), &manager).await;
    let extra = format!(
        "signed and unsaved at each kill {unsaved_per_kill:?} (bound {CONCURRENCY} each), all Issued in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let (figures, per) = s.figures(extra).await?;
    waited?;
    assert_eq!(figures.lost, 0);
    assert_eq!(per.never, Vec::<String>::new());
    for unsaved in &unsaved_per_kill {
        assert!(
            *unsaved <= CONCURRENCY,
            "more signed and unsaved than in flight: {unsaved_per_kill:?}"
        );
    }
    let beyond: Vec<_> = per
        .more
        .iter()
        .filter(|(name, _)| !at_risk.contains(name))
        .collect();
    assert_eq!(
        beyond,
        Vec::<&(String, u32)>::new(),
        "signed twice without being unsaved at a kill"
    );
    assert_eq!(
        figures.duplicates,
        unsaved_per_kill.iter().sum::<u64>(),
        "one extra signature per request a kill left signed and unsaved"
    );
    assert_eq!(figures.signatures, n + figures.duplicates);
    Ok(())
}

/// Resident memory and signatures, sampled once a second.
struct Sample {
    at: Instant,
    signed: u64,
    rss_kib: u64,
}

/// Signatures per second between the first sample at or past `from` signatures and the first
/// at or past `to`, and the samples in between.
fn steady(samples: &[Sample], from: u64, to: u64) -> Option<(f64, &[Sample])> {
    let first = samples.iter().position(|s| s.signed >= from)?;
    let last = samples.iter().position(|s| s.signed >= to)?;
    let (a, b) = (&samples[first], &samples[last]);
    let secs = (b.at - a.at).as_secs_f64();
    (secs > 0.0).then(|| ((b.signed - a.signed) as f64 / secs, &samples[first..=last]))
}

/// A slow CA (2 s per sign) with `--concurrency 8`: throughput is concurrency / latency (4 a
/// second) within 20% over the steady part (10% to 90% of the signatures), and the manager's
/// memory stays flat: the mean of the last five samples of that part is at most 10% (or
/// 2 MiB, whichever is more) above the mean of the first five.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_ca_is_used_at_full_concurrency_with_flat_memory() -> anyhow::Result<()> {
    const DELAY: Duration = Duration::from_secs(2);
    let Some(s) = Scenario::start("slow-ca-2s").await? else {
        return Ok(());
    };
    let options = s.env.options().arg(format!("--concurrency={CONCURRENCY}"));
    let manager = Manager::start(options).await?;
    s.env.create_issuer(ISSUER, None).await?;
    assert!(s.env.ca.set_sign_delay(DELAY));
    let started = Instant::now();
    s.create_requests().await?;
    let n = s.requests.len() as u64;
    let expected = CONCURRENCY as f64 / DELAY.as_secs_f64();
    let budget = Duration::from_secs_f64(n as f64 / expected * 1.5) + Duration::from_secs(60);
    let mut samples = Vec::new();
    let sampling = async {
        loop {
            let rss_kib = manager.rss_kib().unwrap_or(0);
            samples.push(Sample {
                at: Instant::now(),
                signed: s.signed(),
                rss_kib,
            });
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    };
    let waited = tokio::select! {
        waited = s.wait_all_issued(budget, &manager) => waited,
        () = sampling => unreachable!("sampling never ends"),
    };
    let took = started.elapsed();
    let (rate, part) = steady(&samples, n / 10, n * 9 / 10).unwrap_or((0.0, &[]));
    let mean = |s: &[Sample]| s.iter().map(|s| s.rss_kib).sum::<u64>() / s.len().max(1) as u64;
    let (first, last) = (
        mean(&part[..part.len().min(5)]),
        mean(&part[part.len().saturating_sub(5)..]),
    );
    let extra = format!(
        "{rate:.2} signatures/s over the steady part (expected {expected:.1}), RSS {:.1} -> {:.1} MiB, all Issued in {:.1} s",
        first as f64 / 1024.0,
        last as f64 / 1024.0,
        took.as_secs_f64()
    );
    let (figures, per) = s.figures(extra).await?;
    waited?;
    assert_eq!(figures.lost, 0);
    assert_eq!((figures.duplicates, per.never.len()), (0, 0));
    assert!(
        part.len() >= 10,
        "a steady part of at least 10 s: {} samples",
        part.len()
    );
    assert!(
        (rate - expected).abs() <= expected * 0.2,
        "{rate:.2}/s is not {expected}/s within 20%"
    );
    assert!(
        last <= first + (first / 10).max(2048),
        "RSS grew from {first} KiB to {last} KiB"
    );
    Ok(())
}
