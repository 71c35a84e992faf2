//! Fair shares of a controller's reconcile slots. A reconcile that waits on a CA holds one of
//! the controller's `--concurrency` slots for as long as the CA takes; a tenant whose CA
//! stalls could hold all of them and stop everyone else's issuance. Each tenant (a namespace,
//! or a cluster-scoped issuer) may always have its share of calls in flight; beyond it, a
//! tenant uses free slots only while one stays free for the others, so that a tenant alone
//! still uses its CA at nearly full concurrency. A reconcile refused a slot holds nothing and
//! is requeued.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::clock::lock;

/// When a reconcile refused a slot looks again.
pub const SHARE_REQUEUE: Duration = Duration::from_secs(2);

/// Pure: a tenant's share of `concurrency` slots: a quarter, at least one.
pub fn share_of(concurrency: u16) -> usize {
    usize::from(concurrency / 4).max(1)
}

/// Pure: whether a tenant holding `mine` of the `held` slots in use (of `capacity`) may take
/// one more: always within its `share`, beyond it only while another slot stays free.
pub fn may_enter(mine: usize, held: usize, share: usize, capacity: usize) -> bool {
    mine < share || held + 2 <= capacity
}

/// The calls in flight, per tenant and in all.
#[derive(Debug)]
pub struct Shares {
    share: usize,
    capacity: usize,
    held: Arc<Mutex<Held>>,
}

#[derive(Debug, Default)]
struct Held {
    total: usize,
    tenants: HashMap<String, usize>,
}

/// A slot, given back when dropped.
#[derive(Debug)]
pub struct Slot {
    tenant: String,
    held: Arc<Mutex<Held>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = lock(&self.held);
        held.total -= 1;
        if let Some(mine) = held.tenants.get_mut(&self.tenant) {
            *mine -= 1;
            if *mine == 0 {
                held.tenants.remove(&self.tenant);
            }
        }
    }
}

impl Shares {
    /// Shares of `capacity` slots (the controller's concurrency), `share` each.
    pub fn new(share: usize, capacity: usize) -> Self {
        Shares {
            share: share.max(1),
            capacity: capacity.max(1),
            held: Arc::default(),
        }
    }

    /// For a controller of `concurrency` reconciles in flight.
    pub fn for_concurrency(concurrency: u16) -> Self {
        Shares::new(share_of(concurrency), usize::from(concurrency))
    }

    /// A slot for `tenant`, or `None` when [`may_enter`] says no.
    pub fn enter(&self, tenant: &str) -> Option<Slot> {
        let mut held = lock(&self.held);
        let mine = held.tenants.get(tenant).copied().unwrap_or(0);
        if !may_enter(mine, held.total, self.share, self.capacity) {
            return None;
        }
        held.total += 1;
        *held.tenants.entry(tenant.to_string()).or_default() += 1;
        Some(Slot {
            tenant: tenant.to_string(),
            held: self.held.clone(),
        })
    }

    /// How many tenants hold a slot.
    pub fn tenants(&self) -> usize {
        lock(&self.held).tenants.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_table() {
        let cases = [(1, 1), (3, 1), (4, 1), (8, 2), (16, 4), (64, 16)];
        for (concurrency, want) in cases {
            assert_eq!(share_of(concurrency), want, "{concurrency}");
        }
    }

    #[test]
    fn may_enter_table() {
        // (mine, held, share, capacity, want)
        let cases = [
            (0, 0, 2, 8, true),
            (1, 7, 2, 8, true),
            (0, 7, 2, 8, true),
            (2, 5, 2, 8, true),
            (2, 6, 2, 8, true),
            (6, 6, 2, 8, true),
            (7, 7, 2, 8, false),
            (2, 7, 2, 8, false),
            (1, 1, 1, 1, false),
            (0, 0, 1, 1, true),
        ];
        for (mine, held, share, capacity, want) in cases {
            assert_eq!(
                may_enter(mine, held, share, capacity),
                want,
                "{mine} of {held} held, share {share} of {capacity}"
            );
        }
    }

    /// A tenant alone takes all but one slot; another tenant still gets in; slots come back
    /// when dropped, and no entry is left behind.
    #[test]
    fn one_tenant_leaves_a_slot_for_another() {
        let shares = Shares::new(2, 8);
        let stalled: Vec<Slot> = (0..8).filter_map(|_| shares.enter("a")).collect();
        assert_eq!(stalled.len(), 7);
        let b = shares.enter("b");
        assert!(b.is_some(), "the slot kept free");
        assert!(shares.enter("a").is_none(), "all slots taken");
        let c = shares.enter("c");
        assert!(c.is_some(), "within its share, a tenant enters whatever is held");
        assert_eq!(shares.tenants(), 3);
        drop((stalled, b));
        assert_eq!(shares.tenants(), 1);
        drop(c);
        assert_eq!(shares.tenants(), 0);
    }
}
