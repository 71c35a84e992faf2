//! The revision manager: once a Certificate is Ready, deletes its oldest requests beyond
//! `revisionHistoryLimit` (1 when unset). Requests without a valid revision are not counted.

use std::sync::Arc;

use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};

use super::observe::{self, revision_of};
use super::{CertificateContext, Error, acts_on, log_and_retry};
use crate::api::certmanager::{Certificate, CertificateRequest, READY};

const NAME: &str = "revisionmanager";

/// The requests to delete: the oldest revisions beyond the limit, once Ready.
pub fn decide(crt: &Certificate, requests: &[&CertificateRequest]) -> Vec<String> {
    if !crt.has_true(READY) {
        return Vec::new();
    }
    let limit = crt.spec.revision_history_limit.map_or(1, |l| l.max(1));
    let limit = usize::try_from(limit).unwrap_or(1);
    let mut revisions: Vec<(i64, String)> = requests
        .iter()
        .filter_map(|cr| revision_of(cr).map(|r| (r, cr.name_any())))
        .collect();
    revisions.sort();
    let extra = revisions.len().saturating_sub(limit);
    revisions.into_iter().take(extra).map(|(_, name)| name).collect()
}

pub async fn reconcile(crt: Arc<Certificate>, ctx: Arc<CertificateContext>) -> Result<Action, Error> {
    if !acts_on(&crt) {
        return Ok(Action::await_change());
    }
    let requests = observe::owned_requests(&ctx, &crt);
    let doomed = decide(&crt, &requests.iter().map(AsRef::as_ref).collect::<Vec<_>>());
    let api = Api::<CertificateRequest>::namespaced(
        ctx.shared.client.clone(),
        &crt.namespace().unwrap_or_default(),
    );
    for name in doomed {
        super::delete_ignoring_missing(&api, &name).await?;
    }
    ctx.settled(&super::retry_key(NAME, &crt));
    Ok(Action::await_change())
}

pub fn error_policy(crt: Arc<Certificate>, err: &Error, ctx: Arc<CertificateContext>) -> Action {
    log_and_retry(NAME, &crt, err, &ctx)
}

#[cfg(test)]
mod tests;
