//! What the watches keep of each object before the caches see it, and what the manager forgets
//! when an object goes.
//!
//! - A CertificateRequest for another issuer group is not cached at all: the controller never
//!   acts on one and the issuer watches never look for one, so 20,000 of cert-manager's own
//!   requests cost no memory. cert-manager makes a request's spec immutable, so a request never
//!   becomes ours later; should one change group anyway, its update is turned into a delete,
//!   which takes it out of the cache and triggers nothing.
//! - `managedFields` are dropped from every request: nothing reads them.
//! - A deleted issuer takes its CFSSL client (and the HMAC key in it), its backoff entry, its
//!   metric series and its last seen generation with it; a deleted request takes its backoff
//!   entry, its unsaved chain, what [`super::memory`] holds for it and, when no other cached
//!   request is for the same Certificate, its expiry series.
//! - The issuer controllers run on spec changes only ([`Generations`]): their own status writes
//!   do not run them again.
//!
//! Deletes are seen on the watch, before the cache drops the object. Those missed while a watch
//! was down are swept when it relists ([`Relist`]): what the manager holds for objects the relist
//! did not bring goes, except a request's expiry series (prometheus-client cannot list them),
//! which stays until the next delete of a request for the same Certificate or a restart.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt, future};
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use kube::runtime::watcher::Event;

use super::certificaterequest::{expiry_labels, request_key};
use super::{Context, issuer};
use crate::api::certmanager::CertificateRequest;
use crate::api::{AnyIssuer, IssuerKind};

/// Whether the request names an issuer of our group (a kind we do not know included: the
/// controller fails those, so it must see them).
pub fn is_ours(cr: &CertificateRequest) -> bool {
    IssuerKind::for_issuer_ref(&cr.spec.issuer_ref).is_some()
}

/// Pure: the watch event the request cache and controller get, if any.
pub fn trim_request_event(event: Event<CertificateRequest>) -> Option<Event<CertificateRequest>> {
    let trim = |mut cr: CertificateRequest| {
        cr.metadata.managed_fields = None;
        cr
    };
    match event {
        Event::Apply(cr) if is_ours(&cr) => Some(Event::Apply(trim(cr))),
        // Removes it from the cache should it have been ours before; never triggers a reconcile.
        Event::Apply(cr) => Some(Event::Delete(bare(cr))),
        Event::InitApply(cr) if is_ours(&cr) => Some(Event::InitApply(trim(cr))),
        Event::InitApply(_) => None,
        Event::Delete(cr) if is_ours(&cr) => Some(Event::Delete(trim(cr))),
        Event::Delete(cr) => Some(Event::Delete(bare(cr))),
        Event::Init => Some(Event::Init),
        Event::InitDone => Some(Event::InitDone),
    }
}

/// Only what names the object.
fn bare(cr: CertificateRequest) -> CertificateRequest {
    let mut bare = CertificateRequest::new(&cr.name_any(), Default::default());
    bare.metadata.namespace = cr.metadata.namespace;
    bare.metadata.uid = cr.metadata.uid;
    bare
}

/// Observe: one request watch event. Forgets a deleted request, sweeps at the end of a relist,
/// then trims the event.
pub fn request_event(
    event: Event<CertificateRequest>,
    ctx: &Context,
    requests: &Store<CertificateRequest>,
    relist: &mut Relist,
) -> Option<Event<CertificateRequest>> {
    if let Event::Delete(cr) = &event
        && is_ours(cr)
    {
        forget_request(ctx, cr, requests);
    }
    let ours = |cr: &CertificateRequest| is_ours(cr).then(|| request_key(cr));
    if let Some(live) = relist.observe(&event, ours) {
        ctx.request_backoff.retain(|uid| live.contains(uid));
        ctx.unsaved
            .lock()
            .expect("unsaved lock")
            .retain(|uid, _| live.contains(uid));
        ctx.request_memory.retain(&live);
    }
    trim_request_event(event)
}

