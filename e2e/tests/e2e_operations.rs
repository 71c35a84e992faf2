//! Running the manager: probes, metrics, leader election, graceful shutdown and crash restarts,
//! through the real binary against the in-process API server and simple-cfssl.
//!
//! Every scenario here starts, stops or kills managers and reads the API server's request
//! counts, so none runs against a real cluster (`E2E_KUBECONFIG`).

use std::collections::BTreeSet;
use std::time::Duration;

use futures::future::try_join_all;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use x509_parser::prelude::*;

use e2e::harness::objects::{self, Kind};
use e2e::harness::scrape::{Exposition, scrape};
use e2e::harness::{Csr, Manager, ManagerOptions, OwnManagers, SYSTEM, eventually};
use kube_testserver::{Count, Verb};

const GROUP: &str = "cfssl-issuer.wikimedia.org";
const WAIT: Duration = Duration::from_secs(60);
/// The manager's default Lease name.
const LEASE_NAME: &str = "51059ce8.wikimedia.org";
/// Short, so takeovers stay quick in CI.
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
    /// `None` against a real cluster, where the suite cannot start or kill managers.
    async fn start() -> anyhow::Result<Option<Env>> {
        Ok(OwnManagers::start("ops").await?.map(Env))
    }

    /// A manager that competes for the Lease as `name` (its identity is `name_<random>`).
    fn candidate(&self, name: &str) -> ManagerOptions {
        self.options()
            .arg("--enable-leader-election")
            .arg("--leader-election-namespace")
            .arg(SYSTEM)
            .arg("--leader-election-lease-duration")
            .arg(format!("{LEASE_SECONDS}s"))
            .env("POD_NAME", name)
    }

    /// Creates the Issuer `team-ca` and its Secret (some manager must lead to check it).
    async fn create_issuer(&self) -> anyhow::Result<()> {
        self.cluster
            .put_key_secret(&self.ns, "team-ca", &self.ca.key_hex)
            .await?;
        let spec = objects::issuer_spec(&self.ca, "team-ca", "server");
        objects::create_issuer(self.client(), Kind::Issuer, &self.ns, "team-ca", spec).await
    }

    async fn wait_issuer_checked(&self) -> anyhow::Result<()> {
        objects::wait_issuer_reason(self.client(), Kind::Issuer, &self.ns, "team-ca", "Checked", WAIT).await
    }

    /// Creates and approves a request to `team-ca`.
    async fn request(&self, name: &str) -> anyhow::Result<()> {
        let csr = Csr::new(&format!("{name}.{}.svc", self.ns))?;
        objects::create_request(
            self.client(),
            &self.ns,
            name,
            GROUP,
            "Issuer",
            "team-ca",
            &csr.pem,
        )
        .await?;
        objects::approve(self.client(), &self.ns, name).await
    }

    async fn wait_issued(&self, name: &str) -> anyhow::Result<k8s_openapi::ByteString> {
        let issued = objects::wait_request_reason(self.client(), &self.ns, name, "Issued", WAIT).await?;
        Ok(issued
            .status
            .and_then(|s| s.certificate)
            .expect("an Issued request has a certificate"))
    }

    /// Names of the requests whose Ready reason is `Issued` now.
    async fn issued_now(&self, names: &[String]) -> anyhow::Result<BTreeSet<String>> {
        let mut issued = BTreeSet::new();
        for name in names {
            let request = objects::get_request(self.client(), &self.ns, name).await?;
            if objects::ready_of(&request).is_some_and(|(_, reason)| reason == "Issued") {
                issued.insert(name.clone());
            }
        }
        Ok(issued)
    }

    fn leases(&self) -> Api<Lease> {
        Api::namespaced(self.client().clone(), SYSTEM)
    }

    /// The Lease's holderIdentity, if the Lease exists and is held.
    async fn holder(&self) -> Option<String> {
        self.leases()
            .get_opt(LEASE_NAME)
            .await
            .ok()
            .flatten()?
            .spec?
            .holder_identity
    }

    /// Waits until the candidate started as `name` holds the Lease.
    async fn wait_holder(&self, name: &str, timeout: Duration) -> anyhow::Result<String> {
        let prefix = format!("{name}_");
        eventually(timeout, &format!("the Lease held by {name}"), || async {
            self.holder().await.filter(|h| h.starts_with(&prefix))
        })
        .await
    }
}

