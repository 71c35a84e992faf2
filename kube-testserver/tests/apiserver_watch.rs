//! Watches: resourceVersion semantics, bookmarks, 410 relists, streaming lists, selectors,
//! and metadata-only answers.

mod support;

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent, WatchParams},
    core::PartialObjectMeta,
    runtime::{watcher, watcher::Event},
};
use kube_testserver::Options;
use serde_json::{Value, json};
use support::{config_map, secret, start, start_with};

fn name_of(event: &Event<ConfigMap>) -> String {
    match event {
        Event::Apply(o) | Event::Delete(o) | Event::InitApply(o) => o.name_any(),
        Event::Init => "<init>".into(),
        Event::InitDone => "<init-done>".into(),
    }
}

/// The next `n` events of a watcher, failing after five seconds.
async fn next_events<S>(stream: &mut S, n: usize) -> Vec<String>
where
    S: futures::Stream<Item = Result<Event<ConfigMap>, watcher::Error>> + Unpin,
{
    let mut out = Vec::new();
    while out.len() < n {
        let event = tokio::time::timeout(Duration::from_secs(5), stream.next())
            .await
            .expect("event within 5s");
        out.push(match event.expect("stream open") {
            Ok(e @ Event::Delete(_)) => format!("delete {}", name_of(&e)),
            Ok(e) => name_of(&e),
            Err(err) => format!("error {err}"),
        });
    }
    out
}

#[tokio::test]
async fn watcher_lists_then_follows_changes() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    cms.create(&PostParams::default(), &config_map("a", &[]))
        .await
        .unwrap();
    let mut events = watcher(cms.clone(), watcher::Config::default()).boxed();
    assert_eq!(next_events(&mut events, 3).await, ["<init>", "a", "<init-done>"]);
    cms.create(&PostParams::default(), &config_map("b", &[]))
        .await
        .unwrap();
    cms.delete("a", &DeleteParams::default()).await.unwrap();
    assert_eq!(next_events(&mut events, 2).await, ["b", "delete a"]);
}

#[tokio::test]
async fn watch_from_a_resource_version_replays_later_changes() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    let a = cms
        .create(&PostParams::default(), &config_map("a", &[]))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &config_map("b", &[]))
        .await
        .unwrap();
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({ "data": { "k": "v" } })),
    )
    .await
    .unwrap();
    let stream = cms
        .watch(
            &WatchParams::default().disable_bookmarks(),
            &a.resource_version().unwrap(),
        )
        .await
        .unwrap();
    let events: Vec<String> = stream
        .take(2)
        .map(|e| match e.unwrap() {
            WatchEvent::Added(o) => format!("ADDED {}", o.name_any()),
            WatchEvent::Modified(o) => format!("MODIFIED {}", o.name_any()),
            other => format!("{other:?}"),
        })
        .collect()
        .await;
    assert_eq!(events, ["ADDED b", "MODIFIED a"]);
}

#[tokio::test]
async fn watch_without_a_resource_version_starts_with_current_objects() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    cms.create(&PostParams::default(), &config_map("a", &[]))
        .await
        .unwrap();
    let mut stream = cms.watch(&WatchParams::default(), "0").await.unwrap().boxed();
    let first = stream.try_next().await.unwrap().unwrap();
    assert!(matches!(first, WatchEvent::Added(ref o) if o.name_any() == "a"));
}

