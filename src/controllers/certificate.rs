//! Standalone mode: cert-manager's Certificate lifecycle controllers, run in this manager for
//! Certificates whose `issuerRef.group` is ours. Each controller is its own module (observe,
//! a pure `decide` with its table, a thin act) under its own field manager; they cooperate only
//! through the Certificate's status, as cert-manager's do:
//!
//! - [`trigger`] sets `Issuing=True` when the Secret needs a new certificate (the policy chain);
//! - [`keymanager`] keeps the next private key in a Secret of its own while issuing;
//! - [`requestmanager`] creates one CertificateRequest per revision from that key;
//! - [`approver`] approves the requests they create (no cert-manager approver runs), and the CSI
//!   plugin's requests their Pods' volumes confirm;
//! - [`issuing`] writes the signed certificate into the Secret and ends the issuance;
//! - [`readiness`] writes `Ready`, `notBefore`, `notAfter` and `renewalTime`;
//! - [`revisionmanager`] deletes requests beyond `revisionHistoryLimit`.

pub mod approver;
mod created;
pub mod issuing;
pub mod keymanager;
pub mod observe;
pub mod readiness;
pub mod requestmanager;
pub mod revisionmanager;
pub mod status;
mod summary;
pub mod trigger;
mod wiring;

#[cfg(test)]
mod properties;
#[cfg(test)]
mod testing;

use k8s_openapi::api::core::v1::Secret;
use kube::runtime::reflector::Store;
use std::sync::Arc;

use self::created::Created;
pub use self::wiring::{Indexes, StandaloneWatches, controllers};
pub use super::kit::Error;
use super::kit::Shared;
use super::kit::backoff::{self, Backoff};
use super::kit::events::Events;
use super::kit::funnel::Funnel;
use super::kit::later::Later;
use super::kit::plan::{self, FullPlan, Next, Requeue, Target, Write};
use super::kit::recent::Recent;
use super::kit::secrets::SecretIndex;
use super::kit::status::FieldManager;
use crate::api::certmanager::{Certificate, CertificateRequest};

/// What standalone mode was started with.
pub use crate::controllers::kit::StandaloneSettings as Settings;

/// What every Certificate controller reads: the caches, the settings, its Events.
pub struct CertificateContext {
    pub shared: Arc<Shared>,
    pub settings: Settings,
    pub certificates: Store<Certificate>,
    /// Our requests: finished ones as summaries (`CertificateRequest::summary`).
    pub requests: Store<CertificateRequest>,
    /// The whole copies of the finished requests most recently seen.
    pub request_copies: Recent<CertificateRequest>,
    /// Secrets labelled `controller.cert-manager.io/fao=true`: next-key Secrets whole, issued
    /// ones as summaries (`summary::secret_summary`).
    pub secrets: Store<Secret>,
    /// The whole copies of the issued Secrets most recently seen.
    pub recent: Recent<Secret>,
    /// When each Certificate is looked at again if nothing changes.
    pub later: Later<Certificate>,
    /// The line every trigger of the Certificate controller waits in.
    pub funnel: Funnel<Certificate>,
    /// Which other Secrets exist (the metadata watch), to skip GETs of ones that do not.
    pub secret_names: SecretIndex,
    /// Requests and key Secrets by owner, Certificates by the Secrets they name.
    pub indexes: Indexes,
    pub events: Events,
    /// The approver's last Event on each CSI volume's request it left unapproved.
    pub volume_notes: approver::volume::Said,
    backoff: Backoff<String>,
    acted: Acted,
    created: Created,
}

