//! The conditions the manager writes, on any kind, and the `Ready` reasons of our issuers.
//!
//! [`Condition`] is `metav1.Condition` with the Go issuer's looser rules: only `type` and
//! `status` are required, so every status the Go controller wrote still parses. cert-manager's
//! kinds have conditions of their own ([`crate::api::certmanager::CertificateRequestCondition`]
//! has no `observedGeneration`). Every kind is [`ConditionLike`]; the ones the manager writes are
//! [`WritableCondition`], whose one rule carries a transition time over and sets
//! `observedGeneration` where the kind has it.
//! Helpers are pure and take `now`, so transitions are testable without a clock.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The condition type cert-manager and `kubectl wait --for=condition=Ready` look at.
pub const READY: &str = "Ready";

/// `True`, `False` or `Unknown`, as in every Kubernetes condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    pub fn from_bool(value: bool) -> Self {
        if value { Self::True } else { Self::False }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }

    /// The status named by `status`, if it is one of the three.
    pub fn parse(status: &str) -> Option<Self> {
        [Self::True, Self::False, Self::Unknown]
            .into_iter()
            .find(|s| s.as_str() == status)
    }
}

/// What every condition has, whoever wrote it: enough to carry a transition time over.
pub trait ConditionLike {
    fn type_(&self) -> &str;
    fn status(&self) -> &str;
    fn last_transition_time(&self) -> Option<&Time>;
}

/// A condition the manager writes: the one transition rule, for every kind.
pub trait WritableCondition: ConditionLike + Sized {
    fn set_last_transition_time(&mut self, time: Option<Time>);

    /// Sets `observedGeneration` where this kind of condition has it; a no-op where not.
    fn set_observed_generation(&mut self, generation: Option<i64>);

    /// Keeps `previous`'s transition time when the status did not change: the time says when
    /// the state began, not when it was last confirmed.
    #[must_use]
    fn with_transition_from(mut self, previous: Option<&impl ConditionLike>) -> Self {
        if let Some(previous) = previous
            && previous.type_() == self.type_()
            && previous.status() == self.status()
            && let Some(time) = previous.last_transition_time()
        {
            self.set_last_transition_time(Some(time.clone()));
        }
        self
    }

    /// Records the generation this condition was computed for, where the kind holds it.
    #[must_use]
    fn for_generation(mut self, generation: Option<i64>) -> Self {
        self.set_observed_generation(generation);
        self
    }
}

impl WritableCondition for Condition {
    fn set_last_transition_time(&mut self, time: Option<Time>) {
        self.last_transition_time = time;
    }
    fn set_observed_generation(&mut self, generation: Option<i64>) {
        self.observed_generation = generation;
    }
}

impl ConditionLike for Condition {
    fn type_(&self) -> &str {
        &self.type_
    }
    fn status(&self) -> &str {
        self.status.as_str()
    }
    fn last_transition_time(&self) -> Option<&Time> {
        self.last_transition_time.as_ref()
    }
}

