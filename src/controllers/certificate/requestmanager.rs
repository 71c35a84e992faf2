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

use kube::api::PostParams;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::prelude::FromDer;

pub use self::build::{annotations_to_copy, request, request_name};
use super::observe::{self, current_revision, revision_of};
use super::{CertificateContext, Error, acts_on, log_and_retry};
use crate::api::certmanager::{Certificate, CertificateRequest, ISSUING, READY, REASON_FAILED};
use crate::certificates::decode;
use crate::certificates::matching::{private_key_matches_spec, request_matches_spec};
use crate::controllers::kit::events::Notice;
use crate::controllers::kit::plan::{Next, Plan, requeue};
use crate::controllers::kit::status::FieldManager;
use crate::pki::keys::Key;

const NAME: &str = "requestmanager";

/// What to do besides status (the request manager writes none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Work {
    /// Requests to delete, by name.
    pub delete: Vec<String>,
    /// The revision to create a request for.
    pub create: Option<i64>,
}

/// What the request manager decides from.
#[derive(Debug, Clone)]
pub struct Facts<'a> {
    pub certificate: &'a Certificate,
    /// The next private key, from the Secret status names (trusted per #9224).
    pub next_key: Option<&'a Key>,
    /// The requests the Certificate controls.
    pub requests: Vec<&'a CertificateRequest>,
}

/// The request manager's plan.
pub fn decide(facts: &Facts<'_>) -> Plan<Work> {
    let crt = facts.certificate;
    if !crt.has_true(ISSUING) {
        return Plan::idle(Next::AwaitChange);
    }
    let Some(key) = facts.next_key else {
        return Plan::idle(Next::AwaitChange);
    };
    if !private_key_matches_spec(key, &crt.spec).is_empty() {
        return Plan::idle(Next::AwaitChange);
    }
    let next = current_revision(crt) + 1;
    let mut work = Work::default();
    let mut kept = 0;
    for cr in &facts.requests {
        match revision_of(cr) {
            None => work.delete.push(cr.name_any()),
            Some(revision) if revision != next => {}
            Some(_) if keep(crt, cr, key) => kept += 1,
            Some(_) => work.delete.push(cr.name_any()),
        }
    }
    if kept == 0 {
        work.create = Some(next);
    }
    if work == Work::default() {
        Plan::idle(Next::AwaitChange)
    } else {
        Plan::idle(Next::Work(work))
    }
}

/// Whether a request for the next revision stays: it matches the spec and the next key, and
/// did not fail before this issuance began.
fn keep(crt: &Certificate, cr: &CertificateRequest, key: &Key) -> bool {
    let matches = request_matches_spec(cr, &crt.spec).is_ok_and(|v| v.is_empty());
    matches && csr_has_key(cr, key) && !failed_before_issuing(crt, cr)
}

/// Whether the request's CSR carries `key`'s public half.
pub fn csr_has_key(cr: &CertificateRequest, key: &Key) -> bool {
    let Ok(der) = decode::csr(&cr.spec.request.0) else {
        return false;
    };
    let Ok((_, csr)) = X509CertificationRequest::from_der(&der) else {
        return false;
    };
    decode::public_keys_equal(&csr.certification_request_info.subject_pki, key).unwrap_or(false)
}

/// A request that failed (`Ready=False`, `Failed`) before the current `Issuing=True` began.
pub fn failed_before_issuing(crt: &Certificate, cr: &CertificateRequest) -> bool {
    let failed = cr
        .condition(READY)
        .is_some_and(|c| c.status == "False" && c.reason == REASON_FAILED);
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

pub async fn reconcile(crt: Arc<Certificate>, ctx: Arc<CertificateContext>) -> Result<Action, Error> {
    if !acts_on(&crt) {
        return Ok(Action::await_change());
    }
    let (secret, key) = observe::next_key(&ctx, &crt);
    let requests = observe::owned_requests(&ctx, &crt);
    let facts = Facts {
        certificate: &crt,
        next_key: key.as_ref(),
        requests: requests.iter().map(AsRef::as_ref).collect(),
    };
    let plan = decide(&facts);
    if let (Next::Work(work), Some(key), Some(secret)) = (&plan.next, &key, &secret) {
        act(&ctx, &crt, work, key, &secret.name_any()).await?;
    }
    ctx.settled(&super::retry_key(NAME, &crt));
    Ok(requeue(&plan.next, || std::time::Duration::from_secs(1)))
}

async fn act(
    ctx: &CertificateContext,
    crt: &Certificate,
    work: &Work,
    key: &Key,
    key_secret: &str,
) -> Result<(), Error> {
    let namespace = crt.namespace().unwrap_or_default();
    let api = Api::<CertificateRequest>::namespaced(ctx.shared.client.clone(), &namespace);
    for name in &work.delete {
        super::delete_ignoring_missing(&api, name).await?;
    }
    let Some(revision) = work.create else {
        return Ok(());
    };
    let prefixes = &ctx.settings.copied_annotation_prefixes;
    let cr = match request(crt, key, revision, key_secret, prefixes) {
        Ok(cr) => cr,
        Err(err) => {
            let note = format!("Failed to generate CSR: {err} - will not retry");
            publish(ctx, crt, Notice::warning("RequestFailed", "Request", &note)).await;
            return Ok(());
        }
    };
    create(ctx, crt, &api, cr).await
}

/// Creates `cr`; when its name is taken by a request this Certificate does not control (left
/// by an earlier Certificate of the same name), creates it under a generated name instead.
async fn create(
    ctx: &CertificateContext,
    crt: &Certificate,
    api: &Api<CertificateRequest>,
    mut cr: CertificateRequest,
) -> Result<(), Error> {
    let params = PostParams {
        field_manager: Some(FieldManager::REQUEST_MANAGER.as_str().to_string()),
        ..PostParams::default()
    };
    let name = cr.name_any();
    let created = match api.create(&params, &cr).await {
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let existing = api
                .get_opt(&name)
                .await
                .map_err(Error::api("reading CertificateRequest", &name))?;
            if existing.is_some_and(|e| observe::controlled_by(&e.metadata, crt)) {
                return Ok(());
            }
            cr.metadata.generate_name = Some(format!("{name}-"));
            cr.metadata.name = None;
            api.create(&params, &cr).await
        }
        other => other,
    };
    match created {
        Ok(made) => {
            let note = format!("Created new CertificateRequest resource {:?}", made.name_any());
            publish(ctx, crt, Notice::normal("Requested", "Request", &note)).await;
            Ok(())
        }
        Err(source) => {
            let note = format!("Failed to create CertificateRequest: {source}");
            publish(ctx, crt, Notice::warning("RequestFailed", "Request", &note)).await;
            Err(Error::api("creating CertificateRequest", name)(source))
        }
    }
}

async fn publish(ctx: &CertificateContext, crt: &Certificate, notice: Notice) {
    use kube::Resource;
    ctx.events.publish(&notice, &crt.object_ref(&())).await;
}

pub fn error_policy(crt: Arc<Certificate>, err: &Error, ctx: Arc<CertificateContext>) -> Action {
    log_and_retry(NAME, &crt, err, &ctx)
}

#[cfg(test)]
mod tests;