/// The keys of the objects a relist (`Init` … `InitDone`) brings, to sweep what deletes missed
/// while the watch was down left behind.
#[derive(Debug, Default)]
pub struct Relist {
    keys: Option<HashSet<String>>,
}

impl Relist {
    /// Feeds one event; at the end of a relist, the keys of every object it brought.
    pub fn observe<K>(
        &mut self,
        event: &Event<K>,
        key: impl Fn(&K) -> Option<String>,
    ) -> Option<HashSet<String>> {
        match event {
            Event::Init => self.keys = Some(HashSet::new()),
            Event::InitApply(obj) => {
                if let (Some(keys), Some(key)) = (&mut self.keys, key(obj)) {
                    keys.insert(key);
                }
            }
            Event::InitDone => return self.keys.take(),
            Event::Apply(_) | Event::Delete(_) => {}
        }
        None
    }
}

const CERTIFICATE_NAME: &str = "cert-manager.io/certificate-name";

/// Drops what the manager holds for a deleted request. `requests` may still hold `cr` itself.
pub fn forget_request(ctx: &Context, cr: &CertificateRequest, requests: &Store<CertificateRequest>) {
    let uid = request_key(cr);
    ctx.request_backoff.reset(&uid);
    ctx.unsaved.lock().expect("unsaved lock").remove(&uid);
    ctx.request_memory.forget(&uid);
    let Some(issuer) = issuer_key_of(cr) else {
        return;
    };
    let labels = expiry_labels(cr, &issuer);
    if ctx.metrics.certificate_expiry.get(&labels).is_none() {
        return;
    }
    // Cheap comparisons first: cert-manager may delete thousands of old requests at once.
    let another = requests.state().iter().any(|other| {
        other.metadata.namespace == cr.metadata.namespace
            && other.metadata.uid != cr.metadata.uid
            && certificate_name(other) == certificate_name(cr)
            && issuer_key_of(other).as_deref() == Some(&issuer)
    });
    if !another {
        ctx.metrics.certificate_expiry.remove(&labels);
    }
}

/// The Certificate a request was made for, as its expiry series names it.
fn certificate_name(cr: &CertificateRequest) -> Option<&String> {
    cr.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CERTIFICATE_NAME))
        .or(cr.metadata.name.as_ref())
}

/// The metrics key (`Issuer/ns/name`, `ClusterIssuer/name`) of the issuer a request names.
fn issuer_key_of(cr: &CertificateRequest) -> Option<String> {
    let name = &cr.spec.issuer_ref.name;
    match IssuerKind::for_issuer_ref(&cr.spec.issuer_ref)? {
        Ok(kind @ IssuerKind::Issuer) => {
            Some(format!("{kind}/{}/{name}", cr.namespace().unwrap_or_default()))
        }
        Ok(kind @ IssuerKind::ClusterIssuer) => Some(format!("{kind}/{name}")),
        Err(_) => None,
    }
}

/// Observe: one issuer watch event; a delete forgets the issuer, the end of a relist every
/// issuer of this kind it did not bring.
pub fn issuer_event<K: AnyIssuer>(
    event: &Event<K>,
    ctx: &Context,
    generations: &Generations,
    relist: &mut Relist,
) {
    if let Event::Delete(issuer) = event {
        forget_issuer(ctx, generations, issuer);
    }
    let Some(live) = relist.observe(event, |i| Some(issuer::key(i))) else {
        return;
    };
    let prefix = format!("{}/", K::KIND);
    let gone = |key: &str| key.starts_with(&prefix) && !live.contains(key);
    ctx.cfssl.retain(|key| !gone(key));
    ctx.issuer_backoff.retain(|key| !gone(key));
    ctx.metrics.retain_issuers(&prefix, &live);
    generations.retain(|key| !gone(key));
}

/// Drops what the manager holds for a deleted issuer.
pub fn forget_issuer<K: AnyIssuer>(ctx: &Context, generations: &Generations, issuer: &K) {
    let key = issuer::key(issuer);
    ctx.cfssl.forget(&key);
    ctx.issuer_backoff.reset(&key);
    ctx.metrics.forget_issuer(&key);
    generations.forget(&key);
    tracing::debug!(issuer = %key, "deleted; client, backoff and metrics dropped");
}

