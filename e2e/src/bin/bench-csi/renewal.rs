//! Phase 6: volumes from an issuer whose profile lasts 105 s, all due within a minute, renewed
//! by the plugin's own timers while the bench watches their files.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use x509_parser::prelude::{FromDer, X509Certificate};

use cfssl_issuer::api::certmanager::CertificateRequest;

use crate::Env;
use crate::phases::{figure, pods, publish};
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
    let published = futures::stream::iter(&pods)
        .map(|pod| publish(node, pod))
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    if let Some(Err(error)) = published.iter().find(|r| r.is_err()) {
        diagnose(env).await;
        anyhow::bail!("not every renewing volume was published: {error:#}");
    }
    let writes_before = plugin_requests(env.server()).1;
    let mut watched = HashMap::new();
    for pod in &pods {
        let id = pod.volume_id();
        let (serial, not_after) = leaf(node, &id).ok_or_else(|| anyhow::anyhow!("no certificate in {id}"))?;
        let issued_at = unix_now();
        watched.insert(
            id,
            Watched {
                serial,
                issued_at,
                not_after,
                renewed_at: None,
            },
        );
    }
    let wait_until = Instant::now() + Duration::from_secs(240);
    while Instant::now() < wait_until && watched.values().any(|w| w.renewed_at.is_none()) {
        for (id, seen) in watched.iter_mut().filter(|(_, w)| w.renewed_at.is_none()) {
            if leaf(node, id).is_some_and(|(serial, _)| serial != seen.serial) {
                seen.renewed_at = Some(unix_now());
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let writes = plugin_requests(env.server()).1 - writes_before;
    report(&watched, writes, n);
    Ok(())
}

fn report(watched: &HashMap<String, Watched>, writes: usize, n: usize) {
    let renewed = watched.values().filter(|w| w.renewed_at.is_some()).count();
    let in_time = watched
        .values()
        .filter(|w| w.renewed_at.is_some_and(|at| at <= w.deadline()))
        .count();
    let per = writes as f64 / renewed.max(1) as f64;
    println!("6. {n} volumes of a 105 s profile, due within a minute");
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
