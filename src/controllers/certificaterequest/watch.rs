//! What the request watch keeps of each request before the cache sees it, and what the
//! controller forgets when a request goes.
//!
//! - A CertificateRequest for another issuer group is not cached at all: the controller never
//!   acts on one and the issuer watches never look for one, so 20,000 of cert-manager's own
//!   requests cost no memory. cert-manager makes a request's spec immutable, so a request never
//!   becomes ours later; should one change group anyway, its update is turned into a delete,
//!   which takes it out of the cache and triggers nothing.
//! - `managedFields` are dropped from every request: nothing reads them.
//! - A request over a budget (its CSR over 64 KiB, or the rest over 64 KiB) is kept without
//!   its body ([`super::budget`]): the controller fails it from what the cache says it held.
//! - A terminal request (Issued, Failed, Denied) is cached bare (name, namespace, UID: no
//!   issuer, so its reconcile returns at once), unless the standalone controllers run: they
//!   read its CSR, annotations and conditions for as long as it is the Certificate's current
//!   request, so it is kept without its chain (`status.certificate` and `status.ca`, a third
//!   of a signed request's memory), which issuing reads live the one time it needs it. The
//!   controller has nothing more to do with it, and 10,000 issued requests cached even without their PEM held 21 MB (2.1 KB
//!   each, measured with a counting allocator). It is not turned into a delete (see
//!   [`trim_request_event`]). Its backoff and memory go at once; what signing holds for it (the
//!   written resourceVersion, a few dozen bytes) stays until it is deleted, as the guard
//!   against a reconcile dispatched with its stale object. Should it ever become non-terminal
//!   again, its next update brings it back.
//! - A deleted request takes its backoff entry, its unsaved chain, what the ledger holds for it
//!   and the expiry series of its Certificate when that series shows this request's signature.
//!
//! Deletes are seen on the watch, before the cache drops the object. Those missed while the
//! watch was down are swept when it relists ([`Relist`]).

use kube::ResourceExt;
use kube::runtime::watcher::Event;

use super::budget::within_budget;
use super::observe::is_terminal;
use super::{RequestContext, expiry_labels, request_key};
use crate::api::IssuerKind;
use crate::api::certmanager::{CACHED_CHAIN_SHA256, CertificateRequest, CertificateRequestSpec};
use crate::controllers::kit::wiring::Relist;

/// Whether the request names an issuer of our group (a kind we do not know included: the
/// controller fails those, so it must see them).
pub fn is_ours(cr: &CertificateRequest) -> bool {
    IssuerKind::for_issuer_ref(&cr.spec.issuer_ref).is_some()
}

/// Pure: the watch event the request cache and controller get, if any. A terminal request
/// (Issued, Failed, Denied) is cached bare unless `keep_terminal` (the standalone controllers
/// read it), and then without its chain.
pub fn trim_request_event(
    event: Event<CertificateRequest>,
    keep_terminal: bool,
) -> Option<Event<CertificateRequest>> {
    let kept = |cr: &CertificateRequest| is_ours(cr) && !leaves_cache(cr, keep_terminal);
    let slim = |mut cr: CertificateRequest| {
        cr.metadata.managed_fields = None;
        without_chain(within_budget(cr))
    };
    match event {
        Event::Apply(cr) if kept(&cr) => Some(Event::Apply(slim(cr))),
        // A terminal request of ours stays as its bare name, never as a delete. kube-runtime
        // 5.0's `ReflectHandle::poll_next` takes the next `ObjectRef` from its channel and
        // looks it up in the store; when the object has left the store since the ref was sent,
        // it returns `Poll::Pending` although the channel returned `Ready`, so no waker is
        // registered and the ref is dropped. The controller's shared stream then sleeps until
        // an unrelated wake-up, and every request queued behind it waits with it. A bare object
        // stays in the store and names no issuer, so its reconcile returns at once.
        Event::Apply(cr) if is_ours(&cr) => Some(Event::Apply(bare(&cr))),
        // A foreign request never entered the cache (its spec is immutable): nothing to stall.
        Event::Apply(cr) => Some(Event::Delete(bare(&cr))),
        Event::InitApply(cr) if kept(&cr) => Some(Event::InitApply(slim(cr))),
        Event::InitApply(_) => None,
        Event::Delete(cr) => Some(Event::Delete(bare(&cr))),
        Event::Init => Some(Event::Init),
        Event::InitDone => Some(Event::InitDone),
    }
}

