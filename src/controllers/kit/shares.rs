//! Fair shares of a controller's reconcile slots. A reconcile that waits on a CA holds one of
//! the controller's `--concurrency` slots for as long as the CA takes; a tenant whose CA
//! stalls could hold all of them and stop everyone else's issuance. Each tenant (a namespace,
//! or a cluster-scoped issuer) may have at most its share of calls in flight; a reconcile over
//! the share waits briefly for a slot (a fast CA frees one within milliseconds), then gives up
//! and is requeued, holding nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::clock::lock;

/// How long a reconcile waits for a slot of its tenant's share before it is requeued.
pub const SHARE_WAIT: Duration = Duration::from_millis(100);

/// When a reconcile that found its tenant's share full looks again.
pub const SHARE_REQUEUE: Duration = Duration::from_secs(2);

/// Pure: a tenant's share of `concurrency` slots: a quarter, at least one. With the default 8,
/// four tenants whose CAs stall leave no slot to the others; fewer leave
/// `concurrency - stalled * share`.
pub fn share_of(concurrency: u16) -> usize {
    usize::from(concurrency / 4).max(1)
}

/// The calls in flight per tenant, each tenant limited to `share`.
#[derive(Debug)]
pub struct Shares {
    share: usize,
    wait: Duration,
    tenants: Arc<Mutex<HashMap<String, Tenant>>>,
}

/// One tenant's slots and how many hold or wait for one (the entry goes at zero).
#[derive(Debug)]
struct Tenant {
    slots: Arc<Semaphore>,
    users: usize,
}

/// A slot of a tenant's share, given back when dropped.
#[derive(Debug)]
pub struct Slot {
    _permit: OwnedSemaphorePermit,
    _user: User,
}

/// One holder or waiter of a tenant's slots; leaving takes the tenant's entry when it was the
/// last.
#[derive(Debug)]
struct User {
    tenant: String,
    tenants: Arc<Mutex<HashMap<String, Tenant>>>,
}

impl Drop for User {
    fn drop(&mut self) {
        let mut tenants = lock(&self.tenants);
        if let Some(entry) = tenants.get_mut(&self.tenant) {
            entry.users -= 1;
            if entry.users == 0 {
                tenants.remove(&self.tenant);
            }
        }
    }
}

impl Shares {
    pub fn new(share: usize, wait: Duration) -> Self {
        Shares {
            share: share.max(1),
            wait,
            tenants: Arc::default(),
        }
    }

    /// A slot of `tenant`'s share, waiting at most the configured wait; `None` when the share
    /// stayed full.
    pub async fn enter(&self, tenant: &str) -> Option<Slot> {
        let (slots, user) = self.join(tenant);
        let permit = tokio::time::timeout(self.wait, slots.acquire_owned()).await;
        match permit {
            Ok(Ok(permit)) => Some(Slot {
                _permit: permit,
                _user: user,
            }),
            // Timed out (the semaphore is never closed).
            _ => None,
        }
    }

    /// How many tenants hold or wait for a slot.
    pub fn tenants(&self) -> usize {
        lock(&self.tenants).len()
    }

    fn join(&self, tenant: &str) -> (Arc<Semaphore>, User) {
        let mut tenants = lock(&self.tenants);
        let entry = tenants.entry(tenant.to_string()).or_insert_with(|| Tenant {
            slots: Arc::new(Semaphore::new(self.share)),
            users: 0,
        });
        entry.users += 1;
        let user = User {
            tenant: tenant.to_string(),
            tenants: self.tenants.clone(),
        };
        (entry.slots.clone(), user)
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

    /// A tenant over its share waits, then gives up; another tenant is not held up; slots come
    /// back when dropped, and no entry is left behind.
    #[tokio::test]
    async fn one_tenant_cannot_take_anothers_slots() {
        let shares = Shares::new(2, Duration::from_millis(20));
        let run = async {
            let a1 = shares.enter("a").await;
            let a2 = shares.enter("a").await;
            assert!(a1.is_some() && a2.is_some());
            assert!(shares.enter("a").await.is_none(), "over its share");
            let b = shares.enter("b").await;
            assert!(b.is_some(), "another tenant enters at once");
            assert_eq!(shares.tenants(), 2);
            drop(a1);
            assert!(shares.enter("a").await.is_some(), "a freed slot is reused");
            drop((a2, b));
            assert_eq!(shares.tenants(), 0);
        };
        tokio::time::timeout(Duration::from_secs(5), run).await.unwrap();
    }

    /// A waiter gets the slot freed while it waits.
    #[tokio::test]
    async fn a_waiter_gets_a_slot_freed_in_time() {
        // The waiter waits up to a minute; the slot is freed as soon as it waits.
        let shares = Arc::new(Shares::new(1, Duration::from_secs(60)));
        let run = async {
            let held = shares.enter("a").await;
            let waiter = {
                let shares = shares.clone();
                tokio::spawn(async move { shares.enter("a").await.is_some() })
            };
            while lock(&shares.tenants).get("a").map(|t| t.users) != Some(2) {
                tokio::task::yield_now().await;
            }
            drop(held);
            assert!(waiter.await.unwrap());
            assert_eq!(shares.tenants(), 0);
        };
        tokio::time::timeout(Duration::from_secs(5), run).await.unwrap();
    }
}
