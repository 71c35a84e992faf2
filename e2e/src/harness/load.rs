//! Many requests (or Secrets) at once, and what the manager spent on them: API requests with the
//! test's own subtracted, writes per request, conflicts, memory.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, watcher};

use cfssl_issuer::api::certmanager::CertificateRequest;

use super::objects::{self, Kind};
use super::scrape;
use super::{Csr, Manager};
use kube_testserver::{Count, Counts, Verb};

const GROUP: &str = "cfssl-issuer.wikimedia.org";

/// `n` requests named `{prefix}-00000`… with a fresh key each, so every certificate can be
/// matched to its own CSR.
pub fn requests(prefix: &str, n: usize) -> anyhow::Result<Vec<(String, Csr)>> {
    (0..n)
        .map(|i| {
            let name = format!("{prefix}-{i:05}");
            let csr = Csr::new(&format!("{name}.example.com"))?;
            Ok((name, csr))
        })
        .collect()
}

/// Creates every request for the Issuer `issuer`, `concurrency` at a time, approving each
/// right after its create when `approve` is set.
pub async fn create_requests(
    client: &Client,
    namespace: &str,
    issuer: &str,
    requests: &[(String, Csr)],
    approve: bool,
    concurrency: usize,
) -> anyhow::Result<()> {
    super::all_at_once(
        requests.iter().map(|(name, csr)| async move {
            objects::create_request(
                client,
                namespace,
                name,
                GROUP,
                Kind::Issuer.as_str(),
                issuer,
                &csr.pem,
            )
            .await?;
            if approve {
                objects::approve(client, namespace, name).await?;
            }
            anyhow::Ok(())
        }),
        concurrency,
    )
    .await
}

/// Approves every named request, `concurrency` at a time.
pub async fn approve_all<'a>(
    client: &Client,
    namespace: &str,
    names: impl IntoIterator<Item = &'a str>,
    concurrency: usize,
) -> anyhow::Result<()> {
    super::all_at_once(
        names
            .into_iter()
            .map(|name| objects::approve(client, namespace, name)),
        concurrency,
    )
    .await
}

/// Certificates the manager says it signed (`cfssl_issuer_certificates_issued_total`, all issuers).
pub async fn issued_total(manager: &Manager) -> anyhow::Result<u64> {
    let exposition = scrape::scrape(&manager.metrics_addr).await?;
    Ok(exposition
        .find("cfssl_issuer_certificates_issued_total", &[])
        .map(|s| s.value as u64)
        .sum())
}

/// Reconciles of the CertificateRequest controller that failed and were retried.
pub async fn request_reconcile_errors(manager: &Manager) -> anyhow::Result<u64> {
    let exposition = scrape::scrape(&manager.metrics_addr).await?;
    Ok(exposition
        .find(
            "cfssl_issuer_reconcile_errors_total",
            &[("controller", "CertificateRequest")],
        )
        .map(|s| s.value as u64)
        .sum())
}

/// All requests of a namespace once each is Ready with reason `Issued`.
pub struct Completion {
    pub requests: Vec<CertificateRequest>,
    /// Lists the wait made, each followed by a watch (the test's own API requests, to subtract).
    pub lists: u64,
    /// When the watch showed the last one issued.
    pub at: tokio::time::Instant,
}

/// Waits until the `n` requests in `namespace` are all `Issued`, following them with one watch
/// of the namespace: the wait costs the API server a list and a watch (more only if the watch
/// must relist), and the manager nothing.
pub async fn wait_all_issued(
    client: &Client,
    namespace: &str,
    n: usize,
    timeout: Duration,
) -> anyhow::Result<Completion> {
    let api = Api::<CertificateRequest>::namespaced(client.clone(), namespace);
    let followed = follow_until(api, n, is_issued, timeout).await.map_err(|late| {
        let waiting = late.waiting.map(|cr| (cr.name_any(), objects::ready_of(&cr)));
        anyhow::anyhow!(
            "timed out after {timeout:?}: {} of {n} requests issued; e.g. {waiting:?} not yet",
            late.done
        )
    })?;
    Ok(Completion {
        requests: followed.done.into_values().collect(),
        lists: followed.lists,
        at: tokio::time::Instant::now(),
    })
}

/// What [`follow_until`] saw.
pub struct Followed<K> {
    /// The objects that satisfied the predicate, by name.
    pub done: std::collections::HashMap<String, K>,
    /// Lists the watch made (each followed by a watch).
    pub lists: u64,
}

/// Why [`follow_until`] gave up: how many were done, and one that was not.
pub struct Late<K> {
    pub done: usize,
    pub waiting: Option<K>,
}

