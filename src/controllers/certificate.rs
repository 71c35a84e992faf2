//! Standalone mode: cert-manager's Certificate lifecycle controllers, run in this manager for
//! Certificates whose `issuerRef.group` is ours. Each controller is its own module (observe,
//! a pure `decide` with its table, a thin act) under its own field manager; they cooperate only
//! through the Certificate's status, as cert-manager's do:
//!
//! - [`trigger`] sets `Issuing=True` when the Secret needs a new certificate (the policy chain);
//! - [`keymanager`] keeps the next private key in a Secret of its own while issuing;
//! - [`requestmanager`] creates one CertificateRequest per revision from that key;
//! - [`approver`] approves the requests they create (no cert-manager approver runs);
//! - [`issuing`] writes the signed certificate into the Secret and ends the issuance;
//! - [`readiness`] writes `Ready`, `notBefore`, `notAfter` and `renewalTime`;
//! - [`revisionmanager`] deletes requests beyond `revisionHistoryLimit`.

pub mod approver;
pub mod issuing;
pub mod keymanager;
pub mod observe;
pub mod readiness;
pub mod requestmanager;
pub mod revisionmanager;
pub mod status;
pub mod trigger;
mod wiring;

#[cfg(test)]
mod properties;
#[cfg(test)]
mod testing;

use k8s_openapi::api::core::v1::Secret;
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use std::sync::Arc;

pub use self::wiring::{StandaloneWatches, controllers};
pub use super::kit::Error;
use super::kit::Shared;
use super::kit::backoff::{self, Backoff};
use super::kit::events::Events;
use super::kit::plan::{self, FullPlan, Next, Target};
use super::kit::secrets::SecretIndex;
use super::kit::status::FieldManager;
use crate::api::certmanager::{Certificate, CertificateRequest};

/// What standalone mode was started with.
pub use crate::controllers::kit::StandaloneSettings as Settings;

/// What every Certificate controller reads: the caches, the settings, its Events.
pub struct CertificateContext {
    pub shared: Arc<Shared>,
    pub settings: Settings,
    pub certificates: Store<Certificate>,
    pub requests: Store<CertificateRequest>,
    /// Secrets labelled `controller.cert-manager.io/fao=true`, whole (data and managedFields).
    pub secrets: Store<Secret>,
    /// Which other Secrets exist (the metadata watch), to skip GETs of ones that do not.
    pub secret_names: SecretIndex,
    pub events: Events,
    backoff: Backoff<String>,
}

impl CertificateContext {
    pub fn new(
        shared: Arc<Shared>,
        settings: Settings,
        (certificates, requests, secrets): (Store<Certificate>, Store<CertificateRequest>, Store<Secret>),
    ) -> Self {
        CertificateContext {
            events: Events::per_event(shared.client.clone(), shared.clock.clone()),
            shared,
            settings,
            certificates,
            requests,
            secrets,
            secret_names: SecretIndex::default(),
            backoff: backoff::per_object(),
        }
    }

    /// The requeue after a failed reconcile of `key`, growing per failure.
    pub fn retry(&self, key: String) -> Action {
        Action::requeue(self.backoff.next(key))
    }

    /// Forgets the failures of `key` after a reconcile that went through.
    pub fn settled(&self, key: &str) {
        self.backoff.reset(key);
    }
}

/// Carries out `plan` (its writes, status apply and Event) on `crt` as `manager`; hands `next`
/// back.
pub async fn execute<W>(
    ctx: &CertificateContext,
    crt: &Certificate,
    manager: FieldManager,
    plan: impl Into<FullPlan<W>>,
) -> Result<Next<W>, Error> {
    let target = Target {
        client: &ctx.shared.client,
        object: crt,
        manager,
        events: &ctx.events,
    };
    let (_, next) = plan::execute(target, plan).await?;
    Ok(next)
}

/// Runs `work` on the crypto pool, in the lane of `crt`'s namespace: what a tenant's
/// Certificate or Secret can make long (key generation, CSR signing, keystores) never runs on
/// the runtime thread, and one tenant's work holds at most one of the pool's slots.
pub async fn computed<T, F>(ctx: &CertificateContext, crt: &Certificate, work: F) -> Result<T, Error>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    use kube::ResourceExt;
    let namespace = crt.namespace().unwrap_or_default();
    ctx.shared
        .crypto
        .run(&namespace, work)
        .await
        .map_err(|source| Error::Crypto {
            object: observe::describe(crt),
            source,
        })
}

/// Whether a Certificate controller acts on `crt` at all: ours, and not being deleted.
pub fn acts_on(crt: &Certificate) -> bool {
    observe::is_ours(crt) && crt.metadata.deletion_timestamp.is_none()
}

/// The key a Certificate's retry back-off is kept under, per controller.
pub fn retry_key(controller: &str, crt: &Certificate) -> String {
    use kube::ResourceExt;
    format!("{controller}/{}", crt.uid().unwrap_or_default())
}

/// What every Certificate controller's `error_policy` does: log, then retry with back-off.
pub fn log_and_retry(
    controller: &'static str,
    crt: &Certificate,
    err: &Error,
    ctx: &CertificateContext,
) -> Action {
    tracing::warn!(controller, certificate = %observe::describe(crt), error = %err, "reconcile failed");
    ctx.retry(retry_key(controller, crt))
}
