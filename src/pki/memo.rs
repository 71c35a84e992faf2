//! Values derived from bytes, remembered by the bytes' SHA-256 (never the bytes themselves).
//! The Certificate controllers look at the same unchanged PEM (a Secret's key and chain, a
//! request's CSR) from several controllers and on every wake; decoding it again each time was
//! most of a reconcile's CPU.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};

use sha2::{Digest, Sha256};

/// The values of the last `max` to `2 * max` distinct inputs, in two generations: when the
/// newer one is full it becomes the older and the oldest go. A working set, not an archive;
/// emptying a full memo at once made the passes still reading its keys parse them again (each
/// PEM up to four times in a mass issuance, README round 12). Errors are not remembered.
pub(crate) struct Memo<V> {
    max: usize,
    values: LazyLock<Mutex<Generations<V>>>,
}

struct Generations<V> {
    newer: HashMap<[u8; 32], V>,
    older: HashMap<[u8; 32], V>,
}

impl<V> Default for Generations<V> {
    fn default() -> Self {
        Generations {
            newer: HashMap::new(),
            older: HashMap::new(),
        }
    }
}

impl<V: Clone> Memo<V> {
    pub(crate) const fn new(max: usize) -> Self {
        Memo {
            max,
            values: LazyLock::new(Default::default),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Generations<V>> {
        self.values.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The value derived from `bytes`: remembered, else `derive`d and remembered.
    pub(crate) fn get_or<E>(&self, bytes: &[u8], derive: impl FnOnce(&[u8]) -> Result<V, E>) -> Result<V, E> {
        let digest: [u8; 32] = Sha256::digest(bytes).into();
        if let Some(value) = self.get(&digest) {
            return Ok(value);
        }
        let value = derive(bytes)?;
        self.insert(digest, value.clone());
        Ok(value)
    }

    /// Remembers `value` as what `bytes` derive to, for a caller that made `bytes` from
    /// `value` and so knows it without deriving.
    pub(crate) fn remember(&self, bytes: &[u8], value: V) {
        self.insert(Sha256::digest(bytes).into(), value);
    }

    /// Whether a value for `bytes` is remembered, in either generation.
    #[cfg(test)]
    pub(crate) fn holds(&self, bytes: &[u8]) -> bool {
        let digest: [u8; 32] = Sha256::digest(bytes).into();
        let values = self.lock();
        values.newer.contains_key(&digest) || values.older.contains_key(&digest)
    }

    /// A value of either generation; one of the older is kept on in the newer.
    fn get(&self, digest: &[u8; 32]) -> Option<V> {
        let mut values = self.lock();
        if let Some(value) = values.newer.get(digest) {
            return Some(value.clone());
        }
        let value = values.older.remove(digest)?;
        drop(values);
        self.insert(*digest, value.clone());
        Some(value)
    }

    fn insert(&self, digest: [u8; 32], value: V) {
        let mut values = self.lock();
        if values.newer.len() >= self.max {
            values.older = std::mem::take(&mut values.newer);
        }
        values.newer.insert(digest, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value is derived once per distinct input while it is among the last `max` to
    /// `2 * max`, errors never stick, and a value looked up moves to the newer generation.
    #[test]
    fn derives_once_while_in_either_generation() {
        let memo: Memo<usize> = Memo::new(2);
        let calls = std::cell::Cell::new(0);
        let len = |bytes: &[u8]| -> Result<usize, ()> {
            calls.set(calls.get() + 1);
            if bytes.is_empty() {
                Err(())
            } else {
                Ok(bytes.len())
            }
        };
        let rows: [(&[u8], Result<usize, ()>, usize); 11] = [
            (b"ab", Ok(2), 1),
            (b"ab", Ok(2), 1),
            (b"", Err(()), 2),
            (b"", Err(()), 3),
            // newer {ab, xyz}.
            (b"xyz", Ok(3), 4),
            // Newer full: it becomes the older; newer {q}, older {ab, xyz}.
            (b"q", Ok(1), 5),
            // From the older, kept on in the newer {q, ab}.
            (b"ab", Ok(2), 5),
            // Newer full again: newer {xyz}, older {q, ab}.
            (b"xyz", Ok(3), 5),
            // newer {xyz, ab}, older {q}.
            (b"ab", Ok(2), 5),
            // newer {abcd}, older {xyz, ab}: q is gone.
            (b"abcd", Ok(4), 6),
            (b"q", Ok(1), 7),
        ];
        for (i, (bytes, want, want_calls)) in rows.into_iter().enumerate() {
            assert_eq!(memo.get_or(bytes, len), want, "row {i}");
            assert_eq!(calls.get(), want_calls, "row {i}");
        }
    }

    /// A remembered value is what `get_or` answers, without deriving.
    #[test]
    fn a_remembered_value_is_not_derived_again() {
        let memo: Memo<usize> = Memo::new(4);
        assert!(!memo.holds(b"made"));
        memo.remember(b"made", 7);
        assert!(memo.holds(b"made"));
        assert_eq!(memo.get_or(b"made", |_| Err::<usize, ()>(())), Ok(7));
        assert_eq!(memo.get_or(b"other", |_| Err::<usize, ()>(())), Err(()));
    }
}
