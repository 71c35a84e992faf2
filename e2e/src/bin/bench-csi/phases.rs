//! Phases 1 to 5: Publish latency, re-publish, a burst, a full node idle, a restart.

use std::path::Path;
use std::time::{Duration, Instant};

use e2e::harness::cpu::Meter;
use futures::StreamExt;

use crate::Env;
use crate::plugin::{Plugin, PodVolume, plugin_requests, requests_created};

/// A figure beside its target.
pub fn figure(name: &str, value: String, target: &str, ok: bool) {
    let verdict = if ok { "ok" } else { "MISSED" };
    println!("  {name:<48} {value:>14}   target {target:<14} {verdict}");
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// The `q` quantile (nearest rank) of `samples`.
pub fn quantile(samples: &mut [Duration], q: f64) -> Duration {
    samples.sort();
    let rank = ((samples.len() as f64) * q).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1]
}

pub async fn pods(env: &Env, prefix: &str, issuer: &str, n: usize) -> anyhow::Result<Vec<PodVolume>> {
    let client = &env.cluster.client;
    let made = futures::stream::iter(0..n)
        .map(|i| PodVolume::create(client, &env.ns, format!("{prefix}-{i}"), issuer))
        .buffered(32)
        .collect::<Vec<_>>()
        .await;
    made.into_iter().collect()
}

/// Publishes `pod`'s volume: its latency.
pub async fn publish(node: &Plugin, pod: &PodVolume) -> anyhow::Result<Duration> {
    let started = Instant::now();
    node.node()
        .node_publish_volume(pod.publish(node.target(&pod.uid)))
        .await?;
    Ok(started.elapsed())
}

pub async fn sequential(env: &Env, node: &Plugin, n: usize) -> anyhow::Result<Vec<PodVolume>> {
    let pods = pods(env, "seq", "fast", n).await?;
    let mut took = Vec::with_capacity(n);
    for pod in &pods {
        took.push(publish(node, pod).await?);
    }
    println!("1. {n} new volumes, one at a time (ECDSA P-256, issuer Ready)");
    let p50 = quantile(&mut took, 0.5);
    figure(
        "Publish p50",
        ms(p50),
        "<= 50 ms",
        p50 <= Duration::from_millis(50),
    );
    let p99 = quantile(&mut took, 0.99);
    figure(
        "Publish p99",
        ms(p99),
        "<= 200 ms",
        p99 <= Duration::from_millis(200),
    );
    Ok(pods)
}

/// Publishes `pods` again; `heading` says when. Each looks at its own target only, so the
/// node's other mounts must not slow it.
pub async fn republish(env: &Env, node: &Plugin, pods: &[PodVolume], heading: &str) -> anyhow::Result<()> {
    let before = plugin_requests(env.server()).0;
    let mut took = Vec::with_capacity(pods.len());
    for pod in pods {
        took.push(publish(node, pod).await?);
    }
    let requests = plugin_requests(env.server()).0 - before;
    println!("{heading}");
    let p99 = quantile(&mut took, 0.99);
    figure(
        "re-Publish p99",
        ms(p99),
        "<= 2 ms",
        p99 <= Duration::from_millis(2),
    );
    figure("API requests", requests.to_string(), "0", requests == 0);
    Ok(())
}

pub async fn burst(env: &Env, node: &Plugin, n: usize) -> anyhow::Result<Vec<PodVolume>> {
    let pods = pods(env, "burst", "fast", n).await?;
    let created = requests_created(env.server());
    let started = Instant::now();
    let results = futures::future::join_all(pods.iter().map(|pod| publish(node, pod))).await;
    let took = started.elapsed();
    let failed = results.iter().filter(|r| r.is_err()).count();
    let requests = requests_created(env.server()) - created;
    println!("3. {n} Publishes at once");
    figure(
        "all succeeded within",
        ms(took),
        "<= 10 s",
        failed == 0 && took <= Duration::from_secs(10),
    );
    figure("failed", failed.to_string(), "0", failed == 0);
    figure(
        "CertificateRequests created",
        requests.to_string(),
        &n.to_string(),
        requests == n,
    );
    Ok(pods)
}

/// Adds volumes (32 at a time) until the node holds `total`.
pub async fn fill(env: &Env, node: &Plugin, pods: &mut Vec<PodVolume>, total: usize) -> anyhow::Result<()> {
    let more = total.saturating_sub(pods.len());
    let added = self::pods(env, "fill", "fast", more).await?;
    let results = futures::stream::iter(&added)
        .map(|pod| publish(node, pod))
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    let failed = results.iter().filter(|r| r.is_err()).count();
    anyhow::ensure!(failed == 0, "{failed} of {more} volumes were not published");
    pods.extend(added);
    Ok(())
}

pub fn idle(node: &Plugin, wait: Duration) -> anyhow::Result<()> {
    let meter = Meter::start(node.pid()).ok_or_else(|| anyhow::anyhow!("no /proc stat for the plugin"))?;
    std::thread::sleep(wait);
    let used = meter.used().unwrap_or_default();
    let share = used.as_secs_f64() / wait.as_secs_f64() * 100.0;
    let rss = node.rss_mib().unwrap_or(f64::NAN);
    println!(
        "4. {} volumes on the node, the plugin idle {} s",
        volumes(node),
        wait.as_secs()
    );
    figure("plugin RSS", format!("{rss:.1} MiB"), "<= 50 MiB", rss <= 50.0);
    figure(
        "plugin CPU while idle",
        format!("{share:.2} % of a core"),
        "<= 1 %",
        share <= 1.0,
    );
    Ok(())
}

fn volumes(node: &Plugin) -> usize {
    let root = node.dir.join("data/volumes");
    std::fs::read_dir(root).map_or(0, |d| d.flatten().filter(|e| e.path().is_dir()).count())
}

pub async fn restart(env: &Env, node: Plugin, binary: &Path, max: usize) -> anyhow::Result<Plugin> {
    let dir = node.dir.clone();
    let held = volumes(&node);
    node.kill().await?;
    let before = plugin_requests(env.server());
    let created = requests_created(env.server());
    let node = Plugin::start(binary, &dir, &env.kubeconfig, max).await?;
    let ready = node.started.elapsed();
    // Long enough for a restarted plugin that re-issues everything to show it.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = plugin_requests(env.server());
    let recreated = requests_created(env.server()) - created;
    println!("5. the plugin killed (SIGKILL) with {held} volumes and started again");
    figure(
        "Probe ready after",
        ms(ready),
        "<= 2 s",
        ready <= Duration::from_secs(2),
    );
    figure(
        "requests for volumes not due",
        recreated.to_string(),
        "0",
        recreated == 0,
    );
    println!(
        "  (its API requests in the first 5 s: {}, writes {})",
        after.0 - before.0,
        after.1 - before.1
    );
    Ok(node)
}
