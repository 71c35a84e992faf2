//! Events: what a plan says happened, published on the object it happened to.
//!
//! Two recorder policies. Issuers are few and their checks repeat, so one shared kube
//! [`Recorder`] aggregates a failure that keeps coming into a series. Requests are many and an
//! Event of one hardly ever repeats; kube's Recorder scans its whole six-minute cache on every
//! publish, so a shared one made each Event cost O(requests in the last six minutes): 480 us per
//! request at 40,000 (benches/reconcile.rs). Requests get a fresh recorder per Event instead.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// Event reasons of the request controller (cert-manager's names where it has one).
pub mod reason {
    pub const ISSUED: &str = "Issued";
    pub const DENIED: &str = "Denied";
    pub const PERMANENT_ERROR: &str = "PermanentError";
    pub const RETRYABLE_ERROR: &str = "RetryableError";
    pub const ISSUER_NOT_READY: &str = "IssuerNotReady";
    pub const ISSUER_NOT_FOUND: &str = "IssuerNotFound";
    pub const WAITING_FOR_APPROVAL: &str = "WaitingForApproval";
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
    /// A fresh recorder per Event.
    PerEvent {
        client: kube::Client,
        reporter: Reporter,
    },
}

impl Events {
    pub fn aggregated(client: kube::Client) -> Self {
        Events::Aggregated(Recorder::new(client, Reporter::from(REPORTER)))
    }

    pub fn per_event(client: kube::Client) -> Self {
        Events::PerEvent {
            client,
            reporter: Reporter::from(REPORTER),
        }
    }

    /// Publishes `notice` on `regarding`. An Event is a courtesy (the status already says it):
    /// a failure is logged, never returned.
    pub async fn publish(&self, notice: &Notice, regarding: &ObjectReference) {
        let event = Event {
            type_: notice.type_,
            reason: notice.reason.to_string(),
            note: Some(notice.note.clone()),
            action: notice.action.into(),
            secondary: None,
        };
        let result = match self {
            Events::Aggregated(recorder) => recorder.publish(&event, regarding).await,
            Events::PerEvent { client, reporter } => {
                let recorder = Recorder::new(client.clone(), reporter.clone());
                recorder.publish(&event, regarding).await
            }
        };
        if let Err(err) = result {
            tracing::warn!(error = %err, reason = %notice.reason, "cannot publish event");
        }
    }
}

/// Event notes are limited to 1 KiB by the API server.
pub fn truncate(message: &str) -> String {
    const MAX: usize = 1000;
    if message.len() <= MAX {
        return message.to_string();
    }
    let mut end = MAX;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &message[..end])
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
    fn notices_are_truncated_and_typed() {
        let n = Notice::warning(reason::DENIED, "Sign", &"x".repeat(2000));
        assert_eq!(
            (n.type_, n.reason, n.action, n.note.len()),
            (EventType::Warning, "Denied".into(), "Sign", 1003)
        );
    }
}
