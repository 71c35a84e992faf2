//! The issuance budget (`--issuance-budget`) under a mass re-issue: `n` approved requests for
//! one Issuer, each with a renew-by of its own (shuffled against their names), all there before
//! a manager started with the budget lists them; what the CA saw: when each was signed, and in
//! which order of urgency. Shared by `e2e_budget` (which asserts) and `bench-standalone`
//! (which prints).

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use serde_json::json;

use cfssl_issuer::api::certmanager::CertificateRequest;

use super::objects::{self, Kind};
use super::{Ca, Cluster, Csr, Manager, ManagerOptions, ca, load};

const ISSUER: &str = "budget-ca";
const GROUP: &str = "cfssl-issuer.wikimedia.org";
const RENEW_BY: &str = "cfssl-issuer.wikimedia.org/renew-by";
const WAITING: &str = "WaitingForIssuanceBudget";

/// A burst to run.
#[derive(Debug, Clone, Copy)]
pub struct Burst {
    /// Requests created at once.
    pub n: usize,
    /// `--issuance-budget`, signs per second.
    pub rate: u32,
    /// `--issuance-budget-burst`.
    pub burst: u32,
    /// How long all may take to be issued.
    pub timeout: Duration,
}

/// What the CA saw of one burst.
#[derive(Debug, Clone)]
pub struct Measured {
    pub burst: Burst,
    /// The namespace of the requests.
    pub namespace: String,
    /// Each sign, in the CA's order: seconds after the first, and the urgency rank of the
    /// request signed (0: the soonest renew-by).
    pub signs: Vec<(f64, usize)>,
    /// The request names by urgency rank.
    pub by_rank: Vec<String>,
    /// By urgency rank: when the request joined the line (its `WaitingForIssuanceBudget`
    /// Event), seconds after the first sign (negative before it); `None` when it signed on
    /// its first turn without waiting.
    pub joined: Vec<Option<f64>>,
}

impl Measured {
    /// The most signs in any one second (from each sign on).
    pub fn max_in_any_second(&self) -> usize {
        (0..self.signs.len())
            .map(|i| {
                let from = self.signs[i].0;
                self.signs[i..].iter().filter(|(at, _)| *at < from + 1.0).count()
            })
            .max()
            .unwrap_or(0)
    }

    /// Signs per second from the first to the last.
    pub fn rate(&self) -> f64 {
        match self.signs.last() {
            Some((last, _)) if *last > 0.0 => (self.signs.len() - 1) as f64 / last,
            _ => 0.0,
        }
    }

    /// Signs after the first `warm` that went before a more urgent request still waiting.
    pub fn out_of_order(&self, warm: usize) -> usize {
        (warm..self.signs.len())
            .filter(|&k| {
                let rank = self.signs[k].1;
                self.signs[k..].iter().any(|(_, other)| *other < rank)
            })
            .count()
    }

    /// Signs that went before a more urgent request already in line: one that had joined
    /// before the sign preceding this one. The bucket serves the line, and only the requests
    /// that have asked are in it: the first sign takes the burst token of a new bucket before
    /// any other request has asked, and the line forms as the controller reconciles its queue,
    /// so [`Measured::out_of_order`] also counts signs that went before a more urgent request
    /// had asked. A request that joined between the previous sign and this one may have
    /// joined after this one's turn (the CA logs a sign after its turn), so it is not counted.
    pub fn out_of_line(&self) -> usize {
        (1..self.signs.len())
            .filter(|&k| {
                let (previous, rank) = (self.signs[k - 1].0, self.signs[k].1);
                self.signs[k..]
                    .iter()
                    .any(|(_, other)| *other < rank && self.joined[*other].is_some_and(|at| at <= previous))
            })
            .count()
    }

    /// The urgency ranks in the order they were signed.
    pub fn ranks(&self) -> Vec<usize> {
        self.signs.iter().map(|(_, rank)| *rank).collect()
    }
}

/// A fixed shuffle of `0..n`, so runs compare.
fn shuffled(n: usize) -> Vec<usize> {
    let mut ranks: Vec<usize> = (0..n).collect();
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    for i in (1..n).rev() {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let j = usize::try_from(state >> 33).unwrap_or(0) % (i + 1);
        ranks.swap(i, j);
    }
    ranks
}

