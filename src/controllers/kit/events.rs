//! Events: what a plan says happened, published on the object it happened to.
//!
//! Two policies. Issuers are few and their checks repeat, so one shared kube [`Recorder`]
//! aggregates a failure that keeps coming into a series. Requests are many and an Event of one
//! hardly ever repeats; kube's Recorder scans its whole six-minute cache on every publish, so a
//! shared one made each Event cost O(requests in the last six minutes): 480 us per request at
//! 40,000 (benches/reconcile.rs). A request's Event is posted on its own instead, as the
//! Recorder would post a first one, without decoding the API server's answer (one Event per
//! issued request: the answer cost as much to read as the request to send).

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::clock::Clock;

/// Event reasons of the request controller (cert-manager's names where it has one).
pub mod reason {
    pub const ISSUED: &str = "Issued";
    pub const DENIED: &str = "Denied";
    pub const PERMANENT_ERROR: &str = "PermanentError";
    pub const RETRYABLE_ERROR: &str = "RetryableError";
    pub const ISSUER_NOT_READY: &str = "IssuerNotReady";
    pub const ISSUER_NOT_FOUND: &str = "IssuerNotFound";
    pub const WAITING_FOR_APPROVAL: &str = "WaitingForApproval";
    /// Issuers: Ready, but reached over plain `http://` (a Warning).
    pub const INSECURE_TRANSPORT: &str = "InsecureTransport";
}

/// Who reports our Events.
pub const REPORTER: &str = "cfssl-issuer";

/// One Event to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub type_: EventType,
    /// Mostly a constant; the issuing controller repeats a request condition's own reason.
    pub reason: std::borrow::Cow<'static, str>,
    /// Truncated to what the API server accepts.
    pub note: String,
    /// What the controller was doing (`Check`, `Sign`).
    pub action: &'static str,
}

impl Notice {
    pub fn normal(
        reason: impl Into<std::borrow::Cow<'static, str>>,
        action: &'static str,
        note: &str,
    ) -> Self {
        Notice {
            type_: EventType::Normal,
            reason: reason.into(),
            note: truncate(note),
            action,
        }
    }

    pub fn warning(
        reason: impl Into<std::borrow::Cow<'static, str>>,
        action: &'static str,
        note: &str,
    ) -> Self {
        Notice {
            type_: EventType::Warning,
            ..Notice::normal(reason, action, note)
        }
    }
}

/// How a controller publishes its Events.
pub enum Events {
    /// One recorder for every object: repeats become series.
    Aggregated(Recorder),
    /// Each Event posted on its own, never a series.
    PerEvent { client: kube::Client, clock: Clock },
}

impl Events {
    pub fn aggregated(client: kube::Client) -> Self {
        Events::Aggregated(Recorder::new(client, Reporter::from(REPORTER)))
    }

    pub fn per_event(client: kube::Client, clock: Clock) -> Self {
        Events::PerEvent { client, clock }
    }

    /// Publishes `notice` on `regarding`. An Event is a courtesy (the status already says it):
    /// a failure is logged, never returned.
    pub async fn publish(&self, notice: &Notice, regarding: &ObjectReference) {
        let result = match self {
            Events::Aggregated(recorder) => {
                let event = Event {
                    type_: notice.type_,
                    reason: notice.reason.to_string(),
                    note: Some(notice.note.clone()),
                    action: notice.action.into(),
                    secondary: None,
                };
                recorder.publish(&event, regarding).await
            }
            Events::PerEvent { client, clock } => {
                post(client, &single_event(notice, regarding, clock())).await
            }
        };
        if let Err(err) = result {
            tracing::warn!(error = %err, reason = %notice.reason, "cannot publish event");
        }
    }
}

