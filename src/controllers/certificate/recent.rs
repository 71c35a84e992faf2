//! Issued Secrets in the cache: the store keeps each as its name, namespace, UID,
//! resourceVersion and owners only ([`summary_of`]), and the whole copies of the most recently
//! seen ones sit beside it here ([`Recent`]). A Ready Certificate's Secret is read only when
//! something about it changes; keeping every one whole was most of what 10,000 Ready
//! Certificates cost (its data, annotations, labels and managedFields: 5.3 of its 6 KB). The
//! reconciles that follow a change find the whole copy here; one woken later (a renewal, a
//! spec edit, a restart) reads the Secret live once (`observe::secret_named`).
//!
//! Next-key Secrets are kept whole in the store: they live for one issuance, and the key
//! manager and the request manager read their keys on every pass of it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher;

use crate::certificates::next_key;
use crate::certificates::secret::data_bytes;

/// How many whole copies a generation holds, and how many bytes of data: past either, the
/// older generation goes. The byte bound caps the worst case (keystores and RSA-8192 keys in
/// every Secret) at twice it.
const GENERATION: usize = 256;
const GENERATION_BYTES: usize = 4 * 1024 * 1024;
/// How many copies, and bytes of data, stay pinned for Certificates in flight; past either,
/// pins age like the rest (a deleted Certificate's pin stays until its Secret changes).
const PINNED: usize = 4096;
const PINNED_BYTES: usize = 64 * 1024 * 1024;

type Key = (String, String);

/// The whole copies of issued Secrets, by namespace and name. A copy a Certificate in flight
/// read is pinned until that Certificate settles: a mass issuance or renewal has every one of
/// them in flight at once, and their reconciles would otherwise push each other's copies out
/// and read them live again. The rest, the copies the watch brought, sit in two generations,
/// the older dropped when the newer fills.
#[derive(Clone, Default)]
pub struct Recent(Arc<Mutex<Copies>>);

#[derive(Default)]
struct Copies {
    pinned: HashMap<Key, Arc<Secret>>,
    pinned_bytes: usize,
    current: HashMap<Key, Arc<Secret>>,
    current_bytes: usize,
    previous: HashMap<Key, Arc<Secret>>,
}

impl Copies {
    fn age(&mut self, key: Key, secret: Arc<Secret>) {
        let bytes = data_bytes(&secret);
        if self.current.len() >= GENERATION || self.current_bytes + bytes > GENERATION_BYTES {
            self.previous = std::mem::take(&mut self.current);
            self.current_bytes = 0;
        }
        self.previous.remove(&key);
        self.current_bytes += bytes;
        self.current.insert(key, secret);
    }

    fn take(&mut self, key: &Key) -> Option<Arc<Secret>> {
        let pinned = self.pinned.remove(key);
        if let Some(secret) = &pinned {
            self.pinned_bytes -= data_bytes(secret);
        }
        let current = self.current.remove(key);
        let previous = self.previous.remove(key);
        pinned.or(current).or(previous)
    }

    /// Pins `secret` if there is room, else lets it age.
    fn pin(&mut self, key: Key, secret: Arc<Secret>) {
        let bytes = data_bytes(&secret);
        if self.pinned.len() < PINNED && self.pinned_bytes + bytes <= PINNED_BYTES {
            self.pinned_bytes += bytes;
            self.pinned.insert(key, secret);
        } else {
            self.age(key, secret);
        }
    }
}

impl Recent {
    fn lock(&self) -> MutexGuard<'_, Copies> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `secret`'s whole copy, pinned if `pin` or if the copy it replaces was.
    pub fn remember(&self, secret: Arc<Secret>, pin: bool) {
        let Some(key) = key_of(&secret.metadata) else {
            return;
        };
        let mut copies = self.lock();
        let pinned = copies.pinned.contains_key(&key);
        copies.take(&key);
        if pin || pinned {
            copies.pin(key, secret);
        } else {
            copies.age(key, secret);
        }
    }

    /// The whole copy of `namespace/name` at `version`, if it is still here; pinned from now
    /// if `pin`.
    pub fn get(&self, namespace: &str, name: &str, version: Option<&str>, pin: bool) -> Option<Arc<Secret>> {
        let key = (namespace.to_string(), name.to_string());
        let mut copies = self.lock();
        let found = [&copies.pinned, &copies.current, &copies.previous]
            .into_iter()
            .find_map(|m| m.get(&key))
            .filter(|s| version.is_some() && s.metadata.resource_version.as_deref() == version)
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
            && let Some(secret) = copies.take(&key)
        {
            copies.age(key, secret);
        }
    }

    /// Whether the copy of `namespace/name` is pinned.
    #[cfg(test)]
    pub fn is_pinned(&self, namespace: &str, name: &str) -> bool {
        let key = (namespace.to_string(), name.to_string());
        self.lock().pinned.contains_key(&key)
    }

    fn forget(&self, meta: &ObjectMeta) {
        if let Some(key) = key_of(meta) {
            self.lock().take(&key);
        }
    }

    /// The event as the store takes it: an issued Secret applied is remembered whole here and
    /// passed on as its summary; a deleted one is forgotten. Copies the watch brings are not
    /// pinned: thousands pinned through a mass issuance and freed as their Certificates settle
    /// leave the heap in holes (the README's standalone round 8), for fewer reads only where
    /// a reconcile came late.
    pub fn summarise(&self, event: watcher::Event<Secret>) -> watcher::Event<Secret> {
        let keep = |secret: Secret| {
            if next_key::labelled(&secret) {
                return secret;
            }
            let summary = summary_of(&secret);
            self.remember(Arc::new(secret), false);
            summary
        };
        match event {
            watcher::Event::Apply(secret) => watcher::Event::Apply(keep(secret)),
            watcher::Event::InitApply(secret) => watcher::Event::InitApply(keep(secret)),
            watcher::Event::Delete(secret) => {
                self.forget(&secret.metadata);
                watcher::Event::Delete(secret)
            }
            marker => marker,
        }
    }
}

/// What the store keeps of an issued Secret: no data, labels, annotations or managedFields.
pub fn summary_of(secret: &Secret) -> Secret {
    let meta = &secret.metadata;
    Secret {
        metadata: ObjectMeta {
            name: meta.name.clone(),
            namespace: meta.namespace.clone(),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            owner_references: meta.owner_references.clone(),
            ..ObjectMeta::default()
        },
        ..Secret::default()
    }
}

/// Whether a cached Secret may be a summary, to be had whole from [`Recent`] or read live. A
/// Secret that truly has no data is read live too: the same answer, one GET later.
pub fn is_summary(secret: &Secret) -> bool {
    secret.data.is_none()
}

fn key_of(meta: &ObjectMeta) -> Option<Key> {
    Some((meta.namespace.clone()?, meta.name.clone()?))
}

#[cfg(test)]
mod tests;
