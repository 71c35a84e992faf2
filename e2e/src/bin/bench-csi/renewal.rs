//! Phase 6: volumes from an issuer whose profile lasts 150 s, all due within a minute, renewed
//! by the plugin's own timers while the bench watches their files.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use x509_parser::prelude::{FromDer, X509Certificate};

use cfssl_issuer::api::certmanager::CertificateRequest;

use crate::Env;
use crate::phases::{figure, pods, publish, quantile};
use crate::plugin::{Plugin, PodVolume, plugin_requests};

/// A volume's certificate as its file shows it: serial, and notAfter as a Unix time.
fn leaf(node: &Plugin, volume: &str) -> Option<(Vec<u8>, i64)> {
    let path = node.dir.join("data/volumes").join(volume).join("data/tls.crt");
    let pem = std::fs::read(path).ok()?;
    let block = pem::parse_many(&pem).ok()?.into_iter().next()?;
    let (_, cert) = X509Certificate::from_der(block.contents()).ok()?;
    Some((cert.raw_serial().to_vec(), cert.validity().not_after.timestamp()))
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// What the bench saw of one volume: its first certificate and when it was issued.
struct Watched {
    serial: Vec<u8>,
    issued_at: f64,
    not_after: i64,
    renewed_at: Option<f64>,
    /// Every new certificate seen, the first renewal's included: the plugin's writes are
    /// counted over the whole wait, in which early volumes may renew again.
    renewals: usize,
}

impl Watched {
    /// 5/6 of the lifetime the volume actually had: from its issuance (the CA backdates
    /// notBefore by 5 minutes) to its notAfter.
    fn deadline(&self) -> f64 {
        self.issued_at + (self.not_after as f64 - self.issued_at) * 5.0 / 6.0
    }
}

pub async fn renewal(env: &Env, node: &Plugin, n: usize) -> anyhow::Result<()> {
    let pods: Vec<PodVolume> = pods(env, "renew", "renewing", n).await?;
    let publishing = Instant::now();
    // Each volume's issuance time is when its Publish returned: the deadline is its own.
    let published = futures::stream::iter(&pods)
        .map(|pod| async move { publish(node, pod).await.map(|_| (pod.volume_id(), unix_now())) })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    let issued: Vec<(String, f64)> = match published.into_iter().collect() {
        Ok(issued) => issued,
        Err(error) => {
            diagnose(env).await;
            anyhow::bail!("not every renewing volume was published: {error:#}");
        }
    };
    println!("  (published in {:.1} s)", publishing.elapsed().as_secs_f64());
    let writes_before = plugin_requests(env.server()).1;
    let mut watched = HashMap::new();
    for (id, issued_at) in issued {
        let (serial, not_after) = leaf(node, &id).ok_or_else(|| anyhow::anyhow!("no certificate in {id}"))?;
        let (renewed_at, renewals) = (None, 0);
        let seen = Watched {
            serial,
            issued_at,
            not_after,
            renewed_at,
            renewals,
        };
        watched.insert(id, seen);
    }
    let wait_until = Instant::now() + Duration::from_secs(240);
    while Instant::now() < wait_until && watched.values().any(|w| w.renewed_at.is_none()) {
        for (id, seen) in watched.iter_mut() {
            if let Some((serial, _)) = leaf(node, id).filter(|(serial, _)| *serial != seen.serial) {
                seen.renewed_at.get_or_insert_with(unix_now);
                seen.renewals += 1;
                seen.serial = serial;
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let writes = plugin_requests(env.server()).1 - writes_before;
    report(&watched, writes, n);
    if watched.values().any(|w| w.renewed_at.is_none()) {
        diagnose(env).await;
    }
    Ok(())
}

fn report(watched: &HashMap<String, Watched>, writes: usize, n: usize) {
    let renewed = watched.values().filter(|w| w.renewed_at.is_some()).count();
    let in_time = watched
        .values()
        .filter(|w| w.renewed_at.is_some_and(|at| at <= w.deadline()))
        .count();
    let renewals: usize = watched.values().map(|w| w.renewals).sum();
    let per = writes as f64 / renewals.max(1) as f64;
    let mut ages: Vec<Duration> = watched
        .values()
        .filter_map(|w| Duration::try_from_secs_f64(w.renewed_at? - w.issued_at).ok())
        .collect();
    if !ages.is_empty() {
        let mut age = |q: f64| quantile(&mut ages, q).as_secs_f64();
        let (min, p50, max) = (age(0.0), age(0.5), age(1.0));
        println!(
            "  (first renewal after issuance: min {min:.1} s, p50 {p50:.1} s, max {max:.1} s; {renewals} renewals, {writes} writes)"
        );
    }
    // The latest, against their own deadline and the lifetime they had left at issuance.
    let mut late: Vec<&Watched> = watched
        .values()
        .filter(|w| w.renewed_at.is_none_or(|at| at > w.deadline()))
        .collect();
    late.sort_by(|a, b| a.issued_at.total_cmp(&b.issued_at));
    for w in late.iter().take(5) {
        let since = |at: f64| at - w.issued_at;
        println!(
            "  (late: renewed {:.1} s after issuance, deadline {:.1} s, notAfter {:.1} s)",
            w.renewed_at.map_or(f64::NAN, since),
            since(w.deadline()),
            since(w.not_after as f64)
        );
    }
    println!("6. {n} volumes of a 150 s profile, due within a minute");
    figure(
        "renewed",
        format!("{renewed}/{n}"),
        &format!("{n}/{n}"),
        renewed == n,
    );
    figure(
        "renewed before 5/6 of the lifetime",
        format!("{in_time}/{n}"),
        &format!("{n}/{n}"),
        in_time == n,
    );
    figure(
        "plugin API writes per renewal",
        format!("{per:.2}"),
        "<= 2",
        renewed > 0 && per <= 2.0,
    );
}

/// What the manager and the requests say, when the phase cannot go on.
async fn diagnose(env: &Env) {
    let api: kube::Api<CertificateRequest> = kube::Api::namespaced(env.cluster.client.clone(), &env.ns);
    if let Ok(list) = api.list(&Default::default()).await {
        println!(
            "  requests by Ready reason: {:?}",
            e2e::harness::load::by_ready_reason(&list.items)
        );
        println!("  requests by approval: {:?}", by_approval(&list.items));
    }
    let events: kube::Api<k8s_openapi::api::core::v1::Event> =
        kube::Api::namespaced(env.cluster.client.clone(), &env.ns);
    if let Ok(list) = events.list(&Default::default()).await {
        let mut reasons = std::collections::BTreeMap::new();
        for event in &list.items {
            let key = format!(
                "{}/{}",
                event.involved_object.kind.as_deref().unwrap_or("?"),
                event.reason.as_deref().unwrap_or("?")
            );
            *reasons.entry(key).or_insert(0usize) += event.count.unwrap_or(1) as usize;
        }
        println!("  events by reason: {reasons:?}");
    }
    let alive = env
        .manager
        .pid()
        .is_some_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists());
    println!("  manager alive: {alive}; its last lines:");
    let log = env.manager.log();
    for line in log.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev() {
        println!("    {line}");
    }
}

/// Requests by whether they are approved, denied or undecided.
fn by_approval(requests: &[CertificateRequest]) -> std::collections::BTreeMap<&'static str, usize> {
    use cfssl_issuer::api::certmanager::{APPROVED, DENIED};
    let mut counts = std::collections::BTreeMap::new();
    for request in requests {
        let key = match (request.condition(APPROVED), request.condition(DENIED)) {
            (Some(_), _) => "approved",
            (None, Some(_)) => "denied",
            (None, None) => "undecided",
        };
        *counts.entry(key).or_insert(0) += 1;
    }
    counts
}
