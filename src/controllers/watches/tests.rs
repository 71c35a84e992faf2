//! Tests of the watch filters and of what the manager forgets.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::runtime::reflector;
use serde_json::json;

use super::*;
use crate::api::{Issuer, IssuerSpec};
use crate::cfssl::{AuthKey, ClientConfig};
use crate::controllers::certificaterequest::decide::Signing;
use crate::controllers::signer::Fingerprint;
use crate::controllers::{Config, Contexts, system_clock};
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

/// Ours, waiting to be signed: stays in the cache.
fn pending(name: &str, certificate: &str) -> CertificateRequest {
    let mut cr = request(name, crate::api::GROUP, certificate);
    let ready = &mut cr.status.as_mut().unwrap().conditions[0];
    ready.status = "False".into();
    ready.reason = "Pending".into();
    cr
}

fn trimmed(mut cr: CertificateRequest) -> CertificateRequest {
    cr.metadata.managed_fields = None;
    cr
}

fn bare(name: &str) -> CertificateRequest {
    let mut cr = CertificateRequest::new(name, CertificateRequestSpec::default());
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
            "ours deleted, bare",
            Event::Delete(ours.clone()),
            Some(Event::Delete(bare("ours"))),
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
            format!("{:?}", trim_request_event(event, true)),
            format!("{want:?}"),
            "{row}"
        );
    }
}

