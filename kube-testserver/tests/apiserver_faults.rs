//! Request counts, injected faults, latency and cut watches.

mod support;

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{ListParams, Patch, PatchParams, PostParams},
    runtime::{watcher, watcher::Event},
};
use kube_testserver::{Count, Counts, Fault, FaultKind, FaultRates, RateTally, Verb};
use serde_json::json;
use support::{Harness, Widget, code, config_map, reason, start, widget};

#[tokio::test]
async fn requests_are_counted_by_verb_and_resource() {
    let h = start().await;
    h.install_widgets().await;
    h.server.reset_counts();
    let widgets: Api<Widget> = h.api();
    widgets
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    widgets.get("w").await.unwrap();
    widgets.get("w").await.unwrap();
    widgets.list(&ListParams::default()).await.unwrap();
    widgets
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "phase": "x" } })),
        )
        .await
        .unwrap();
    let _ = widgets.get("missing").await;

    let counts = h.server.counts();
    assert_eq!(counts.get(Verb::Create, "widgets"), 1);
    assert_eq!(counts.get(Verb::Get, "widgets"), 3);
    assert_eq!(counts.get(Verb::List, "widgets"), 1);
    assert_eq!(counts.get(Verb::Patch, "widgets/status"), 1);
    assert_eq!(counts.get(Verb::Patch, "widgets"), 0);
    assert_eq!(counts.total(), 6);

    h.server.reset_counts();
    assert_eq!(h.server.counts(), Counts::default());
}

#[tokio::test]
async fn counts_are_readable_and_resettable_over_http() {
    let h = start().await;
    h.api::<ConfigMap>()
        .create(&PostParams::default(), &config_map("a", &[]))
        .await
        .unwrap();
    let text = h
        .client
        .request_text(http::Request::get("/testserver/counts").body(vec![]).unwrap())
        .await
        .unwrap();
    let rows: Vec<Count> = serde_json::from_str(&text).unwrap();
    assert_eq!(Counts::from_rows(rows).get(Verb::Create, "configmaps"), 1);
    h.client
        .request_text(http::Request::delete("/testserver/counts").body(vec![]).unwrap())
        .await
        .unwrap();
    assert_eq!(h.server.counts().total(), 0);
}

#[tokio::test]
async fn internal_error_faults_fail_the_next_matching_requests() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    h.server.inject(
        Fault::new(FaultKind::InternalError)
            .verb(Verb::Create)
            .resource("configmaps")
            .times(2),
    );
    cms.get_opt("unrelated").await.unwrap();
    for _ in 0..2 {
        let err = cms
            .create(&PostParams::default(), &config_map("a", &[]))
            .await
            .unwrap_err();
        assert_eq!((code(&err), reason(&err).as_str()), (500, "InternalError"));
    }
    cms.create(&PostParams::default(), &config_map("a", &[]))
        .await
        .unwrap();
    assert_eq!(h.server.counts().get(Verb::Create, "configmaps"), 3);
}

/// As RBAC answers a request its rules do not grant: 403 Forbidden.
#[tokio::test]
async fn forbidden_faults_look_like_rbac_denials() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    h.server.inject(
        Fault::new(FaultKind::Forbidden)
            .verb(Verb::List)
            .resource("configmaps"),
    );
    let err = cms.list(&ListParams::default()).await.unwrap_err();
    assert_eq!((code(&err), reason(&err).as_str()), (403, "Forbidden"));
    cms.list(&ListParams::default()).await.unwrap();
}

#[tokio::test]
async fn conflict_faults_look_like_lost_races() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    cms.create(&PostParams::default(), &config_map("a", &[]))
        .await
        .unwrap();
    h.server.inject(Fault::new(FaultKind::Conflict).verb(Verb::Patch));
    let patch = Patch::Merge(json!({ "data": { "k": "v" } }));
    let err = cms.patch("a", &PatchParams::default(), &patch).await.unwrap_err();
    assert_eq!((code(&err), reason(&err).as_str()), (409, "Conflict"));
    assert!(
        cms.get("a").await.unwrap().data.is_none(),
        "the faulted write did not happen"
    );
    cms.patch("a", &PatchParams::default(), &patch).await.unwrap();
}