/// Writes other than to Leases: what a manager that does not lead must never send.
fn writes_besides_leases(rows: Vec<Count>) -> Vec<Count> {
    rows.into_iter()
        .filter(|c| {
            matches!(
                c.verb,
                Verb::Create | Verb::Update | Verb::Patch | Verb::Delete | Verb::DeleteCollection
            ) && c.resource != "leases"
        })
        .collect()
}

fn request_names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:02}")).collect()
}

/// `/healthz` answers as soon as the server listens; `/readyz` only once the caches synced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_waits_for_the_caches_healthz_does_not() -> anyhow::Result<()> {
    let Some(env) = Env::start().await? else {
        return Ok(());
    };
    // Every API call takes this long, so the initial lists keep the caches unsynced a while.
    env.server().set_latency(Duration::from_millis(1500));
    let mut options = env.options();
    options.wait_ready = false;
    let mut manager = Manager::start(options).await?;

    let healthz = eventually(Duration::from_secs(30), "/healthz to answer", || async {
        manager.probe("/healthz").await.ok()
    })
    .await?;
    assert_eq!(healthz.0, 200, "/healthz: {healthz:?}");
    let readyz = manager.probe("/readyz").await?;
    assert_eq!(readyz.0, 503, "/readyz before the caches synced: {readyz:?}");
    assert!(!manager.log().contains("caches synced"), "{}", manager.log());

    env.server().set_latency(Duration::ZERO);
    manager.wait_ready(Duration::from_secs(30)).await?;
    assert!(manager.log().contains("caches synced"), "{}", manager.log());
    assert_eq!(manager.probe("/healthz").await?.0, 200);
    Ok(())
}

/// An API server error at start is retried, not mistaken for missing CRDs: the manager comes
/// up once the server answers, and a 404 (CRDs really missing) still fails fast.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_survives_api_errors_but_not_missing_crds() -> anyhow::Result<()> {
    let Some(env) = Env::start().await? else {
        return Ok(());
    };
    env.server().inject(
        kube_testserver::Fault::new(kube_testserver::FaultKind::InternalError)
            .verb(Verb::List)
            .resource("issuers")
            .times(3),
    );
    let mut manager = Manager::start(env.options()).await?;
    env.create_issuer().await?;
    env.wait_issuer_checked().await?;
    assert!(manager.log().contains("watchers will retry"), "{}", manager.log());
    manager.terminate(Duration::from_secs(10)).await?;

    // A server without our CRDs answers 404.
    let bare = kube_testserver::TestServer::start(kube_testserver::Options::default()).await?;
    let mut options = ManagerOptions::new(bare.kubeconfig_path(), SYSTEM);
    options.wait_ready = false;
    let mut missing = Manager::start(options).await?;
    let status = missing.wait_exit(Duration::from_secs(30)).await?;
    assert!(!status.success(), "exit status {status}");
    assert!(
        missing.log().contains("are the CRDs installed?"),
        "{}",
        missing.log()
    );
    Ok(())
}