#[test]
fn terminal_requests_are_cached_bare_outside_standalone() {
    let with_ready = |status: &str, reason: &str| {
        let mut cr = request("r", crate::api::GROUP, "web");
        let conditions = &mut cr.status.as_mut().unwrap().conditions;
        conditions[0].status = status.into();
        conditions[0].reason = reason.into();
        cr
    };
    let issued = with_ready("True", "Issued");
    let pending = pending("r", "web");
    type E = Event<CertificateRequest>;
    // (row, event, keep_chains, want)
    let cases: Vec<(&str, E, bool, Option<E>)> = vec![
        (
            "issued: cached bare",
            Event::Apply(issued.clone()),
            false,
            Some(Event::Apply(bare("r"))),
        ),
        (
            "failed: cached bare",
            Event::Apply(with_ready("False", "Failed")),
            false,
            Some(Event::Apply(bare("r"))),
        ),
        (
            "denied: cached bare",
            Event::Apply(with_ready("False", "Denied")),
            false,
            Some(Event::Apply(bare("r"))),
        ),
        (
            "issued on relist: never cached",
            Event::InitApply(issued.clone()),
            false,
            None,
        ),
        (
            "issued, standalone: kept whole for its chain",
            Event::Apply(issued.clone()),
            true,
            Some(Event::Apply(trimmed(issued.clone()))),
        ),
        (
            "issued on relist, standalone",
            Event::InitApply(issued.clone()),
            true,
            Some(Event::InitApply(trimmed(issued))),
        ),
        (
            "pending: kept with its CSR",
            Event::Apply(pending.clone()),
            false,
            Some(Event::Apply(trimmed(pending.clone()))),
        ),
        (
            "pending on relist",
            Event::InitApply(pending.clone()),
            false,
            Some(Event::InitApply(trimmed(pending))),
        ),
    ];
    for (row, event, keep_chains, want) in cases {
        assert_eq!(
            format!("{:?}", trim_request_event(event, keep_chains)),
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
    for event in events.into_iter().filter_map(|e| trim_request_event(e, true)) {
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

fn context() -> Contexts {
    let (service, _handle) =
        tower_test::mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
    let client = kube::Client::new(service, "default");
    let (issuers, _) = reflector::store();
    let (cluster_issuers, _) = reflector::store();
    Contexts::new(
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
    let old = request("web-1", crate::api::GROUP, "web");
    let new = request("web-2", crate::api::GROUP, "web");
    let other = request("api-1", crate::api::GROUP, "api");
    for cr in [&old, &new, &other] {
        let uid = request_key(cr);
        ctx.requests.kept.backoff.next(uid.clone());
        ctx.requests.kept.memory.failed(&uid, ctx.shared.now());
        ctx.requests.kept.memory.announced(&uid);
        ctx.requests.kept.signings.insert(
            &uid,
            Signing::Unsaved(Chain {
                certificates: "c".into(),
                ca: None,
            }),
        );
        let labels = expiry_labels(cr, "Issuer/apps/ca");
        ctx.shared
            .metrics
            .certificate_expiry
            .get_or_create(&labels)
            .set(1.0);
        // As signing does: the series shows the request signed last.
        ctx.requests.expiry.set(labels, &uid);
    }
    let has = |cr: &CertificateRequest| {
        ctx.shared
            .metrics
            .certificate_expiry
            .get(&expiry_labels(cr, "Issuer/apps/ca"))
            .is_some()
    };
    assert_eq!(
        expiry_labels(&old, "i"),
        expiry_labels(&new, "i"),
        "one series per Certificate"
    );

    request_event(Event::Delete(old.clone()), &ctx.requests, &mut Relist::default());
    assert_eq!(ctx.requests.kept.backoff.len(), 2);
    assert_eq!(ctx.requests.kept.signings.snapshot().len(), 2);
    assert_eq!(ctx.requests.kept.memory.len(), 4);
    assert!(has(&new), "the series shows web-2's signature, not web-1's");

    request_event(Event::Delete(new.clone()), &ctx.requests, &mut Relist::default());
    assert!(!has(&new), "the request the series showed is gone");
    assert!(has(&other));

    request_event(
        Event::Delete(other.clone()),
        &ctx.requests,
        &mut Relist::default(),
    );
    assert!(ctx.requests.kept.backoff.is_empty());
    assert!(ctx.requests.kept.signings.snapshot().is_empty());
    assert!(ctx.requests.kept.memory.is_empty());
    assert!(!has(&other));
}

/// A request cached bare on being Issued is never acted on again: its backoff and
/// memory go when the watch shows it; what signing holds stays (it stops a reconcile already
/// dispatched with the stale object from signing again), and so does its expiry series.
#[tokio::test]
async fn an_issued_request_leaving_the_cache_drops_backoff_and_memory() {
    let ctx = context();
    let issued = request("web-1", crate::api::GROUP, "web");
    let pending = pending("web-2", "web");
    let labels = expiry_labels(&issued, "Issuer/apps/ca");
    for cr in [&issued, &pending] {
        let uid = request_key(cr);
        ctx.requests.kept.backoff.next(uid.clone());
        ctx.requests.kept.memory.announced(&uid);
        ctx.requests.kept.signings.saved(&uid, Some("7".into()));
    }
    ctx.shared
        .metrics
        .certificate_expiry
        .get_or_create(&labels)
        .set(1.0);
    ctx.requests.expiry.set(labels.clone(), &request_key(&issued));

    let seen = request_event(
        Event::Apply(issued.clone()),
        &ctx.requests,
        &mut Relist::default(),
    );
    request_event(
        Event::Apply(pending.clone()),
        &ctx.requests,
        &mut Relist::default(),
    );
    assert!(
        matches!(&seen, Some(Event::Apply(cr)) if !is_ours(cr) && cr.metadata.uid == issued.metadata.uid),
        "cached bare: {seen:?}"
    );
    let pending_uid = request_key(&pending);
    assert_eq!(
        ctx.requests.kept.signings.snapshot().len(),
        2,
        "the Saved entry guards until the delete"
    );
    assert_eq!(ctx.requests.kept.backoff.len(), 1);
    assert_eq!(ctx.requests.kept.memory.len(), 1);
    assert!(ctx.requests.kept.memory.is_announced(&pending_uid));
    assert!(!ctx.requests.kept.memory.is_announced(&request_key(&issued)));
    assert!(ctx.shared.metrics.certificate_expiry.get(&labels).is_some());
    assert_eq!(ctx.requests.expiry.len(), 1);
}

/// Puts a CFSSL client for the issuer `key` in the signer's cache.
fn build_client(ctx: &Contexts, key: &str, uid: &str) {
    let fingerprint = Fingerprint {
        issuer_uid: uid.into(),
        generation: 1,
        secret_version: "1".into(),
    };
    let config = || ClientConfig::new("http://127.0.0.1:1", "l", AuthKey::from_hex("00").unwrap());
    ctx.issuers
        .signer
        .clients
        .get_or_build(key, fingerprint, config)
        .unwrap();
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
        let key = key(issuer);
        build_client(&ctx, &key, &issuer.uid().unwrap());
        ctx.issuers.backoff.next(key.clone());
        generations.changed(issuer);
        let labels = CallLabels {
            issuer: key.clone(),
            label: "l".into(),
            call: "check",
        };
        ctx.shared.metrics.observe_call(labels, 0.1, Some("retryable"));
        ctx.shared
            .metrics
            .issuer_ready
            .get_or_create(&IssuerLabels { issuer: key })
            .set(0);
    }

    issuer_event(
        &Event::Apply(gone.clone()),
        &ctx.issuers,
        &generations,
        &mut Relist::default(),
    );
    assert_eq!(
        (
            ctx.issuers.signer.clients.len(),
            ctx.issuers.backoff.len(),
            generations.len()
        ),
        (2, 2, 2),
        "not on update"
    );
    issuer_event(
        &Event::Delete(gone),
        &ctx.issuers,
        &generations,
        &mut Relist::default(),
    );

    assert_eq!(
        ctx.issuers.signer.clients.len(),
        1,
        "the client and its HMAC key are dropped"
    );
    assert_eq!(ctx.issuers.backoff.len(), 1);
    assert_eq!(generations.len(), 1);
    let text = ctx.shared.metrics.encode();
    assert!(!text.contains("Issuer/apps/gone"), "{text}");
    assert!(text.contains("Issuer/apps/kept"), "{text}");
}

#[tokio::test]
async fn a_relist_sweeps_requests_whose_delete_was_missed() {
    let ctx = context();
    let live = pending("live", "web");
    let gone = pending("gone", "api");
    let series = |cr: &CertificateRequest| expiry_labels(cr, "Issuer/apps/ca");
    for cr in [&live, &gone] {
        let uid = request_key(cr);
        ctx.shared
            .metrics
            .certificate_expiry
            .get_or_create(&series(cr))
            .set(1.0);
        ctx.requests.expiry.set(series(cr), &uid);
        ctx.requests.kept.backoff.next(uid.clone());
        ctx.requests.kept.memory.failed(&uid, ctx.shared.now());
        ctx.requests.kept.signings.insert(
            &uid,
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
        request_event(event, &ctx.requests, &mut relist);
        assert_eq!(
            ctx.requests.kept.backoff.len(),
            2,
            "nothing swept before the relist ends"
        );
    }
    request_event(Event::InitDone, &ctx.requests, &mut relist);
    let uid = request_key(&live);
    assert_eq!(ctx.requests.kept.backoff.len(), 1);
    assert!(ctx.requests.kept.memory.first_failure(&uid).is_some());
    assert_eq!(ctx.requests.kept.memory.len(), 1);
    assert_eq!(
        ctx.requests.kept.signings.snapshot().keys().collect::<Vec<_>>(),
        [&uid]
    );
    let metrics = &ctx.shared.metrics;
    assert!(metrics.certificate_expiry.get(&series(&live)).is_some());
    assert!(metrics.certificate_expiry.get(&series(&gone)).is_none());
    assert_eq!(ctx.requests.expiry.len(), 1);
    // Outside a relist, nothing is swept.
    request_event(Event::InitDone, &ctx.requests, &mut relist);
    assert_eq!(ctx.requests.kept.backoff.len(), 1);
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
        build_client(&ctx, key, key);
        ctx.issuers.backoff.next(key.to_string());
        ctx.shared.metrics.set_issuer_ready(key, true);
    }
    generations.changed(&issuer("live"));
    generations.changed(&issuer("gone"));
    let mut relist = Relist::default();
    for event in [Event::Init, Event::InitApply(issuer("live")), Event::InitDone] {
        issuer_event(&event, &ctx.issuers, &generations, &mut relist);
    }
    assert_eq!(
        (
            ctx.issuers.signer.clients.len(),
            ctx.issuers.backoff.len(),
            generations.len()
        ),
        (2, 2, 1)
    );
    let text = ctx.shared.metrics.encode();
    assert!(!text.contains("Issuer/apps/gone"), "{text}");
    assert!(
        text.contains("Issuer/apps/live") && text.contains("ClusterIssuer/other"),
        "{text}"
    );
}