#[tokio::test]
async fn bookmarks_arrive_only_when_allowed() {
    let h = start_with(Options {
        bookmark_interval: Duration::from_millis(50),
        ..Options::default()
    })
    .await;
    let cms: Api<ConfigMap> = h.api();
    let created = cms
        .create(&PostParams::default(), &config_map("a", &[]))
        .await
        .unwrap();
    let rv = created.resource_version().unwrap();
    let mut with = cms.watch(&WatchParams::default(), &rv).await.unwrap().boxed();
    let event = tokio::time::timeout(Duration::from_secs(2), with.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let WatchEvent::Bookmark(bookmark) = event else {
        panic!("expected a bookmark, got {event:?}")
    };
    assert_eq!(bookmark.metadata.resource_version, rv);
    assert_eq!(bookmark.types.kind, "ConfigMap");

    let mut without = cms
        .watch(&WatchParams::default().disable_bookmarks(), &rv)
        .await
        .unwrap()
        .boxed();
    let quiet = tokio::time::timeout(Duration::from_millis(300), without.try_next()).await;
    assert!(quiet.is_err(), "no events without bookmarks: {quiet:?}");
}

#[tokio::test]
async fn a_too_old_resource_version_is_a_410_error_event() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    cms.create(&PostParams::default(), &config_map("a", &[]))
        .await
        .unwrap();
    h.server.compact_history();
    let mut stream = cms.watch(&WatchParams::default(), "1").await.unwrap().boxed();
    let event = stream.try_next().await.unwrap().unwrap();
    let WatchEvent::Error(status) = event else {
        panic!("expected an error event, got {event:?}")
    };
    assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
    assert!(
        status.message.contains("too old resource version"),
        "{}",
        status.message
    );
}

#[tokio::test]
async fn watcher_relists_after_410_gone() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    cms.create(&PostParams::default(), &config_map("a", &[]))
        .await
        .unwrap();
    let mut events = watcher(cms.clone(), watcher::Config::default()).boxed();
    assert_eq!(next_events(&mut events, 3).await, ["<init>", "a", "<init-done>"]);

    // While the watcher is not being polled: cut its watch, change things, forget history.
    h.server.close_watches();
    cms.create(&PostParams::default(), &config_map("b", &[]))
        .await
        .unwrap();
    h.server.compact_history();

    let seen = next_events(&mut events, 5).await;
    assert!(
        seen[0].starts_with("error") && seen[0].contains("too old resource version"),
        "{seen:?}"
    );
    assert_eq!(&seen[1..], ["<init>", "a", "b", "<init-done>"]);
}

#[tokio::test]
async fn timeout_seconds_ends_the_watch() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    let started = tokio::time::Instant::now();
    let stream = cms
        .watch(&WatchParams::default().timeout(1).disable_bookmarks(), "0")
        .await
        .unwrap();
    let events: Vec<_> = tokio::time::timeout(Duration::from_secs(5), stream.collect::<Vec<_>>())
        .await
        .unwrap();
    assert!(events.is_empty());
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn streaming_lists_end_initial_events_with_an_annotated_bookmark() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    cms.create(&PostParams::default(), &config_map("a", &[]))
        .await
        .unwrap();
    let mut raw = cms
        .watch(&WatchParams::streaming_lists(), "")
        .await
        .unwrap()
        .boxed();
    assert!(matches!(
        raw.try_next().await.unwrap().unwrap(),
        WatchEvent::Added(_)
    ));
    let WatchEvent::Bookmark(end) = raw.try_next().await.unwrap().unwrap() else {
        panic!("expected the end bookmark")
    };
    assert_eq!(
        end.metadata
            .annotations
            .get("k8s.io/initial-events-end")
            .map(String::as_str),
        Some("true")
    );

    let mut events = watcher(cms.clone(), watcher::Config::default().streaming_lists()).boxed();
    assert_eq!(next_events(&mut events, 3).await, ["<init>", "a", "<init-done>"]);
    cms.create(&PostParams::default(), &config_map("b", &[]))
        .await
        .unwrap();
    assert_eq!(next_events(&mut events, 1).await, ["b"]);
}