/// The UID and generation each issuer (by [`issuer::key`]) was last passed on with: a change
/// of anything else, status included, does not pass.
#[derive(Debug, Default)]
pub struct Generations {
    seen: Mutex<HashMap<String, (Option<String>, i64)>>,
}

impl Generations {
    /// Whether `issuer` is new (a new UID under an old name included) or its spec changed since
    /// it last passed. Objects without a generation always pass.
    pub fn changed<K: AnyIssuer>(&self, issuer: &K) -> bool {
        let Some(generation) = issuer.meta().generation else {
            return true;
        };
        let seen = (issuer.uid(), generation);
        let mut generations = self.seen.lock().expect("generations lock");
        generations.insert(issuer::key(issuer), seen.clone()) != Some(seen)
    }

    /// Forgets the issuer with this key.
    pub fn forget(&self, key: &str) {
        self.seen.lock().expect("generations lock").remove(key);
    }

    /// Keeps only the issuers `keep` accepts.
    pub fn retain(&self, mut keep: impl FnMut(&str) -> bool) {
        self.seen.lock().expect("generations lock").retain(|k, _| keep(k));
    }

    pub fn len(&self) -> usize {
        self.seen.lock().expect("generations lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The issuers of `stream` whose spec changed (see [`Generations::changed`]).
pub fn spec_changes<K: AnyIssuer>(
    stream: impl Stream<Item = Arc<K>>,
    generations: Arc<Generations>,
) -> impl Stream<Item = Arc<K>> {
    stream.filter(move |obj| future::ready(generations.changed(&**obj)))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    use kube::runtime::reflector;
    use serde_json::json;

    use super::*;
    use crate::api::{Issuer, IssuerSpec};
    use crate::cfssl::{AuthKey, ClientConfig};
    use crate::controllers::certificaterequest::decide::Signing;
    use crate::controllers::clients::Fingerprint;
    use crate::controllers::{Config, system_clock};
    use crate::pki::Chain;
    use crate::telemetry::Metrics;
    use crate::telemetry::metrics::{CallLabels, IssuerLabels};

    fn request(name: &str, group: &str, certificate: &str) -> CertificateRequest {
        let mut cr: CertificateRequest = serde_json::from_value(json!({
            "apiVersion": "cert-manager.io/v1", "kind": "CertificateRequest",
            "metadata": {
                "name": name, "namespace": "apps", "uid": format!("uid-{name}"),
                "annotations": {"cert-manager.io/certificate-name": certificate},
            },
            "spec": {
                "request": "Q1NS",
                "issuerRef": {"group": group, "kind": "Issuer", "name": "ca"},
            },
            "status": {"certificate": "Q0VSVA==", "conditions": [
                {"type": "Ready", "status": "True", "reason": "Issued", "message": "ok"},
            ]},
        }))
        .unwrap();
        cr.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some("cert-manager".into()),
            ..Default::default()
        }]);
        cr
    }

    fn trimmed(mut cr: CertificateRequest) -> CertificateRequest {
        cr.metadata.managed_fields = None;
        cr
    }

    fn bare(name: &str) -> CertificateRequest {
        let mut cr = CertificateRequest::new(name, Default::default());
        cr.metadata.namespace = Some("apps".into());
        cr.metadata.uid = Some(format!("uid-{name}"));
        cr
    }

