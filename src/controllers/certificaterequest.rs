//! CertificateRequest reconciler: the cert-manager external issuer contract. Only requests for
//! our group are touched; approval is awaited, denial honoured, and each request is signed at
//! most once.
//!
//! Observe ([`observe`]), decide ([`decide`] for the contract's step, [`plan`] for the exact
//! writes); the signing pipeline ([`crate::controllers::signing::pipeline`]) does the rest.

pub mod budget;
pub mod decide;
pub mod expiry;
pub mod observe;
pub mod plan;
pub mod watch;
mod wiring;

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;

pub use self::expiry::{ExpiryOwners, expiry_labels};
pub use self::observe::{request_key, request_view};
pub use self::wiring::controller;
use super::kit::status::FieldManager;
use super::kit::{Error, Shared};
use super::signing::budget::renew_by;
use super::signing::pipeline::{self, Adapter, Core, Observed, Seen};
use super::signing::{BudgetWait, Decision, IssuerName, Issuers, Outcome, Recheck, Signer};
use crate::api::certmanager::CertificateRequest;
use crate::telemetry::metrics::Controller;

/// What the request controller works with.
pub struct RequestContext {
    pub core: Core,
    /// The request each expiry series stands for.
    pub expiry: ExpiryOwners,
}

impl RequestContext {
    pub fn new(
        shared: Arc<Shared>,
        signer: Arc<Signer>,
        issuers: Issuers,
        recheck: tokio::sync::mpsc::UnboundedSender<Recheck>,
    ) -> Self {
        RequestContext {
            core: Core::new(shared, signer, issuers, recheck),
            expiry: ExpiryOwners::default(),
        }
    }
}

impl Adapter for RequestContext {
    type Object = CertificateRequest;
    type View = observe::Observation;
    const MANAGER: FieldManager = FieldManager::CERTIFICATE_REQUEST;
    const CONTROLLER: Controller = Controller::CertificateRequest;

    fn core(&self) -> &Core {
        &self.core
    }

    /// Contract step 1: never touch requests for other issuers.
    fn observe(&self, cr: &CertificateRequest) -> Option<Observed<Self::View>> {
        observe::observe(cr, &self.core)
    }

    fn has_certificate(view: &Self::View) -> bool {
        view.request.has_certificate()
    }

    fn request(cr: &CertificateRequest) -> &[u8] {
        &cr.spec.request.0
    }

    fn decide(&self, seen: &Seen<Self::View>, now: Timestamp) -> Decision {
        let request = &seen.view.request;
        let approval = self.core.shared.config.approval_required;
        let step = decide::decide(request, &seen.view.issuer, approval);
        let step = decide::guard(step, request.has_certificate(), &seen.held);
        plan::for_step(step, request, &seen.held, seen.announced, now)
    }

    fn signed(&self, seen: &Seen<Self::View>, outcome: Outcome, now: Timestamp) -> Decision {
        plan::for_outcome(outcome, &seen.view.request, now)
    }

    /// Set by standalone mode's request manager (the notAfter of the certificate renewed), or
    /// by whoever creates the request.
    fn renew_by(cr: &CertificateRequest) -> Option<Timestamp> {
        renew_by(cr.metadata.annotations.as_ref())
    }

    fn waits(&self, seen: &Seen<Self::View>, waiting: &BudgetWait, now: Timestamp) -> Decision {
        plan::for_budget(waiting, &seen.view.request, now)
    }

    fn expires(&self, cr: &CertificateRequest, issuer: &IssuerName, not_after: i64) {
        expiry::record(self, cr, &issuer.key(), not_after);
    }
}

pub async fn reconcile(cr: Arc<CertificateRequest>, ctx: Arc<RequestContext>) -> Result<Action, Error> {
    pipeline::reconcile(cr, ctx).await
}

pub fn error_policy(cr: Arc<CertificateRequest>, err: &Error, ctx: Arc<RequestContext>) -> Action {
    pipeline::error_policy(cr, err, ctx)
}