#[tokio::test]
async fn watches_are_scoped_to_their_namespace_or_all() {
    let h = start().await;
    let namespaces: Api<Namespace> = h.cluster_api();
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some("other".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces.create(&PostParams::default(), &ns).await.unwrap();
    let here: Api<ConfigMap> = h.api();
    let there: Api<ConfigMap> = Api::namespaced(h.client.clone(), "other");
    let everywhere: Api<ConfigMap> = Api::all(h.client.clone());
    let mut local = watcher(here.clone(), watcher::Config::default()).boxed();
    let mut global = watcher(everywhere, watcher::Config::default()).boxed();
    assert_eq!(next_events(&mut local, 2).await, ["<init>", "<init-done>"]);
    assert_eq!(next_events(&mut global, 2).await, ["<init>", "<init-done>"]);
    there
        .create(&PostParams::default(), &config_map("far", &[]))
        .await
        .unwrap();
    here.create(&PostParams::default(), &config_map("near", &[]))
        .await
        .unwrap();
    assert_eq!(next_events(&mut local, 1).await, ["near"]);
    assert_eq!(next_events(&mut global, 2).await, ["far", "near"]);
}

#[tokio::test]
async fn label_selected_watches_see_relabelling_as_add_and_delete() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    let mut stream = cms
        .watch(&WatchParams::default().labels("team=a").disable_bookmarks(), "0")
        .await
        .unwrap()
        .boxed();
    cms.create(&PostParams::default(), &config_map("x", &[("team", "b")]))
        .await
        .unwrap();
    let relabel = |team: &str| Patch::Merge(json!({ "metadata": { "labels": { "team": team } } }));
    cms.patch("x", &PatchParams::default(), &relabel("a"))
        .await
        .unwrap();
    cms.patch("x", &PatchParams::default(), &relabel("c"))
        .await
        .unwrap();
    let kinds: Vec<String> = stream
        .by_ref()
        .take(2)
        .map(|e| match e.unwrap() {
            WatchEvent::Added(_) => "ADDED".to_string(),
            WatchEvent::Deleted(_) => "DELETED".to_string(),
            other => format!("{other:?}"),
        })
        .collect()
        .await;
    assert_eq!(kinds, ["ADDED", "DELETED"]);
}

#[tokio::test]
#[allow(deprecated)] // kube 5 deprecates `metadata_watcher` in favour of `Api<PartialObjectMeta<K>>`; both must work.
async fn metadata_watcher_works_and_never_carries_secret_data() {
    let h = start().await;
    let secrets: Api<Secret> = h.api();
    secrets
        .create(&PostParams::default(), &secret("before", &[("key", "hunter2")]))
        .await
        .unwrap();
    let mut events = kube::runtime::metadata_watcher(secrets.clone(), watcher::Config::default()).boxed();
    let mut names = Vec::new();
    while names.len() < 2 {
        let event = tokio::time::timeout(Duration::from_secs(5), events.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        match event {
            Event::InitApply(meta) | Event::Apply(meta) => {
                assert_eq!(meta.types.as_ref().unwrap().kind, "PartialObjectMetadata");
                names.push(meta.name_any());
                if names.len() == 1 {
                    secrets
                        .create(&PostParams::default(), &secret("after", &[("key", "hunter3")]))
                        .await
                        .unwrap();
                }
            }
            _ => {}
        }
    }
    assert_eq!(names, ["before", "after"]);

    // On the wire, not just after typed decoding: no data in get, list or watch answers.
    let accept = |list: bool| {
        if list {
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
        } else {
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
        }
    };
    for (path, list) in [
        ("/api/v1/namespaces/default/secrets/before", false),
        ("/api/v1/namespaces/default/secrets", true),
        (
            "/api/v1/namespaces/default/secrets?watch=true&resourceVersion=0&timeoutSeconds=1",
            false,
        ),
    ] {
        let req = http::Request::get(path)
            .header("accept", accept(list))
            .body(vec![])
            .unwrap();
        let text = h.client.request_text(req).await.unwrap();
        assert!(
            text.contains("before") && !text.contains("\"data\"") && !text.contains("hunter"),
            "{path}: {text}"
        );
    }
    let meta = secrets.get_metadata("after").await.unwrap();
    assert_eq!(meta.types.unwrap().api_version, "meta.k8s.io/v1");
    let listed = secrets.list_metadata(&Default::default()).await.unwrap();
    assert_eq!(listed.items.len(), 2);
}

#[tokio::test]
async fn metadata_only_answers_leave_out_everything_but_metadata() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    cms.create(&PostParams::default(), &config_map("a", &[("x", "y")]))
        .await
        .unwrap();
    let req = http::Request::get("/api/v1/namespaces/default/configmaps/a")
        .header(
            "accept",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )
        .body(vec![])
        .unwrap();
    let doc: Value = serde_json::from_str(&h.client.request_text(req).await.unwrap()).unwrap();
    let keys: Vec<&String> = doc.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["apiVersion", "kind", "metadata"]);
    assert_eq!(doc["metadata"]["labels"]["x"], "y");
}