    #[test]
    fn foreign_requests_never_reach_the_cache() {
        let ours = request("ours", crate::api::GROUP, "web");
        let odd_kind = {
            let mut cr = request("odd", crate::api::GROUP, "web");
            cr.spec.issuer_ref.kind = "Signer".into();
            cr
        };
        let foreign = request("foreign", "cert-manager.io", "web");
        type E = Event<CertificateRequest>;
        let cases: Vec<(&str, E, Option<E>)> = vec![
            (
                "ours kept, minus managedFields",
                Event::Apply(ours.clone()),
                Some(Event::Apply(trimmed(ours.clone()))),
            ),
            (
                "ours on relist",
                Event::InitApply(ours.clone()),
                Some(Event::InitApply(trimmed(ours.clone()))),
            ),
            (
                "ours deleted",
                Event::Delete(ours.clone()),
                Some(Event::Delete(trimmed(ours.clone()))),
            ),
            (
                "an unknown kind of our group is ours to fail",
                Event::Apply(odd_kind.clone()),
                Some(Event::Apply(trimmed(odd_kind))),
            ),
            (
                "foreign update removes, never adds",
                Event::Apply(foreign.clone()),
                Some(Event::Delete(bare("foreign"))),
            ),
            (
                "foreign on relist dropped",
                Event::InitApply(foreign.clone()),
                None,
            ),
            (
                "foreign delete, bare",
                Event::Delete(foreign.clone()),
                Some(Event::Delete(bare("foreign"))),
            ),
            ("relist start", Event::Init, Some(Event::Init)),
            ("relist end", Event::InitDone, Some(Event::InitDone)),
        ];
        for (row, event, want) in cases {
            // Events have no PartialEq; their Debug form shows every field.
            assert_eq!(
                format!("{:?}", trim_request_event(event)),
                format!("{want:?}"),
                "{row}"
            );
        }
    }

    #[test]
    fn the_cache_holds_only_our_requests() {
        let (store, mut writer) = reflector::store::<CertificateRequest>();
        let mut events = vec![Event::Init];
        events.extend((0..3).map(|i| Event::InitApply(request(&format!("f{i}"), "cert-manager.io", "x"))));
        events.push(Event::InitApply(request("ours", crate::api::GROUP, "web")));
        events.push(Event::InitDone);
        events.push(Event::Apply(request("f9", "cert-manager.io", "x")));
        // A request that changed group (cert-manager forbids it) leaves the cache.
        events.push(Event::Apply(request("moved", crate::api::GROUP, "x")));
        events.push(Event::Apply(request("moved", "cert-manager.io", "x")));
        for event in events.into_iter().filter_map(trim_request_event) {
            writer.apply_watcher_event(&event);
        }
        let names: Vec<String> = store.state().iter().map(|cr| cr.name_any()).collect();
        assert_eq!(names, ["ours"]);
        assert!(store.state()[0].metadata.managed_fields.is_none());
    }

    #[test]
    fn only_spec_changes_pass() {
        let g = Generations::default();
        let issuer = |name: &str, uid: &str, generation: Option<i64>| {
            let mut i = Issuer::new(name, IssuerSpec::default());
            i.metadata.namespace = Some("apps".into());
            i.metadata.uid = Some(uid.into());
            i.metadata.generation = generation;
            i
        };
        let cases = [
            ("first sight", "a", "u1", Some(1), true),
            ("status-only write", "a", "u1", Some(1), false),
            ("again", "a", "u1", Some(1), false),
            ("another issuer", "b", "u9", Some(1), true),
            ("spec change", "a", "u1", Some(2), true),
            ("same name, recreated", "a", "u2", Some(2), true),
            ("no generation", "c", "u3", None, true),
            ("no generation, again", "c", "u3", None, true),
        ];
        for (row, name, uid, generation, want) in cases {
            assert_eq!(g.changed(&issuer(name, uid, generation)), want, "{row}");
        }
        assert_eq!(g.len(), 2);
        g.forget("Issuer/apps/a");
        assert!(g.changed(&issuer("a", "u2", Some(2))), "forgotten: passes again");
        g.retain(|key| key != "Issuer/apps/b");
        assert_eq!(g.len(), 1);
    }

    fn context() -> Context {
        let (service, _handle) =
            tower_test::mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
        let client = kube::Client::new(service, "default");
        let (issuers, _) = reflector::store();
        let (cluster_issuers, _) = reflector::store();
        Context::new(
            client,
            Config::new("cfssl-system"),
            system_clock(),
            issuers,
            cluster_issuers,
            Arc::new(Metrics::default()),
        )
        .0
    }