/// Follows `api` with one watch until `n` of its objects satisfy `done` (one unpaged list,
/// so each list the wait makes is one API request), or `timeout` passes.
pub async fn follow_until<K>(
    api: Api<K>,
    n: usize,
    done: impl Fn(&K) -> bool,
    timeout: Duration,
) -> Result<Followed<K>, Late<K>>
where
    K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + 'static,
    K: k8s_openapi::serde::de::DeserializeOwned,
{
    let mut seen = Followed {
        done: std::collections::HashMap::new(),
        lists: 0,
    };
    let mut waiting = None;
    let config = watcher::Config {
        page_size: None,
        ..Default::default()
    };
    let mut events = watcher(api, config).default_backoff().boxed();
    let follow = async {
        while let Ok(Some(event)) = events.try_next().await {
            let obj = match event {
                watcher::Event::Init => {
                    seen.lists += 1;
                    continue;
                }
                // Nothing to wait for (`n` is 0, e.g. `BENCH_SCALE_N=0`): no object event
                // would ever come to end the wait.
                watcher::Event::InitDone if seen.done.len() >= n => return true,
                watcher::Event::InitDone => continue,
                watcher::Event::Apply(obj) | watcher::Event::InitApply(obj) => obj,
                watcher::Event::Delete(obj) => {
                    seen.done.remove(&obj.name_any());
                    continue;
                }
            };
            if done(&obj) {
                seen.done.insert(obj.name_any(), obj);
            } else {
                seen.done.remove(&obj.name_any());
                waiting = Some(obj);
            }
            if seen.done.len() >= n {
                return true;
            }
        }
        false
    };
    match tokio::time::timeout(timeout, follow).await {
        Ok(true) => Ok(seen),
        _ => Err(Late {
            done: seen.done.len(),
            waiting,
        }),
    }
}

/// How often the CA signed each request (simple-cfssl counts signatures per public key, and
/// each request has a key of its own).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PerRequest {
    /// Requests signed exactly once.
    pub once: usize,
    /// Requests never signed.
    pub never: Vec<String>,
    /// Requests signed more than once, with the count.
    pub more: Vec<(String, u32)>,
}

impl PerRequest {
    /// Signatures beyond the first, over all requests.
    pub fn duplicates(&self) -> u64 {
        self.more.iter().map(|(_, n)| u64::from(n - 1)).sum()
    }
}

/// The CA's signatures per request, for `requests` (None unless the CA is simple-cfssl).
pub fn signatures_per_request(ca: &super::Ca, requests: &[(String, Csr)]) -> Option<PerRequest> {
    let mut tally = PerRequest::default();
    for (name, csr) in requests {
        match ca.signatures_for(csr)? {
            0 => tally.never.push(name.clone()),
            1 => tally.once += 1,
            n => tally.more.push((name.clone(), n)),
        }
    }
    Some(tally)
}

/// Requests by their Ready condition, `status/reason` (`no Ready` when there is none): what a
/// failed wait shows.
pub fn by_ready_reason(requests: &[CertificateRequest]) -> std::collections::BTreeMap<String, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for request in requests {
        let key = match objects::ready_of(request) {
            Some((status, reason)) => format!("{status}/{reason}"),
            None => "no Ready".to_string(),
        };
        *counts.entry(key).or_insert(0) += 1;
    }
    counts
}

pub fn is_issued(request: &CertificateRequest) -> bool {
    objects::ready_of(request).is_some_and(|(status, reason)| status == "True" && reason == "Issued")
}

/// The manager's share of `total`: what is left after taking away the test's own requests.
pub fn without(total: &Counts, own: &[(Verb, &str, u64)]) -> Counts {
    Counts::from_rows(total.rows().into_iter().filter_map(|mut row| {
        let mine: u64 = own
            .iter()
            .filter(|(verb, resource, _)| *verb == row.verb && *resource == row.resource)
            .map(|(_, _, n)| n)
            .sum();
        row.count = row.count.saturating_sub(mine);
        (row.count > 0).then_some(row)
    }))
}

/// Writes to CertificateRequests (object or status): create, update, patch.
pub fn request_writes(counts: &Counts) -> u64 {
    [Verb::Create, Verb::Update, Verb::Patch]
        .into_iter()
        .flat_map(|verb| {
            ["certificaterequests", "certificaterequests/status"].map(|resource| counts.get(verb, resource))
        })
        .sum()
}

/// Events created or patched, under either API group's resource name.
pub fn event_writes(counts: &Counts) -> u64 {
    counts
        .rows()
        .iter()
        .filter(|c| c.resource == "events" && matches!(c.verb, Verb::Create | Verb::Patch | Verb::Update))
        .map(|c| c.count)
        .sum()
}