/// Per controller and Certificate (UID), the resourceVersion of the cached Certificate the
/// controller's last status write was based on, and the one the write made, until the cache
/// shows a newer one. A reconcile of that same copy (woken by a Secret or request event that
/// overtook the Certificate's own), or of one written by another controller in between (a
/// version after the copy and before the write, when both read as numbers, as etcd's do),
/// would decide on a status without the controller's own change, and write it again: skipped,
/// the write's own watch event brings the Certificate back.
///
/// Beside it, the UIDs of the objects the controllers deleted (key Secrets, requests), until
/// the start over: a shared reflector passes on no deletes (kube-rs/kube#1590), so the cache
/// shows a deleted object until the watch event comes, and a reconcile in between would delete
/// it again.
#[derive(Default)]
struct Acted {
    based_on: std::sync::Mutex<BasedOn>,
    deleted: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// By field manager and Certificate UID: the resourceVersion a status write was based on, and
/// the one it made.
type BasedOn = std::collections::HashMap<(&'static str, String), (String, String)>;

/// Entries beyond which [`Acted`] starts over: an entry normally lives one watch round trip,
/// but one for a Certificate deleted in that time would stay.
const ACTED_MAX: usize = 65_536;

impl Acted {
    fn lock(&self) -> std::sync::MutexGuard<'_, BasedOn> {
        self.based_on
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn deleted_set(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.deleted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The controllers deleted the objects of `uids`.
    fn deleted(&self, uids: Vec<String>) {
        if uids.is_empty() {
            return;
        }
        let mut deleted = self.deleted_set();
        if deleted.len() + uids.len() > ACTED_MAX {
            deleted.clear();
        }
        deleted.extend(uids);
    }

    /// Whether a controller has deleted the object of `uid`.
    fn was_deleted(&self, uid: Option<&str>) -> bool {
        uid.is_some_and(|uid| self.deleted_set().contains(uid))
    }

    /// Whether `crt` is the copy `manager` has already written on.
    fn stale(&self, manager: FieldManager, crt: &Certificate) -> bool {
        let (Some(uid), Some(version)) = (&crt.metadata.uid, &crt.metadata.resource_version) else {
            return false;
        };
        let mut acted = self.lock();
        let key = (manager.as_str(), uid.clone());
        match acted.get(&key) {
            Some((based_on, written)) if based_on == version || between(based_on, version, written) => true,
            Some(_) => {
                acted.remove(&key);
                // A mass issuance leaves a table sized for every Certificate at once.
                let len = acted.len();
                if acted.capacity() > 1024 && len * 8 < acted.capacity() {
                    acted.shrink_to(len * 2);
                }
                false
            }
            None => false,
        }
    }

    /// `manager` changed `crt` (its status apply returned `written`).
    fn record(&self, manager: FieldManager, crt: &Certificate, written: Option<&str>) {
        let (Some(uid), Some(version)) = (&crt.metadata.uid, &crt.metadata.resource_version) else {
            return;
        };
        let Some(written) = written.filter(|w| w != version) else {
            return;
        };
        let mut acted = self.lock();
        if acted.len() >= ACTED_MAX {
            acted.clear();
        }
        acted.insert(
            (manager.as_str(), uid.clone()),
            (version.clone(), written.to_string()),
        );
    }
}

/// Whether resourceVersion `version` comes after `based_on` and before `written`, when all
/// three read as numbers; `false` otherwise (resourceVersions are opaque to clients: without
/// numbers only the copy written on is skipped).
fn between(based_on: &str, version: &str, written: &str) -> bool {
    let number = |v: &str| v.parse::<u64>().ok();
    match (number(based_on), number(version), number(written)) {
        (Some(b), Some(v), Some(w)) => b < v && v < w,
        _ => false,
    }
}

impl CertificateContext {
    pub fn new(
        shared: Arc<Shared>,
        settings: Settings,
        stores: (Store<Certificate>, Store<CertificateRequest>, Store<Secret>),
    ) -> Self {
        let indexes = Indexes::of(&stores);
        let (certificates, requests, secrets) = stores;
        CertificateContext {
            events: Events::per_event(shared.client.clone(), shared.clock.clone()),
            shared,
            settings,
            certificates,
            requests,
            secrets,
            secret_names: SecretIndex::default(),
            recent: Recent::default(),
            later: Later::default(),
            funnel: Funnel::new(1),
            request_copies: Recent::default(),
            indexes,
            volume_notes: approver::volume::Said::default(),
            backoff: backoff::per_object(),
            acted: Acted::default(),
            created: Created::default(),
        }
    }

    /// The requeue after a failed reconcile of `key`, growing per failure.
    pub fn retry(&self, key: String) -> Requeue {
        Requeue::after(self.backoff.next(key))
    }

    /// Whether the controller writing as `manager` acts on `crt` now: ours, not being deleted,
    /// and not the copy it has already written on ([`Acted`]).
    pub fn acts_on(&self, manager: FieldManager, crt: &Certificate) -> bool {
        acts_on(crt) && !self.acted.stale(manager, crt)
    }

    /// Whether a Certificate controller has deleted the object with `meta` (the cache may
    /// still show it).
    pub fn deleted(&self, meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> bool {
        self.acted.was_deleted(meta.uid.as_deref())
    }

    /// Forgets the failures of `key` after a reconcile that went through.
    pub fn settled(&self, key: &str) {
        self.backoff.reset(key);
    }
}

/// Carries out `plan` (its writes, status apply and Event) on `crt` as `manager`; hands `next`
/// back.
pub async fn execute<W>(
    ctx: &CertificateContext,
    crt: &Certificate,
    manager: FieldManager,
    plan: impl Into<FullPlan<W>>,
) -> Result<Next<W>, Error> {
    let target = Target {
        client: &ctx.shared.client,
        object: crt,
        manager,
        events: &ctx.events,
    };
    let now = (ctx.shared.clock)();
    let plan = ctx.created.without_repeats(plan.into(), now);
    let marks = Created::marks(&plan);
    let deleted: Vec<String> = plan
        .writes()
        .filter_map(|w| match w {
            Write::Delete { uid, .. } => Some(uid.clone()),
            _ => None,
        })
        .collect();
    let (written, next) = plan::execute(target, plan).await?;
    ctx.acted.record(manager, crt, written.as_deref());
    ctx.acted.deleted(deleted);
    ctx.created.record(marks, now);
    Ok(next)
}

/// Runs `work` on the crypto pool, in the lane of `crt`'s namespace: what a tenant's
/// Certificate or Secret can make long (key generation, CSR signing, keystores) never runs on
/// the runtime thread, and one tenant's work holds at most one of the pool's slots.
pub async fn computed<T, F>(ctx: &CertificateContext, crt: &Certificate, work: F) -> Result<T, Error>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    use kube::ResourceExt;
    let namespace = crt.namespace().unwrap_or_default();
    ctx.shared
        .crypto
        .run(&namespace, work)
        .await
        .map_err(|source| Error::Crypto {
            object: observe::describe(crt),
            source,
        })
}

/// Whether a Certificate controller acts on `crt` at all: ours, and not being deleted.
pub fn acts_on(crt: &Certificate) -> bool {
    observe::is_ours(crt) && crt.metadata.deletion_timestamp.is_none()
}

/// The key a Certificate's retry back-off is kept under, per controller.
pub fn retry_key(controller: &str, crt: &Certificate) -> String {
    use kube::ResourceExt;
    format!("{controller}/{}", crt.uid().unwrap_or_default())
}

/// What every Certificate controller's `error_policy` does: log, then retry with back-off.
pub fn log_and_retry(
    controller: &'static str,
    crt: &Certificate,
    err: &Error,
    ctx: &CertificateContext,
) -> Requeue {
    tracing::warn!(controller, certificate = %observe::describe(crt), error = %err, "reconcile failed");
    ctx.retry(retry_key(controller, crt))
}

#[cfg(test)]
mod acted_tests {
    use super::*;

    fn crt(uid: &str, version: &str) -> Certificate {
        let mut crt = Certificate::new("web", crate::api::certmanager::CertificateSpec::default());
        crt.metadata.uid = Some(uid.into());
        crt.metadata.resource_version = Some(version.into());
        crt
    }

    /// A controller skips the copy it wrote on (and, with numeric versions, one written before
    /// its write), until the cache shows its write or a newer one; another
    /// controller, a write that changed nothing and an unknown Certificate never are skipped.
    #[test]
    fn the_copy_written_on_is_skipped_until_a_newer_one() {
        let acted = Acted::default();
        let (trigger, readiness) = (FieldManager::TRIGGER, FieldManager::READINESS);
        acted.record(trigger, &crt("a", "5"), Some("6"));
        acted.record(readiness, &crt("b", "7"), Some("7"));
        acted.record(readiness, &crt("d", "10"), Some("13"));
        acted.record(trigger, &crt("e", "x1"), Some("x3"));
        let rows = [
            (
                "a copy between the one written on and the write",
                readiness,
                ("d", "12"),
                true,
            ),
            ("the write's own copy", readiness, ("d", "13"), false),
            (
                "opaque versions: only the copy written on",
                trigger,
                ("e", "x2"),
                false,
            ),
            ("the copy written on", trigger, ("a", "5"), true),
            ("another controller", readiness, ("a", "5"), false),
            ("a write that changed nothing", readiness, ("b", "7"), false),
            ("a Certificate never written", trigger, ("c", "1"), false),
            ("the cache caught up", trigger, ("a", "6"), false),
            ("then the old copy again: forgotten", trigger, ("a", "5"), false),
        ];
        for (row, manager, (uid, version), stale) in rows {
            assert_eq!(acted.stale(manager, &crt(uid, version)), stale, "{row}");
        }
    }

    /// Once the cache has caught up with a mass issuance's writes, the table gives back what
    /// it grew to.
    #[test]
    fn the_table_shrinks_once_caught_up() {
        let acted = Acted::default();
        for i in 0..4096 {
            acted.record(FieldManager::TRIGGER, &crt(&i.to_string(), "1"), Some("2"));
        }
        let grown = acted.lock().capacity();
        for i in 0..4096 {
            assert!(!acted.stale(FieldManager::TRIGGER, &crt(&i.to_string(), "2")));
        }
        assert_eq!(acted.lock().len(), 0);
        assert!(
            acted.lock().capacity() < grown / 8,
            "{grown} -> {}",
            acted.lock().capacity()
        );
    }

    /// Deleted UIDs are remembered; past the bound the set starts over.
    #[test]
    fn deleted_objects_are_remembered() {
        let acted = Acted::default();
        acted.deleted(vec!["x".into()]);
        assert!(acted.was_deleted(Some("x")));
        assert!(!acted.was_deleted(Some("y")));
        assert!(!acted.was_deleted(None));
        acted.deleted((0..ACTED_MAX).map(|i| i.to_string()).collect());
        assert!(!acted.was_deleted(Some("x")), "started over");
    }
}
