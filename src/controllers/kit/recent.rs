//! Whole copies beside a store of summaries. Where a store keeps an object as a summary (an
//! issued Secret, a finished request in standalone mode: what selecting it takes, not what
//! reading it does), the whole copies of the most recently seen ones sit here ([`Recent`]). A
//! settled Certificate's objects are read only when something about it changes; keeping every
//! one whole was most of what 10,000 Ready Certificates cost. The reconciles that follow a
//! change find the whole copy here; one woken later (a renewal, a spec edit, a restart) reads
//! it live once and remembers it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::watcher;

use crate::api::certmanager::CertificateRequest;
use crate::certificates::secret::data_bytes;

/// How many whole copies a generation holds, and how many bytes of payload: past either, the
/// older generation goes. The byte bound caps the worst case (keystores and RSA-8192 keys in
/// every Secret, long chains in every request) at twice it.
const GENERATION: usize = 256;
const GENERATION_BYTES: usize = 4 * 1024 * 1024;
/// How many copies, and bytes, stay pinned for Certificates in flight; past either, pins age
/// like the rest (a deleted Certificate's pin stays until its object changes).
const PINNED: usize = 4096;
const PINNED_BYTES: usize = 64 * 1024 * 1024;

type Key = (String, String);

/// An object a [`Recent`] keeps whole: what its copy weighs.
pub trait Whole: Resource + Clone {
    /// The bytes of payload (Secret data, a request's CSR, chain and CA) the bounds count.
    fn weight(&self) -> usize;
}

impl Whole for Secret {
    fn weight(&self) -> usize {
        data_bytes(self)
    }
}

impl Whole for CertificateRequest {
    fn weight(&self) -> usize {
        let status = self.status.as_ref();
        let pem = |b: Option<&k8s_openapi::ByteString>| b.map_or(0, |b| b.0.len());
        self.spec.request.0.len()
            + pem(status.and_then(|s| s.certificate.as_ref()))
            + pem(status.and_then(|s| s.ca.as_ref()))
    }
}

/// The whole copies, by namespace and name. A copy a Certificate in flight read is pinned until
/// that Certificate settles: a mass issuance or renewal has every one of them in flight at
/// once, and their reconciles would otherwise push each other's copies out and read them live
/// again. The rest, the copies the watch brought, sit in two generations, the older dropped
/// when the newer fills.
pub struct Recent<K>(Arc<Mutex<Copies<K>>>);

impl<K> Clone for Recent<K> {
    fn clone(&self) -> Self {
        Recent(self.0.clone())
    }
}

impl<K> Default for Recent<K> {
    fn default() -> Self {
        Recent(Arc::default())
    }
}

struct Copies<K> {
    pinned: HashMap<Key, Arc<K>>,
    pinned_bytes: usize,
    current: HashMap<Key, Arc<K>>,
    current_bytes: usize,
    previous: HashMap<Key, Arc<K>>,
}

impl<K> Default for Copies<K> {
    fn default() -> Self {
        Copies {
            pinned: HashMap::new(),
            pinned_bytes: 0,
            current: HashMap::new(),
            current_bytes: 0,
            previous: HashMap::new(),
        }
    }
}

impl<K: Whole> Copies<K> {
    fn age(&mut self, key: Key, copy: Arc<K>) {
        let bytes = copy.weight();
        if self.current.len() >= GENERATION || self.current_bytes + bytes > GENERATION_BYTES {
            self.previous = std::mem::take(&mut self.current);
            self.current_bytes = 0;
        }
        self.previous.remove(&key);
        self.current_bytes += bytes;
        self.current.insert(key, copy);
    }

    fn take(&mut self, key: &Key) -> Option<Arc<K>> {
        let pinned = self.pinned.remove(key);
        if let Some(copy) = &pinned {
            self.pinned_bytes -= copy.weight();
        }
        let current = self.current.remove(key);
        if let Some(copy) = &current {
            self.current_bytes = self.current_bytes.saturating_sub(copy.weight());
        }
        let previous = self.previous.remove(key);
        pinned.or(current).or(previous)
    }

