//! The issuance budget (`--issuance-budget`): at most N signs per second per issuer, so a mass
//! re-issue (a first install, a CA rotation, everything renewing at once) never sends a CA
//! more. Each issuer has a token bucket; the objects waiting for its tokens form a line ordered
//! by urgency ([`Urgency`], earliest deadline first), and only the head of the line takes the
//! next token, so none expires waiting while the budget can serve it in time.
//!
//! The decision is pure ([`Bucket::turn`]); [`Budget`] keeps one bucket per issuer behind a
//! lock. Nothing sleeps: a waiter is told when its turn may come and requeued for then. A
//! waiter leaves the line when it signs, when a reconcile of it no longer asks to sign
//! (denied, failed, its issuer not ready), when it is deleted, or when it has not come back
//! [`LATE`] after its turn, so it never holds up the others for long.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::issuers::IssuerName;
use crate::clock::lock;
use crate::controllers::kit::rate::UNIT;
pub use crate::controllers::kit::rate::{Rate, RateError, Settings};

#[cfg(test)]
mod tests;

/// The annotation a request may carry to say by when it must be signed (RFC 3339), e.g. the
/// notAfter of the certificate it renews; standalone mode sets it on the requests it makes.
pub const RENEW_BY: &str = "cfssl-issuer.wikimedia.org/renew-by";

/// The Event reason of an object that waits for its issuer's budget.
pub const WAITING_FOR_BUDGET: &str = "WaitingForIssuanceBudget";

/// How long after its turn a waiter that has not come back leaves the line. A waiter that
/// stops asking to sign or is deleted leaves at once; this only bounds what a waiter lost
/// otherwise holds up, and is long enough that a busy controller queue does not drop waiters.
pub const LATE: Duration = Duration::from_secs(10);

/// How urgent a waiter is: earliest deadline first, then the oldest, then by UID so the order
/// is total. The deadline is the [`RENEW_BY`] a request carries, or its creation time when it
/// carries none (a first issuance, cert-manager's own requests, Kubernetes CSRs): such a
/// request is due now. A renew-by earlier than the creation time counts as the creation time,
/// so an annotation can only ever make a request less urgent than one without it, never pass
/// a request created before it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Urgency {
    pub deadline: Timestamp,
    pub created: Timestamp,
    pub uid: String,
}

impl Urgency {
    /// Pure: the urgency of `uid`, created at `created` (`now` when unknown), with `renew_by`.
    pub fn of(uid: &str, created: Option<Timestamp>, renew_by: Option<Timestamp>, now: Timestamp) -> Self {
        let created = created.unwrap_or(now);
        Urgency {
            deadline: renew_by.map_or(created, |by| by.max(created)),
            created,
            uid: uid.to_string(),
        }
    }
}

/// Pure: the [`RENEW_BY`] of an object's annotations, when it parses.
pub fn renew_by(annotations: Option<&std::collections::BTreeMap<String, String>>) -> Option<Timestamp> {
    annotations?.get(RENEW_BY)?.trim().parse().ok()
}

/// Whose turn it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Turn {
    /// Sign now: a token was taken.
    Go,
    Wait(Wait),
}

/// A waiter's place in its issuer's line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    /// 1 for the head of the line.
    pub place: usize,
    /// Waiters in the line, this one included.
    pub line: usize,
    /// When its turn may come: look again then.
    pub after: Duration,
    /// It just joined the line: say so (once).
    pub first: bool,
}

/// Pure: what a waiting object says, on its condition and in its Event.
pub fn message(issuer: &IssuerName, settings: Settings, wait: &Wait) -> String {
    format!(
        "Waiting for {}'s issuance budget of {} signs/s (burst {}): number {} of {} in line, \
         soonest expiry first",
        issuer.describe(),
        settings.rate,
        settings.burst,
        wait.place,
        wait.line
    )
}

/// One issuer's tokens and line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    /// Micro-tokens at `at`.
    tokens: u64,
    at: Timestamp,
    /// The waiters, most urgent first, each with when it was told to come back.
    line: BTreeMap<Urgency, Timestamp>,
    /// The urgency each waiter joined with, by UID.
    joined: HashMap<String, Urgency>,
}

impl Bucket {
    /// A full bucket at `now`.
    pub fn full(settings: Settings, now: Timestamp) -> Self {
        Bucket {
            tokens: settings.capacity(),
            at: now,
            line: BTreeMap::new(),
            joined: HashMap::new(),
        }
    }

    /// Tokens now, in micro-tokens, and the waiters in line.
    pub fn state(&self) -> (u64, usize) {
        (self.tokens, self.line.len())
    }

    /// Whether the bucket is full with nobody waiting: as good as a new one.
    pub fn is_idle(&self, settings: Settings) -> bool {
        self.line.is_empty() && self.tokens >= settings.capacity()
    }

