//! The requests a pass reads: the cache keeps finished ones as summaries (what picks a
//! revision's request), so the ones of the current and next revision, the only ones whose CSR,
//! spec or conditions a decision reads, are had whole: from the copies beside the store, else
//! read live once and remembered there.

use std::sync::Arc;

use kube::{Api, ResourceExt};

use super::{current_revision, next_revision, owned_requests, revision_of, settled};
use crate::api::certmanager::{Certificate, CertificateRequest};
use crate::controllers::certificate::{CertificateContext, Error};

/// The requests `crt` controls, those of its current and next revision whole (while `crt` is
/// in flight, their copies stay pinned until it settles). A summarised one that is gone or was
/// replaced by another of its name is left out: the watch says so next.
pub async fn picked_requests(
    ctx: &CertificateContext,
    crt: &Certificate,
) -> Result<Vec<Arc<CertificateRequest>>, Error> {
    let picked = [current_revision(crt), next_revision(crt)];
    let pin = !settled(crt);
    let mut out = Vec::new();
    for cr in owned_requests(ctx, crt) {
        if !cr.is_summary() || !revision_of(&cr).is_some_and(|r| picked.contains(&r)) {
            out.push(cr);
        } else if let Some(whole) = whole(ctx, &cr, pin).await? {
            out.push(whole);
        }
    }
    Ok(out)
}

/// The whole request `summary` stands for: its copy at that version, else one live GET.
async fn whole(
    ctx: &CertificateContext,
    summary: &CertificateRequest,
    pin: bool,
) -> Result<Option<Arc<CertificateRequest>>, Error> {
    let (namespace, name) = (summary.namespace().unwrap_or_default(), summary.name_any());
    let version = summary.metadata.resource_version.as_deref();
    if let Some(copy) = ctx.request_copies.get(&namespace, &name, version, pin) {
        return Ok(Some(copy));
    }
    let live = live_request(ctx, summary).await?.map(Arc::new);
    if let Some(live) = &live {
        ctx.request_copies.remember(live.clone(), pin);
    }
    Ok(live)
}

/// One live GET of the request `cached` stands for, as the cache would hold it whole (no
/// managedFields); `None` when it is gone or another object took its name (the watch says so
/// next).
pub async fn live_request(
    ctx: &CertificateContext,
    cached: &CertificateRequest,
) -> Result<Option<CertificateRequest>, Error> {
    let (namespace, name) = (cached.namespace().unwrap_or_default(), cached.name_any());
    let live = Api::<CertificateRequest>::namespaced(ctx.shared.client.clone(), &namespace)
        .get_opt(&name)
        .await
        .map_err(Error::api(
            "reading CertificateRequest",
            format!("{namespace}/{name}"),
        ))?;
    Ok(live
        .filter(|live| live.metadata.uid == cached.metadata.uid)
        .map(|mut live| {
            live.metadata.managed_fields = None;
            live
        }))
}

/// Lets the copies of `crt`'s requests age: it has settled.
pub fn unpin_requests(ctx: &CertificateContext, crt: &Certificate) {
    let namespace = crt.namespace().unwrap_or_default();
    for cr in owned_requests(ctx, crt) {
        ctx.request_copies.unpin(&namespace, &cr.name_any());
    }
}
