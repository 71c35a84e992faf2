use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;
use kube::runtime::reflector::ObjectRef;
use tokio::time::{Instant, timeout};

use super::{Funnel, HELD_AT_MOST, KEPT_CAPACITY, Line};

enum Step {
    Push(&'static str),
    Done(&'static str, bool),
    /// What `next` lets through, seconds after the start.
    Next(u64, Option<&'static str>),
}

/// A line two wide: keys go in the order they came, each once; a key out comes back only
/// after its pass (or its time) is over; a full line lets nothing through.
#[test]
fn line_table() {
    use Step::{Done, Next, Push};
    let start = Instant::now();
    let mut line = Line::new(2);
    let steps = [
        Push("a/x"),
        Push("a/y"),
        Push("a/x"),
        Push("b/z"),
        Next(0, Some("a/x")),
        Next(0, Some("a/y")),
        // Two out: full.
        Next(1, None),
        // a/x again while out: it waits, and is passed over until its pass is done.
        Push("a/x"),
        Done("a/x", true),
        Done("a/x", false),
        Next(2, Some("b/z")),
        Next(2, None),
        Done("b/z", true),
        Next(3, Some("a/x")),
        Next(3, None),
        // a/y went at 0: at 30 it no longer counts, and the line has room, but nothing waits.
        Next(30, None),
        Push("c/w"),
        Next(30, Some("c/w")),
    ];
    for (i, step) in steps.into_iter().enumerate() {
        match step {
            Push(key) => line.push(key),
            Done(key, was_out) => assert_eq!(line.done(key), was_out, "step {i}: done {key}"),
            Next(at, want) => {
                let got = line.next(start + Duration::from_secs(at));
                assert_eq!(got.as_deref(), want, "step {i}: next at {at}s");
            }
        }
    }
    assert_eq!(line.out.len(), 2);
    assert!(line.is_empty());
}

/// A line with keys waiting says when its oldest key out stops counting; with none waiting it
/// says nothing.
#[test]
fn expiry_only_with_keys_waiting() {
    let start = Instant::now();
    let mut line = Line::new(2);
    line.push("a/x");
    line.push("a/y");
    assert_eq!(line.next(start).as_deref(), Some("a/x"));
    assert_eq!(line.expiry(), Some(start + HELD_AT_MOST));
    assert_eq!(line.next(start + Duration::from_secs(5)).as_deref(), Some("a/y"));
    assert_eq!(line.expiry(), None);
}

/// An object deleted before its pass never finishes one; made again under the same name, its
/// trigger waits behind the old one only until that stops counting, even in a line with room.
#[test]
fn a_key_out_without_a_pass_blocks_itself_only_for_a_while() {
    let start = Instant::now();
    let mut line = Line::new(3);
    line.push("a/x");
    assert_eq!(line.next(start).as_deref(), Some("a/x"));
    line.push("a/x");
    line.push("a/y");
    let at = |n: u64| start + Duration::from_secs(n);
    assert_eq!(line.next(at(1)).as_deref(), Some("a/y"));
    assert_eq!(line.next(at(1)), None);
    assert_eq!(line.expiry(), Some(start + HELD_AT_MOST));
    assert_eq!(line.next(start + HELD_AT_MOST).as_deref(), Some("a/x"));
}

/// A burst's places are given back once the line is empty.
#[test]
fn an_emptied_line_gives_its_memory_back() {
    let start = Instant::now();
    let mut line = Line::new(1);
    let keys: Vec<String> = (0..5000).map(|i| format!("a/{i}")).collect();
    for key in &keys {
        line.push(key);
    }
    assert!(line.waiting.capacity() >= 5000);
    for key in &keys {
        assert_eq!(line.next(start).as_deref(), Some(key.as_str()));
        assert!(line.done(key));
    }
    assert!(line.waiting.capacity() <= KEPT_CAPACITY);
    assert!(line.queued.capacity() <= KEPT_CAPACITY);
}

fn map(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            namespace: Some("a".into()),
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

fn named(name: &str) -> ObjectRef<ConfigMap> {
    ObjectRef::new(name).within("a")
}

async fn next<S>(through: &mut S) -> ObjectRef<ConfigMap>
where
    S: futures::Stream<Item = ObjectRef<ConfigMap>> + Unpin,
{
    timeout(Duration::from_secs(3600), through.next())
        .await
        .expect("let through within the hour")
        .expect("the sources are open")
}

/// Through the stream: two at a time; a pass done lets the next go at once; a key whose pass
/// never finishes (its object gone) gives its place up after `HELD_AT_MOST`; the stream ends
/// with its sources once the line is empty.
#[tokio::test(start_paused = true)]
async fn the_stream_lets_two_through_at_a_time() {
    let funnel = Funnel::<ConfigMap>::new(2);
    let (send, receive) = futures::channel::mpsc::unbounded();
    for name in ["x", "y", "z"] {
        send.unbounded_send(named(name)).expect("open");
    }
    let mut through = Box::pin(funnel.clone().through(receive));
    assert_eq!(next(&mut through).await, named("x"));
    assert_eq!(next(&mut through).await, named("y"));
    // x comes again while out: it waits behind z.
    send.unbounded_send(named("x")).expect("open");
    let start = Instant::now();
    let waiting = timeout(Duration::from_secs(1), through.next()).await;
    assert!(waiting.is_err(), "a full line lets nothing through");
    funnel.done(&map("x"));
    assert_eq!(next(&mut through).await, named("z"));
    assert_eq!(Instant::now() - start, Duration::from_secs(1));
    // y and z never finish: x, waiting again, goes when y's place expires.
    assert_eq!(next(&mut through).await, named("x"));
    assert_eq!(Instant::now() - start, HELD_AT_MOST);
    drop(send);
    let end = timeout(Duration::from_secs(3600), through.next()).await;
    assert_eq!(end.expect("ends"), None);
}
