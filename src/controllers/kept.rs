//! What a signing controller (CertificateRequests, Kubernetes CSRs) keeps of each object it
//! works on, by UID: its backoff, its sign (the exactly-once guard) and its memory (retry window,
//! approval notice). One place for how the three move together, so both controllers keep and
//! drop them alike.

use std::collections::HashSet;

use kube::runtime::controller::Action;
use prometheus_client::metrics::gauge::Gauge;

use super::backoff::Backoff;
use super::memory::RequestMemory;
use super::plan::{self as plans, Next};
use super::signings::Signings;

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

#[derive(Debug)]
pub struct Kept {
    pub backoff: Backoff<String>,
    /// Objects this process is signing or has signed, until the cache shows the write.
    pub signings: Signings,
    pub memory: RequestMemory,
}

impl Kept {
    /// The default backoff; signed-but-unsaved entries counted on `signed_unsaved`.
    pub fn new(signed_unsaved: Gauge) -> Self {
        Kept {
            backoff: super::default_backoff(),
            signings: Signings::counted_on(signed_unsaved),
            memory: RequestMemory::default(),
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
    pub fn opened(&self, uid: &str, window: Window, now: k8s_openapi::jiff::Timestamp) {
        if window == Window::Open {
            self.memory.failed(uid, now);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::signings::Signing;
    use std::time::Duration;

    /// (backoff entries, sign entries, memory entries) after each way of letting go of "a",
    /// with "b" kept throughout.
    #[test]
    fn settle_forget_and_retain_drop_exactly_their_part() {
        let now = "2026-11-22T10:00:00Z".parse().unwrap();
        let filled = || {
            let kept = Kept::new(Gauge::default());
            for uid in ["a", "b"] {
                kept.backoff.next(uid.to_string());
                kept.signings.insert(uid, Signing::InFlight);
                kept.opened(uid, Window::Open, now);
            }
            kept
        };
        let sizes = |k: &Kept| (k.backoff.len(), k.signings.snapshot().len(), k.memory.len());
        let live: HashSet<String> = ["b".to_string()].into();
        type LetGo = fn(&Kept, &HashSet<String>);
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
        let kept = Kept::new(Gauge::default());
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
