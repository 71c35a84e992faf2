//! The issuance budget phase: a burst of requests for one Issuer against a manager of its own
//! started with `--issuance-budget`, measured at the CA (simple-cfssl's sign log): the rate it
//! saw, the most signs in any one second, and how well urgency order (soonest renew-by first)
//! held. Self-contained: its own namespace, CA and manager, on the bench's cluster.

use std::time::Duration;

use e2e::harness::Cluster;
use e2e::harness::budget::{self, Burst};

/// What the phase measured, to print beside the budget it ran with.
#[derive(Debug, Clone)]
pub struct BudgetFigures {
    pub n: usize,
    /// `--issuance-budget` and `--issuance-budget-burst`.
    pub rate: u32,
    pub burst: u32,
    /// Signs per second at the CA, first to last.
    pub measured_rate: f64,
    /// The most signs in any one second; at most `rate + burst`.
    pub max_in_any_second: usize,
    /// Signs that went before a more urgent request already in line (see
    /// [`budget::Measured::out_of_line`]): what urgency order promises.
    pub out_of_line: usize,
    /// Signs (after the first) that went before a more urgent request signed later, whether
    /// or not it had asked yet: the line forming as the manager reconciles its queue.
    pub out_of_order: usize,
    /// Seconds from the first sign to the last.
    pub seconds: f64,
}

impl std::fmt::Display for BudgetFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "issuance budget {}/s (burst {}), {} requests at once: {:.2} signs/s at the CA over \
             {:.1} s, at most {} in any second (target <= {}), {} before a more urgent request in \
             line (target 0), {} before a more urgent one had asked (the line forming)",
            self.rate,
            self.burst,
            self.n,
            self.measured_rate,
            self.seconds,
            self.max_in_any_second,
            self.rate + self.burst,
            self.out_of_line,
            self.out_of_order,
        )
    }
}

/// Runs `n` requests at once against a manager started with `--issuance-budget=rate` and
/// `--issuance-budget-burst=burst` (its Lease-free, non-standalone default otherwise), in a
/// namespace of its own; the manager is stopped before returning. Call it while no other
/// manager runs on `cluster`: each manager keeps a budget of its own, so another one would
/// sign these requests too.
pub async fn budget_burst(
    cluster: &Cluster,
    system: &str,
    n: usize,
    rate: u32,
    burst: u32,
) -> anyhow::Result<BudgetFigures> {
    let expected = Duration::from_secs_f64(n as f64 / f64::from(rate.max(1)));
    let run = Burst {
        n,
        rate,
        burst,
        timeout: expected * 2 + Duration::from_secs(30),
    };
    let (measured, mut manager) = budget::run(cluster, system, run).await?;
    manager.terminate(Duration::from_secs(10)).await?;
    Ok(BudgetFigures {
        n,
        rate,
        burst,
        measured_rate: measured.rate(),
        max_in_any_second: measured.max_in_any_second(),
        out_of_line: measured.out_of_line(),
        out_of_order: measured.out_of_order(1),
        seconds: measured.signs.last().map_or(0.0, |(at, _)| *at),
    })
}
