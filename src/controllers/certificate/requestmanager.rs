//! The request manager: while a Certificate is issuing and its next key is ready, keeps
//! exactly one CertificateRequest for the next revision, made from that key and the spec.
//! Requests without a revision, for the next revision but not matching the spec or key, and
//! failed ones from an earlier attempt at this revision are deleted.
//!
//! A request is named `<certificate>-<revision>` (long names shortened as cert-manager does),
//! so a retry finds the request it made; a foreign request under that name is worked around
//! with a generated name.

mod build;

use std::sync::Arc;

use kube::ResourceExt;

pub use self::build::{annotations_to_copy, go_duration_string, request, request_name};
use super::observe::{self, next_revision, revision_of};
use super::{CertificateContext, Error, computed, execute, log_and_retry};
use crate::api::ConditionStatus;
use crate::api::certmanager::{Certificate, CertificateRequest, ISSUING, READY, REASON_FAILED};
use crate::certificates::matching::{private_key_matches_spec, request_has_key, request_matches_spec};
use crate::controllers::kit::events::Notice;
use crate::controllers::kit::plan::{Announce, FullPlan, IfTaken, Next, Plan, Requeue, Write, requeue_at};
use crate::controllers::kit::status::FieldManager;
use crate::pki::keys::Key;

const NAME: &str = "requestmanager";

/// What the request manager decides from.
#[derive(Debug, Clone)]
pub struct Facts<'a> {
    pub certificate: &'a Certificate,
    /// The next private key, from the Secret status names (trusted per #9224).
    pub next_key: Option<&'a Key>,
    /// The name of that Secret, recorded on the request.
    pub key_secret: &'a str,
    /// The requests the Certificate controls.
    pub requests: Vec<&'a CertificateRequest>,
    /// The annotation prefixes copied from the Certificate to its requests.
    pub prefixes: &'a [String],
}

/// While issuing with a next key as the spec asks: the deletes among the requests, and whether
/// one of the next revision is kept.
struct Triage<'a> {
    key: &'a Key,
    next: i64,
    deletes: Vec<Write>,
    kept: bool,
}

fn triage<'a>(facts: &Facts<'a>) -> Option<Triage<'a>> {
    let crt = facts.certificate;
    let key = facts.next_key.filter(|_| crt.has_true(ISSUING))?;
    if !private_key_matches_spec(key.spec, &crt.spec).is_empty() {
        return None;
    }
    let next = next_revision(crt);
    let mut deletes = Vec::new();
    let mut kept = false;
    for cr in &facts.requests {
        match revision_of(cr) {
            None => deletes.extend(Write::delete(*cr)),
            Some(revision) if revision != next => {}
            Some(_) if keep(crt, cr, key) => kept = true,
            Some(_) => deletes.extend(Write::delete(*cr)),
        }
    }
    Some(Triage {
        key,
        next,
        deletes,
        kept,
    })
}

/// Whether [`decide`] signs a new CSR with the next key (tens of milliseconds for RSA-8192),
/// and so runs on the crypto pool; the other passes cost less than the hand-off.
pub fn signs(facts: &Facts<'_>) -> bool {
    triage(facts).is_some_and(|t| !t.kept)
}

/// The request manager's plan: the requests to delete, then the one to create. It writes no
/// status.
pub fn decide(facts: &Facts<'_>) -> FullPlan<()> {
    let crt = facts.certificate;
    let Some(Triage {
        key,
        next,
        deletes: mut writes,
        kept,
    }) = triage(facts)
    else {
        return FullPlan::idle(Next::AwaitChange);
    };
    if kept {
        return Plan::idle(Next::AwaitChange).preceded_by(writes);
    }
    match request(crt, key, next, facts.key_secret, facts.prefixes) {
        Ok(cr) => {
            writes.push(create(crt, &cr));
            Plan::idle(Next::AwaitChange).preceded_by(writes)
        }
        Err(err) => {
            let note = format!("Failed to generate CSR: {err} - will not retry");
            let plan = Plan {
                status: None,
                event: Some(Notice::warning("RequestFailed", "Request", &note)),
                next: Next::AwaitChange,
            };
            plan.preceded_by(writes)
        }
    }
}

/// The create of `cr`. Its name taken by a request this Certificate does not control (left by
/// an earlier Certificate of the same name), it is made under a generated name instead.
fn create(crt: &Certificate, cr: &CertificateRequest) -> Write {
    let announce = Announce {
        made: Some(Notice::normal(
            "Requested",
            "Request",
            "Created new CertificateRequest resource ",
        )),
        refused: Some(Notice::warning(
            "RequestFailed",
            "Request",
            "Failed to create CertificateRequest: ",
        )),
    };
    let owner = IfTaken::RenameUnlessControlledBy(crt.uid().unwrap_or_default());
    Write::create(cr, owner, announce)
}

/// Whether a request for the next revision stays: it matches the spec and the next key, and
/// did not fail before this issuance began.
fn keep(crt: &Certificate, cr: &CertificateRequest, key: &Key) -> bool {
    let matches = request_matches_spec(cr, &crt.spec).is_ok_and(|v| v.is_empty());
    matches && request_has_key(cr, key) && !failed_before_issuing(crt, cr)
}

/// A request that failed (`Ready=False`, `Failed`) before the current `Issuing=True` began.
pub fn failed_before_issuing(crt: &Certificate, cr: &CertificateRequest) -> bool {
    let failed = cr
        .condition(READY)
        .is_some_and(|c| c.status == ConditionStatus::False.as_str() && c.reason == REASON_FAILED);
    let began = crt
        .condition(ISSUING)
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0);
    let failed_at = cr
        .status
        .as_ref()
        .and_then(|s| s.failure_time.as_ref())
        .map(|t| t.0);
    failed && matches!((failed_at, began), (Some(at), Some(began)) if at < began)
}

pub async fn reconcile(crt: Arc<Certificate>, ctx: Arc<CertificateContext>) -> Result<Requeue, Error> {
    if !ctx.acts_on(FieldManager::REQUEST_MANAGER, &crt) {
        return Ok(Requeue::AWAIT_CHANGE);
    }
    let (secret, key) = observe::next_key(&ctx, &crt);
    let requests = observe::picked_requests(&ctx, &crt).await?;
    let key_secret = secret.map(|s| s.name_any()).unwrap_or_default();
    let prefixes = ctx.settings.copied_annotation_prefixes.clone();
    let costly = signs(&Facts {
        certificate: &crt,
        next_key: key.as_ref(),
        key_secret: &key_secret,
        requests: requests.iter().map(AsRef::as_ref).collect(),
        prefixes: &prefixes,
    });
    let decision = {
        let crt = crt.clone();
        move || {
            let facts = Facts {
                certificate: &crt,
                next_key: key.as_ref(),
                key_secret: &key_secret,
                requests: requests.iter().map(AsRef::as_ref).collect(),
                prefixes: &prefixes,
            };
            decide(&facts)
        }
    };
    let plan = if costly {
        computed(&ctx, &crt, decision).await?
    } else {
        decision()
    };
    let next = execute(&ctx, &crt, FieldManager::REQUEST_MANAGER, plan).await?;
    ctx.settled(&super::retry_key(NAME, &crt));
    Ok(requeue_at(&next, || std::time::Duration::from_secs(1)))
}

pub fn error_policy(crt: Arc<Certificate>, err: &Error, ctx: Arc<CertificateContext>) -> Requeue {
    log_and_retry(NAME, &crt, err, &ctx)
}

#[cfg(test)]
mod tests;