    /// Pins `copy` if there is room, else lets it age.
    fn pin(&mut self, key: Key, copy: Arc<K>) {
        let bytes = copy.weight();
        if self.pinned.len() < PINNED && self.pinned_bytes + bytes <= PINNED_BYTES {
            self.pinned_bytes += bytes;
            self.pinned.insert(key, copy);
        } else {
            self.age(key, copy);
        }
    }
}

impl<K: Whole> Recent<K> {
    fn lock(&self) -> MutexGuard<'_, Copies<K>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `copy` whole, pinned if `pin` or if the copy it replaces was.
    pub fn remember(&self, copy: Arc<K>, pin: bool) {
        let Some(key) = key_of(copy.meta()) else {
            return;
        };
        let mut copies = self.lock();
        let pinned = copies.pinned.contains_key(&key);
        copies.take(&key);
        if pin || pinned {
            copies.pin(key, copy);
        } else {
            copies.age(key, copy);
        }
    }

    /// The whole copy of `namespace/name` at `version`, if it is still here; pinned from now
    /// if `pin`.
    pub fn get(&self, namespace: &str, name: &str, version: Option<&str>, pin: bool) -> Option<Arc<K>> {
        let key = (namespace.to_string(), name.to_string());
        let mut copies = self.lock();
        let found = [&copies.pinned, &copies.current, &copies.previous]
            .into_iter()
            .find_map(|m| m.get(&key))
            .filter(|c| version.is_some() && c.meta().resource_version.as_deref() == version)
            .cloned()?;
        if pin && !copies.pinned.contains_key(&key) {
            copies.take(&key);
            copies.pin(key, found.clone());
        }
        Some(found)
    }

    /// Lets the copy of `namespace/name` age: its Certificate has settled.
    pub fn unpin(&self, namespace: &str, name: &str) {
        let key = (namespace.to_string(), name.to_string());
        let mut copies = self.lock();
        if copies.pinned.contains_key(&key)
            && let Some(copy) = copies.take(&key)
        {
            copies.age(key, copy);
        }
    }

    /// Whether the copy of `namespace/name` is pinned.
    #[cfg(test)]
    pub fn is_pinned(&self, namespace: &str, name: &str) -> bool {
        let key = (namespace.to_string(), name.to_string());
        self.lock().pinned.contains_key(&key)
    }

    /// Drops the copy of the object `meta` names.
    pub fn forget(&self, meta: &ObjectMeta) {
        if let Some(key) = key_of(meta) {
            self.lock().take(&key);
        }
    }

    /// The event as the store takes it: an object `summary` gives a summary of is remembered
    /// whole here and passed on as that summary; one it gives none of is passed on whole; a
    /// deleted one is forgotten. Copies the watch brings are not pinned: thousands pinned
    /// through a mass issuance and freed as their Certificates settle leave the heap in holes
    /// (the README's standalone round 8), for fewer reads only where a reconcile came late.
    pub fn summarise(
        &self,
        event: watcher::Event<K>,
        summary: impl Fn(&K) -> Option<K>,
    ) -> watcher::Event<K> {
        let keep = |whole: K| match summary(&whole) {
            Some(summary) => {
                self.remember(Arc::new(whole), false);
                summary
            }
            None => whole,
        };
        match event {
            watcher::Event::Apply(whole) => watcher::Event::Apply(keep(whole)),
            watcher::Event::InitApply(whole) => watcher::Event::InitApply(keep(whole)),
            watcher::Event::Delete(gone) => {
                self.forget(gone.meta());
                watcher::Event::Delete(gone)
            }
            marker => marker,
        }
    }
}

fn key_of(meta: &ObjectMeta) -> Option<Key> {
    Some((meta.namespace.clone()?, meta.name.clone()?))
}

#[cfg(test)]
mod tests;