#[tokio::test]
async fn too_many_requests_faults_carry_retry_after_and_kube_retries_them() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    h.server.inject(
        Fault::new(FaultKind::TooManyRequests {
            retry_after_seconds: 1,
        })
        .verb(Verb::Get)
        .resource("configmaps"),
    );
    let started = Instant::now();
    assert!(
        cms.get_opt("a").await.unwrap().is_none(),
        "kube's client retried after the 429"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "Retry-After was honoured: {:?}",
        started.elapsed()
    );
    assert_eq!(h.server.counts().get(Verb::Get, "configmaps"), 2);

    // The raw answer: 429, reason TooManyRequests, Retry-After header.
    h.server.inject(Fault::new(FaultKind::TooManyRequests {
        retry_after_seconds: 7,
    }));
    let req = http::Request::get("/api/v1/namespaces/default/configmaps")
        .body(kube::client::Body::empty())
        .unwrap();
    let mut config = h.server.config().unwrap();
    config.default_retry = false;
    let plain = kube::Client::try_from(config).unwrap();
    let response = plain.send(req).await.unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "7");
}

#[tokio::test]
async fn faults_can_be_injected_over_http() {
    let h = start().await;
    let fault =
        json!({ "verb": "list", "resource": "configmaps", "kind": { "type": "internalError" }, "times": 1 });
    let req = http::Request::post("/testserver/faults")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&fault).unwrap())
        .unwrap();
    h.client.request_text(req).await.unwrap();
    let err = h
        .api::<ConfigMap>()
        .list(&ListParams::default())
        .await
        .unwrap_err();
    assert_eq!(code(&err), 500);
    h.api::<ConfigMap>().list(&ListParams::default()).await.unwrap();
}

#[tokio::test]
async fn latency_delays_every_request() {
    let h = start().await;
    h.server.set_latency(Duration::from_millis(200));
    let started = Instant::now();
    h.api::<ConfigMap>().get_opt("a").await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(200));
    h.server.set_latency(Duration::ZERO);
}

/// A kube watcher of `cms` past its initial list.
async fn synced_watcher(
    cms: &Api<ConfigMap>,
) -> futures::stream::BoxStream<'static, Result<Event<ConfigMap>, watcher::Error>> {
    let mut events = watcher(cms.clone(), watcher::Config::default()).boxed();
    while !matches!(events.next().await.unwrap().unwrap(), Event::InitDone) {}
    events
}

#[tokio::test]
async fn closed_watches_are_resumed_by_kube_watchers() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    let mut events = synced_watcher(&cms).await;
    let watches_before = h.server.counts().get(Verb::Watch, "configmaps");
    h.server.close_watches();
    cms.create(&PostParams::default(), &config_map("after-cut", &[]))
        .await
        .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(event, Event::Apply(ref o) if o.metadata.name.as_deref() == Some("after-cut")));
    assert_eq!(
        h.server.counts().get(Verb::Watch, "configmaps"),
        watches_before + 1,
        "one re-watch"
    );
    assert_eq!(
        h.server.counts().get(Verb::List, "configmaps"),
        1,
        "no relist needed"
    );
}