/// Pure: the Event kube's Recorder would create for a first occurrence of `notice`: named
/// `<object>.<nanoseconds in hex>` like client-go's, in the object's namespace (`default` for a
/// cluster-scoped one, as the Recorder does).
pub fn single_event(notice: &Notice, regarding: &ObjectReference, now: Timestamp) -> K8sEvent {
    let object = regarding.name.as_deref().unwrap_or(REPORTER);
    K8sEvent {
        action: Some(notice.action.to_string()),
        reason: Some(notice.reason.to_string()),
        note: Some(notice.note.clone()),
        event_time: Some(MicroTime(now)),
        regarding: Some(regarding.clone()),
        metadata: ObjectMeta {
            namespace: Some(regarding.namespace.as_deref().unwrap_or("default").to_string()),
            name: Some(format!("{object}.{:x}", now.as_nanosecond())),
            ..ObjectMeta::default()
        },
        reporting_controller: Some(REPORTER.to_string()),
        reporting_instance: Some(REPORTER.to_string()),
        type_: Some(
            match notice.type_ {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .to_string(),
        ),
        ..K8sEvent::default()
    }
}

/// Creates `event`, reading the answer only for its status.
async fn post(client: &kube::Client, event: &K8sEvent) -> Result<(), kube::Error> {
    use kube::Resource as _;
    let namespace = event.metadata.namespace.as_deref();
    let body = serde_json::to_vec(event).map_err(kube::Error::SerdeError)?;
    let request = kube::core::Request::new(K8sEvent::url_path(&(), namespace))
        .create(&PostParams::default(), body)
        .map_err(kube::Error::BuildRequest)?;
    client.request_text(request).await.map(drop)
}

/// Event notes are limited to 1 KiB by the API server.
pub fn truncate(message: &str) -> String {
    const MAX: usize = 1000;
    if message.len() <= MAX {
        return message.to_string();
    }
    let mut note = message.to_string();
    crate::api::cut_at_char(&mut note, MAX);
    note.push_str("...");
    note
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_table() {
        let long = "a".repeat(1500);
        let multibyte = format!("{}é", "a".repeat(999));
        let cases = [
            ("short", "hello".to_string(), "hello".to_string()),
            ("exactly the limit", "b".repeat(1000), "b".repeat(1000)),
            ("long", long, format!("{}...", "a".repeat(1000))),
            (
                "cut before a character, not inside it",
                multibyte,
                format!("{}...", "a".repeat(999)),
            ),
        ];
        for (row, input, want) in cases {
            assert_eq!(truncate(&input), want, "{row}");
        }
    }

    #[test]
    fn single_event_table() {
        let at: Timestamp = "2026-11-24T10:00:00.000001Z".parse().unwrap();
        let nanos = format!("{:x}", at.as_nanosecond());
        let request = ObjectReference {
            api_version: Some("cert-manager.io/v1".into()),
            kind: Some("CertificateRequest".into()),
            name: Some("web-1".into()),
            namespace: Some("team-a".into()),
            uid: Some("u-1".into()),
            ..ObjectReference::default()
        };
        let cluster_issuer = ObjectReference {
            kind: Some("ClusterIssuer".into()),
            name: Some("ca".into()),
            ..ObjectReference::default()
        };
        let cases = [
            (
                "namespaced, normal",
                Notice::normal(reason::ISSUED, "Sign", "signed"),
                &request,
                (
                    "team-a",
                    format!("web-1.{nanos}"),
                    "Normal",
                    "Issued",
                    "Sign",
                    "signed",
                ),
            ),
            (
                "cluster-scoped, warning: the Recorder's default namespace",
                Notice::warning(reason::PERMANENT_ERROR, "Check", "bad"),
                &cluster_issuer,
                (
                    "default",
                    format!("ca.{nanos}"),
                    "Warning",
                    "PermanentError",
                    "Check",
                    "bad",
                ),
            ),
        ];
        for (row, notice, regarding, want) in cases {
            let e = single_event(&notice, regarding, at);
            let got = (
                e.metadata.namespace.as_deref().unwrap(),
                e.metadata.name.clone().unwrap(),
                e.type_.as_deref().unwrap(),
                e.reason.as_deref().unwrap(),
                e.action.as_deref().unwrap(),
                e.note.as_deref().unwrap(),
            );
            assert_eq!(got, want, "{row}");
            assert_eq!(e.regarding.as_ref(), Some(regarding), "{row}");
            assert_eq!(e.event_time, Some(MicroTime(at)), "{row}");
            assert_eq!(
                (
                    e.reporting_controller.as_deref(),
                    e.reporting_instance.as_deref(),
                    &e.series
                ),
                (Some(REPORTER), Some(REPORTER), &None),
                "{row}"
            );
        }
    }

    #[test]
    fn notices_are_truncated_and_typed() {
        let n = Notice::warning(reason::DENIED, "Sign", &"x".repeat(2000));
        assert_eq!(
            (n.type_, n.reason, n.action, n.note.len()),
            (EventType::Warning, "Denied".into(), "Sign", 1003)
        );
    }
}
