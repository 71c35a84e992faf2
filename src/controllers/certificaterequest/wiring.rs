//! How the request controller is wired: run by requests (ours only reach the cache; finished
//! ones, kept bare or as summaries, never wake it) and by changes of the issuers they wait on.

use std::sync::Arc;

use futures::StreamExt;
use futures::future::{self, BoxFuture};
use kube::ResourceExt;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{ObjectRef, Store};

use super::{RequestContext, error_policy, observe, reconcile, watch};
use crate::api::certmanager::CertificateRequest;
use crate::api::{ClusterIssuer, Issuer, IssuerKind};
use crate::controllers::kit::wiring::{Wiring, drive};

pub fn controller(wiring: &Wiring, ctx: Arc<RequestContext>) -> BoxFuture<'static, ()> {
    let requests = &wiring.requests.store;
    let (for_issuers, for_cluster_issuers) = (requests.clone(), requests.clone());
    // Only requests of ours wake it: a finished one is cached bare (or, in standalone mode, as
    // its summary), names no issuer and would be reconciled for nothing. A manager started on
    // 10,000 finished requests scheduled every one of them, and kube-runtime's scheduler keeps
    // the tables it grew for them (7 MiB per controller, heaptrack).
    let ours = wiring
        .requests
        .subscribe()
        .filter(|cr| future::ready(watch::is_ours(cr)));
    let controller = Controller::for_shared_stream(ours, requests.clone())
        .with_config(wiring.config.clone())
        .watches_shared_stream(wiring.issuers.subscribe(), move |issuer: Arc<Issuer>| {
            let namespace = issuer.namespace();
            requests_for(
                &for_issuers,
                IssuerKind::Issuer,
                namespace.as_deref(),
                &issuer.name_any(),
            )
        })
        .watches_shared_stream(
            wiring.cluster_issuers.subscribe(),
            move |issuer: Arc<ClusterIssuer>| {
                requests_for(
                    &for_cluster_issuers,
                    IssuerKind::ClusterIssuer,
                    None,
                    &issuer.name_any(),
                )
            },
        )
        .graceful_shutdown_on(wiring.shutdown.clone())
        .run(reconcile, error_policy, ctx);
    drive(controller)
}

/// Requests waiting on an issuer, to reconcile when it changes. Terminal ones are skipped.
pub fn requests_for(
    store: &Store<CertificateRequest>,
    kind: IssuerKind,
    namespace: Option<&str>,
    name: &str,
) -> Vec<ObjectRef<CertificateRequest>> {
    store
        .state()
        .iter()
        .filter(|cr| {
            let r = &cr.spec.issuer_ref;
            r.name == name
                && IssuerKind::for_issuer_ref(r) == Some(Ok(kind))
                && (namespace.is_none() || cr.namespace().as_deref() == namespace)
                && !observe::is_terminal(cr)
        })
        .map(|cr| ObjectRef::from_obj(&**cr))
        .collect()
}
