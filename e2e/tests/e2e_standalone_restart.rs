//! Standalone mode survives its manager being killed mid-issuance: ten runs, each killing the
//! manager (SIGKILL) at a random point 0-500 ms after a Certificate is created and starting a
//! new one. Throughout, sampled every few milliseconds, no Certificate has more than one
//! request per revision or more than one next-key Secret; each ends Ready at revision 1.

mod standalone;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cfssl_issuer::api::certmanager::CertificateRequest;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::ListParams;
use serde_json::json;
use standalone::{Env, revision_of};

const RUNS: usize = 10;
const WAIT: Duration = Duration::from_secs(30);

/// The most of anything seen at once: (requests of one Certificate and revision, next-key
/// Secrets of one Certificate), with what it was.
#[derive(Debug, Default)]
struct Peaks {
    requests: (usize, String),
    next_keys: (usize, String),
}

/// Lists requests and next-key Secrets every 20 ms until `stop`, keeping the peaks.
async fn sample(client: kube::Client, ns: String, stop: Arc<AtomicBool>) -> anyhow::Result<Peaks> {
    let requests = Api::<CertificateRequest>::namespaced(client.clone(), &ns);
    let secrets = Api::<Secret>::namespaced(client, &ns);
    let next_key = ListParams::default().labels("cert-manager.io/next-private-key=true");
    let mut peaks = Peaks::default();
    while !stop.load(Ordering::Relaxed) {
        let mut per_revision: BTreeMap<(String, Option<i64>), usize> = BTreeMap::new();
        for cr in requests.list(&ListParams::default()).await?.items {
            *per_revision
                .entry((owner(&cr.metadata), revision_of(&cr)))
                .or_default() += 1;
        }
        let mut per_owner: BTreeMap<String, usize> = BTreeMap::new();
        for secret in secrets.list(&next_key).await?.items {
            *per_owner.entry(owner(&secret.metadata)).or_default() += 1;
        }
        if let Some((key, n)) = per_revision.into_iter().max_by_key(|(_, n)| *n)
            && n > peaks.requests.0
        {
            peaks.requests = (n, format!("{key:?}"));
        }
        if let Some((key, n)) = per_owner.into_iter().max_by_key(|(_, n)| *n)
            && n > peaks.next_keys.0
        {
            peaks.next_keys = (n, key);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(peaks)
}

/// The UID of the controlling owner.
fn owner(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .map(|r| format!("{}/{}", r.kind, r.name))
        .unwrap_or_default()
}

fn random_delay() -> Duration {
    let mut bytes = [0u8; 2];
    getrandom::fill(&mut bytes).expect("random bytes");
    Duration::from_millis(u64::from(u16::from_le_bytes(bytes)) % 501)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_issuance_ten_times_leaves_one_request_per_revision_and_finishes() -> anyhow::Result<()> {
    let mut env = Env::start(&[]).await?;
    if env.cluster.is_external() {
        eprintln!("skipped against a real cluster: kills the manager");
        return Ok(());
    }
    env.issuer("team-ca").await?;
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn(sample(env.client().clone(), env.ns.clone(), stop.clone()));
    let mut delays = Vec::new();
    for run in 0..RUNS {
        let name = format!("run-{run}");
        env.certificate(&name, &format!("{name}-tls"), "team-ca", json!({}))
            .await?;
        let delay = random_delay();
        delays.push(delay);
        tokio::time::sleep(delay).await;
        env.restart_manager().await?;
        let result = env.wait_revision(&name, 1, WAIT).await;
        result.map_err(|e| e.context(format!("run {run}, killed {delay:?} after creating")))?;
    }
    stop.store(true, Ordering::Relaxed);
    let peaks = sampler.await??;
    assert_eq!(
        peaks.requests.0, 1,
        "requests per revision at most: {peaks:?} ({delays:?})"
    );
    assert!(
        peaks.next_keys.0 <= 1,
        "next-key Secrets at most: {peaks:?} ({delays:?})"
    );
    for run in 0..RUNS {
        let name = format!("run-{run}");
        let crt = env.certificates().get(&name).await?;
        assert_eq!(crt.status.as_ref().and_then(|s| s.revision), Some(1), "{name}");
        env.verify_secret(
            &env.secret(&format!("{name}-tls")).await?,
            &[&format!("{name}.example.com")],
        )?;
        let revisions: Vec<_> = env.requests_of(&name).await?.iter().map(revision_of).collect();
        assert_eq!(revisions, [Some(1)], "{name}");
        // The key manager removes it once Issuing clears, just after the revision is written.
        e2e::harness::eventually(WAIT, &format!("{name}: key Secret removed"), || async {
            env.next_key_secrets(&name).await.ok()?.is_empty().then_some(())
        })
        .await?;
    }
    env.assert_api_hygiene();
    Ok(())
}
