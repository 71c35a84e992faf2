use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;
use kube::runtime::reflector::ObjectRef;
use tokio::time::{Instant, timeout};

use super::{Due, Later};

fn map(namespace: &str, name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

fn named(namespace: &str, name: &str) -> ObjectRef<ConfigMap> {
    ObjectRef::new(name).within(namespace)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Each step: the key set (with its time in seconds, or cleared), whether the first time due
/// moved earlier, then the keys due at second 3 in order and how many wait after.
#[test]
fn due_table() {
    let start = Instant::now();
    let at = |n: u64| Some(start + secs(n));
    let mut due = Due::default();
    let steps = [
        ("a/x", at(5), true),
        ("a/y", at(2), true),
        ("a/z", at(2), false),
        // Replacing the first time with a later one: not sooner.
        ("a/y", at(9), false),
        // Cleared: gone from both maps, nothing sooner.
        ("a/x", None, false),
        ("a/w", None, false),
        ("b/x", at(1), true),
        ("b/x", at(3), false),
    ];
    for (key, when, sooner) in steps {
        assert_eq!(due.set(key, when), sooner, "setting {key} to {when:?}");
    }
    assert_eq!(due.at.len(), 3);
    assert_eq!(due.queue.len(), 3);
    let taken: Vec<String> = due
        .take(start + secs(3))
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(taken, ["a/z", "b/x"]);
    assert_eq!(due.first(), at(9));
    assert_eq!((due.at.len(), due.queue.len()), (1, 1));
    assert!(due.take(start + secs(8)).is_empty());
}

/// The next object woken, and when (since `start`).
async fn next<S>(wakes: &mut S, start: Instant) -> (ObjectRef<ConfigMap>, Duration)
where
    S: futures::Stream<Item = ObjectRef<ConfigMap>> + Unpin,
{
    let woken = timeout(secs(3600), wakes.next())
        .await
        .expect("a wake within the hour")
        .expect("the stream never ends");
    (woken, Instant::now() - start)
}

/// Objects wake at their times, soonest first; a replaced time moves, a cleared one never
/// fires, and a sooner time set while the stream sleeps wakes it early.
#[tokio::test(start_paused = true)]
async fn wakes_come_at_their_times() {
    let later = Later::<ConfigMap>::default();
    let start = Instant::now();
    later.set(&map("a", "late"), Some(secs(300)));
    later.set(&map("a", "moved"), Some(secs(10)));
    later.set(&map("a", "moved"), Some(secs(200)));
    later.set(&map("b", "cleared"), Some(secs(50)));
    later.set(&map("b", "cleared"), None);
    let mut wakes = Box::pin(later.wakes());
    // The stream sleeps until second 200; a time at second 20 wakes it then.
    let sooner = later.clone();
    tokio::spawn(async move {
        tokio::time::sleep(secs(5)).await;
        sooner.set(&map("c", "sooner"), Some(secs(15)));
    });
    assert_eq!(next(&mut wakes, start).await, (named("c", "sooner"), secs(20)));
    assert_eq!(next(&mut wakes, start).await, (named("a", "moved"), secs(200)));
    assert_eq!(next(&mut wakes, start).await, (named("a", "late"), secs(300)));
    assert!(
        timeout(secs(3600), wakes.next()).await.is_err(),
        "the cleared time never fires"
    );
}
