//! Request counting and fault injection.

use std::{collections::BTreeMap, fmt, time::Duration};

use serde::{Deserialize, Serialize};

use super::error::{ApiError, Reason};

/// An API verb, as RBAC and audit logs name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One row of [`Counts`]: `resource` is the plural, with `/status` for the subresource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Count {
    pub verb: Verb,
    pub resource: String,
    pub count: u64,
}

/// Requests served per (verb, resource) since start or the last reset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts(BTreeMap<(Verb, String), u64>);

impl Counts {
    pub fn get(&self, verb: Verb, resource: &str) -> u64 {
        self.0.get(&(verb, resource.to_string())).copied().unwrap_or(0)
    }

    /// All requests with this verb, whatever the resource.
    pub fn verb_total(&self, verb: Verb) -> u64 {
        self.0
            .iter()
            .filter(|((v, _), _)| *v == verb)
            .map(|(_, n)| n)
            .sum()
    }

    /// All requests for this resource, whatever the verb.
    pub fn resource_total(&self, resource: &str) -> u64 {
        self.0
            .iter()
            .filter(|((_, r), _)| r == resource)
            .map(|(_, n)| n)
            .sum()
    }

    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    pub fn rows(&self) -> Vec<Count> {
        self.0
            .iter()
            .map(|((verb, resource), count)| Count {
                verb: *verb,
                resource: resource.clone(),
                count: *count,
            })
            .collect()
    }

    pub fn from_rows(rows: impl IntoIterator<Item = Count>) -> Self {
        Counts(
            rows.into_iter()
                .map(|c| ((c.verb, c.resource), c.count))
                .collect(),
        )
    }

    pub(crate) fn record(&mut self, verb: Verb, resource: &str) {
        *self.0.entry((verb, resource.to_string())).or_default() += 1;
    }
}

/// What an injected fault answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum FaultKind {
    /// 500 InternalError.
    InternalError,
    /// 409 Conflict, as a lost optimistic-concurrency race.
    Conflict,
    /// 429 TooManyRequests with `Retry-After`.
    #[serde(rename_all = "camelCase")]
    TooManyRequests { retry_after_seconds: u32 },
    /// 403 Forbidden, as RBAC denies a request its rules do not grant.
    Forbidden,
}

/// Makes the next `times` requests matching `verb` and `resource` (None matches any) fail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    #[serde(default)]
    pub verb: Option<Verb>,
    /// Plural, with `/status` for the subresource.
    #[serde(default)]
    pub resource: Option<String>,
    /// Only requests for objects in this namespace (None: any namespace or none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub kind: FaultKind,
    #[serde(default = "one")]
    pub times: u32,
}

fn one() -> u32 {
    1
}

impl Fault {
    /// One failure for any request; narrow it with [`Fault::verb`], [`Fault::resource`], [`Fault::times`].
    pub fn new(kind: FaultKind) -> Self {
        Fault {
            verb: None,
            resource: None,
            namespace: None,
            kind,
            times: 1,
        }
    }

    pub fn verb(mut self, verb: Verb) -> Self {
        self.verb = Some(verb);
        self
    }

    pub fn resource(mut self, resource: impl Into<String>) -> Self {
        self.resource = Some(resource.into());
        self
    }

    /// Narrows the fault to one namespace, so concurrent scenarios in other namespaces are not
    /// hit by it.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    pub fn times(mut self, times: u32) -> Self {
        self.times = times;
        self
    }

    fn matches(&self, verb: Verb, resource: &str, namespace: Option<&str>) -> bool {
        self.verb.is_none_or(|v| v == verb)
            && self.resource.as_deref().is_none_or(|r| r == resource)
            && self.namespace.as_deref().is_none_or(|n| Some(n) == namespace)
    }

    fn error(&self, resource: &str) -> ApiError {
        match self.kind {
            FaultKind::InternalError => ApiError::internal("injected fault: internal error"),
            FaultKind::Conflict => ApiError::new(
                Reason::Conflict,
                format!(
                    "Operation cannot be fulfilled on {resource}: injected fault: the object has been modified; please apply your changes to the latest version and try again"
                ),
            ),
            FaultKind::TooManyRequests { retry_after_seconds } => {
                ApiError::too_many_requests(retry_after_seconds)
            }
            FaultKind::Forbidden => ApiError::new(
                Reason::Forbidden,
                format!("{resource} is forbidden: injected fault: the user cannot access it"),
            ),
        }
    }
}

/// Fails a steady share of the writes (create, update, patch, delete) instead of the next few:
/// an API server under strain or losing optimistic-concurrency races. Which write fails is a
/// deterministic pseudo-random draw from `seed` and the write's position among the matching
/// writes, so a run can be repeated; the share is the percentage over many writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultRates {
    /// Percent of the matching writes answered 500 InternalError.
    #[serde(default)]
    pub internal_error_percent: u32,
    /// Percent answered 409 Conflict.
    #[serde(default)]
    pub conflict_percent: u32,
    /// Only this added user's writes (see `TestServer::add_user`); None: everyone's.
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub seed: u64,
}