    #[tokio::test]
    async fn a_deleted_request_is_forgotten() {
        let ctx = context();
        let (store, mut writer) = reflector::store::<CertificateRequest>();
        let old = request("web-1", crate::api::GROUP, "web");
        let new = request("web-2", crate::api::GROUP, "web");
        let other = request("api-1", crate::api::GROUP, "api");
        for cr in [&old, &new, &other] {
            writer.apply_watcher_event(&Event::Apply(cr.clone()));
            let uid = request_key(cr);
            ctx.request_backoff.next(uid.clone());
            ctx.request_memory.failed(&uid, ctx.now());
            ctx.request_memory.announce_waiting(&uid);
            ctx.unsaved.lock().unwrap().insert(
                uid,
                Signing::Unsaved(Chain {
                    certificates: "c".into(),
                    ca: None,
                }),
            );
            let labels = expiry_labels(cr, "Issuer/apps/ca");
            ctx.metrics.certificate_expiry.get_or_create(&labels).set(1.0);
        }
        let has = |cr: &CertificateRequest| {
            ctx.metrics
                .certificate_expiry
                .get(&expiry_labels(cr, "Issuer/apps/ca"))
                .is_some()
        };
        assert_eq!(
            expiry_labels(&old, "i"),
            expiry_labels(&new, "i"),
            "one series per Certificate"
        );

        // The watch reports the delete before the cache drops the request.
        request_event(Event::Delete(old.clone()), &ctx, &store, &mut Relist::default());
        writer.apply_watcher_event(&Event::Delete(old));
        assert_eq!(ctx.request_backoff.len(), 2);
        assert_eq!(ctx.unsaved.lock().unwrap().len(), 2);
        assert_eq!(ctx.request_memory.len(), 4);
        assert!(has(&new), "web-2 still stands for Certificate web");

        request_event(Event::Delete(new.clone()), &ctx, &store, &mut Relist::default());
        writer.apply_watcher_event(&Event::Delete(new.clone()));
        assert!(!has(&new), "the last request of Certificate web is gone");
        assert!(has(&other));

        request_event(Event::Delete(other.clone()), &ctx, &store, &mut Relist::default());
        assert!(ctx.request_backoff.is_empty());
        assert!(ctx.unsaved.lock().unwrap().is_empty());
        assert!(ctx.request_memory.is_empty());
        assert!(!has(&other));
    }

    #[tokio::test]
    async fn a_deleted_issuer_is_forgotten() {
        let ctx = context();
        let generations = Generations::default();
        let mut gone = Issuer::new("gone", IssuerSpec::default());
        gone.metadata.namespace = Some("apps".into());
        gone.metadata.uid = Some("uid-gone".into());
        gone.metadata.generation = Some(1);
        let mut kept = gone.clone();
        kept.metadata.name = Some("kept".into());
        kept.metadata.uid = Some("uid-kept".into());
        for issuer in [&gone, &kept] {
            let key = issuer::key(issuer);
            let fingerprint = Fingerprint {
                issuer_uid: issuer.uid().unwrap(),
                generation: 1,
                secret_version: "1".into(),
            };
            let config = || ClientConfig::new("http://127.0.0.1:1", "l", AuthKey::from_hex("00").unwrap());
            ctx.cfssl.get_or_build(&key, fingerprint, config).unwrap();
            ctx.issuer_backoff.next(key.clone());
            generations.changed(issuer);
            let labels = CallLabels {
                issuer: key.clone(),
                label: "l".into(),
                call: "check",
            };
            ctx.metrics.observe_call(labels, 0.1, Some("retryable"));
            ctx.metrics
                .issuer_ready
                .get_or_create(&IssuerLabels { issuer: key })
                .set(0);
        }

        issuer_event(
            &Event::Apply(gone.clone()),
            &ctx,
            &generations,
            &mut Relist::default(),
        );
        assert_eq!(
            (ctx.cfssl.len(), ctx.issuer_backoff.len(), generations.len()),
            (2, 2, 2),
            "not on update"
        );
        issuer_event(&Event::Delete(gone), &ctx, &generations, &mut Relist::default());

        assert_eq!(ctx.cfssl.len(), 1, "the client and its HMAC key are dropped");
        assert_eq!(ctx.issuer_backoff.len(), 1);
        assert_eq!(generations.len(), 1);
        let text = ctx.metrics.encode();
        assert!(!text.contains("Issuer/apps/gone"), "{text}");
        assert!(text.contains("Issuer/apps/kept"), "{text}");
    }