/// After one Issuer is Ready and one request is issued, `/metrics` says so in numbers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_after_one_issuance() -> anyhow::Result<()> {
    let Some(env) = Env::start().await? else {
        return Ok(());
    };
    let manager = Manager::start(env.options()).await?;
    env.create_issuer().await?;
    env.wait_issuer_checked().await?;
    env.request("one").await?;
    let chain = env.wait_issued("one").await?;
    let not_after = {
        let blocks = ::pem::parse_many(&chain.0)?;
        let (_, leaf) = X509Certificate::from_der(blocks[0].contents())?;
        leaf.validity().not_after.timestamp() as f64
    };

    let issuer = format!("Issuer/{}/team-ca", env.ns);
    let issuer_label = [("issuer", issuer.as_str())];
    let expiry_labels = [
        ("namespace", env.ns.as_str()),
        ("name", "one"),
        ("issuer", issuer.as_str()),
    ];
    // The counter moves at the sign; the unsaved gauge and the expiry after the status write and
    // its Event, which may still be under way when the test sees Issued: wait for all three.
    let m: Exposition = eventually(Duration::from_secs(10), "the issuance in the metrics", || async {
        scrape(&manager.metrics_addr).await.ok().filter(|m| {
            m.value("cfssl_issuer_certificates_issued_total", &issuer_label) == Some(1.0)
                && m.value("cfssl_issuer_signed_unsaved_certificates", &[]) == Some(0.0)
                && m.value(
                    "cfssl_issuer_certificate_expiration_timestamp_seconds",
                    &expiry_labels,
                )
                .is_some()
        })
    })
    .await?;

    assert!(
        m.content_type.starts_with("application/openmetrics-text")
            || m.content_type.starts_with("text/plain; version=0.0.4"),
        "content type {:?}",
        m.content_type
    );
    if m.content_type.starts_with("application/openmetrics-text") {
        assert!(m.text.ends_with("# EOF\n"), "OpenMetrics ends with # EOF");
    }
    for (family, kind) in [
        ("cfssl_issuer_certificates_issued", "counter"),
        ("cfssl_issuer_issuer_ready", "gauge"),
        ("cfssl_issuer_reconciles", "counter"),
        ("cfssl_issuer_cfssl_request_duration_seconds", "histogram"),
        ("cfssl_issuer_certificate_expiration_timestamp_seconds", "gauge"),
        ("cfssl_issuer_signed_unsaved_certificates", "gauge"),
    ] {
        assert_eq!(
            m.types.get(family).map(String::as_str),
            Some(kind),
            "# TYPE of {family}"
        );
    }

    assert_eq!(m.value("cfssl_issuer_issuer_ready", &issuer_label), Some(1.0));
    for controller in ["Issuer", "CertificateRequest"] {
        let runs = m
            .value("cfssl_issuer_reconciles_total", &[("controller", controller)])
            .unwrap_or(0.0);
        assert!(runs >= 1.0, "{controller} reconciles: {runs}");
    }

    // One sign: every bucket of its histogram is cumulative and ends at count = 1.
    let sign = [
        ("issuer", issuer.as_str()),
        ("label", "intermediate1"),
        ("call", "sign"),
    ];
    let duration = "cfssl_issuer_cfssl_request_duration_seconds";
    assert_eq!(m.value(&format!("{duration}_count"), &sign), Some(1.0));
    let sum = m.value(&format!("{duration}_sum"), &sign).expect("_sum");
    assert!(sum > 0.0 && sum < 30.0, "sign took {sum} s");
    let bucket_name = format!("{duration}_bucket");
    let mut buckets: Vec<(f64, f64)> = m
        .find(&bucket_name, &sign)
        .map(|s| (s.labels["le"].replace("+Inf", "inf").parse().unwrap(), s.value))
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert!(buckets.len() > 2, "buckets: {buckets:?}");
    assert!(
        buckets.windows(2).all(|w| w[0].1 <= w[1].1),
        "cumulative: {buckets:?}"
    );
    assert_eq!(buckets.last().copied(), Some((f64::INFINITY, 1.0)));
    let checks = m
        .value(
            &format!("{duration}_count"),
            &[("issuer", issuer.as_str()), ("call", "check")],
        )
        .unwrap_or(0.0);
    assert!(checks >= 1.0, "the health check is timed too: {checks}");

    let expiry = m.value(
        "cfssl_issuer_certificate_expiration_timestamp_seconds",
        &expiry_labels,
    );
    assert_eq!(expiry, Some(not_after), "expiry is the leaf's notAfter");
    assert_eq!(env.ca.issued_count(), Some(1));
    Ok(())
}