    /// Pure: whether `who` signs now, or its place and when to look again. The head of the
    /// line takes a token as soon as there is one; the waiter at place `k` only when `k`
    /// tokens are there, one for each waiter ahead of it, so it never takes the token of a more
    /// urgent one.
    pub fn turn(&mut self, settings: Settings, who: &Urgency, now: Timestamp) -> Turn {
        self.refill(settings, now);
        self.drop_late(who, now);
        let first = self.join(who);
        let ahead = self.line.range(..who).count();
        let needed = (ahead as u64 + 1) * UNIT;
        if self.tokens >= needed {
            self.tokens -= UNIT;
            self.leave(&who.uid);
            return Turn::Go;
        }
        let after = settings.time_for(needed - self.tokens);
        self.line.insert(who.clone(), after_now(now, after));
        Turn::Wait(Wait {
            place: ahead + 1,
            line: self.line.len(),
            after,
            first,
        })
    }

    /// A token taken by [`Bucket::turn`] went unused (no signing slot was free): it goes back.
    pub fn refund(&mut self, settings: Settings, now: Timestamp) {
        self.refill(settings, now);
        self.tokens = (self.tokens + UNIT).min(settings.capacity());
    }

    /// `uid` leaves the line (deleted, signed elsewhere).
    pub fn leave(&mut self, uid: &str) {
        if let Some(urgency) = self.joined.remove(uid) {
            self.line.remove(&urgency);
        }
    }

    fn refill(&mut self, settings: Settings, now: Timestamp) {
        // A clock that went back earns nothing and keeps the later instant.
        if now <= self.at {
            return;
        }
        let elapsed = now.duration_since(self.at).unsigned_abs();
        self.tokens = self
            .tokens
            .saturating_add(settings.earned(elapsed))
            .min(settings.capacity());
        self.at = now;
    }

    /// Joins `who` (or moves it, when its urgency changed); true when it was not in line.
    fn join(&mut self, who: &Urgency) -> bool {
        match self.joined.get(&who.uid) {
            Some(known) if known == who => false,
            Some(_) => {
                self.leave(&who.uid);
                self.insert(who);
                false
            }
            None => {
                self.insert(who);
                true
            }
        }
    }

    fn insert(&mut self, who: &Urgency) {
        self.joined.insert(who.uid.clone(), who.clone());
        self.line.insert(who.clone(), self.at);
    }

    /// Drops the waiters other than `who` that are over [`LATE`] late for their turn.
    fn drop_late(&mut self, who: &Urgency, now: Timestamp) {
        let late: Vec<String> = self
            .line
            .iter()
            .filter(|(u, due)| u.uid != who.uid && after_now(**due, LATE) < now)
            .map(|(u, _)| u.uid.clone())
            .collect();
        for uid in late {
            self.leave(&uid);
        }
    }
}

fn after_now(now: Timestamp, after: Duration) -> Timestamp {
    SignedDuration::try_from(after)
        .ok()
        .and_then(|after| now.checked_add(after).ok())
        .unwrap_or(Timestamp::MAX)
}

/// Every issuer's bucket, shared by the signing controllers (a CertificateRequest and a CSR
/// for the same issuer wait in one line). Off (no `--issuance-budget`): every turn is
/// [`Turn::Go`] and nothing is kept.
#[derive(Debug, Default)]
pub struct Budget {
    settings: Option<Settings>,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl Budget {
    pub fn new(settings: Option<Settings>) -> Self {
        Budget {
            settings,
            buckets: Mutex::default(),
        }
    }

    pub fn settings(&self) -> Option<Settings> {
        self.settings
    }

    /// Whether `who` signs through `issuer` now (a token taken), or waits.
    pub fn turn(&self, issuer: &IssuerName, who: &Urgency, now: Timestamp) -> Turn {
        let Some(settings) = self.settings else {
            return Turn::Go;
        };
        let mut buckets = lock(&self.buckets);
        // Buckets full and unused are as good as new ones: they go, so the map holds only the
        // issuers signing lately.
        buckets.retain(|_, bucket| {
            bucket.refill(settings, now);
            !bucket.is_idle(settings)
        });
        let bucket = buckets
            .entry(issuer.key())
            .or_insert_with(|| Bucket::full(settings, now));
        bucket.turn(settings, who, now)
    }

    /// Gives back the token of a turn that did not sign; a bucket full and unused goes.
    pub fn refund(&self, issuer: &IssuerName, now: Timestamp) {
        let Some(settings) = self.settings else {
            return;
        };
        let mut buckets = lock(&self.buckets);
        let key = issuer.key();
        if let Some(bucket) = buckets.get_mut(&key) {
            bucket.refund(settings, now);
            if bucket.is_idle(settings) {
                buckets.remove(&key);
            }
        }
    }

    /// `uid` no longer asks `issuer` to sign: it leaves its line.
    pub fn leave(&self, issuer: &IssuerName, uid: &str) {
        if self.settings.is_none() {
            return;
        }
        if let Some(bucket) = lock(&self.buckets).get_mut(&issuer.key()) {
            bucket.leave(uid);
        }
    }

    /// `uid` was deleted: it leaves every line.
    pub fn forget(&self, uid: &str) {
        for bucket in lock(&self.buckets).values_mut() {
            bucket.leave(uid);
        }
    }

    /// Objects waiting, over all issuers.
    pub fn waiting(&self) -> usize {
        lock(&self.buckets).values().map(|b| b.line.len()).sum()
    }
}