/// A flaky API server: kube-apiserver answers a failed write with a `Status` (a storage error
/// as 500 `InternalError`, apimachinery's `NewInternalError`; a lost optimistic-concurrency race
/// as 409 `Conflict`, `NewConflict`, "Operation cannot be fulfilled on ..."), and the write does
/// not happen. Rate faults fail the set shares of writes, by a seeded draw, and never reads.
#[tokio::test]
async fn rate_faults_fail_a_share_of_writes_as_status_errors_and_never_reads() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    cms.create(&PostParams::default(), &config_map("target", &[]))
        .await
        .unwrap();
    h.server.set_fault_rates(Some(FaultRates::new(5, 2, 7)));
    let (mut internal, mut conflict, mut applied) = (0u64, 0u64, 0u64);
    let mut last_applied: Option<String> = None;
    for i in 0..1000 {
        let patch = Patch::Merge(json!({ "data": { "n": i.to_string() } }));
        match cms.patch("target", &PatchParams::default(), &patch).await {
            Ok(_) => {
                applied += 1;
                last_applied = Some(i.to_string());
            }
            Err(err) => match (code(&err), reason(&err).as_str()) {
                (500, "InternalError") => internal += 1,
                (409, "Conflict") => {
                    assert!(
                        err.to_string()
                            .contains("Operation cannot be fulfilled on configmaps")
                    );
                    conflict += 1
                }
                other => panic!("unexpected {other:?}: {err}"),
            },
        }
        let data = cms.get("target").await.unwrap().data.unwrap_or_default();
        assert_eq!(data.get("n"), last_applied.as_ref(), "after write {i}");
    }
    let tally = h.server.rate_tally();
    assert_eq!(
        tally,
        RateTally {
            writes: 1000,
            internal_errors: internal,
            conflicts: conflict
        }
    );
    assert_eq!(applied + internal + conflict, 1000);
    assert!((30..=70).contains(&internal), "500s: {internal} of 1000");
    assert!((8..=32).contains(&conflict), "409s: {conflict} of 1000");
    assert_eq!(
        h.server.counts().get(Verb::Get, "configmaps"),
        1000,
        "reads are never faulted"
    );

    // The same seed fails the same writes.
    let again = start().await;
    let cms2: Api<ConfigMap> = again.api();
    cms2.create(&PostParams::default(), &config_map("target", &[]))
        .await
        .unwrap();
    again.server.set_fault_rates(Some(FaultRates::new(5, 2, 7)));
    for i in 0..1000 {
        let patch = Patch::Merge(json!({ "data": { "n": i.to_string() } }));
        let _ = cms2.patch("target", &PatchParams::default(), &patch).await;
    }
    assert_eq!(again.server.rate_tally(), tally);
    h.server.set_fault_rates(None);
    cms.patch(
        "target",
        &PatchParams::default(),
        &Patch::Merge(json!({ "data": { "n": "off" } })),
    )
    .await
    .unwrap();
}

/// A faulted write does not happen: the object keeps its resourceVersion and data.
#[tokio::test]
async fn a_rate_faulted_write_leaves_the_object_as_it_was() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    let created = cms
        .create(&PostParams::default(), &config_map("kept", &[]))
        .await
        .unwrap();
    h.server.set_fault_rates(Some(FaultRates::new(100, 0, 1)));
    let patch = Patch::Merge(json!({ "data": { "k": "v" } }));
    let err = cms
        .patch("kept", &PatchParams::default(), &patch)
        .await
        .unwrap_err();
    assert_eq!((code(&err), reason(&err).as_str()), (500, "InternalError"));
    let err = cms
        .create(&PostParams::default(), &config_map("never", &[]))
        .await
        .unwrap_err();
    assert_eq!(code(&err), 500);
    h.server.set_fault_rates(None);
    let now = cms.get("kept").await.unwrap();
    assert_eq!(now.metadata.resource_version, created.metadata.resource_version);
    assert!(now.data.is_none());
    assert!(cms.get_opt("never").await.unwrap().is_none());
}

/// A client configuration for a new user `name` of the test server (its own bearer token).
async fn added_user(h: &Harness, name: &str) -> kube::Config {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{name}.kubeconfig"));
    h.server.add_user(name, &path).unwrap();
    let kubeconfig = kube::config::Kubeconfig::read_from(&path).unwrap();
    kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap()
}

/// Rate faults can be aimed at one added user (a manager under test) while the test's own
/// client writes freely.
#[tokio::test]
async fn rate_faults_can_be_limited_to_one_user() {
    let h = start().await;
    let config = added_user(&h, "flaky").await;
    let flaky: Api<ConfigMap> = Api::default_namespaced(kube::Client::try_from(config).unwrap());
    h.server
        .set_fault_rates(Some(FaultRates::new(100, 0, 3).user("flaky")));
    h.api::<ConfigMap>()
        .create(&PostParams::default(), &config_map("mine", &[]))
        .await
        .unwrap();
    let err = flaky
        .create(&PostParams::default(), &config_map("theirs", &[]))
        .await
        .unwrap_err();
    assert_eq!(code(&err), 500);
    flaky.get("mine").await.unwrap();
    assert_eq!(
        h.server.rate_tally(),
        RateTally {
            writes: 1,
            internal_errors: 1,
            conflicts: 0
        }
    );
}