/// Two candidates: one leads and signs, the other stands by ready; killing the leader hands
/// the Lease over within about its duration, and the new leader signs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_election_failover_on_kill() -> anyhow::Result<()> {
    let Some(env) = Env::start().await? else {
        return Ok(());
    };
    let mut first = Manager::start(env.candidate("manager-a")).await?;
    // The first candidate finds the Lease free and takes it.
    let holder = env.wait_holder("manager-a", Duration::from_secs(20)).await?;
    assert!(holder.starts_with("manager-a_"), "holder {holder}");
    let second = Manager::start(env.candidate("manager-b")).await?;

    env.create_issuer().await?;
    env.wait_issuer_checked().await?;
    env.request("before-failover").await?;
    env.wait_issued("before-failover").await?;
    assert_eq!(env.ca.issued_count(), Some(1));

    // One holder, and the other knows it is standing by (and says it is ready).
    assert_eq!(env.holder().await, Some(holder.clone()));
    let leading = |m: &Manager| m.log().contains("leading: starting controllers");
    assert!(leading(&first), "{}", first.log());
    assert!(
        !leading(&second),
        "standby started controllers:\n{}",
        second.log()
    );
    assert_eq!(second.probe("/readyz").await?.0, 200, "standby is ready");

    first.kill().await?;
    let killed = tokio::time::Instant::now();
    let margin = Duration::from_secs(6);
    let new_holder = env
        .wait_holder("manager-b", Duration::from_secs(LEASE_SECONDS) + margin)
        .await?;
    eprintln!(
        "takeover after kill -9: {:?} (lease {LEASE_SECONDS}s)",
        killed.elapsed()
    );
    assert!(new_holder.starts_with("manager-b_"), "holder {new_holder}");

    env.request("after-failover").await?;
    env.wait_issued("after-failover").await?;
    assert_eq!(env.ca.issued_count(), Some(2), "each request signed once");
    assert!(leading(&second), "{}", second.log());
    assert_eq!(second.probe("/readyz").await?.0, 200);
    Ok(())
}

