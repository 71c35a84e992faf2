//! How the CSR controller is wired: its own watch of CertificateSigningRequests (ours only
//! reach its cache, without managedFields), and the issuers they name.
//!
//! The CSR watch is not shared: no other controller reads CSRs, and a stream of its own hands
//! the controller objects, not references into a store that a deleted CSR has already left.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::{StreamExt, TryStreamExt, future};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};

use super::signer_name::SignerRef;
use super::{CsrContext, error_policy, reconcile};
use crate::api::{ClusterIssuer, Issuer};
use crate::controllers::wiring::{Wiring, drive};

pub fn controller(wiring: &Wiring, ctx: Arc<CsrContext>) -> BoxFuture<'static, ()> {
    let (store, writer) = reflector::store();
    let namespaced = ctx.namespaced;
    let csrs = watcher(
        Api::<CertificateSigningRequest>::all(ctx.shared.client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .try_filter_map(move |event| future::ready(Ok(ours(event, namespaced))))
    .reflect(writer)
    .applied_objects()
    .boxed();
    let (for_issuers, for_cluster_issuers) = (store.clone(), store.clone());
    let controller = Controller::for_stream(csrs, store)
        .with_config(wiring.config.clone())
        .watches_shared_stream(wiring.issuers.subscribe(), move |issuer: Arc<Issuer>| {
            csrs_for(
                &for_issuers,
                issuer.namespace().as_deref(),
                &issuer.name_any(),
                namespaced,
            )
        })
        .watches_shared_stream(
            wiring.cluster_issuers.subscribe(),
            move |issuer: Arc<ClusterIssuer>| {
                csrs_for(&for_cluster_issuers, None, &issuer.name_any(), namespaced)
            },
        )
        .graceful_shutdown_on(wiring.shutdown.clone())
        .run(reconcile, error_policy, ctx);
    drive(controller)
}

/// Keeps the events of our CSRs, without their managedFields; drops every other signer's.
fn ours(
    event: watcher::Event<CertificateSigningRequest>,
    namespaced: bool,
) -> Option<watcher::Event<CertificateSigningRequest>> {
    let is_ours =
        |csr: &CertificateSigningRequest| SignerRef::parse(&csr.spec.signer_name, namespaced).is_some();
    let trim = |mut csr: CertificateSigningRequest| {
        csr.metadata.managed_fields = None;
        csr
    };
    match event {
        watcher::Event::Apply(csr) => is_ours(&csr).then(|| watcher::Event::Apply(trim(csr))),
        watcher::Event::InitApply(csr) => is_ours(&csr).then(|| watcher::Event::InitApply(trim(csr))),
        watcher::Event::Delete(csr) => is_ours(&csr).then_some(watcher::Event::Delete(csr)),
        other => Some(other),
    }
}

/// The CSRs that name an issuer, to reconcile when it changes. Signed and failed ones are
/// skipped.
fn csrs_for(
    store: &Store<CertificateSigningRequest>,
    namespace: Option<&str>,
    name: &str,
    namespaced: bool,
) -> Vec<ObjectRef<CertificateSigningRequest>> {
    store
        .state()
        .iter()
        .filter(|csr| {
            SignerRef::parse(&csr.spec.signer_name, namespaced)
                .is_some_and(|s| s.name == name && s.namespace.as_deref() == namespace)
                && !is_done(csr)
        })
        .map(|csr| ObjectRef::from_obj(&**csr))
        .collect()
}

fn is_done(csr: &CertificateSigningRequest) -> bool {
    let view = super::observe::csr_view(csr);
    view.has_certificate || view.failed || view.denied
}
