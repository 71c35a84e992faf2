//! Tests of the request watch filter and of what the controller forgets.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::runtime::reflector;
use serde_json::json;

use super::*;
use crate::api::certmanager::Summarised;
use crate::controllers::kit::testing::{shared, shared_with};
use crate::controllers::signing::Issuers;
use crate::controllers::signing::once::Signing;
use crate::controllers::signing::testing::signer;
use crate::pki::Chain;

fn context() -> RequestContext {
    context_with(shared())
}

/// A context whose manager runs the standalone controllers.
fn standalone_context() -> RequestContext {
    let mut config = crate::controllers::kit::Config::new("cfssl-system");
    config.standalone = Some(crate::controllers::kit::StandaloneSettings {
        approve_own_requests: true,
        minimum_backoff: std::time::Duration::from_secs(1),
        maximum_backoff: std::time::Duration::from_secs(60),
        cert_manager_lease_namespace: "cert-manager".into(),
        owner_reference: false,
        copied_annotation_prefixes: Vec::new(),
        renewal_jitter: crate::certificates::renewal::Jitter::OFF,
    });
    context_with(shared_with(config))
}

fn context_with(shared: std::sync::Arc<crate::controllers::kit::Shared>) -> RequestContext {
    let signer = signer(&shared);
    let (issuers, _) = reflector::store();
    let (cluster_issuers, _) = reflector::store();
    let caches = Issuers {
        issuers,
        cluster_issuers,
    };
    RequestContext::new(shared, signer, caches, tokio::sync::mpsc::unbounded_channel().0)
}