/// While someone else holds the Lease, a candidate makes no writes at all (only Lease reads),
/// reports ready, and signs nothing; once the Lease lapses it takes over and signs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standby_writes_nothing_while_another_holds_the_lease() -> anyhow::Result<()> {
    let Some(env) = Env::start().await? else {
        return Ok(());
    };
    let now = || serde_json::to_value(MicroTime(k8s_openapi::jiff::Timestamp::now())).expect("time");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": LEASE_NAME, "namespace": SYSTEM},
        "spec": {
            "holderIdentity": "another-replica", "leaseDurationSeconds": LEASE_SECONDS,
            "acquireTime": now(), "renewTime": now(),
        },
    }))?;
    env.leases().create(&PostParams::default(), &lease).await?;
    // A live leader elsewhere: it renews the Lease well within its duration.
    let renewer = {
        let leases = env.leases();
        tokio::spawn(async move {
            loop {
                let renew = json!({"spec": {"renewTime": now()}});
                let _ = leases
                    .patch(LEASE_NAME, &PatchParams::default(), &Patch::Merge(&renew))
                    .await;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };
    env.create_issuer().await?;
    env.request("waits-for-a-leader").await?;

    env.server().reset_counts();
    let standby = Manager::start(env.candidate("standby")).await?;
    // Long enough for several of the standby's Lease checks.
    tokio::time::sleep(Duration::from_secs(2 * LEASE_SECONDS + 1)).await;
    assert_eq!(standby.probe("/readyz").await?.0, 200, "a standby is ready");
    let counts = env.server().counts();
    assert_eq!(
        writes_besides_leases(counts.rows()),
        vec![],
        "a standby writes nothing"
    );
    assert!(
        counts.get(Verb::Get, "leases") >= 1,
        "the standby watches the Lease"
    );
    assert_eq!(
        counts.get(Verb::List, "certificaterequests"),
        0,
        "no informers before leading"
    );
    assert_eq!(env.ca.issued_count(), Some(0));
    assert_eq!(env.holder().await.as_deref(), Some("another-replica"));
    let request = objects::get_request(env.client(), &env.ns, "waits-for-a-leader").await?;
    assert_eq!(objects::ready_of(&request), None, "untouched while standing by");

    // The other replica goes away without releasing: the Lease lapses and the standby leads.
    renewer.abort();
    env.wait_holder("standby", Duration::from_secs(LEASE_SECONDS + 6))
        .await?;
    env.wait_issuer_checked().await?;
    env.wait_issued("waits-for-a-leader").await?;
    assert_eq!(env.ca.issued_count(), Some(1));
    Ok(())
}

/// SIGTERM with requests in flight: the manager finishes what it started, releases the Lease
/// and exits 0; a successor takes the Lease at once and signs the rest, none twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_in_flight_and_releases_the_lease() -> anyhow::Result<()> {
    let Some(env) = Env::start().await? else {
        return Ok(());
    };
    let mut first = Manager::start(env.candidate("manager-a")).await?;
    env.wait_holder("manager-a", Duration::from_secs(20)).await?;
    env.create_issuer().await?;
    env.wait_issuer_checked().await?;

    // Slow API calls keep each reconcile in flight for a while (status write, Event).
    env.server().set_latency(Duration::from_millis(100));
    let names = request_names("inflight", 24);
    try_join_all(names.iter().map(|n| env.request(n))).await?;
    eventually(WAIT, "a first signature", || async {
        (env.ca.issued_count() >= Some(1)).then_some(())
    })
    .await?;
    let started = tokio::time::Instant::now();
    let status = first.terminate(Duration::from_secs(10)).await?;
    eprintln!("exit after SIGTERM: {:?}, {status}", started.elapsed());
    assert!(status.success(), "exit status {status}:\n{}", first.log());
    env.server().set_latency(Duration::ZERO);
    assert!(first.log().contains("lease released"), "{}", first.log());

    // Nothing half-done: every signature the CA made is on a request's status.
    let signed = env.ca.issued_count().expect("simple-cfssl");
    let issued = env.issued_now(&names).await?;
    eprintln!("signed before exit: {signed} of {}", names.len());
    assert_eq!(signed, issued.len() as u64, "signed but not recorded");

    // kube-lease-manager's release clears holder, times and duration (strategic merge patch).
    let spec = env.leases().get(LEASE_NAME).await?.spec.unwrap_or_default();
    assert_eq!(spec.holder_identity, None, "Lease released: {spec:?}");
    assert_eq!(spec.renew_time, None);
    assert_eq!(spec.lease_duration_seconds, None);

    // A free Lease is taken without waiting for any expiry.
    let _second = Manager::start(env.candidate("manager-b")).await?;
    let waiting = tokio::time::Instant::now();
    env.wait_holder("manager-b", Duration::from_secs(LEASE_SECONDS))
        .await?;
    eprintln!("successor leads after {:?}", waiting.elapsed());
    for name in &names {
        env.wait_issued(name).await?;
    }
    assert_eq!(
        env.ca.issued_count(),
        Some(names.len() as u64),
        "each request signed exactly once"
    );
    Ok(())
}

/// kill -9 in the middle of 50 requests, then a new manager: all end Issued, and the only
/// requests signed twice are those the kill caught between the CA's answer and the status
/// write (the CFSSL API has no idempotency key, so no issuer can do better after a SIGKILL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_and_restarted_mid_run_loses_nothing() -> anyhow::Result<()> {
    let Some(env) = Env::start().await? else {
        return Ok(());
    };
    let mut first = Manager::start(env.options()).await?;
    env.create_issuer().await?;
    env.wait_issuer_checked().await?;

    let names = request_names("crash", 50);
    try_join_all(names.iter().map(|n| env.request(n))).await?;
    eventually(WAIT, "some requests signed", || async {
        (env.ca.issued_count() >= Some(10)).then_some(())
    })
    .await?;
    first.kill().await?;
    // Calls the dead process had already sent may still complete at the CA or the API server.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let signed_at_kill = env.ca.issued_count().expect("simple-cfssl");
    let recorded_at_kill = env.issued_now(&names).await?.len() as u64;
    let caught = signed_at_kill - recorded_at_kill;
    eprintln!("at kill -9: {signed_at_kill} signed, {recorded_at_kill} recorded Issued");
    assert!(recorded_at_kill < names.len() as u64, "killed before the end");
    assert!(
        caught <= 8,
        "at most --concurrency requests are in flight: {caught}"
    );

    let _second = Manager::start(env.options()).await?;
    for name in &names {
        env.wait_issued(name).await?;
    }
    let total = env.ca.issued_count().expect("simple-cfssl");
    eprintln!("signed in all: {total} for {} requests", names.len());
    // Not equality: a status write in transit at the kill may land after the count above.
    assert!(
        total - names.len() as u64 <= caught,
        "re-signed only requests caught in flight ({caught}), but signed {total}"
    );
    Ok(())
}

