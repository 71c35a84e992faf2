//! What a signing controller (CertificateRequests, Kubernetes CSRs) keeps of each object it
//! works on, by UID: its backoff, its sign (the exactly-once guard, [`super::once`]) and its
//! memory (retry window, approval notice). One place for how the three move together, so both
//! controllers keep and drop them alike.
//!
//! Entries go when the object settles (signed, failed for good) or is deleted, so the maps
//! hold at most the objects in flight. Nothing here survives a restart, on purpose and
//! conservatively: after one, the retry window of a failing object starts again at its next
//! failure (more time to recover, never less), and a request still waiting for approval gets
//! its `WaitingForApproval` Event once more.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use prometheus_client::metrics::gauge::Gauge;

use super::once::Signings;
use crate::clock::lock;
use crate::controllers::kit::backoff::{self, Backoff};
use crate::controllers::kit::plan::{self as plans, Next};

/// The retry window of a failing object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Window {
    #[default]
    Unchanged,
    /// A retryable failure now (an earlier one stays the start), before the write.
    Open,
    /// Signed or failed for good, after the write: backoff and window close.
    Close,
}

/// Whether an object's wait for approval has had its one `WaitingForApproval` Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Waiting {
    #[default]
    Unchanged,
    /// Announced now: no second Event while it waits.
    Announced,
    /// No longer waiting for approval.
    Over,
}

/// What a decision asks the ledger to remember of its object, decided with the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Memo {
    pub waiting: Waiting,
    pub window: Window,
    /// The status written ends a sign this process made (Issued with its chain, or Failed):
    /// hold the written resourceVersion until the cache shows it, so a reconcile from a cache
    /// that does not show the write yet does not send the object to the CA again.
    pub hold_written: bool,
}

#[derive(Debug)]
pub struct Ledger {
    pub backoff: Backoff<String>,
    /// Objects this process is signing or has signed, until the cache shows the write.
    pub signings: Signings,
    pub memory: Memory,
}

impl Ledger {
    /// The default backoff; signed-but-unsaved entries counted on `signed_unsaved`.
    pub fn new(signed_unsaved: Gauge) -> Self {
        Ledger {
            backoff: backoff::per_object(),
            signings: Signings::counted_on(signed_unsaved),
            memory: Memory::default(),
        }
    }

    /// `uid` will not be reconciled again: its backoff and memory go. Its sign stays until the
    /// object is deleted, since a reconcile dispatched from a stale cache may still run.
    pub fn settle(&self, uid: &str) {
        self.backoff.reset(uid);
        self.memory.forget(uid);
    }

    /// `uid` was deleted: everything kept of it goes.
    pub fn forget(&self, uid: &str) {
        self.settle(uid);
        self.signings.forget(uid);
    }

    /// Keeps only the objects in `live` (a relist's): deletes missed while the watch was down.
    pub fn retain(&self, live: &HashSet<String>) {
        self.backoff.retain(|uid| live.contains(uid));
        self.signings.retain(|uid| live.contains(uid));
        self.memory.retain(live);
    }

    /// A retryable failure now, at `now`: the retry window opens unless it is open already.
    pub fn opened(&self, uid: &str, window: Window, now: Timestamp) {
        if window == Window::Open {
            self.memory.failed(uid, now);
        }
    }

    /// Before the writes (and before a sign): the approval notice and the retry window.
    pub fn before(&self, uid: &str, memo: Memo, now: Timestamp) {
        match memo.waiting {
            Waiting::Unchanged => {}
            Waiting::Announced => self.memory.announced(uid),
            Waiting::Over => self.memory.stopped_waiting(uid),
        }
        self.opened(uid, memo.window, now);
    }

    /// After the plan's writes: hold the version written for a sign this process made (when
    /// `hold_written`), and close backoff and window when the object settled.
    pub fn written(&self, uid: &str, hold_written: bool, window: Window, written: Option<String>) {
        if hold_written {
            self.signings.saved(uid, written);
        }
        if window == Window::Close {
            self.backoff.reset(uid);
            self.memory.settled(uid);
        }
    }

    /// When to look at `uid` again: after its backoff when the issuer is being rechecked
    /// (`recheck`; the issuer's watch brings it back sooner once it is Ready), else as `next` says.
    pub fn requeue<W>(&self, uid: &str, next: &Next<W>, recheck: bool) -> Action {
        if recheck {
            return Action::requeue(self.backoff.next(uid.to_string()));
        }
        plans::requeue(next, || self.backoff.next(uid.to_string()))
    }
}

#[derive(Debug, Default)]
pub struct Memory {
    /// When signing first failed with a retryable error: the start of the retry window.
    first_failure: Mutex<HashMap<String, Timestamp>>,
    /// Requests whose wait for approval has been announced with an Event.
    announced: Mutex<HashSet<String>>,
}

impl Memory {
    /// When signing `uid` first failed with a retryable error, if it has since it last settled.
    pub fn first_failure(&self, uid: &str) -> Option<Timestamp> {
        lock(&self.first_failure).get(uid).copied()
    }

    /// Records a retryable failure at `now`; an earlier one stays the start of the window.
    pub fn failed(&self, uid: &str, now: Timestamp) {
        lock(&self.first_failure).entry(uid.to_string()).or_insert(now);
    }

