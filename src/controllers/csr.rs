//! Kubernetes CertificateSigningRequest reconciler: signs `certificates.k8s.io/v1` CSRs whose
//! `signerName` names one of our issuers, once approved, on the same CFSSL path as
//! CertificateRequests, at most once each.
//!
//! Observe ([`observe`]), decide ([`decide`] for the step, [`plan`] for the exact writes); the
//! signing pipeline ([`crate::controllers::signing::pipeline`]) does the rest, this
//! controller's SubjectAccessReview included (its [`Adapter::review`]).

pub mod decide;
pub mod observe;
pub mod plan;
pub mod signer_name;
mod wiring;

use std::sync::Arc;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::runtime::watcher;

use self::decide::{Access, CsrView};
pub use self::wiring::controller;
use super::kit::status::FieldManager;
use super::kit::wiring::Relist;
use super::kit::{Error, Shared};
use super::signing::pipeline::{self, Adapter, Core, Observed, Seen, key};
use super::signing::signer::credentials;
use super::signing::{BudgetWait, Decision, IssuerName, Issuers, Outcome, Readiness, Recheck, Signer};
use crate::telemetry::metrics::Controller;

/// What the CSR controller works with.
pub struct CsrContext {
    pub core: Core,
    /// Whether `issuers.<group>/<namespace>.<name>` signer names are ours.
    pub namespaced: bool,
}

/// What the CSR controller observed of one CSR.
pub struct CsrObservation {
    pub csr: CsrView,
    pub signer: IssuerName,
    pub issuer: Readiness,
}

impl CsrContext {
    pub fn new(
        shared: Arc<Shared>,
        signer: Arc<Signer>,
        issuers: Issuers,
        recheck: tokio::sync::mpsc::UnboundedSender<Recheck>,
    ) -> Self {
        CsrContext {
            namespaced: shared.config.kubernetes_csr.is_some_and(|c| c.namespaced_signers),
            core: Core::new(shared, signer, issuers, recheck),
        }
    }

    /// Follows one event of the CSR watch (ours only): forgets a deleted CSR and, at the end
    /// of a relist, every CSR it did not bring (deleted while the watch was away).
    pub fn follow(&self, event: &watcher::Event<CertificateSigningRequest>, relist: &mut Relist) {
        if let watcher::Event::Delete(csr) = event {
            self.core.ledger.forget(&key(csr));
            self.core.signer.budget.forget(&key(csr));
        }
        if let Some(live) = relist.observe(event, |csr| Some(key(csr))) {
            self.core.ledger.retain(&live);
        }
    }

    /// The issuer a CSR names, when it is ours.
    pub fn signer_of(&self, csr: &CertificateSigningRequest) -> Option<IssuerName> {
        signer_name::parse(&csr.spec.signer_name, self.namespaced)
    }
}

/// Decide, given whether the requester may reference the issuer.
fn decided(seen: &Seen<CsrObservation>, access: &Access, now: Timestamp) -> Decision {
    let view = &seen.view;
    let step = decide::decide(&view.csr, &view.signer, &view.issuer, access);
    plan::for_step(decide::guard(step, &seen.held), now)
}

impl Adapter for CsrContext {
    type Object = CertificateSigningRequest;
    type View = CsrObservation;
    const MANAGER: FieldManager = FieldManager::CERTIFICATE_SIGNING_REQUEST;
    const CONTROLLER: Controller = Controller::CertificateSigningRequest;

    fn core(&self) -> &Core {
        &self.core
    }

    fn observe(&self, csr: &CertificateSigningRequest) -> Option<Observed<CsrObservation>> {
        let signer = self.signer_of(csr)?;
        let issuer = self
            .core
            .issuers
            .readiness(&signer, &self.core.shared.status_schemas);
        Some(Observed {
            issuer: Some(signer.clone()),
            view: CsrObservation {
                csr: observe::csr_view(csr),
                signer,
                issuer,
            },
        })
    }

    fn has_certificate(view: &CsrObservation) -> bool {
        view.csr.has_certificate
    }

    fn request(csr: &CertificateSigningRequest) -> &[u8] {
        &csr.spec.request.0
    }

    fn decide(&self, seen: &Seen<CsrObservation>, now: Timestamp) -> Decision {
        decided(seen, &Access::for_signer(&seen.view.signer), now)
    }

    fn signed(&self, _: &Seen<CsrObservation>, outcome: Outcome, now: Timestamp) -> Decision {
        plan::for_outcome(outcome, now)
    }

    /// A CSR carries no renew-by (its requester may be anyone allowed to create one): it is
    /// due from its creation, in the order CSRs and requests were made.
    fn waits(&self, _: &Seen<CsrObservation>, waiting: &BudgetWait, _: Timestamp) -> Decision {
        plan::for_budget(waiting)
    }

    /// Asks the API server whether the requester may reference the namespaced Issuer.
    async fn review(&self, csr: &CertificateSigningRequest, seen: &Seen<CsrObservation>) -> Decision {
        match observe::access(&self.core.shared.client, csr, &seen.view.signer).await {
            Ok(access) => decided(seen, &access, self.core.shared.now()),
            Err(err) => plan::review_failed(&credentials::describe(&err)),
        }
    }
}

pub async fn reconcile(csr: Arc<CertificateSigningRequest>, ctx: Arc<CsrContext>) -> Result<Action, Error> {
    pipeline::reconcile(csr, ctx).await
}

pub fn error_policy(csr: Arc<CertificateSigningRequest>, err: &Error, ctx: Arc<CsrContext>) -> Action {
    pipeline::error_policy(csr, err, ctx)
}