impl FaultRates {
    pub fn new(internal_error_percent: u32, conflict_percent: u32, seed: u64) -> Self {
        FaultRates {
            internal_error_percent,
            conflict_percent,
            user: None,
            seed,
        }
    }

    pub fn user(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }

    fn matches(&self, verb: Verb, user: Option<&str>) -> bool {
        matches!(verb, Verb::Create | Verb::Update | Verb::Patch | Verb::Delete)
            && self.user.as_deref().is_none_or(|u| Some(u) == user)
    }

    /// The fault, if any, for the `n`th matching write (counting from 0).
    pub fn draw(&self, n: u64) -> Option<FaultKind> {
        let roll = (splitmix64(self.seed ^ splitmix64(n)) % 100) as u32;
        if roll < self.internal_error_percent {
            Some(FaultKind::InternalError)
        } else if roll < self.internal_error_percent + self.conflict_percent {
            Some(FaultKind::Conflict)
        } else {
            None
        }
    }
}

/// One step of SplitMix64: a well-mixed 64-bit value from any input.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What [`FaultRates`] did so far: matching writes seen, and how many got each answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RateTally {
    pub writes: u64,
    pub internal_errors: u64,
    pub conflicts: u64,
}

/// One request of a user added with `TestServer::add_user`, as kube-apiserver's audit log
/// records who did what when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub user: String,
    pub verb: Verb,
    /// The API group ("" for the core group).
    pub group: String,
    pub resource: String,
    /// The request's namespace; None for a cluster-scoped object or an all-namespaces list.
    pub namespace: Option<String>,
    /// The object named: by the path, or for a list or watch by a `metadata.name=` field
    /// selector (which RBAC matches against `resourceNames`, as kube-apiserver does).
    pub name: Option<String>,
    /// When the request was received.
    pub at: std::time::Instant,
}

/// Counts, pending faults, added latency and the added users' requests.
#[derive(Debug, Default)]
pub struct Faults {
    pub counts: Counts,
    /// The same requests by namespace and object: `(namespace, verb, resource, name)`, the
    /// name empty for collection requests.
    pub in_namespace: BTreeMap<(String, Verb, String, String), u64>,
    pending: Vec<Fault>,
    rates: Option<FaultRates>,
    pub rate_tally: RateTally,
    pub latency: Duration,
    pub audit: Vec<AuditEntry>,
}

