//! What the issuer watches feed the issuer controllers: a deleted issuer takes its CFSSL client
//! (and the HMAC key in it), its backoff entry, its metric series and its last seen generation
//! with it (those missed while the watch was down go when it relists, [`Relist`]); and the
//! controllers run on spec changes only ([`Generations`]), so their own status writes do not
//! run them again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt, future};
use kube::ResourceExt;
use kube::runtime::watcher::Event;

use super::IssuerContext;
use crate::api::{AnyIssuer, cut_at_char};
use crate::cfssl::MAX_CA_BUNDLE;
use crate::clock::lock;
use crate::controllers::kit::wiring::Relist;
use crate::controllers::signing::signer::key;

/// The longest `url`, `label`, `profile` or `authSecretName` the cache keeps; a longer one is
/// cut to this, which no CA or Secret name matches.
const MAX_FIELD: usize = 8 * 1024;

/// Pure: the issuer as the cache keeps it. Tenants write Issuers, so nothing of one may be
/// larger in the cache than the checks read: metadata the controllers never look at goes, and
/// a `caBundle` over the largest bundle read is cut to one byte over it, so the check still
/// says it is too large.
pub fn slim<K: AnyIssuer>(issuer: &mut K) {
    let meta = issuer.meta_mut();
    meta.managed_fields = None;
    meta.annotations = None;
    meta.labels = None;
    let spec = issuer.spec_mut();
    for field in [&mut spec.url, &mut spec.label, &mut spec.auth_secret_name]
        .into_iter()
        .chain(spec.profile.as_mut())
    {
        cut_at_char(field, MAX_FIELD);
    }
    if let Some(bundle) = spec.ca_bundle.as_mut() {
        bundle.0.truncate(MAX_CA_BUNDLE + 1);
    }
}

/// Observe: one issuer watch event; a delete forgets the issuer, the end of a relist every
/// issuer of this kind it did not bring.
pub fn issuer_event<K: AnyIssuer>(event: &Event<K>, ctx: &IssuerContext, relist: &mut Relist) {
    if let Event::Delete(issuer) = event {
        forget_issuer(ctx, issuer);
    }
    let Some(live) = relist.observe(event, |i| Some(key(i))) else {
        return;
    };
    let prefix = format!("{}/", K::KIND);
    let gone = |key: &str| key.starts_with(&prefix) && !live.contains(key);
    ctx.signer.clients.retain(|key| !gone(key));
    ctx.backoff.retain(|key| !gone(key));
    ctx.shared.metrics.retain_issuers(&prefix, &live);
    ctx.generations.retain(|key| !gone(key));
}

/// Drops what the manager holds for a deleted issuer.
pub fn forget_issuer<K: AnyIssuer>(ctx: &IssuerContext, issuer: &K) {
    let key = key(issuer);
    ctx.signer.clients.forget(&key);
    ctx.backoff.reset(&key);
    ctx.shared.metrics.forget_issuer(&key);
    ctx.generations.forget(&key);
    tracing::debug!(issuer = %key, "deleted; client, backoff and metrics dropped");
}

/// The UID and generation each issuer (by [`key`]) was last passed on with: a change
/// of anything else, status included, does not pass.
#[derive(Debug, Default)]
pub struct Generations {
    seen: Mutex<HashMap<String, (Option<String>, i64)>>,
}

impl Generations {
    /// Whether `issuer` is new (a new UID under an old name included) or its spec changed since
    /// it last passed. Objects without a generation always pass.
    pub fn changed<K: AnyIssuer>(&self, issuer: &K) -> bool {
        let Some(generation) = issuer.meta().generation else {
            return true;
        };
        let seen = (issuer.uid(), generation);
        let mut generations = lock(&self.seen);
        generations.insert(key(issuer), seen.clone()) != Some(seen)
    }

    /// Forgets the issuer with this key.
    pub fn forget(&self, key: &str) {
        lock(&self.seen).remove(key);
    }

    /// Keeps only the issuers `keep` accepts.
    pub fn retain(&self, mut keep: impl FnMut(&str) -> bool) {
        lock(&self.seen).retain(|k, _| keep(k));
    }

    pub fn len(&self) -> usize {
        lock(&self.seen).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The issuers of `stream` whose spec changed (see [`Generations::changed`]).
pub fn spec_changes<K: AnyIssuer>(
    stream: impl Stream<Item = Arc<K>>,
    generations: Arc<Generations>,
) -> impl Stream<Item = Arc<K>> {
    stream.filter(move |obj| future::ready(generations.changed(&**obj)))
}

#[cfg(test)]
mod tests;