    #[tokio::test]
    async fn a_relist_sweeps_requests_whose_delete_was_missed() {
        let ctx = context();
        let (store, _) = reflector::store::<CertificateRequest>();
        let live = request("live", crate::api::GROUP, "web");
        let gone = request("gone", crate::api::GROUP, "api");
        for cr in [&live, &gone] {
            let uid = request_key(cr);
            ctx.request_backoff.next(uid.clone());
            ctx.request_memory.failed(&uid, ctx.now());
            ctx.unsaved.lock().unwrap().insert(
                uid,
                Signing::Unsaved(Chain {
                    certificates: "c".into(),
                    ca: None,
                }),
            );
        }
        let mut relist = Relist::default();
        let events = [
            Event::Init,
            Event::InitApply(live.clone()),
            Event::InitApply(request("foreign", "cert-manager.io", "x")),
        ];
        for event in events {
            request_event(event, &ctx, &store, &mut relist);
            assert_eq!(
                ctx.request_backoff.len(),
                2,
                "nothing swept before the relist ends"
            );
        }
        request_event(Event::InitDone, &ctx, &store, &mut relist);
        let uid = request_key(&live);
        assert_eq!(ctx.request_backoff.len(), 1);
        assert!(ctx.request_memory.first_failure(&uid).is_some());
        assert_eq!(ctx.request_memory.len(), 1);
        assert_eq!(ctx.unsaved.lock().unwrap().keys().collect::<Vec<_>>(), [&uid]);
        // Outside a relist, nothing is swept.
        request_event(Event::InitDone, &ctx, &store, &mut relist);
        assert_eq!(ctx.request_backoff.len(), 1);
    }

    #[tokio::test]
    async fn a_relist_sweeps_issuers_of_its_kind_whose_delete_was_missed() {
        let ctx = context();
        let generations = Generations::default();
        let issuer = |name: &str| {
            let mut i = Issuer::new(name, IssuerSpec::default());
            i.metadata.namespace = Some("apps".into());
            i.metadata.generation = Some(1);
            i
        };
        let keys = ["Issuer/apps/live", "Issuer/apps/gone", "ClusterIssuer/other"];
        for key in keys {
            let fingerprint = Fingerprint {
                issuer_uid: key.into(),
                generation: 1,
                secret_version: "1".into(),
            };
            let config = || ClientConfig::new("http://127.0.0.1:1", "l", AuthKey::from_hex("00").unwrap());
            ctx.cfssl.get_or_build(key, fingerprint, config).unwrap();
            ctx.issuer_backoff.next(key.to_string());
            ctx.metrics.set_issuer_ready(key, true);
        }
        generations.changed(&issuer("live"));
        generations.changed(&issuer("gone"));
        let mut relist = Relist::default();
        for event in [Event::Init, Event::InitApply(issuer("live")), Event::InitDone] {
            issuer_event(&event, &ctx, &generations, &mut relist);
        }
        assert_eq!(
            (ctx.cfssl.len(), ctx.issuer_backoff.len(), generations.len()),
            (2, 2, 1)
        );
        let text = ctx.metrics.encode();
        assert!(!text.contains("Issuer/apps/gone"), "{text}");
        assert!(
            text.contains("Issuer/apps/live") && text.contains("ClusterIssuer/other"),
            "{text}"
        );
    }
}