impl fmt::Display for ConditionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of `status.conditions`, keyed by `type`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Type of the condition; the controller maintains `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Status of the condition: `True`, `False` or `Unknown`.
    pub status: ConditionStatus,
    /// Machine-readable, CamelCase cause of the last transition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable detail of the last transition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When `status` last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// The `metadata.generation` this condition was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The longest condition message written. Messages quote what tenants wrote (names, URLs, a
/// CA's answer); the API server would take 32 KiB of each on every status write.
pub const MAX_MESSAGE: usize = 4096;

/// Pure: `message` cut to [`MAX_MESSAGE`] bytes at a character boundary, with `...` when cut.
pub fn bounded(message: impl Into<String>) -> String {
    let mut message = message.into();
    if message.len() > MAX_MESSAGE {
        cut_at_char(&mut message, MAX_MESSAGE - 3);
        message.push_str("...");
    }
    message
}

/// Cuts `text` to at most `max` bytes, at a character boundary: how every message, note and
/// cached field a tenant may make long is shortened.
pub fn cut_at_char(text: &mut String, max: usize) {
    if text.len() > max {
        let end = (0..=max).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
        text.truncate(end);
    }
}

impl Condition {
    /// A condition that transitioned at `now`, truncated to whole seconds as the API server
    /// stores it, so a freshly built condition compares equal to its round-tripped self.
    pub fn new(
        type_: impl Into<String>,
        status: ConditionStatus,
        reason: impl Into<String>,
        message: impl Into<String>,
        now: Timestamp,
        observed_generation: Option<i64>,
    ) -> Self {
        let now = Timestamp::from_second(now.as_second()).unwrap_or(now);
        Self {
            type_: type_.into(),
            status,
            reason: reason.into(),
            message: bounded(message),
            last_transition_time: Some(Time(now)),
            observed_generation,
        }
    }

    /// The issuer `Ready` condition; its status follows from the reason, so a Ready=True with a
    /// failure reason cannot be built.
    pub fn ready(
        reason: ReadyReason,
        message: impl Into<String>,
        now: Timestamp,
        observed_generation: Option<i64>,
    ) -> Self {
        Self::new(
            READY,
            reason.status(),
            reason.as_str(),
            message,
            now,
            observed_generation,
        )
    }

    pub fn is_true(&self) -> bool {
        self.status == ConditionStatus::True
    }
}

/// The condition of `type_`, if present.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Why an issuer is, or is not, `Ready`. Each variant names who has to act.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReadyReason {
    /// The CA answered an authenticated check for the issuer's label (and profile): requests
    /// may be signed. The only reason with status `True`.
    Checked,
    /// Not decided yet: the first check is under way, or a transient problem (an API error
    /// reading the Secret) stopped it. The controller retries by itself.
    Pending,
    /// The Secret named by `authSecretName` does not exist in the namespace it is read from
    /// (the issuer's own, or the cluster resource namespace for a ClusterIssuer).
    SecretNotFound,
    /// The Secret exists but its `key` is missing or not hex, or the CA rejected the HMAC
    /// token: the key is wrong for this CA.
    InvalidCredentials,
    /// The spec cannot work: no usable URL, or the CA does not know the label or profile.
    InvalidConfig,
    /// No URL in the list answered (connection refused, timeout, 5xx). Usually transient.
    CaUnreachable,
    /// A TLS handshake with the CA failed: untrusted or mismatched server certificate, or an
    /// unusable `caBundle`.
    TlsError,
}

impl ReadyReason {
    pub const ALL: [ReadyReason; 7] = [
        Self::Checked,
        Self::Pending,
        Self::SecretNotFound,
        Self::InvalidCredentials,
        Self::InvalidConfig,
        Self::CaUnreachable,
        Self::TlsError,
    ];

    /// The `reason` string written to the condition and used as Event reason.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Checked => "Checked",
            Self::Pending => "Pending",
            Self::SecretNotFound => "SecretNotFound",
            Self::InvalidCredentials => "InvalidCredentials",
            Self::InvalidConfig => "InvalidConfig",
            Self::CaUnreachable => "CAUnreachable",
            Self::TlsError => "TLSError",
        }
    }

    /// The reason named by `reason`, if it is one of ours.
    pub fn parse(reason: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == reason)
    }

    /// The `Ready` status that goes with this reason.
    pub fn status(self) -> ConditionStatus {
        ConditionStatus::from_bool(self == Self::Checked)
    }
}

impl fmt::Display for ReadyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    #[test]
    fn bounded_table() {
        let cases = [
            ("short".to_string(), "short".to_string()),
            ("a".repeat(MAX_MESSAGE), "a".repeat(MAX_MESSAGE)),
            (
                "a".repeat(MAX_MESSAGE + 1),
                format!("{}...", "a".repeat(MAX_MESSAGE - 3)),
            ),
            (
                format!("{}é{}", "a".repeat(MAX_MESSAGE - 4), "a".repeat(10)),
                format!("{}...", "a".repeat(MAX_MESSAGE - 4)),
            ),
        ];
        for (message, want) in cases {
            let got = bounded(message.clone());
            assert_eq!(got, want, "{}", message.len());
            assert!(got.len() <= MAX_MESSAGE);
        }
    }

    #[test]
    fn cut_at_char_keeps_whole_characters() {
        let cases = [
            ("abc", 5, "abc"),
            ("abcdef", 3, "abc"),
            ("aé", 2, "a"),
            ("éé", 3, "é"),
        ];
        for (text, max, want) in cases {
            let mut text = text.to_string();
            cut_at_char(&mut text, max);
            assert_eq!(text, want);
        }
    }

    fn ready(status: ConditionStatus, reason: &str, message: &str, second: i64) -> Condition {
        Condition::new(READY, status, reason, message, at(second), Some(1))
    }

    #[test]
    fn new_truncates_now_to_seconds() {
        let now = Timestamp::from_nanosecond(1_700_000_000_999_999_999).unwrap();
        let c = Condition::new(READY, ConditionStatus::True, "Checked", "ok", now, None);
        assert_eq!(c.last_transition_time, Some(Time(at(1_700_000_000))));
    }

    #[test]
    fn ready_status_follows_reason() {
        for reason in ReadyReason::ALL {
            let c = Condition::ready(reason, "m", at(0), Some(3));
            assert_eq!(c.is_true(), reason == ReadyReason::Checked, "{reason}");
            assert_eq!(c.reason, reason.as_str());
            assert_eq!(c.observed_generation, Some(3));
        }
    }

    #[test]
    fn reasons_parse_back_and_are_distinct() {
        for reason in ReadyReason::ALL {
            assert_eq!(ReadyReason::parse(reason.as_str()), Some(reason));
        }
        assert_eq!(ReadyReason::parse("CaUnreachable"), None);
        assert_eq!(ReadyReason::CaUnreachable.as_str(), "CAUnreachable");
        assert_eq!(ReadyReason::TlsError.as_str(), "TLSError");
    }

    /// Puts `new` in place of the condition of its type (or appends it), as a status apply
    /// of one condition does to the list; returns whether the list changed.
    fn apply_one(conditions: &mut Vec<Condition>, new: Condition) -> bool {
        let existing = conditions.iter_mut().find(|c| c.type_ == new.type_);
        let new = new.with_transition_from(existing.as_deref());
        match existing {
            Some(existing) if *existing == new => false,
            Some(existing) => {
                *existing = new;
                true
            }
            None => {
                conditions.push(new);
                true
            }
        }
    }

    #[test]
    fn transition_table() {
        use ConditionStatus::{False, True};
        struct Case {
            name: &'static str,
            before: Vec<Condition>,
            new: Condition,
            changed: bool,
            after: Vec<Condition>,
        }
        let other = Condition::new("Other", True, "", "", at(5), None);
        let cases = [
            Case {
                name: "appends to an empty list",
                before: vec![],
                new: ready(True, "Checked", "ok", 100),
                changed: true,
                after: vec![ready(True, "Checked", "ok", 100)],
            },
            Case {
                name: "same status and text: nothing to write, time kept",
                before: vec![ready(True, "Checked", "ok", 100)],
                new: ready(True, "Checked", "ok", 200),
                changed: false,
                after: vec![ready(True, "Checked", "ok", 100)],
            },
            Case {
                name: "same status, new message: time kept",
                before: vec![ready(False, "CAUnreachable", "a", 100)],
                new: ready(False, "TLSError", "b", 200),
                changed: true,
                after: vec![ready(False, "TLSError", "b", 100)],
            },
            Case {
                name: "status flips: time moves",
                before: vec![ready(False, "Pending", "x", 100)],
                new: ready(True, "Checked", "ok", 200),
                changed: true,
                after: vec![ready(True, "Checked", "ok", 200)],
            },
            Case {
                name: "new generation observed: changed, time kept",
                before: vec![ready(True, "Checked", "ok", 100)],
                new: Condition::new(READY, True, "Checked", "ok", at(200), Some(2)),
                changed: true,
                after: vec![Condition::new(READY, True, "Checked", "ok", at(100), Some(2))],
            },
            Case {
                name: "other types untouched, order kept",
                before: vec![other.clone(), ready(False, "Pending", "x", 100)],
                new: ready(False, "Pending", "y", 300),
                changed: true,
                after: vec![other.clone(), ready(False, "Pending", "y", 100)],
            },
            Case {
                name: "previous without a time takes now",
                before: vec![Condition {
                    last_transition_time: None,
                    ..ready(True, "Checked", "ok", 0)
                }],
                new: ready(True, "Checked", "ok", 400),
                changed: true,
                after: vec![ready(True, "Checked", "ok", 400)],
            },
        ];
        for case in cases {
            let mut list = case.before;
            assert_eq!(apply_one(&mut list, case.new), case.changed, "{}", case.name);
            assert_eq!(list, case.after, "{}", case.name);
        }
    }

    #[test]
    fn one_transition_rule_for_every_kind_of_condition() {
        use ConditionStatus::{False, True};
        let theirs = |type_: &str, status: &str, since: Option<i64>| {
            crate::api::certmanager::CertificateRequestCondition {
                type_: type_.into(),
                status: status.into(),
                last_transition_time: since.map(|s| Time(at(s))),
                ..Default::default()
            }
        };
        // (row, previous written by cert-manager, new, transition time kept from)
        let cases = [
            ("same status: kept", theirs(READY, "False", Some(100)), False, 100),
            ("status flips: now", theirs(READY, "False", Some(100)), True, 500),
            (
                "another type: now",
                theirs("Approved", "False", Some(100)),
                False,
                500,
            ),
            ("no time to keep: now", theirs(READY, "False", None), False, 500),
            (
                "a status we do not know: now",
                theirs(READY, "false", Some(100)),
                False,
                500,
            ),
        ];
        for (row, previous, status, since) in cases {
            let new =
                Condition::new(READY, status, "r", "m", at(500), None).with_transition_from(Some(&previous));
            assert_eq!(new.last_transition_time, Some(Time(at(since))), "{row}");
        }
    }

    #[test]
    fn find_condition_by_type() {
        let list = vec![
            Condition::new("A", ConditionStatus::True, "", "", at(0), None),
            ready(ConditionStatus::False, "Pending", "", 0),
        ];
        assert_eq!(
            find_condition(&list, READY).map(|c| c.reason.as_str()),
            Some("Pending")
        );
        assert!(find_condition(&list, "B").is_none());
    }

    #[test]
    fn serializes_like_metav1_and_omits_empty_text() {
        let c = Condition::new(READY, ConditionStatus::Unknown, "", "", at(0), None);
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            serde_json::json!({
                "type": "Ready",
                "status": "Unknown",
                "lastTransitionTime": "1970-01-01T00:00:00Z",
            })
        );
        // The Go controller's conditions: no observedGeneration.
        let go: Condition = serde_json::from_value(serde_json::json!({
            "type": "Ready", "status": "True", "reason": "CFSSLIssuerReconciler",
            "message": "Success", "lastTransitionTime": "2024-05-01T10:00:00Z",
        }))
        .unwrap();
        assert!(go.is_true());
        assert_eq!(go.observed_generation, None);
    }
}