/// Deleting a Ready issuer's credential Secret is noticed from the Secret watch at once, not at
/// the next health check (an hour away here): one Secret watch feeds both issuer controllers,
/// deletes included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_credential_secret_unreadies_its_issuer_at_once() -> anyhow::Result<()> {
    let Some(env) = Env::start().await? else {
        return Ok(());
    };
    let _manager = Manager::start(env.options().arg("--health-check-interval").arg("1h")).await?;
    env.create_issuer().await?;
    env.wait_issuer_checked().await?;
    Api::<k8s_openapi::api::core::v1::Secret>::namespaced(env.client().clone(), &env.ns)
        .delete("team-ca", &Default::default())
        .await?;
    let reason = "SecretNotFound";
    objects::wait_issuer_reason(env.client(), Kind::Issuer, &env.ns, "team-ca", reason, WAIT).await
}

/// A Ready issuer is checked again at the health-check interval; once it is deleted, its timer
/// stops: no more Secret reads, CA calls or status writes for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_an_issuer_stops_its_health_checks() -> anyhow::Result<()> {
    let Some(env) = Env::start().await? else {
        return Ok(());
    };
    let manager = Manager::start(env.options().arg("--health-check-interval").arg("1s")).await?;
    env.create_issuer().await?;
    env.wait_issuer_checked().await?;

    // Periodic checks read the credential Secret each time (a check every 1 s plus its own
    // time, so two of them within seconds, however loaded the machine).
    env.server().reset_counts();
    eventually(Duration::from_secs(20), "two periodic re-checks", || async {
        (env.server().counts().get(Verb::Get, "secrets") >= 2).then_some(())
    })
    .await?;

    Api::<cfssl_issuer::api::Issuer>::namespaced(env.client().clone(), &env.ns)
        .delete("team-ca", &Default::default())
        .await?;
    // The manager has seen the delete once the issuer's series is gone from its metrics.
    let issuer = format!("Issuer/{}/team-ca", env.ns);
    eventually(WAIT, "the deleted issuer's series gone", || async {
        let m = scrape(&manager.metrics_addr).await.ok()?;
        let ready = m.value("cfssl_issuer_issuer_ready", &[("issuer", issuer.as_str())]);
        ready.is_none().then_some(())
    })
    .await?;
    // A check already under way when the delete arrived may still end.
    tokio::time::sleep(Duration::from_millis(500)).await;
    env.server().reset_counts();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let counts = env.server().counts();
    assert_eq!(counts.get(Verb::Get, "secrets"), 0, "{:?}", counts.rows());
    assert_eq!(
        counts.get(Verb::Patch, "issuers/status"),
        0,
        "{:?}",
        counts.rows()
    );
    Ok(())
}

