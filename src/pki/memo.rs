//! Values derived from bytes, remembered by the bytes' SHA-256 (never the bytes themselves).
//! The Certificate controllers look at the same unchanged PEM (a Secret's key and chain, a
//! request's CSR) from several controllers and on every wake; decoding it again each time was
//! most of a reconcile's CPU.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};

use sha2::{Digest, Sha256};

/// At most `max` values; past it the memo starts over (a working set, not an archive). Errors
/// are not remembered.
pub(crate) struct Memo<V> {
    max: usize,
    values: LazyLock<Mutex<HashMap<[u8; 32], V>>>,
}

impl<V: Clone> Memo<V> {
    pub(crate) const fn new(max: usize) -> Self {
        Memo {
            max,
            values: LazyLock::new(Default::default),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<[u8; 32], V>> {
        self.values.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The value derived from `bytes`: remembered, else `derive`d and remembered.
    pub(crate) fn get_or<E>(&self, bytes: &[u8], derive: impl FnOnce(&[u8]) -> Result<V, E>) -> Result<V, E> {
        let digest: [u8; 32] = Sha256::digest(bytes).into();
        if let Some(value) = self.lock().get(&digest) {
            return Ok(value.clone());
        }
        let value = derive(bytes)?;
        let mut values = self.lock();
        if values.len() >= self.max {
            values.clear();
        }
        values.insert(digest, value.clone());
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value is derived once per distinct input, errors never stick, and a full memo starts over.
    #[test]
    fn derives_once_and_starts_over_when_full() {
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
        let rows: [(&[u8], Result<usize, ()>, usize); 7] = [
            (b"ab", Ok(2), 1),
            (b"ab", Ok(2), 1),
            (b"", Err(()), 2),
            (b"", Err(()), 3),
            (b"xyz", Ok(3), 4),
            // Full (two entries): starts over with this one.
            (b"q", Ok(1), 5),
            (b"ab", Ok(2), 6),
        ];
        for (i, (bytes, want, want_calls)) in rows.into_iter().enumerate() {
            assert_eq!(memo.get_or(bytes, len), want, "row {i}");
            assert_eq!(calls.get(), want_calls, "row {i}");
        }
    }
}
