use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::Event;

use super::*;

fn cm(namespace: &str, name: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.namespace = Some(namespace.into());
    cm.metadata.name = Some(name.into());
    cm
}

/// Feeds tagged events (0: namespace a, 1: namespace b) through the merge into a store, and
/// gives what the store then holds, as `namespace/name`, sorted.
async fn store_after(events: Vec<(usize, Event<ConfigMap>)>) -> Vec<String> {
    let mut writer = Writer::<ConfigMap>::default();
    let store = writer.as_reader();
    let reader = store.clone();
    let present: Present<ConfigMap> = Arc::new(move |ns: &str| {
        reader
            .state()
            .iter()
            .filter(|o| o.metadata.namespace.as_deref() == Some(ns))
            .map(|o| (**o).clone())
            .collect()
    });
    let tagged = futures::stream::iter(events.into_iter().map(|(i, e)| (i, Ok(e))));
    let mut merged = Box::pin(merged(tagged, vec!["a".into(), "b".into()], present));
    while let Some(event) = merged.next().await {
        writer.apply_watcher_event(&event.unwrap());
    }
    let mut held: Vec<String> = store
        .state()
        .iter()
        .map(|o| {
            format!(
                "{}/{}",
                o.metadata.namespace.as_deref().unwrap(),
                o.metadata.name.as_deref().unwrap()
            )
        })
        .collect();
    held.sort();
    held
}

/// One initial list over both namespaces; a change while the other still lists is kept; a
/// later relist of one namespace drops only that namespace's vanished objects.
#[tokio::test]
async fn a_namespace_relist_replaces_only_its_own_objects() {
    let events = vec![
        (0, Event::Init),
        (0, Event::InitApply(cm("a", "x"))),
        (0, Event::InitDone),
        (0, Event::Apply(cm("a", "y"))),
        (1, Event::Init),
        (1, Event::InitApply(cm("b", "z"))),
        (1, Event::InitDone),
    ];
    assert_eq!(store_after(events.clone()).await, ["a/x", "a/y", "b/z"]);
    let mut relist = events;
    relist.extend([
        (0, Event::Init),
        (0, Event::InitApply(cm("a", "y"))),
        (0, Event::InitDone),
    ]);
    assert_eq!(store_after(relist.clone()).await, ["a/y", "b/z"]);
    relist.push((1, Event::Delete(cm("b", "z"))));
    assert_eq!(store_after(relist).await, ["a/y"]);
}

/// A namespace that lists again before the other has listed: what vanished in between is
/// swept once both have, and its changes from before the relist are not replayed.
#[tokio::test]
async fn a_relist_before_every_namespace_listed_is_swept_after() {
    let events = vec![
        (0, Event::Init),
        (0, Event::InitApply(cm("a", "x"))),
        (0, Event::InitDone),
        (0, Event::Apply(cm("a", "w"))),
        (0, Event::Init),
        (0, Event::InitApply(cm("a", "y"))),
        (0, Event::InitDone),
        (1, Event::Init),
        (1, Event::InitDone),
    ];
    assert_eq!(store_after(events).await, ["a/y"]);
}

/// The store is ready (one `InitDone`) only once every namespace has listed.
#[test]
fn init_done_waits_for_every_namespace() {
    let mut merge = Merge::<ConfigMap>::new(vec!["a".into(), "b".into()]);
    let done = |outs: &[merge::Out<ConfigMap>]| {
        outs.iter()
            .filter(|o| matches!(o, merge::Out::Event(Event::InitDone)))
            .count()
    };
    let inits = [merge.feed(0, Event::Init).len(), merge.feed(1, Event::Init).len()];
    assert_eq!(inits, [1, 0], "one Init for the store");
    assert_eq!(done(&merge.feed(0, Event::InitDone)), 0);
    assert_eq!(done(&merge.feed(1, Event::InitDone)), 1);
}

#[test]
fn scope_from_flags() {
    let table: [(Vec<&str>, Scope); 3] = [
        (vec![], Scope::Cluster),
        (vec![" ", ""], Scope::Cluster),
        (
            vec!["b", "a", "b"],
            Scope::Namespaces(vec!["a".into(), "b".into()]),
        ),
    ];
    for (flags, want) in table {
        assert_eq!(
            Scope::new(flags.iter().map(ToString::to_string)),
            want,
            "{flags:?}"
        );
    }
    let only_a = Scope::new(["a".to_string()]);
    let answers = [only_a.serves("a"), only_a.serves("b"), Scope::Cluster.serves("b")];
    assert_eq!(answers, [true, false, true]);
    assert_eq!(
        only_a.and("home"),
        Scope::Namespaces(vec!["a".into(), "home".into()])
    );
    assert_eq!(Scope::Cluster.and("home"), Scope::Cluster);
    assert!(
        Scope::Namespaces(Vec::new()).serves("b"),
        "an empty list is the cluster"
    );
}