fn request(name: &str, group: &str, certificate: &str) -> CertificateRequest {
    let mut cr: CertificateRequest = serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "CertificateRequest",
        "metadata": {
            "name": name, "namespace": "apps", "uid": format!("uid-{name}"),
            "annotations": {"cert-manager.io/certificate-name": certificate},
            "ownerReferences": [{
                "apiVersion": "cert-manager.io/v1", "kind": "Certificate", "name": certificate,
                "uid": format!("uid-{certificate}"), "controller": true,
            }],
        },
        "spec": {
            "request": "Q1NS",
            "issuerRef": {"group": group, "kind": "Issuer", "name": "ca"},
        },
        "status": {"certificate": "Q0VSVA==", "ca": "Q0E=", "conditions": [
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

/// As cached in standalone mode once finished: its name, namespace, UID and owners (the
/// fixture has no version, creation time or revision), no annotation, spec or status but its
/// chain's SHA-256.
fn summarised(cr: &CertificateRequest) -> CertificateRequest {
    // sha256("CERT"), the fixture's chain.
    let digest = hex::decode("fc3c8e63b513125abcbc527c9b18c1a1dad76f87d03b127609a89603d5d0c5c1").unwrap();
    let spec = CertificateRequestSpec {
        summarised: Some(Box::new(Summarised {
            revision: None,
            chain_sha256: Some(digest.try_into().unwrap()),
        })),
        ..CertificateRequestSpec::default()
    };
    let mut summary = CertificateRequest::new(&cr.name_any(), spec);
    summary.metadata.namespace.clone_from(&cr.metadata.namespace);
    summary.metadata.uid.clone_from(&cr.metadata.uid);
    summary
        .metadata
        .owner_references
        .clone_from(&cr.metadata.owner_references);
    summary
}

/// A summary of a request that holds no chain.
fn without_chain(mut summary: CertificateRequest) -> CertificateRequest {
    summary.spec.summarised.as_mut().unwrap().chain_sha256 = None;
    summary
}

/// `cr` with a `summarised` field in its spec, as a tenant may write one: to the API it is an
/// unknown field, never the summary's.
fn claiming(cr: &CertificateRequest) -> CertificateRequest {
    let mut value = serde_json::to_value(cr).unwrap();
    value["spec"]["summarised"] = json!({ "revision": 1, "chainSha256": null });
    serde_json::from_value(value).unwrap()
}

fn bare(name: &str) -> CertificateRequest {
    let mut cr = CertificateRequest::new(name, CertificateRequestSpec::default());
    cr.metadata.namespace = Some("apps".into());
    cr.metadata.uid = Some(format!("uid-{name}"));
    cr
}

#[test]
fn foreign_requests_never_reach_the_cache() {
    let ours = pending("ours", "web");
    let odd_kind = {
        let mut cr = pending("odd", "web");
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
    let mut failed = with_ready("False", "Failed");
    failed.status.as_mut().unwrap().certificate = None;
    let pending = pending("r", "web");
    type E = Event<CertificateRequest>;
    // (row, event, keep_terminal, want)
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
            "issued, standalone: kept whole (request_event summarises it)",
            Event::Apply(issued.clone()),
            true,
            Some(Event::Apply(trimmed(issued.clone()))),
        ),
        (
            "failed, standalone: kept whole",
            Event::Apply(failed.clone()),
            true,
            Some(Event::Apply(trimmed(failed.clone()))),
        ),
        (
            "issued on relist, standalone",
            Event::InitApply(issued.clone()),
            true,
            Some(Event::InitApply(trimmed(issued.clone()))),
        ),
        (
            "a tenant's `summarised` on an issued request: an unknown field, kept whole",
            Event::Apply(claiming(&issued)),
            true,
            Some(Event::Apply(trimmed(claiming(&issued)))),
        ),
        (
            "a tenant's `summarised` on a pending request: an unknown field, kept whole",
            Event::Apply(claiming(&pending)),
            true,
            Some(Event::Apply(trimmed(claiming(&pending)))),
        ),
        (
            "signed but not yet marked Issued (a lost write), standalone: chain kept",
            Event::Apply(pending.clone()),
            true,
            Some(Event::Apply(trimmed(pending.clone()))),
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
    for (row, event, keep_terminal, want) in cases {
        assert_eq!(
            format!("{:?}", trim_request_event(event, keep_terminal)),
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

#[tokio::test]
async fn a_deleted_request_is_forgotten() {
    let ctx = context();
    let old = request("web-1", crate::api::GROUP, "web");
    let new = request("web-2", crate::api::GROUP, "web");
    let other = request("api-1", crate::api::GROUP, "api");
    for cr in [&old, &new, &other] {
        let uid = request_key(cr);
        ctx.core.ledger.backoff.next(uid.clone());
        ctx.core.ledger.memory.failed(&uid, ctx.core.shared.now());
        ctx.core.ledger.memory.announced(&uid);
        ctx.core.ledger.signings.insert(
            &uid,
            Signing::Unsaved(Chain {
                certificates: "c".into(),
                ca: None,
            }),
        );
        let labels = expiry_labels(cr, "Issuer/apps/ca");
        ctx.core
            .shared
            .metrics
            .certificate_expiry
            .get_or_create(&labels)
            .set(1.0);
        // As signing does: the series shows the request signed last.
        ctx.expiry.set(labels, &uid);
    }
    let has = |cr: &CertificateRequest| {
        ctx.core
            .shared
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

    request_event(
        Event::Delete(old.clone()),
        &ctx,
        &mut Relist::default(),
        &Recent::default(),
    );
    assert_eq!(ctx.core.ledger.backoff.len(), 2);
    assert_eq!(ctx.core.ledger.signings.snapshot().len(), 2);
    assert_eq!(ctx.core.ledger.memory.len(), 4);
    assert!(has(&new), "the series shows web-2's signature, not web-1's");

    request_event(
        Event::Delete(new.clone()),
        &ctx,
        &mut Relist::default(),
        &Recent::default(),
    );
    assert!(!has(&new), "the request the series showed is gone");
    assert!(has(&other));

    request_event(
        Event::Delete(other.clone()),
        &ctx,
        &mut Relist::default(),
        &Recent::default(),
    );
    assert!(ctx.core.ledger.backoff.is_empty());
    assert!(ctx.core.ledger.signings.snapshot().is_empty());
    assert!(ctx.core.ledger.memory.is_empty());
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
        ctx.core.ledger.backoff.next(uid.clone());
        ctx.core.ledger.memory.announced(&uid);
        ctx.core.ledger.signings.saved(&uid, Some("7".into()));
    }
    ctx.core
        .shared
        .metrics
        .certificate_expiry
        .get_or_create(&labels)
        .set(1.0);
    ctx.expiry.set(labels.clone(), &request_key(&issued));

    let seen = request_event(
        Event::Apply(issued.clone()),
        &ctx,
        &mut Relist::default(),
        &Recent::default(),
    );
    request_event(
        Event::Apply(pending.clone()),
        &ctx,
        &mut Relist::default(),
        &Recent::default(),
    );
    assert!(
        matches!(&seen, Some(Event::Apply(cr)) if !is_ours(cr) && cr.metadata.uid == issued.metadata.uid),
        "cached bare: {seen:?}"
    );
    let pending_uid = request_key(&pending);
    assert_eq!(
        ctx.core.ledger.signings.snapshot().len(),
        2,
        "the Saved entry guards until the delete"
    );
    assert_eq!(ctx.core.ledger.backoff.len(), 1);
    assert_eq!(ctx.core.ledger.memory.len(), 1);
    assert!(ctx.core.ledger.memory.is_announced(&pending_uid));
    assert!(!ctx.core.ledger.memory.is_announced(&request_key(&issued)));
    assert!(ctx.core.shared.metrics.certificate_expiry.get(&labels).is_some());
    assert_eq!(ctx.expiry.len(), 1);
}

/// In standalone mode a finished request goes into the store as its summary (no digest when
/// it holds no chain; a tenant's `summarised` field changes nothing) and beside it whole
/// (chain included, managedFields not), at its version; a pending one goes into the store
/// whole and not beside it; a delete forgets the copy.
#[tokio::test]
async fn standalone_keeps_a_finished_requests_whole_copy_beside_its_summary() {
    let ctx = standalone_context();
    let copies = Recent::default();
    let mut issued = request("web-1", crate::api::GROUP, "web");
    issued.metadata.resource_version = Some("7".into());
    let forged = claiming(&issued);
    let mut pending = pending("web-2", "web");
    pending.metadata.resource_version = Some("8".into());

    let seen = request_event(
        Event::Apply(forged.clone()),
        &ctx,
        &mut Relist::default(),
        &copies,
    );
    let mut want = summarised(&issued);
    want.metadata.resource_version = Some("7".into());
    assert_eq!(format!("{seen:?}"), format!("{:?}", Some(Event::Apply(want))));
    let whole = copies.get("apps", "web-1", Some("7"), false);
    assert_eq!(whole.as_deref(), Some(&trimmed(forged)));
    assert!(!whole.unwrap().is_summary());

    let seen = request_event(
        Event::Apply(pending.clone()),
        &ctx,
        &mut Relist::default(),
        &copies,
    );
    assert_eq!(
        format!("{seen:?}"),
        format!("{:?}", Some(Event::Apply(trimmed(pending))))
    );
    assert!(copies.get("apps", "web-2", Some("8"), false).is_none());

    // A failed request holds no chain: its summary has no digest.
    let mut failed = request("web-3", crate::api::GROUP, "web");
    let status = failed.status.as_mut().unwrap();
    status.certificate = None;
    (status.conditions[0].status, status.conditions[0].reason) = ("False".into(), "Failed".into());
    let seen = request_event(
        Event::Apply(failed.clone()),
        &ctx,
        &mut Relist::default(),
        &copies,
    );
    let want = without_chain(summarised(&failed));
    assert_eq!(format!("{seen:?}"), format!("{:?}", Some(Event::Apply(want))));

    request_event(Event::Delete(issued), &ctx, &mut Relist::default(), &copies);
    assert!(copies.get("apps", "web-1", Some("7"), false).is_none());
}

#[tokio::test]
async fn a_relist_sweeps_requests_whose_delete_was_missed() {
    let ctx = context();
    let live = pending("live", "web");
    let gone = pending("gone", "api");
    let series = |cr: &CertificateRequest| expiry_labels(cr, "Issuer/apps/ca");
    for cr in [&live, &gone] {
        let uid = request_key(cr);
        ctx.core
            .shared
            .metrics
            .certificate_expiry
            .get_or_create(&series(cr))
            .set(1.0);
        ctx.expiry.set(series(cr), &uid);
        ctx.core.ledger.backoff.next(uid.clone());
        ctx.core.ledger.memory.failed(&uid, ctx.core.shared.now());
        ctx.core.ledger.signings.insert(
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
        request_event(event, &ctx, &mut relist, &Recent::default());
        assert_eq!(
            ctx.core.ledger.backoff.len(),
            2,
            "nothing swept before the relist ends"
        );
    }
    request_event(Event::InitDone, &ctx, &mut relist, &Recent::default());
    let uid = request_key(&live);
    assert_eq!(ctx.core.ledger.backoff.len(), 1);
    assert!(ctx.core.ledger.memory.first_failure(&uid).is_some());
    assert_eq!(ctx.core.ledger.memory.len(), 1);
    assert_eq!(
        ctx.core.ledger.signings.snapshot().keys().collect::<Vec<_>>(),
        [&uid]
    );
    let metrics = &ctx.core.shared.metrics;
    assert!(metrics.certificate_expiry.get(&series(&live)).is_some());
    assert!(metrics.certificate_expiry.get(&series(&gone)).is_none());
    assert_eq!(ctx.expiry.len(), 1);
    // Outside a relist, nothing is swept.
    request_event(Event::InitDone, &ctx, &mut relist, &Recent::default());
    assert_eq!(ctx.core.ledger.backoff.len(), 1);
}