#[tokio::test]
async fn watchers_over_partial_object_meta_use_metadata_requests() {
    let h = start().await;
    h.api::<Secret>()
        .create(&PostParams::default(), &secret("s", &[("key", "v")]))
        .await
        .unwrap();
    let api: Api<PartialObjectMeta<Secret>> = Api::namespaced(h.client.clone(), "default");
    let mut events = watcher(api, watcher::Config::default()).boxed();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(5), events.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let Event::InitApply(meta) = event {
            assert_eq!(meta.name_any(), "s");
            assert_eq!(meta.types.unwrap().kind, "PartialObjectMetadata");
            break;
        }
    }
}

/// kube-apiserver writes each watch line from `metav1.WatchEvent`, whose Go struct declares
/// `Type` before `Object`, so every line starts with `{"type":`. Clients decode the event as a
/// tagged enum and read the tag first; an object first makes them buffer the whole object.
#[tokio::test]
async fn watch_lines_carry_type_before_object() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    cms.create(&PostParams::default(), &config_map("a", &[]))
        .await
        .unwrap();
    let request = http::Request::get(
        "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=0&timeoutSeconds=1",
    )
    .body(Vec::new())
    .unwrap();
    let text = tokio::time::timeout(Duration::from_secs(5), h.client.request_text(request))
        .await
        .expect("the watch ends after timeoutSeconds")
        .unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(
        lines[0].starts_with(r#"{"type":"ADDED","object":{"#),
        "{}",
        lines[0]
    );
    let event: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(event["object"]["metadata"]["name"], "a");
}

/// kube-apiserver's cacher closes a watcher that cannot keep up ("Forcing watcher close due to
/// unresponsiveness") without an ERROR event; the client watches again from the last
/// resourceVersion it saw and, while that is in the watch cache, gets the rest without a
/// relist. Here a watch whose client stops reading falls behind a 4-change buffer.
#[tokio::test]
async fn a_watch_that_falls_behind_is_closed_and_resumes_from_its_last_version() {
    let h = start_with(Options {
        watch_buffer: 4,
        ..Options::default()
    })
    .await;
    let cms: Api<ConfigMap> = h.api();
    let mut stream = cms
        .watch(&WatchParams::default().disable_bookmarks(), "0")
        .await
        .unwrap()
        .boxed();
    // Large objects, so that the server's queue and the socket fill while nobody reads.
    const N: usize = 600;
    let big = "x".repeat(64 * 1024);
    for i in 0..N {
        let mut cm = config_map(&format!("c{i:03}"), &[]);
        cm.data = Some([("k".to_string(), big.clone())].into());
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let mut names = Vec::new();
    let mut last = String::new();
    while let Some(event) = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
        .await
        .expect("the closed watch ends")
        .unwrap()
    {
        match event {
            WatchEvent::Added(cm) => {
                last = cm.resource_version().unwrap();
                names.push(cm.name_any());
            }
            other => panic!("no ERROR or other event when closed: {other:?}"),
        }
    }
    assert!(
        !names.is_empty() && names.len() < N,
        "closed after {} of {N}",
        names.len()
    );
    let rest: Vec<String> = cms
        .watch(&WatchParams::default().disable_bookmarks().timeout(1), &last)
        .await
        .unwrap()
        .map_ok(|event| match event {
            WatchEvent::Added(cm) => cm.name_any(),
            other => panic!("resumed from history: {other:?}"),
        })
        .try_collect()
        .await
        .unwrap();
    names.extend(rest);
    let want: Vec<String> = (0..N).map(|i| format!("c{i:03}")).collect();
    assert_eq!(names, want);
}