/// Creates `name` for the Issuer with `renew_by`, approved.
async fn create(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    csr: &Csr,
    renew_by: Timestamp,
) -> anyhow::Result<()> {
    use base64::Engine as _;
    let request: CertificateRequest = serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "CertificateRequest",
        "metadata": {"name": name, "namespace": namespace, "annotations": {RENEW_BY: renew_by.to_string()}},
        "spec": {
            "issuerRef": {"group": GROUP, "kind": "Issuer", "name": ISSUER},
            "request": base64::engine::general_purpose::STANDARD.encode(&csr.pem),
            "usages": ["digital signature", "key encipherment", "server auth"],
        },
    }))?;
    Api::<CertificateRequest>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &request)
        .await?;
    objects::approve(client, namespace, name).await
}

/// Runs `burst` in a namespace of its own, with a simple-cfssl and a manager of its own
/// (started with the budget once every request is there); returns what the CA saw and the
/// manager (still running, for its log and metrics).
pub async fn run(cluster: &Cluster, system: &str, burst: Burst) -> anyhow::Result<(Measured, Manager)> {
    let client = &cluster.client;
    let ca = Ca::simple(false).await?;
    let namespace = cluster.namespace("budget").await?;
    cluster.put_key_secret(&namespace, ISSUER, &ca.key_hex).await?;
    let spec = objects::issuer_spec(&ca, ISSUER, "server");
    objects::create_issuer(client, Kind::Issuer, &namespace, ISSUER, spec).await?;
    let requests = load::requests("budget", burst.n)?;
    let ranks = shuffled(burst.n);
    let base = Timestamp::now() + SignedDuration::from_hours(1);
    super::all_at_once(
        requests.iter().zip(&ranks).map(|((name, csr), rank)| {
            let renew_by = base + SignedDuration::from_mins(i64::try_from(*rank).unwrap_or(0));
            create(client, &namespace, name, csr, renew_by)
        }),
        8,
    )
    .await?;
    cluster.ensure_namespace(system).await?;
    let options = ManagerOptions::new(&cluster.kubeconfig, system)
        .arg(format!("--issuance-budget={}", burst.rate))
        .arg(format!("--issuance-budget-burst={}", burst.burst));
    let manager = Manager::start(options).await?;
    load::wait_all_issued(client, &namespace, burst.n, burst.timeout).await?;
    let log = ca.sign_log().unwrap_or_default();
    let mut by_rank = vec![String::new(); burst.n];
    let mut rank_of = std::collections::HashMap::new();
    for ((name, csr), rank) in requests.iter().zip(&ranks) {
        by_rank[*rank].clone_from(name);
        rank_of.insert(ca::spki_digest(csr), *rank);
    }
    let first = log.first().map(|(at, _)| *at);
    let signs = log
        .iter()
        .filter_map(|(at, digest)| {
            let since = at.duration_since(first?).as_secs_f64();
            Some((since, *rank_of.get(digest)?))
        })
        .collect();
    let joined = joined(client, &namespace, &by_rank, &log).await?;
    let measured = Measured {
        burst,
        namespace,
        signs,
        by_rank,
        joined,
    };
    Ok((measured, manager))
}

/// By urgency rank: when each request joined the line (its `WaitingForIssuanceBudget` Event's
/// time), in seconds after the first sign in `log`.
async fn joined(
    client: &kube::Client,
    namespace: &str,
    by_rank: &[String],
    log: &[(std::time::Instant, [u8; 32])],
) -> anyhow::Result<Vec<Option<f64>>> {
    let Some((first, _)) = log.first() else {
        return Ok(vec![None; by_rank.len()]);
    };
    // The sign log counts in this process's monotonic clock, Events in wall-clock time.
    let first = Timestamp::now() - SignedDuration::try_from(first.elapsed())?;
    let events = Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), namespace)
        .list(&kube::api::ListParams::default())
        .await?
        .items;
    let mut at = std::collections::HashMap::<&str, f64>::new();
    for event in events.iter().filter(|e| e.reason.as_deref() == Some(WAITING)) {
        let name = event.regarding.as_ref().and_then(|r| r.name.as_deref());
        if let (Some(name), Some(time)) = (name, &event.event_time) {
            let since = time.0.duration_since(first).as_secs_f64();
            let earliest = at.entry(name).or_insert(since);
            *earliest = earliest.min(since);
        }
    }
    Ok(by_rank
        .iter()
        .map(|name| at.get(name.as_str()).copied())
        .collect())
}