impl Faults {
    /// Counts the request and consumes the first matching fault, if any.
    pub fn observe(
        &mut self,
        verb: Verb,
        resource: &str,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> Option<ApiError> {
        self.counts.record(verb, resource);
        if let Some(ns) = namespace {
            let key = (
                ns.to_string(),
                verb,
                resource.to_string(),
                name.unwrap_or_default().to_string(),
            );
            *self.in_namespace.entry(key).or_default() += 1;
        }
        let index = self
            .pending
            .iter()
            .position(|f| f.times > 0 && f.matches(verb, resource, namespace))?;
        let fault = &mut self.pending[index];
        fault.times -= 1;
        let err = fault.error(resource);
        if fault.times == 0 {
            self.pending.remove(index);
        }
        Some(err)
    }

    /// Requests with `verb` for `resource` in `namespace` so far; only those for the object
    /// `name` when given.
    pub fn count_in(&self, namespace: &str, verb: Verb, resource: &str, name: Option<&str>) -> u64 {
        self.in_namespace
            .iter()
            .filter(|((ns, v, r, n), _)| {
                ns == namespace && *v == verb && r == resource && name.is_none_or(|name| name == n)
            })
            .map(|(_, count)| count)
            .sum()
    }

    /// After [`Faults::observe`]: the rate-based fault for this write, if its draw says so.
    pub fn observe_rates(&mut self, verb: Verb, resource: &str, user: Option<&str>) -> Option<ApiError> {
        let rates = self.rates.as_ref().filter(|r| r.matches(verb, user))?;
        let kind = rates.draw(self.rate_tally.writes);
        self.rate_tally.writes += 1;
        match kind? {
            FaultKind::InternalError => self.rate_tally.internal_errors += 1,
            _ => self.rate_tally.conflicts += 1,
        }
        Some(Fault::new(kind?).error(resource))
    }

    /// Replaces the rate-based faults (None turns them off); the tally starts again.
    pub fn set_rates(&mut self, rates: Option<FaultRates>) {
        self.rates = rates;
        self.rate_tally = RateTally::default();
    }

    pub fn inject(&mut self, fault: Fault) {
        if fault.times > 0 {
            self.pending.push(fault);
        }
    }

    pub fn clear(&mut self) {
        self.pending.clear();
    }

    pub fn pending(&self) -> &[Fault] {
        &self.pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_fire_the_given_number_of_times_on_matching_requests() {
        let mut faults = Faults::default();
        faults.inject(
            Fault::new(FaultKind::InternalError)
                .verb(Verb::Patch)
                .resource("issuers/status")
                .times(2),
        );
        assert!(faults.observe(Verb::Patch, "issuers", None, None).is_none());
        assert_eq!(
            faults
                .observe(Verb::Patch, "issuers/status", None, None)
                .unwrap()
                .code(),
            500
        );
        assert!(faults.observe(Verb::Get, "issuers/status", None, None).is_none());
        assert!(
            faults
                .observe(Verb::Patch, "issuers/status", None, None)
                .is_some()
        );
        assert!(
            faults
                .observe(Verb::Patch, "issuers/status", None, None)
                .is_none()
        );
        assert_eq!(faults.counts.get(Verb::Patch, "issuers/status"), 3);
    }

    /// A fault for one namespace spares the same requests elsewhere; requests are counted by
    /// namespace too.
    #[test]
    fn a_namespaced_fault_hits_only_its_namespace() {
        let mut faults = Faults::default();
        faults.inject(
            Fault::new(FaultKind::Forbidden)
                .verb(Verb::Get)
                .resource("secrets")
                .namespace("team-a")
                .times(u32::MAX),
        );
        let get = |faults: &mut Faults, ns, name| faults.observe(Verb::Get, "secrets", ns, Some(name));
        assert!(get(&mut faults, Some("team-b"), "s").is_none());
        assert!(get(&mut faults, None, "s").is_none());
        assert_eq!(get(&mut faults, Some("team-a"), "s").unwrap().code(), 403);
        assert!(get(&mut faults, Some("team-a"), "t").is_some());
        assert_eq!(faults.count_in("team-a", Verb::Get, "secrets", None), 2);
        assert_eq!(faults.count_in("team-a", Verb::Get, "secrets", Some("t")), 1);
        assert_eq!(faults.count_in("team-b", Verb::Get, "secrets", None), 1);
        assert_eq!(faults.count_in("team-a", Verb::List, "secrets", None), 0);
        assert_eq!(faults.counts.get(Verb::Get, "secrets"), 4);
    }

    #[test]
    fn rates_fail_writes_in_the_given_shares_and_repeat_with_the_seed() {
        let rates = FaultRates::new(5, 2, 42);
        let draws: Vec<_> = (0..100_000).map(|n| rates.draw(n)).collect();
        let share = |kind| draws.iter().filter(|d| **d == Some(kind)).count();
        let (internal, conflict) = (share(FaultKind::InternalError), share(FaultKind::Conflict));
        assert!((4_700..=5_300).contains(&internal), "500s: {internal} of 100,000");
        assert!((1_800..=2_200).contains(&conflict), "409s: {conflict} of 100,000");
        let again: Vec<_> = (0..100_000).map(|n| rates.draw(n)).collect();
        assert_eq!(draws, again, "the same seed draws the same faults");
        let other: Vec<_> = (0..100_000).map(|n| FaultRates::new(5, 2, 43).draw(n)).collect();
        assert_ne!(draws, other, "another seed draws others");
        assert!((0..1000).all(|n| FaultRates::new(0, 0, 42).draw(n).is_none()));
    }

    #[test]
    fn rates_apply_to_writes_of_the_named_user_only() {
        let mut faults = Faults::default();
        faults.set_rates(Some(FaultRates::new(100, 0, 1).user("manager")));
        assert!(
            faults
                .observe_rates(Verb::Get, "secrets", Some("manager"))
                .is_none()
        );
        assert!(
            faults
                .observe_rates(Verb::Watch, "secrets", Some("manager"))
                .is_none()
        );
        assert!(faults.observe_rates(Verb::Patch, "secrets", None).is_none());
        assert!(
            faults
                .observe_rates(Verb::Patch, "secrets", Some("test"))
                .is_none()
        );
        for verb in [Verb::Create, Verb::Update, Verb::Patch, Verb::Delete] {
            let err = faults.observe_rates(verb, "secrets", Some("manager")).unwrap();
            assert_eq!(err.code(), 500, "{verb}");
        }
        assert_eq!(
            faults.rate_tally,
            RateTally {
                writes: 4,
                internal_errors: 4,
                conflicts: 0
            }
        );
        faults.set_rates(Some(FaultRates::new(0, 100, 1)));
        assert_eq!(
            faults
                .observe_rates(Verb::Create, "secrets", None)
                .unwrap()
                .code(),
            409
        );
        faults.set_rates(None);
        assert!(faults.observe_rates(Verb::Create, "secrets", None).is_none());
        assert_eq!(faults.rate_tally, RateTally::default());
    }

    #[test]
    fn fault_json_shape() {
        let fault: Fault = serde_json::from_str(
            r#"{"verb":"create","resource":"secrets","kind":{"type":"tooManyRequests","retryAfterSeconds":2},"times":3}"#,
        )
        .unwrap();
        assert_eq!(
            fault,
            Fault::new(FaultKind::TooManyRequests {
                retry_after_seconds: 2
            })
            .verb(Verb::Create)
            .resource("secrets")
            .times(3)
        );
    }
}