/// The manager keeps nothing of what is gone and does not chase its own writes: the Issuer
/// controller runs on spec changes, not on status writes; an unapproved request gets one
/// `WaitingForApproval` Event (once it has waited 5 s) however often it is reconciled; deleting a request removes its
/// expiry series and deleting an issuer every series labelled with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_writes_do_not_rerun_issuers_and_deletes_leave_no_series() -> anyhow::Result<()> {
    let Some(env) = Env::start().await? else {
        return Ok(());
    };
    let manager = Manager::start(env.options()).await?;
    let metrics = || async { scrape(&manager.metrics_addr).await };
    let issuer_runs = || async {
        anyhow::Ok(
            metrics()
                .await?
                .value("cfssl_issuer_reconciles_total", &[("controller", "Issuer")])
                .unwrap_or(0.0),
        )
    };
    env.create_issuer().await?;
    env.wait_issuer_checked().await?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Its own Ready write does not run it again (before, every write did: at least 2 here).
    let settled = issuer_runs().await?;
    eprintln!("Issuer reconciles after create and check: {settled}");

    // Someone else's status-only change: no reconcile. A spec change: one.
    let issuers = Api::<cfssl_issuer::api::Issuer>::namespaced(env.client().clone(), &env.ns);
    let probe = json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Issuer", "status": {"conditions": [
        {"type": "E2EProbe", "status": "True", "reason": "Probe", "message": "status only",
         "lastTransitionTime": "2026-11-22T10:00:00Z"}]}});
    issuers
        .patch_status(
            "team-ca",
            &PatchParams::apply("e2e-probe").force(),
            &Patch::Apply(&probe),
        )
        .await?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        issuer_runs().await?,
        settled,
        "a status-only change ran the Issuer controller"
    );
    issuers
        .patch(
            "team-ca",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"bundle": false}})),
        )
        .await?;
    eventually(WAIT, "the Issuer reconcile after a spec change", || async {
        issuer_runs().await.ok().filter(|runs| *runs > settled)
    })
    .await?;

    // Waiting for approval: one Event, however many reconciles.
    let csr = Csr::new("waiting.example.com")?;
    objects::create_request(
        env.client(),
        &env.ns,
        "waiting",
        GROUP,
        "Issuer",
        "team-ca",
        &csr.pem,
    )
    .await?;
    let requests =
        Api::<cfssl_issuer::api::certmanager::CertificateRequest>::namespaced(env.client().clone(), &env.ns);
    let events = Api::<k8s_openapi::api::events::v1::Event>::namespaced(env.client().clone(), &env.ns);
    let waiting_events = || async {
        let listed = events.list(&Default::default()).await.ok()?;
        Some(
            listed
                .items
                .iter()
                .filter(|e| {
                    e.reason.as_deref() == Some("WaitingForApproval")
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("waiting")
                })
                .count(),
        )
    };
    eventually(WAIT, "a WaitingForApproval Event", || async {
        waiting_events().await.filter(|n| *n > 0)
    })
    .await?;
    for touch in 0..3 {
        let labels = json!({"metadata": {"labels": {"e2e-touch": touch.to_string()}}});
        requests
            .patch("waiting", &PatchParams::default(), &Patch::Merge(&labels))
            .await?;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        waiting_events().await,
        Some(1),
        "exactly one WaitingForApproval Event"
    );

    // Deletes take their series along.
    env.request("one").await?;
    env.wait_issued("one").await?;
    let issuer = format!("Issuer/{}/team-ca", env.ns);
    let expiry = [("namespace", env.ns.as_str()), ("name", "one")];
    let of_issuer = |m: &Exposition| {
        m.samples
            .iter()
            .filter(|s| {
                s.labels.get("issuer") == Some(&issuer)
                    && s.name != "cfssl_issuer_certificate_expiration_timestamp_seconds"
            })
            .map(|s| s.name.clone())
            .collect::<BTreeSet<_>>()
    };
    let before = eventually(Duration::from_secs(10), "the expiry series of one", || async {
        metrics().await.ok().filter(|m| {
            m.value("cfssl_issuer_certificate_expiration_timestamp_seconds", &expiry)
                .is_some()
        })
    })
    .await?;
    assert!(
        of_issuer(&before).len() >= 3,
        "issuer series: {:?}",
        of_issuer(&before)
    );
    requests.delete("one", &Default::default()).await?;
    eventually(
        Duration::from_secs(10),
        "the expiry series of a deleted request gone",
        || async {
            metrics().await.ok().filter(|m| {
                m.value("cfssl_issuer_certificate_expiration_timestamp_seconds", &expiry)
                    .is_none()
            })
        },
    )
    .await?;
    issuers.delete("team-ca", &Default::default()).await?;
    let after = eventually(
        Duration::from_secs(10),
        "the series of a deleted issuer gone",
        || async { metrics().await.ok().filter(|m| of_issuer(m).is_empty()) },
    )
    .await;
    assert!(after.is_ok(), "left behind: {:?}", of_issuer(&metrics().await?));
    Ok(())
}
