//! Reconcilers, one file per controller, and what they share.
//!
//! Each reconciler observes (caches, one Secret), decides (pure functions in its `decide`
//! module) and acts (one server-side apply of status, an Event, the requeue it returns).

pub mod backoff;
pub mod certificaterequest;
pub mod clients;
pub mod credentials;
pub mod issuer;
pub mod memory;
mod run;
pub mod status_schema;
pub mod watches;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::Store;
use tokio::sync::mpsc;

use crate::api::{ClusterIssuer, Issuer};
use crate::telemetry::Metrics;
pub use run::{RunError, run};

/// The one field manager under which every status is applied.
pub const FIELD_MANAGER: &str = "cfssl-issuer";

/// Settings shared by the controllers, from the command line.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where a ClusterIssuer's credential Secret lives.
    pub cluster_resource_namespace: String,
    /// How often a Ready issuer is checked again.
    pub health_check_interval: Duration,
    /// How long a request is retried after retryable errors before it fails, counted from its
    /// first failed sign (remembered in memory: a restart starts the window again).
    pub max_retry_duration: Duration,
    /// Sign only approved requests (cert-manager >= 1.3); off for older cert-manager.
    pub approval_required: bool,
    /// Reconciles in flight per controller.
    pub concurrency: u16,
    /// Per-request timeout towards the CA.
    pub cfssl_timeout: Duration,
}

impl Config {
    pub fn new(cluster_resource_namespace: impl Into<String>) -> Self {
        Self {
            cluster_resource_namespace: cluster_resource_namespace.into(),
            health_check_interval: Duration::from_secs(60),
            max_retry_duration: Duration::from_secs(300),
            approval_required: true,
            concurrency: 8,
            cfssl_timeout: crate::cfssl::ClientConfig::DEFAULT_TIMEOUT,
        }
    }
}

pub use crate::clock::{Clock, system_clock};

/// A request to check an issuer again now, sent by the request controller when the CA blames
/// the issuer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recheck {
    pub kind: crate::api::IssuerKind,
    pub namespace: Option<String>,
    pub name: String,
}

impl Recheck {
    pub fn of<K: crate::api::AnyIssuer>(issuer: &K) -> Self {
        use kube::ResourceExt;
        Recheck {
            kind: K::KIND,
            namespace: issuer.namespace(),
            name: issuer.name_any(),
        }
    }
}

/// Everything a reconcile needs, shared by all of them.
pub struct Context {
    pub client: kube::Client,
    /// Events for issuers, aggregated into series when a check keeps failing the same way.
    pub recorder: Recorder,
    /// Who reports our Events; requests get a recorder of their own per write (see
    /// `certificaterequest::publish`).
    pub reporter: Reporter,
    pub config: Config,
    pub clock: Clock,
    pub issuers: Store<Issuer>,
    pub cluster_issuers: Store<ClusterIssuer>,
    pub cfssl: clients::Clients,
    pub issuer_backoff: backoff::Backoff<String>,
    pub request_backoff: backoff::Backoff<String>,
    /// Requests this process is signing or has signed, by request UID, until the cache shows
    /// the Issued write: a retry writes the kept chain instead of asking the CA again, and a
    /// reconcile from a stale cache neither signs again nor drops the certificate.
    pub unsaved: std::sync::Mutex<std::collections::HashMap<String, certificaterequest::decide::Signing>>,
    /// Retry windows and approval notices, by request UID.
    pub request_memory: memory::RequestMemory,
    pub recheck: mpsc::UnboundedSender<Recheck>,
    pub metrics: Arc<Metrics>,
    /// Whether the installed Issuer/ClusterIssuer CRDs declare `observedGeneration` in
    /// conditions (kept current by `status_schema::watch`).
    pub status_schemas: status_schema::StatusSchemas,
}

impl Context {
    /// A context over the given caches; the receiver yields the issuer rechecks requested by
    /// the request controller.
    pub fn new(
        client: kube::Client,
        config: Config,
        clock: Clock,
        issuers: Store<Issuer>,
        cluster_issuers: Store<ClusterIssuer>,
        metrics: Arc<Metrics>,
    ) -> (Self, mpsc::UnboundedReceiver<Recheck>) {
        let (recheck, rechecks) = mpsc::unbounded_channel();
        let ctx = Context {
            recorder: Recorder::new(client.clone(), Reporter::from(FIELD_MANAGER)),
            reporter: Reporter::from(FIELD_MANAGER),
            client,
            config,
            clock,
            issuers,
            cluster_issuers,
            cfssl: clients::Clients::default(),
            issuer_backoff: backoff(),
            request_backoff: backoff(),
            unsaved: Default::default(),
            request_memory: Default::default(),
            recheck,
            metrics,
            status_schemas: Default::default(),
        };
        (ctx, rechecks)
    }

    pub fn now(&self) -> Timestamp {
        (self.clock)()
    }
}

/// What went wrong in a reconcile that the returned `Action` does not already cover: the API
/// server refused a write or a read. Outcomes of signing and checking are never errors here;
/// they are conditions.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("writing status of {object}: {source}")]
    WriteStatus {
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("reading {object}: {source}")]
    Read {
        object: String,
        #[source]
        source: kube::Error,
    },
}

/// The metrics label of an error class.
pub fn class_label(class: crate::cfssl::Class) -> &'static str {
    match class {
        crate::cfssl::Class::Retryable => "retryable",
        crate::cfssl::Class::Permanent => "permanent",
        crate::cfssl::Class::Issuer(_) => "issuer",
    }
}

fn backoff() -> backoff::Backoff<String> {
    backoff::Backoff::new(Duration::from_secs(1), Duration::from_secs(300))
}
