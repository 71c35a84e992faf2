//! The revision manager: once a Certificate is Ready, deletes its oldest requests beyond
//! `revisionHistoryLimit` (1 when unset). Requests without a valid revision are not counted.

use std::sync::Arc;

use kube::ResourceExt;

use super::observe::{self, revision_of};
use super::{CertificateContext, Error, execute, log_and_retry};
use crate::api::certmanager::{Certificate, CertificateRequest, READY};
use crate::controllers::kit::plan::{FullPlan, Next, Plan, Requeue, Write, requeue_at};
use crate::controllers::kit::status::FieldManager;

const NAME: &str = "revisionmanager";

/// The revision manager's plan: once Ready, delete the requests of the oldest revisions
/// beyond the limit.
pub fn decide(crt: &Certificate, requests: &[&CertificateRequest]) -> FullPlan<()> {
    if !crt.has_true(READY) {
        return FullPlan::idle(Next::AwaitChange);
    }
    let limit = crt.spec.revision_history_limit.map_or(1, |l| l.max(1));
    let limit = usize::try_from(limit).unwrap_or(1);
    let mut revisions: Vec<(i64, String, &CertificateRequest)> = requests
        .iter()
        .filter_map(|cr| revision_of(cr).map(|r| (r, cr.name_any(), *cr)))
        .collect();
    revisions.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let extra = revisions.len().saturating_sub(limit);
    let doomed = revisions
        .into_iter()
        .take(extra)
        .filter_map(|(_, _, cr)| Write::delete(cr));
    Plan::idle(Next::AwaitChange).preceded_by(doomed.collect())
}

pub async fn reconcile(crt: Arc<Certificate>, ctx: Arc<CertificateContext>) -> Result<Requeue, Error> {
    if !ctx.acts_on(FieldManager::REVISION_MANAGER, &crt) {
        return Ok(Requeue::AWAIT_CHANGE);
    }
    let requests = observe::owned_requests(&ctx, &crt);
    let plan = decide(&crt, &requests.iter().map(AsRef::as_ref).collect::<Vec<_>>());
    let next = execute(&ctx, &crt, FieldManager::REVISION_MANAGER, plan).await?;
    ctx.settled(&super::retry_key(NAME, &crt));
    Ok(requeue_at(&next, || std::time::Duration::from_secs(1)))
}

pub fn error_policy(crt: Arc<Certificate>, err: &Error, ctx: Arc<CertificateContext>) -> Requeue {
    log_and_retry(NAME, &crt, err, &ctx)
}

#[cfg(test)]
mod tests;
