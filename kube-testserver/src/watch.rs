//! Watch streams: newline-delimited JSON `WatchEvent`s over a chunked response.

use std::{convert::Infallible, sync::Arc, time::Duration};

use axum::body::Body;
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::{broadcast::error::RecvError, mpsc, watch};

use super::{
    convert,
    error::ApiError,
    negotiate::Output,
    resources::ResourceType,
    schema,
    selector::{FieldSelector, LabelSelector},
    store::{Change, ChangeKind, WatchStart},
};

/// What one watch request asked for.
pub struct WatchSpec {
    pub rt: Arc<ResourceType>,
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub output: Output,
    /// `allowWatchBookmarks=true`.
    pub bookmarks: bool,
    /// `sendInitialEvents=true`: end the initial ADDED events with an annotated BOOKMARK.
    pub initial_events_end: bool,
    pub timeout: Option<Duration>,
    pub bookmark_interval: Duration,
}

impl WatchSpec {
    /// The object as this watch sends it: read through the resource type it started on. After a
    /// CRD update kube-apiserver keeps serving an open watch from the old storage, which
    /// decodes (prunes and defaults) with the old schema, until it tears that storage down,
    /// up to two request timeouts later (apiextensions-apiserver `crdHandler.tearDown`).
    fn render(&self, obj: &Value) -> Value {
        let mut view = convert::to_view(&self.rt, obj.clone());
        if let Some(schema) = &self.rt.schema {
            schema::check(schema, &mut view);
        }
        self.output.object(&self.rt, view)
    }

    fn selects(&self, view: &Value) -> bool {
        self.labels.matches(view) && self.fields.matches(view)
    }

    /// The event this watcher sees for a change, if any: a modification that moves an object
    /// into or out of the selection reads as ADDED or DELETED, as with kube-apiserver.
    fn translate(&self, kind: ChangeKind, obj: &Value, old: Option<&Value>) -> Option<Event> {
        let full = convert::to_view(&self.rt, obj.clone());
        let now = self.selects(&full);
        let then = old
            .map(|o| self.selects(&convert::to_view(&self.rt, o.clone())))
            .unwrap_or(now);
        let kind = match (kind, then, now) {
            (ChangeKind::Modified, true, true) => ChangeKind::Modified,
            (ChangeKind::Modified, false, true) => ChangeKind::Added,
            (ChangeKind::Modified, true, false) => ChangeKind::Deleted,
            (ChangeKind::Added | ChangeKind::Deleted, _, true) => kind,
            _ => return None,
        };
        Some(Event {
            kind: kind.as_str(),
            object: self.render(obj),
        })
    }

    fn concerns(&self, change: &Change) -> bool {
        change.storage == self.rt.storage
            && self
                .namespace
                .as_ref()
                .is_none_or(|ns| *ns == change.key.namespace)
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Event {
        let (kind, api_version) = self.output.bookmark_type(&self.rt);
        let mut metadata = json!({ "resourceVersion": rv.to_string() });
        if initial_end {
            metadata["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
        }
        Event {
            kind: "BOOKMARK",
            object: json!({ "kind": kind, "apiVersion": api_version, "metadata": metadata }),
        }
    }
}

/// One `WatchEvent`: its `type` (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR) and object.
struct Event {
    kind: &'static str,
    object: Value,
}

impl Event {
    fn error(err: &ApiError) -> Event {
        Event {
            kind: "ERROR",
            object: err.to_status(),
        }
    }
}

/// One line of the stream, `type` first as kube-apiserver writes it (its `WatchEvent` struct
/// declares `type` before `object`): a client decoding the event as a tagged enum then reads
/// the tag before the object instead of buffering the whole object to find it.
fn line(event: &Event) -> Bytes {
    let mut bytes = Vec::with_capacity(256);
    bytes.extend_from_slice(b"{\"type\":\"");
    bytes.extend_from_slice(event.kind.as_bytes());
    bytes.extend_from_slice(b"\",\"object\":");
    serde_json::to_writer(&mut bytes, &event.object).expect("JSON values serialise");
    bytes.extend_from_slice(b"}\n");
    Bytes::from(bytes)
}

/// A response body streaming the watch; `closer` ends it when its value changes.
pub fn body(spec: WatchSpec, start: Result<WatchStart, ApiError>, closer: watch::Receiver<u64>) -> Body {
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    tokio::spawn(async move {
        match start {
            Ok(start) => run(spec, start, closer, tx).await,
            Err(err) => {
                let _ = tx.send(line(&Event::error(&err))).await;
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (Ok::<_, Infallible>(chunk), rx))
    });
    Body::from_stream(stream)
}

async fn run(spec: WatchSpec, start: WatchStart, mut closer: watch::Receiver<u64>, tx: mpsc::Sender<Bytes>) {
    let WatchStart { initial, mut rx, rv } = start;
    let mut last_rv = rv;
    for (kind, obj, old) in &initial {
        if let Some(event) = spec.translate(*kind, obj, old.as_ref())
            && tx.send(line(&event)).await.is_err()
        {
            return;
        }
    }
    if spec.initial_events_end && tx.send(line(&spec.bookmark(last_rv, true))).await.is_err() {
        return;
    }
    let deadline = spec.timeout.map(|t| tokio::time::Instant::now() + t);
    let mut ticker = tokio::time::interval(spec.bookmark_interval);
    ticker.tick().await;
    loop {
        // Biased so that a close requested before a write ends the stream before that write's
        // event goes out: tests rely on that to make a watcher resume from an older version.
        let next = tokio::select! {
            biased;
            _ = closer.changed() => return,
            _ = tx.closed() => return,
            received = rx.recv() => match received {
                Ok(change) => {
                    if change.rv <= last_rv {
                        continue;
                    }
                    last_rv = change.rv;
                    if !spec.concerns(&change) {
                        continue;
                    }
                    match spec.translate(change.kind, &change.object, change.old.as_ref()) {
                        Some(event) => event,
                        None => continue,
                    }
                }
                // This watcher fell behind: kube-apiserver's cacher closes an unresponsive
                // watcher ("Forcing watcher close due to unresponsiveness") and the client
                // watches again from its last resourceVersion, which history replays (or, once
                // that is older than history, answers 410 and the client relists).
                Err(RecvError::Lagged(_)) => return,
                Err(RecvError::Closed) => return,
            },
            _ = ticker.tick(), if spec.bookmarks => spec.bookmark(last_rv, false),
            _ = async { tokio::time::sleep_until(deadline.expect("guarded")).await }, if deadline.is_some() => return,
        };
        let is_error = next.kind == "ERROR";
        if tx.send(line(&next)).await.is_err() || is_error {
            return;
        }
    }
}
