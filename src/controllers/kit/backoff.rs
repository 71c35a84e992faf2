//! Per-object exponential backoff. kube-runtime's Controller retries failed reconciles only at the
//! delay `error_policy` returns, so the attempt count per object lives here.

use crate::clock::lock;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

/// Delays of `initial * 2^attempt`, capped at `max`.
#[derive(Debug)]
pub struct Backoff<K> {
    initial: Duration,
    max: Duration,
    attempts: Mutex<HashMap<K, u32>>,
}

impl<K: Eq + Hash> Backoff<K> {
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            attempts: Mutex::default(),
        }
    }

    /// The delay before the next attempt for `key`, counting this failure.
    pub fn next(&self, key: K) -> Duration {
        let mut attempts = lock(&self.attempts);
        let n = attempts.entry(key).or_insert(0);
        let delay = delay(self.initial, self.max, *n);
        *n = n.saturating_add(1);
        delay
    }

    /// Forget `key`: it succeeded or is gone.
    pub fn reset<Q>(&self, key: &Q)
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        lock(&self.attempts).remove(key);
    }

    /// Keeps only the keys `keep` accepts.
    pub fn retain(&self, mut keep: impl FnMut(&K) -> bool) {
        lock(&self.attempts).retain(|k, _| keep(k));
    }

    pub fn len(&self) -> usize {
        lock(&self.attempts).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The controllers' per-object backoff: 1 s doubling to 5 min.
pub fn per_object() -> Backoff<String> {
    Backoff::new(Duration::from_secs(1), Duration::from_secs(300))
}

fn delay(initial: Duration, max: Duration, attempt: u32) -> Duration {
    initial
        .checked_mul(1u32.checked_shl(attempt).unwrap_or(u32::MAX))
        .map_or(max, |d| d.min(max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_one_second_to_five_minutes() {
        let b = Backoff::new(Duration::from_secs(1), Duration::from_secs(300));
        let got: Vec<u64> = (0..12).map(|_| b.next("a").as_secs()).collect();
        assert_eq!(got, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert_eq!(b.next("b"), Duration::from_secs(1), "keys are independent");
        b.reset(&"a");
        assert_eq!(b.next("a"), Duration::from_secs(1), "reset starts over");
    }

    #[test]
    fn never_overflows() {
        assert_eq!(
            delay(Duration::from_secs(1), Duration::from_secs(300), u32::MAX),
            Duration::from_secs(300)
        );
    }
}
