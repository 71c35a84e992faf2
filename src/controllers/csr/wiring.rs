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

use super::signer_name;
use super::{CsrContext, error_policy, reconcile};
use crate::api::{ClusterIssuer, Issuer};
use crate::controllers::kit::scope::Scope;
use crate::controllers::kit::size::watch_config;
use crate::controllers::kit::wiring::Relist;
use crate::controllers::kit::wiring::{Wiring, drive};

pub fn controller(wiring: &Wiring, ctx: Arc<CsrContext>) -> BoxFuture<'static, ()> {
    let (store, writer) = reflector::store();
    let namespaced = ctx.namespaced;
    let scope = ctx.core.shared.config.scope.clone();
    let (forgets, mut relist) = (ctx.clone(), Relist::default());
    let csrs = watcher(
        Api::<CertificateSigningRequest>::all(ctx.core.shared.client.clone()),
        watch_config(),
    )
    .default_backoff()
    .try_filter_map(move |event| {
        let event = ours(event, namespaced).and_then(|event| served(event, namespaced, &scope));
        if let Some(event) = &event {
            forgets.follow(event, &mut relist);
        }
        future::ready(Ok(event))
    })
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
        |csr: &CertificateSigningRequest| signer_name::parse(&csr.spec.signer_name, namespaced).is_some();
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
            signer_name::parse(&csr.spec.signer_name, namespaced)
                .is_some_and(|s| s.name == name && s.namespace.as_deref() == namespace)
                && !super::observe::is_settled(csr)
        })
        .map(|csr| ObjectRef::from_obj(&**csr))
        .collect()
}

