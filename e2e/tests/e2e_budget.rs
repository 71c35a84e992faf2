//! The issuance budget (`--issuance-budget`) through the real manager binary: a burst of
//! approved requests for one Issuer never reaches the CA faster than the budget, the most
//! urgent (soonest renew-by) are signed first, and each waiting request says so once.
//!
//! It reads simple-cfssl's sign log in this process, so it needs the in-process cluster and
//! CA; against `E2E_KUBECONFIG` it is skipped.

use std::time::Duration;

use e2e::harness::budget::{self, Burst};
use e2e::harness::{Cluster, load};
use kube::api::{Api, ListParams};

const SYSTEM: &str = "cfssl-issuer-system";
const REASON: &str = "WaitingForIssuanceBudget";

/// 40 requests at once, 5 signs/s with a burst of 1: at most 6 signs in any second at the CA,
/// about 8 s in all, in urgency order once the line has formed (the signs of the first second
/// may go before every request has joined it: each joins with a status write), from the first
/// sign never before a more urgent request already in line, each request with at most one
/// Event for its wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_keeps_to_the_budget_soonest_expiry_first() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    if cluster.is_external() {
        eprintln!("skipped: reads simple-cfssl's sign log in this process");
        return Ok(());
    }
    let burst = Burst {
        n: 40,
        rate: 5,
        burst: 1,
        timeout: Duration::from_secs(90),
    };
    let (measured, manager) = budget::run(&cluster, SYSTEM, burst).await?;
    let ranks = measured.ranks();
    eprintln!(
        "budget 5/s burst 1, 40 requests: {:.2} signs/s at the CA, at most {} in any second, \
         {} out of urgency order, {} before a more urgent one in line; ranks signed: {ranks:?}; \
         signed at {:?} s; joined the line at {:?} s (by rank)",
        measured.rate(),
        measured.max_in_any_second(),
        measured.out_of_order(1),
        measured.out_of_line(),
        measured.signs.iter().map(|(at, _)| *at).collect::<Vec<_>>(),
        measured.joined,
    );
    assert_eq!(measured.signs.len(), 40, "each request signed once");
    assert!(
        measured.max_in_any_second() <= 6,
        "over the budget: {:?}",
        measured.signs
    );
    let last = measured.signs.last().map_or(0.0, |(at, _)| *at);
    assert!(last >= 7.4, "40 signs at 5/s take about 8 s, not {last:.2} s");
    assert_eq!(
        measured.out_of_order(6),
        0,
        "after the first second, soonest renew-by first: {ranks:?}"
    );
    assert_eq!(
        measured.out_of_line(),
        0,
        "from the first sign, none before a more urgent request in line: {ranks:?}, joined {:?}",
        measured.joined
    );

    let events =
        Api::<k8s_openapi::api::events::v1::Event>::namespaced(cluster.client.clone(), &measured.namespace)
            .list(&ListParams::default())
            .await?
            .items;
    let mut waits = std::collections::HashMap::<String, usize>::new();
    for event in events.iter().filter(|e| e.reason.as_deref() == Some(REASON)) {
        let name = event
            .regarding
            .as_ref()
            .and_then(|r| r.name.clone())
            .unwrap_or_default();
        let note = event.note.as_deref().unwrap_or_default();
        let want = format!(
            "Waiting for Issuer {}/budget-ca's issuance budget of 5 signs/s (burst 1): number ",
            measured.namespace
        );
        assert!(note.starts_with(&want), "{name}: {note}");
        *waits.entry(name).or_default() += 1;
    }
    assert!(
        waits.len() >= 30,
        "most requests waited and said so: {}",
        waits.len()
    );
    assert!(waits.values().all(|n| *n == 1), "one Event per wait: {waits:?}");
    let metrics = manager.metrics().await?;
    assert!(
        metrics.contains("cfssl_issuer_issuance_budget_waits_total{issuer=\"Issuer/"),
        "{metrics}"
    );
    assert_eq!(load::request_reconcile_errors(&manager).await?, 0);
    Ok(())
}
