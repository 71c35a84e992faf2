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
//!   pick a Certificate's current and next request from its requests' revisions and chains,
//!   and read the one they pick. So there it is cached as its summary
//!   (`CertificateRequest::summary`: metadata, its revision, its chain's SHA-256; 10,000 issued
//!   requests cached whole but for their chain held 38 MB), and its whole copy goes beside the
//!   store (`kit::recent`), where the standalone controllers find it or read it live once. The
//!   controller has nothing more to do with it. It is not turned into a delete (see
//!   [`trim_request_event`]). Its backoff and memory go at once; what signing holds for it (the
//!   written resourceVersion, a few dozen bytes) stays until it is deleted, as the guard
//!   against a reconcile dispatched with its stale object. Should it ever become non-terminal
//!   again, its next update brings it back whole.
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
use crate::api::certmanager::{CertificateRequest, CertificateRequestSpec};
use crate::certificates::keys::annotation::CERTIFICATE_REVISION;
use crate::controllers::kit::recent::Recent;
use crate::controllers::kit::wiring::Relist;

/// Whether the request names an issuer of our group (a kind we do not know included: the
/// controller fails those, so it must see them).
pub fn is_ours(cr: &CertificateRequest) -> bool {
    IssuerKind::for_issuer_ref(&cr.spec.issuer_ref).is_some()
}

/// Pure: the watch event the request cache and controller get, if any. A terminal request
/// (Issued, Failed, Denied) is cached bare unless `keep_terminal` (the standalone controllers
/// read it), and then kept whole here: [`request_event`] turns it into its summary.
pub fn trim_request_event(
    event: Event<CertificateRequest>,
    keep_terminal: bool,
) -> Option<Event<CertificateRequest>> {
    let kept = |cr: &CertificateRequest| is_ours(cr) && !leaves_cache(cr, keep_terminal);
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

/// A request of ours as the cache or its copies keep it: no managedFields (nothing reads
/// them), its body only within the budget.
fn slim(mut cr: CertificateRequest) -> CertificateRequest {
    cr.metadata.managed_fields = None;
    within_budget(cr)
}

/// What the standalone cache keeps of a terminal request of ours: what picks it, not what
/// reads it. None for any other: the store keeps it as it is.
fn finished_summary(cr: &CertificateRequest) -> Option<CertificateRequest> {
    (is_ours(cr) && is_terminal(cr)).then(|| cr.summary(CERTIFICATE_REVISION))
}

/// Pure: whether a request of ours is done with (Issued, Failed, Denied) and so leaves the
/// cache, outside standalone mode (`keep_terminal`).
fn leaves_cache(cr: &CertificateRequest, keep_terminal: bool) -> bool {
    is_ours(cr) && !keep_terminal && is_terminal(cr)
}

/// Only what names the object.
fn bare(cr: &CertificateRequest) -> CertificateRequest {
    let mut bare = CertificateRequest::new(&cr.name_any(), CertificateRequestSpec::default());
    bare.metadata.namespace.clone_from(&cr.metadata.namespace);
    bare.metadata.uid.clone_from(&cr.metadata.uid);
    bare
}

/// Observe: one request watch event. Forgets a deleted request, settles one that leaves the
/// cache, sweeps at the end of a relist, then trims the event, and in standalone mode keeps a
/// finished request's whole copy in `copies` and its summary for the store.
pub fn request_event(
    event: Event<CertificateRequest>,
    ctx: &RequestContext,
    relist: &mut Relist,
    copies: &Recent<CertificateRequest>,
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
    let event = trim_request_event(event, keep_terminal)?;
    // In standalone mode a finished request goes into the store as its summary, whole into
    // `copies`; a deleted one leaves `copies` too.
    Some(if keep_terminal {
        copies.summarise(event, finished_summary)
    } else {
        event
    })
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
