//! Watch streams: newline-delimited JSON `WatchEvent`s over a chunked response.

use std::{
    convert::Infallible,
    sync::{Arc, Mutex},
    time::Duration,
};

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
        if self.output == Output::Metadata && self.rt.schema.is_none() {
            // Metadata reads the same in every served form, and only a schema could change
            // it: no need to copy the whole object (a Secret's data) to keep its metadata.
            return convert::to_metadata(obj);
        }
        let mut view = convert::to_view(&self.rt, obj.clone());
        if let Some(schema) = &self.rt.schema {
            schema::check(schema, &mut view);
        }
        self.output.object(&self.rt, view)
    }

    /// Whether the selectors select `obj` (stored form). Labels are in metadata, which no
    /// served form changes, so only a field selector needs the object as this watch serves it.
    fn selects(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && convert::fields_select(&self.rt, &self.fields, obj)
    }

    /// The event type this watcher sees for a change, if any: a modification that moves an
    /// object into or out of the selection reads as ADDED or DELETED, as with kube-apiserver.
    fn event_kind(&self, kind: ChangeKind, obj: &Value, old: Option<&Value>) -> Option<ChangeKind> {
        let now = self.selects(obj);
        let then = old.map(|o| self.selects(o)).unwrap_or(now);
        match (kind, then, now) {
            (ChangeKind::Modified, true, true) => Some(ChangeKind::Modified),
            (ChangeKind::Modified, false, true) => Some(ChangeKind::Added),
            (ChangeKind::Modified, true, false) => Some(ChangeKind::Deleted),
            (ChangeKind::Added | ChangeKind::Deleted, _, true) => Some(kind),
            _ => None,
        }
    }

    fn translate(&self, kind: ChangeKind, obj: &Value, old: Option<&Value>) -> Option<Event> {
        let kind = self.event_kind(kind, obj, old)?;
        Some(Event {
            kind: kind.as_str(),
            object: self.render(obj),
        })
    }

    /// The line this watcher sends for a committed change, if any, rendered once for every
    /// watcher that reads it through the same resource type and shape.
    fn line_for(&self, change: &Change) -> Option<Bytes> {
        let kind = self.event_kind(change.kind, &change.object, change.old.as_ref())?;
        Some(change.lines.get_or(&self.rt, self.output, kind, || {
            line(&Event {
                kind: kind.as_str(),
                object: self.render(&change.object),
            })
        }))
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

/// A change's watch lines as rendered so far, by the resource type (the very one: a watch that
/// outlives a CRD update reads through the old one) and shape watchers read it through, so
/// watchers that would send the same bytes share them instead of each converting, pruning and
/// serialising the object again.
#[derive(Debug, Default)]
pub struct Lines(Mutex<Vec<RenderedLine>>);

type RenderedLine = (Arc<ResourceType>, Output, ChangeKind, Bytes);

impl Lines {
    fn get_or(
        &self,
        rt: &Arc<ResourceType>,
        output: Output,
        kind: ChangeKind,
        render: impl FnOnce() -> Bytes,
    ) -> Bytes {
        let mut lines = self.0.lock().expect("lines lock");
        let found = lines
            .iter()
            .find(|(r, o, k, _)| Arc::ptr_eq(r, rt) && *o == output && *k == kind);
        if let Some((.., bytes)) = found {
            return bytes.clone();
        }
        let bytes = render();
        lines.push((Arc::clone(rt), output, kind, bytes.clone()));
        bytes
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
                    match spec.line_for(&change) {
                        Some(line) => (line, false),
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
            _ = ticker.tick(), if spec.bookmarks => (line(&spec.bookmark(last_rv, false)), false),
            _ = async { tokio::time::sleep_until(deadline.expect("guarded")).await }, if deadline.is_some() => return,
        };
        let (next, is_error) = next;
        if tx.send(next).await.is_err() || is_error {
            return;
        }
    }
}