/// Drops the events of CSRs naming an Issuer in a namespace this install does not serve:
/// another install (with its own `--namespace`) may serve it, so it is left alone, unseen.
fn served(
    event: watcher::Event<CertificateSigningRequest>,
    namespaced: bool,
    scope: &Scope,
) -> Option<watcher::Event<CertificateSigningRequest>> {
    let serves = |csr: &CertificateSigningRequest| {
        signer_name::parse(&csr.spec.signer_name, namespaced)
            .and_then(|signer| signer.namespace)
            .is_none_or(|namespace| scope.serves(&namespace))
    };
    match event {
        watcher::Event::Apply(csr) | watcher::Event::InitApply(csr) | watcher::Event::Delete(csr)
            if !serves(&csr) =>
        {
            None
        }
        other => Some(other),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    use super::*;

    fn csr(signer: &str) -> CertificateSigningRequest {
        let mut csr = CertificateSigningRequest::default();
        csr.spec.signer_name = signer.into();
        csr.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        csr
    }

    fn named(name: &str, signer: &str, status: Option<serde_json::Value>) -> CertificateSigningRequest {
        let mut csr = csr(signer);
        csr.metadata.name = Some(name.into());
        csr.status = status.map(|s| serde_json::from_value(s).unwrap_or_default());
        csr
    }

    /// Which CSRs an issuer's change brings back: those naming it, not yet signed, failed or
    /// denied.
    #[test]
    fn an_issuer_brings_back_the_csrs_waiting_on_it() {
        let (cluster, issuer) = (
            "clusterissuers.cfssl-issuer.wikimedia.org/ca",
            "issuers.cfssl-issuer.wikimedia.org/apps.ca",
        );
        let approved = serde_json::json!({"conditions": [{"type": "Approved", "status": "True"}]});
        let (store, mut writer) = reflector::store();
        for csr in [
            named("waiting", cluster, Some(approved.clone())),
            named("unapproved", cluster, None),
            named(
                "signed",
                cluster,
                Some(serde_json::json!({"certificate": "Q0VSVA=="})),
            ),
            named(
                "failed",
                cluster,
                Some(serde_json::json!({"conditions": [{"type": "Failed", "status": "True"}]})),
            ),
            named(
                "denied",
                cluster,
                Some(serde_json::json!({"conditions": [{"type": "Denied", "status": "True"}]})),
            ),
            named(
                "other-ca",
                "clusterissuers.cfssl-issuer.wikimedia.org/other",
                Some(approved.clone()),
            ),
            named("namespaced", issuer, Some(approved)),
        ] {
            writer.apply_watcher_event(&watcher::Event::Apply(csr));
        }
        let names = |refs: Vec<ObjectRef<CertificateSigningRequest>>| {
            let mut names: Vec<String> = refs.into_iter().map(|r| r.name).collect();
            names.sort();
            names
        };
        struct Case {
            row: &'static str,
            namespace: Option<&'static str>,
            name: &'static str,
            namespaced: bool,
            want: &'static [&'static str],
        }
        let cases = [
            Case {
                row: "ClusterIssuer ca",
                namespace: None,
                name: "ca",
                namespaced: true,
                want: &["unapproved", "waiting"],
            },
            Case {
                row: "Issuer apps/ca",
                namespace: Some("apps"),
                name: "ca",
                namespaced: true,
                want: &["namespaced"],
            },
            Case {
                row: "Issuer apps/ca, namespaced signers off",
                namespace: Some("apps"),
                name: "ca",
                namespaced: false,
                want: &[],
            },
            Case {
                row: "Issuer other/ca",
                namespace: Some("other"),
                name: "ca",
                namespaced: true,
                want: &[],
            },
            Case {
                row: "ClusterIssuer nobody names",
                namespace: None,
                name: "nobody",
                namespaced: true,
                want: &[],
            },
        ];
        for Case {
            row,
            namespace,
            name,
            namespaced,
            want,
        } in cases
        {
            assert_eq!(
                names(csrs_for(&store, namespace, name, namespaced)),
                want,
                "{row}"
            );
        }
    }

    /// Which watch events reach the CSR cache, and in what shape.
    #[test]
    fn only_our_csrs_reach_the_cache_without_managed_fields() {
        let cluster = "clusterissuers.cfssl-issuer.wikimedia.org/ca";
        let issuer = "issuers.cfssl-issuer.wikimedia.org/apps.ca";
        let kept = |event: Option<watcher::Event<CertificateSigningRequest>>| match event {
            Some(watcher::Event::Apply(c) | watcher::Event::InitApply(c)) => {
                Some(("apply", c.metadata.managed_fields))
            }
            Some(watcher::Event::Delete(c)) => Some(("delete", c.metadata.managed_fields)),
            Some(watcher::Event::Init) => Some(("init", None)),
            Some(watcher::Event::InitDone) => Some(("done", None)),
            None => None,
        };
        // (row, event, namespaced signers on, want)
        let cases = [
            (
                "ours, applied",
                watcher::Event::Apply(csr(cluster)),
                true,
                Some(("apply", None)),
            ),
            (
                "ours, listed",
                watcher::Event::InitApply(csr(cluster)),
                false,
                Some(("apply", None)),
            ),
            (
                "ours, deleted (left as is: it leaves the cache)",
                watcher::Event::Delete(csr(cluster)),
                true,
                Some(("delete", Some(vec![ManagedFieldsEntry::default()]))),
            ),
            (
                "namespaced, on",
                watcher::Event::Apply(csr(issuer)),
                true,
                Some(("apply", None)),
            ),
            ("namespaced, off", watcher::Event::Apply(csr(issuer)), false, None),
            (
                "kubelet's",
                watcher::Event::Apply(csr("kubernetes.io/kubelet-serving")),
                true,
                None,
            ),
            (
                "another's, deleted",
                watcher::Event::Delete(csr("example.com/x")),
                true,
                None,
            ),
            ("list start", watcher::Event::Init, true, Some(("init", None))),
            ("list end", watcher::Event::InitDone, true, Some(("done", None))),
        ];
        for (row, event, namespaced, want) in cases {
            assert_eq!(kept(ours(event, namespaced)), want, "{row}");
        }
    }

    /// Namespace-scoped, a namespaced signer naming an unserved namespace is left alone (another
    /// install may serve it); ClusterIssuer signers and served namespaces pass.
    #[test]
    fn a_signer_in_an_unserved_namespace_is_not_seen() {
        let scope = Scope::new(["apps".to_string()]);
        let table = [
            ("clusterissuers.cfssl-issuer.wikimedia.org/ca", true),
            ("issuers.cfssl-issuer.wikimedia.org/apps.ca", true),
            ("issuers.cfssl-issuer.wikimedia.org/other.ca", false),
        ];
        for (signer, want) in table {
            for event in [
                watcher::Event::Apply(csr(signer)),
                watcher::Event::InitApply(csr(signer)),
                watcher::Event::Delete(csr(signer)),
            ] {
                assert_eq!(served(event, true, &scope).is_some(), want, "{signer}");
            }
            let everywhere = served(watcher::Event::Apply(csr(signer)), true, &Scope::Cluster);
            assert!(everywhere.is_some(), "{signer} cluster-wide");
        }
    }
}