/// kube-apiserver ends watches itself (each after a random 1-2x `--min-request-timeout`, and
/// on restart or behind a load balancer's idle timeout); a client-go reflector or kube's
/// watcher then watches again from the last resourceVersion it saw, without a relist. The
/// periodic drop ends every open watch each period; the watcher loses no event.
#[tokio::test]
async fn periodically_dropped_watches_are_resumed_without_losing_events() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    let mut events = synced_watcher(&cms).await;
    h.server.drop_watches_every(Some(Duration::from_millis(200)));
    let writer = {
        let cms = cms.clone();
        tokio::spawn(async move {
            for i in 0..20 {
                cms.create(&PostParams::default(), &config_map(&format!("cm-{i:02}"), &[]))
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(60)).await;
            }
        })
    };
    let mut seen = Vec::new();
    while seen.len() < 20 {
        let event = tokio::time::timeout(Duration::from_secs(10), events.next())
            .await
            .expect("an event within 10 s")
            .unwrap()
            .unwrap();
        if let Event::Apply(cm) = event {
            seen.push(cm.metadata.name.unwrap());
        }
    }
    writer.await.unwrap();
    h.server.drop_watches_every(None);
    let expected: Vec<String> = (0..20).map(|i| format!("cm-{i:02}")).collect();
    assert_eq!(seen, expected, "every create, once, in order");
    let closes = h.server.watch_closes();
    assert!(closes >= 4, "the watch was dropped {closes} times in ~1.2 s");
    let counts = h.server.counts();
    assert!(
        counts.get(Verb::Watch, "configmaps") > 4,
        "re-watched after each drop: {counts:?}"
    );
    assert_eq!(counts.get(Verb::List, "configmaps"), 1, "no relist needed");
    // Stopped: no more drops.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(h.server.watch_closes(), closes);
}

/// kube-apiserver authenticates each bearer token as its own user and its audit log records
/// who made which request; a token it does not know gets 401 Unauthorized.
#[tokio::test]
async fn added_users_have_their_own_token_and_their_requests_are_audited() {
    let h = start().await;
    let config = added_user(&h, "alice").await;
    let alice: Api<ConfigMap> = Api::default_namespaced(kube::Client::try_from(config.clone()).unwrap());
    alice
        .create(&PostParams::default(), &config_map("by-alice", &[]))
        .await
        .unwrap();
    alice.get("by-alice").await.unwrap();
    // The kubeconfig's own user is not audited.
    h.api::<ConfigMap>().get("by-alice").await.unwrap();

    let audit = h.server.audit();
    let seen: Vec<(&str, Verb, &str)> = audit
        .iter()
        .map(|e| (e.user.as_str(), e.verb, e.resource.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("alice", Verb::Create, "configmaps"),
            ("alice", Verb::Get, "configmaps")
        ]
    );
    assert!(audit[0].at <= audit[1].at);

    let mut stranger = config;
    stranger.auth_info.token = Some("not-a-token".to_string().into());
    let refused = Api::<ConfigMap>::default_namespaced(kube::Client::try_from(stranger).unwrap())
        .get("by-alice")
        .await
        .unwrap_err();
    assert_eq!(code(&refused), 401);
}

/// The audit says where each request went: group, namespace, and the object, named by the
/// path or, for a list or watch, by a `metadata.name` field selector (RBAC's resourceNames
/// match it so); an all-namespaces list has no namespace.
#[tokio::test]
async fn the_audit_records_group_namespace_and_object_of_each_request() {
    let h = start().await;
    let config = added_user(&h, "bob").await;
    let client = kube::Client::try_from(config).unwrap();
    let ns = client.default_namespace().to_string();
    let bob: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    bob.create(&PostParams::default(), &config_map("by-bob", &[]))
        .await
        .unwrap();
    let by_name = kube::api::ListParams::default().fields("metadata.name=by-bob");
    bob.list(&by_name).await.unwrap();
    Api::<ConfigMap>::all(client.clone())
        .list(&Default::default())
        .await
        .unwrap();
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(client, &ns);
    let _ = leases.get_opt("none").await.unwrap();
    let audit = h.server.audit();
    /// verb, group, resource, namespace, object
    type Seen<'a> = (Verb, &'a str, &'a str, Option<&'a str>, Option<&'a str>);
    let seen: Vec<Seen> = audit
        .iter()
        .map(|e| {
            (
                e.verb,
                e.group.as_str(),
                e.resource.as_str(),
                e.namespace.as_deref(),
                e.name.as_deref(),
            )
        })
        .collect();
    let ns = Some(ns.as_str());
    assert_eq!(
        seen,
        [
            (Verb::Create, "", "configmaps", ns, None),
            (Verb::List, "", "configmaps", ns, Some("by-bob")),
            (Verb::List, "", "configmaps", None, None),
            (Verb::Get, "coordination.k8s.io", "leases", ns, Some("none")),
        ]
    );
}