/// One line per (verb, resource): the count and the count per request.
pub fn per_request_table(counts: &Counts, per: u64) -> String {
    let rows: Vec<Count> = counts.rows();
    let mut out = String::new();
    for row in rows {
        let label = format!("{} {}", row.verb, row.resource);
        out.push_str(&format!(
            "  {label:<40} {:>8} {:>8.3}/request\n",
            row.count,
            row.count as f64 / per.max(1) as f64
        ));
    }
    out
}

/// Creates `n` Secrets of `size` random bytes each, nothing any issuer names.
pub async fn create_secrets(
    client: &Client,
    namespace: &str,
    prefix: &str,
    n: usize,
    size: usize,
    concurrency: usize,
) -> anyhow::Result<()> {
    let api = Api::<Secret>::namespaced(client.clone(), namespace);
    super::all_at_once(
        (0..n).map(|i| {
            let api = api.clone();
            async move {
                let mut data = vec![0u8; size];
                getrandom::fill(&mut data).map_err(|e| anyhow::anyhow!("random bytes: {e}"))?;
                let secret = Secret {
                    metadata: ObjectMeta {
                        name: Some(format!("{prefix}-{i:05}")),
                        namespace: Some(namespace.into()),
                        ..Default::default()
                    },
                    data: Some([("blob".to_string(), ByteString(data))].into()),
                    ..Default::default()
                };
                api.create(&PostParams::default(), &secret).await?;
                anyhow::Ok(())
            }
        }),
        concurrency,
    )
    .await
}

/// The manager's VmRSS once it stops moving: sampled every 250 ms, settled when three
/// samples in a row differ by under 64 KiB, waiting at least `min_wait` and at most 30 s.
pub async fn settled_rss_kib(manager: &Manager, min_wait: Duration) -> anyhow::Result<u64> {
    tokio::time::sleep(min_wait).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let sample = || {
        manager
            .rss_kib()
            .ok_or_else(|| anyhow::anyhow!("no VmRSS for the manager"))
    };
    let mut last = sample()?;
    let mut steady = 0;
    while steady < 3 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = sample()?;
        steady = if now.abs_diff(last) < 64 { steady + 1 } else { 0 };
        last = now;
    }
    Ok(last)
}

/// Whether the manager logged an optimistic-concurrency failure (kube prints the API's
/// `reason: "Conflict"`, `code: 409`).
pub fn log_has_conflict(log: &str) -> bool {
    log.contains("Conflict") || log.contains("code: 409")
}

/// A CertificateRequest as cert-manager's own CA issuer leaves it once issued: an RSA-2048
/// CSR, a two-certificate chain, the CA, cert-manager's annotations and conditions.
pub fn foreign_request(namespace: &str) -> anyhow::Result<serde_json::Value> {
    use base64::Engine;
    let rsa = || rcgen::KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256);
    let key = rsa()?;
    let mut params = rcgen::CertificateParams::new(vec!["app.example.com".to_string()])?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "app.example.com");
    let csr = params.serialize_request(&key)?.pem()?;
    let ca_key = rsa()?;
    let ca = rcgen::CertificateParams::new(vec!["ca.example.com".to_string()])?.self_signed(&ca_key)?;
    let leaf = params.self_signed(&key)?;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    Ok(serde_json::json!({
        "apiVersion": "cert-manager.io/v1", "kind": "CertificateRequest",
        "metadata": {
            "namespace": namespace,
            "annotations": {
                "cert-manager.io/certificate-name": "app",
                "cert-manager.io/certificate-revision": "1",
                "cert-manager.io/private-key-secret-name": "app-xk2pq",
            },
            "labels": {"app.kubernetes.io/name": "app"},
        },
        "spec": {
            "request": b64(&csr),
            "issuerRef": {"group": "cert-manager.io", "kind": "ClusterIssuer", "name": "ca"},
            "duration": "2160h0m0s",
            "usages": ["digital signature", "key encipherment"],
        },
        "status": {
            "conditions": [
                {"type": "Approved", "status": "True", "reason": "cert-manager.io",
                 "message": "Certificate request has been approved by cert-manager.io",
                 "lastTransitionTime": "2026-11-22T10:00:00Z"},
                {"type": "Ready", "status": "True", "reason": "Issued",
                 "message": "Certificate fetched from issuer successfully",
                 "lastTransitionTime": "2026-11-22T10:00:01Z"},
            ],
            "certificate": b64(&(leaf.pem() + &ca.pem())),
            "ca": b64(&ca.pem()),
        },
    }))
}

/// `template` named `{prefix}-{i:05}`.
pub fn numbered(template: &serde_json::Value, prefix: &str, i: usize) -> serde_json::Value {
    let mut object = template.clone();
    object["metadata"]["name"] = format!("{prefix}-{i:05}").into();
    object
}