    /// `uid` was signed or failed for good: its retry window closes.
    pub fn settled(&self, uid: &str) {
        lock(&self.first_failure).remove(uid);
    }

    /// Whether the wait for approval of `uid` has had its Event (since it last stopped
    /// waiting or was forgotten).
    pub fn is_announced(&self, uid: &str) -> bool {
        lock(&self.announced).contains(uid)
    }

    /// The wait for approval of `uid` has had its Event.
    pub fn announced(&self, uid: &str) {
        lock(&self.announced).insert(uid.to_string());
    }

    /// `uid` no longer waits for approval (approved, denied, or settled).
    pub fn stopped_waiting(&self, uid: &str) {
        lock(&self.announced).remove(uid);
    }

    /// Forgets `uid` entirely: the request was deleted.
    pub fn forget(&self, uid: &str) {
        self.settled(uid);
        self.stopped_waiting(uid);
    }

    /// Keeps only the requests in `live`: deletes missed while the watch was down.
    pub fn retain(&self, live: &HashSet<String>) {
        lock(&self.first_failure).retain(|uid, _| live.contains(uid));
        lock(&self.announced).retain(|uid| live.contains(uid));
    }

    /// Entries held, for tests and bounds checks.
    pub fn len(&self) -> usize {
        lock(&self.first_failure).len() + lock(&self.announced).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::signing::once::Signing;
    use std::time::Duration;

    /// (backoff entries, sign entries, memory entries) after each way of letting go of "a",
    /// with "b" kept throughout.
    #[test]
    fn settle_forget_and_retain_drop_exactly_their_part() {
        let now = "2026-11-22T10:00:00Z".parse().unwrap();
        let filled = || {
            let kept = Ledger::new(Gauge::default());
            for uid in ["a", "b"] {
                kept.backoff.next(uid.to_string());
                kept.signings.insert(uid, Signing::InFlight);
                kept.opened(uid, Window::Open, now);
            }
            kept
        };
        let sizes = |k: &Ledger| (k.backoff.len(), k.signings.snapshot().len(), k.memory.len());
        let live: HashSet<String> = ["b".to_string()].into();
        type LetGo = fn(&Ledger, &HashSet<String>);
        let cases: [(&str, LetGo, (usize, usize, usize)); 5] = [
            ("settle keeps the sign", |k, _| k.settle("a"), (1, 2, 1)),
            ("forget drops all", |k, _| k.forget("a"), (1, 1, 1)),
            ("retain drops all", |k, live| k.retain(live), (1, 1, 1)),
            (
                "written and closed keeps the sign",
                |k, _| k.written("a", false, Window::Close, None),
                (1, 2, 1),
            ),
            (
                "written unchanged keeps all",
                |k, _| k.written("a", true, Window::Unchanged, None),
                (2, 2, 2),
            ),
        ];
        for (row, act, want) in cases {
            let kept = filled();
            act(&kept, &live);
            assert_eq!(sizes(&kept), want, "{row}");
        }
    }

    #[test]
    fn a_recheck_waits_the_backoff_whatever_next_says() {
        let kept = Ledger::new(Gauge::default());
        let second = Duration::from_secs(1);
        assert_eq!(
            kept.requeue("a", &Next::<()>::AwaitChange, true),
            Action::requeue(second)
        );
        assert_eq!(
            kept.requeue("a", &Next::<()>::AwaitChange, false),
            Action::await_change()
        );
        let after = Duration::from_secs(7);
        assert_eq!(
            kept.requeue("b", &Next::<()>::After(after), false),
            Action::requeue(after)
        );
    }
}

#[cfg(test)]
mod memory_tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn the_window_starts_at_the_first_failure_and_closes_when_settled() {
        let m = Memory::default();
        assert_eq!(m.first_failure("a"), None);
        m.failed("a", at("2026-01-01T01:00:00Z"));
        m.failed("a", at("2026-01-01T01:02:00Z"));
        assert_eq!(m.first_failure("a"), Some(at("2026-01-01T01:00:00Z")));
        assert_eq!(m.first_failure("b"), None, "per request");
        m.settled("a");
        assert_eq!(m.first_failure("a"), None);
        m.failed("a", at("2026-01-01T02:00:00Z"));
        assert_eq!(
            m.first_failure("a"),
            Some(at("2026-01-01T02:00:00Z")),
            "a new window"
        );
    }

    #[test]
    fn waiting_is_announced_once() {
        let m = Memory::default();
        let mut seen = vec![];
        for uid in ["a", "a", "b"] {
            seen.push(m.is_announced(uid));
            m.announced(uid);
        }
        assert_eq!(seen, [false, true, false]);
        m.stopped_waiting("a");
        assert!(
            !m.is_announced("a"),
            "announced again only after it stopped waiting"
        );
    }

    #[test]
    fn forgetting_a_deleted_request_leaves_nothing() {
        let m = Memory::default();
        m.failed("a", at("2026-01-01T01:00:00Z"));
        m.announced("a");
        m.announced("b");
        assert_eq!(m.len(), 3);
        m.forget("a");
        assert_eq!(m.len(), 1);
        m.forget("b");
        assert!(m.is_empty());
    }
}