/// Pure: whether a request of ours is done with (Issued, Failed, Denied) and so leaves the
/// cache, outside standalone mode (`keep_terminal`).
fn leaves_cache(cr: &CertificateRequest, keep_terminal: bool) -> bool {
    is_ours(cr) && !keep_terminal && is_terminal(cr)
}

/// A terminal request without its chain, its digest in its place. Only a terminal one: the
/// signer reads a chain on a request not yet marked Issued as the sign of a lost condition
/// write (`decide::guard`). Only this watch says a chain was dropped: a tenant's annotation
/// of that name is removed first.
fn without_chain(mut cr: CertificateRequest) -> CertificateRequest {
    if let Some(annotations) = cr.metadata.annotations.as_mut() {
        annotations.remove(CACHED_CHAIN_SHA256);
    }
    if is_terminal(&cr) {
        cr.drop_chain();
    }
    cr
}

/// Only what names the object.
fn bare(cr: &CertificateRequest) -> CertificateRequest {
    let mut bare = CertificateRequest::new(&cr.name_any(), CertificateRequestSpec::default());
    bare.metadata.namespace.clone_from(&cr.metadata.namespace);
    bare.metadata.uid.clone_from(&cr.metadata.uid);
    bare
}

/// Observe: one request watch event. Forgets a deleted request, settles one that leaves the
/// cache, sweeps at the end of a relist, then trims the event.
pub fn request_event(
    event: Event<CertificateRequest>,
    ctx: &RequestContext,
    relist: &mut Relist,
) -> Option<Event<CertificateRequest>> {
    let keep_terminal = ctx.core.shared.config.standalone.is_some();
    match &event {
        Event::Delete(cr) if is_ours(cr) => forget_request(ctx, cr),
        // Never reconciled again, so nothing else would drop its backoff and memory. What
        // `signings` holds stays until the request is deleted: a reconcile dispatched with the
        // stale object before this event may still run, and only that entry stops it from
        // signing again (`e2e_once` holds this under issuer churn).
        Event::Apply(cr) | Event::InitApply(cr) if leaves_cache(cr, keep_terminal) => {
            ctx.core.ledger.settle(&request_key(cr));
        }
        _ => {}
    }
    let ours = |cr: &CertificateRequest| is_ours(cr).then(|| request_key(cr));
    if let Some(live) = relist.observe(&event, ours) {
        ctx.core.ledger.retain(&live);
        for labels in ctx.expiry.retain(&live) {
            ctx.core.shared.metrics.certificate_expiry.remove(&labels);
        }
    }
    trim_request_event(event, keep_terminal)
}

/// Drops what the manager holds for a deleted request: backoff, memory, what signing held, its
/// place in an issuance budget's line and its expiry series.
pub fn forget_request(ctx: &RequestContext, cr: &CertificateRequest) {
    let uid = request_key(cr);
    ctx.core.ledger.forget(&uid);
    ctx.core.signer.budget.forget(&uid);
    if let Some(issuer) = issuer_key_of(cr) {
        let labels = expiry_labels(cr, &issuer);
        if ctx.expiry.release(&labels, &uid) {
            ctx.core.shared.metrics.certificate_expiry.remove(&labels);
        }
    }
}

/// The metrics key (`Issuer/ns/name`, `ClusterIssuer/name`) of the issuer a request names.
fn issuer_key_of(cr: &CertificateRequest) -> Option<String> {
    let name = &cr.spec.issuer_ref.name;
    match IssuerKind::for_issuer_ref(&cr.spec.issuer_ref)? {
        Ok(kind @ IssuerKind::Issuer) => {
            Some(format!("{kind}/{}/{name}", cr.namespace().unwrap_or_default()))
        }
        Ok(kind @ IssuerKind::ClusterIssuer) => Some(format!("{kind}/{name}")),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests;
