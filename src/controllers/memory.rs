//! What the request controller remembers of a request between reconciles, by UID, and which
//! request each Certificate's expiry series stands for.
//!
//! Entries go when the request settles (signed, failed for good, approved) or is deleted (see
//! [`super::watches`]), so the maps hold at most the requests in flight. Nothing here survives a
//! restart, on purpose and conservatively: after one, the retry window of a failing request
//! starts again at its next failure (more time to recover, never less), and a request still
//! waiting for approval gets its `WaitingForApproval` Event once more.

use crate::clock::lock;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use k8s_openapi::jiff::Timestamp;

use crate::telemetry::metrics::CertificateLabels;

#[derive(Debug, Default)]
pub struct RequestMemory {
    /// When signing first failed with a retryable error: the start of the retry window.
    first_failure: Mutex<HashMap<String, Timestamp>>,
    /// Requests whose wait for approval has been announced with an Event.
    announced: Mutex<HashSet<String>>,
}

impl RequestMemory {
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

/// Which request's signature each Certificate's expiry series shows. The series goes when that
/// request is deleted, or when a relist no longer brings it, without signed requests being kept
/// in the cache to tell.
#[derive(Debug, Default)]
pub struct ExpiryOwners {
    by_series: Mutex<HashMap<CertificateLabels, String>>,
}

impl ExpiryOwners {
    /// The request `uid` has just set the series `labels`.
    pub fn set(&self, labels: CertificateLabels, uid: &str) {
        lock(&self.by_series).insert(labels, uid.to_string());
    }

    /// Whether the series `labels` showed the request `uid`, which was deleted: if so, the
    /// series has no request left and the caller removes it.
    pub fn release(&self, labels: &CertificateLabels, uid: &str) -> bool {
        let mut owners = lock(&self.by_series);
        if owners.get(labels).is_some_and(|owner| owner == uid) {
            owners.remove(labels);
            return true;
        }
        false
    }

    /// Keeps the series whose request is in `live`; returns the others, for removal.
    pub fn retain(&self, live: &HashSet<String>) -> Vec<CertificateLabels> {
        let mut gone = Vec::new();
        lock(&self.by_series).retain(|labels, uid| {
            let keep = live.contains(uid);
            if !keep {
                gone.push(labels.clone());
            }
            keep
        });
        gone
    }

    pub fn len(&self) -> usize {
        lock(&self.by_series).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn the_window_starts_at_the_first_failure_and_closes_when_settled() {
        let m = RequestMemory::default();
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
        let m = RequestMemory::default();
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
        let m = RequestMemory::default();
        m.failed("a", at("2026-01-01T01:00:00Z"));
        m.announced("a");
        m.announced("b");
        assert_eq!(m.len(), 3);
        m.forget("a");
        assert_eq!(m.len(), 1);
        m.forget("b");
        assert!(m.is_empty());
    }

    #[test]
    fn an_expiry_series_goes_with_the_request_it_shows() {
        let web = |issuer: &str| CertificateLabels {
            namespace: "apps".into(),
            name: "web".into(),
            issuer: issuer.into(),
        };
        let owners = ExpiryOwners::default();
        owners.set(web("Issuer/apps/ca"), "r1");
        owners.set(web("Issuer/apps/ca"), "r2");
        owners.set(web("ClusterIssuer/ca"), "r3");
        // (row, series, deleted request, removed)
        let cases = [
            (
                "an older request of the Certificate",
                web("Issuer/apps/ca"),
                "r1",
                false,
            ),
            ("another issuer's series", web("Issuer/apps/ca"), "r3", false),
            ("the request the series shows", web("Issuer/apps/ca"), "r2", true),
            ("already released", web("Issuer/apps/ca"), "r2", false),
        ];
        for (row, labels, uid, want) in cases {
            assert_eq!(owners.release(&labels, uid), want, "{row}");
        }
        assert_eq!(owners.len(), 1);
        owners.set(web("Issuer/apps/ca"), "r4");
        let gone = owners.retain(&["r4".to_string()].into());
        assert_eq!(gone, [web("ClusterIssuer/ca")], "a relist without r3");
        assert_eq!(owners.len(), 1);
    }
}
