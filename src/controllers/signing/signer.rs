//! Signer access, shared by the controllers that talk to the CA: an issuer's credentials (one
//! Secret read), its CFSSL client (reused while spec and Secret are unchanged), each call timed
//! into the metrics, and the `Ready` reason a failure gives the issuer.

pub mod clients;
pub mod credentials;

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use kube::ResourceExt;

pub use self::clients::{Clients, Fingerprint};
pub use self::credentials::{Credentials, SecretProblem};
use k8s_openapi::jiff::Timestamp;

use super::budget::Budget;
use super::issuers::{Found, IssuerName};
use super::outcome::{Outcome, blame, outcome};
use crate::api::{AnyIssuer, IssuerSpec, ReadyReason};
use crate::cfssl::{self, AllowList, Class, ClientConfig, HostPolicy};
use crate::clock::Clock;
use crate::controllers::kit::Config;
use crate::controllers::kit::secrets::SecretIndex;
use crate::controllers::kit::shares::Shares;
use crate::telemetry::Metrics;
use crate::telemetry::metrics::{CallLabels, IssuerLabels};

/// A stable name for logs, backoff, metrics and the client cache: `Issuer/ns/name` or
/// `ClusterIssuer/name`.
pub fn key<K: AnyIssuer>(issuer: &K) -> String {
    match issuer.namespace() {
        Some(ns) => format!("{}/{ns}/{}", K::KIND, issuer.name_any()),
        None => format!("{}/{}", K::KIND, issuer.name_any()),
    }
}

/// Pure: whose share of the reconcile slots a call for `issuer` counts against: its namespace
/// (a tenant may make many Issuers), or the ClusterIssuer itself (made by the cluster's admin).
pub fn tenant(issuer: &IssuerName) -> String {
    match &issuer.namespace {
        Some(namespace) => format!("namespace/{namespace}"),
        None => format!("{}/{}", issuer.kind, issuer.name),
    }
}

/// Reaches the CA on an issuer's behalf.
pub struct Signer {
    client: kube::Client,
    /// Where a ClusterIssuer's credential Secret lives.
    cluster_resource_namespace: String,
    timeout: std::time::Duration,
    /// How long retryable sign failures are retried (`--max-retry-duration`).
    max_retry: std::time::Duration,
    /// Stamps the CFSSL tokens.
    clock: Clock,
    /// `--namespaced-issuer-allowed-hosts`.
    allowed_hosts: Option<Arc<AllowList>>,
    metrics: Arc<Metrics>,
    /// One client per issuer, by [`key`].
    pub clients: Clients,
    /// The resourceVersion of every Secret, kept by the Secret metadata watch (see
    /// [`Signer::client_for`]).
    secrets: SecretIndex,
    /// The longest one sign or check may take (`--cfssl-sign-deadline`).
    deadline: std::time::Duration,
    /// Each tenant's share of the signs in flight.
    pub signs: Shares,
    /// Each tenant's share of the health checks in flight.
    pub checks: Shares,
    /// Each issuer's issuance budget (`--issuance-budget`), and the line waiting for it.
    pub budget: Budget,
}

/// Why the signer has no client for an issuer.
#[derive(Debug, thiserror::Error)]
pub enum Unusable {
    #[error(transparent)]
    Secret(#[from] SecretProblem),
    #[error(transparent)]
    Client(#[from] cfssl::Error),
}

impl Unusable {
    /// The issuer's `Ready` reason while it is unusable so.
    pub fn reason(&self) -> ReadyReason {
        match self {
            Unusable::Secret(problem) => problem.reason(),
            Unusable::Client(err) => blame(err),
        }
    }
}

impl Signer {
    pub fn new(client: kube::Client, config: &Config, clock: Clock, metrics: Arc<Metrics>) -> Self {
        Signer {
            client,
            cluster_resource_namespace: config.cluster_resource_namespace.clone(),
            timeout: config.cfssl_timeout,
            max_retry: config.max_retry_duration,
            clock,
            allowed_hosts: config.namespaced_issuer_allowed_hosts.clone(),
            metrics,
            clients: Clients::default(),
            secrets: SecretIndex::default(),
            deadline: config.sign_deadline,
            signs: Shares::for_concurrency(config.concurrency),
            checks: Shares::for_concurrency(config.concurrency),
            budget: Budget::new(config.issuance_budget),
        }
    }

    /// What the Secret metadata watch keeps current: the manager's
    /// [`SecretFeed`](crate::controllers::kit::secrets::SecretFeed) is built on it.
    pub fn secret_index(&self) -> &SecretIndex {
        &self.secrets
    }

    /// Signs `request` (PEM) through `issuer`, as every signing controller does: an issuer whose
    /// client cannot be built is at fault; the call is timed, an issued certificate counted,
    /// and the result classified by [`outcome`] against the retry window that opened at
    /// `first_failure`. Also returns the leaf's notAfter when it signed.
    pub async fn sign<K: AnyIssuer>(
        &self,
        issuer: &K,
        request: &[u8],
        first_failure: Option<Timestamp>,
    ) -> (Outcome, Option<i64>) {
        let client = match self.client_for(issuer).await {
            Ok(client) => client,
            Err(unusable) => {
                let fault = Outcome::IssuerFault {
                    message: unusable.to_string(),
                    reason: unusable.reason(),
                };
                return (fault, None);
            }
        };
        let result = self
            .timed(
                issuer,
                "sign",
                self.within_deadline(&client, cfssl::Call::AuthSign, client.sign(request)),
            )
            .await;
        let not_after = result.as_ref().ok().and_then(|signed| signed.not_after);
        if result.is_ok() {
            let labels = IssuerLabels { issuer: key(issuer) };
            self.metrics.issued.get_or_create(&labels).inc();
        }
        let chain = result.as_ref().map(|signed| signed.chain.clone());
        (
            outcome(chain, first_failure, (self.clock)(), self.max_retry),
            not_after,
        )
    }

    /// [`Signer::sign`] through an issuer found in the caches.
    pub async fn sign_found(
        &self,
        issuer: &Found,
        request: &[u8],
        first_failure: Option<Timestamp>,
    ) -> (Outcome, Option<i64>) {
        match issuer {
            Found::Issuer(issuer) => self.sign(&**issuer, request, first_failure).await,
            Found::ClusterIssuer(issuer) => self.sign(&**issuer, request, first_failure).await,
        }
    }

    /// The issuer's client for signing: the cached one while the metadata watch shows the
    /// Secret it was built from unchanged (no API request), else one built from a fresh read.
    pub async fn client_for<K: AnyIssuer>(&self, issuer: &K) -> Result<Arc<cfssl::Client>, Unusable> {
        let namespace = self.secret_namespace(issuer);
        let version = self.secrets.version(namespace, &issuer.spec().auth_secret_name);
        if let Some(client) = version.and_then(|v| self.clients.get(&key(issuer), &fingerprint(issuer, v))) {
            return Ok(client);
        }
        let credentials = self.credentials(issuer).await?;
        Ok(self.client(issuer, credentials)?)
    }

    fn secret_namespace<'a, K: AnyIssuer>(&'a self, issuer: &'a K) -> &'a str {
        issuer
            .secret_namespace(&self.cluster_resource_namespace)
            .unwrap_or_default()
    }

    /// Reads the issuer's credential Secret.
    pub async fn credentials<K: AnyIssuer>(&self, issuer: &K) -> Result<Credentials, SecretProblem> {
        let namespace = self.secret_namespace(issuer);
        credentials::read(&self.client, namespace, &issuer.spec().auth_secret_name)
            .await
            .map_err(|problem| problem.for_kind(K::KIND))
    }

    /// The issuer's CFSSL client, reused while its spec and Secret are unchanged.
    pub fn client<K: AnyIssuer>(
        &self,
        issuer: &K,
        credentials: Credentials,
    ) -> Result<Arc<cfssl::Client>, cfssl::Error> {
        let fingerprint = fingerprint(issuer, credentials.version.clone());
        let key = key(issuer);
        self.clients.get_or_build(&key, fingerprint, || {
            let mut config = client_config(issuer.spec(), credentials, self.timeout);
            config.unanswered_signs = self.metrics.possible_duplicates_of(&key);
            config.clock = self.clock.clone();
            config.hosts = HostPolicy::for_issuer(issuer.namespace().is_some(), self.allowed_hosts.as_ref());
            config
        })
    }

    /// `work` (a call of `client`), failed as a timeout once past the sign deadline: failover
    /// tries each URL with the per-request timeout, so without it an issuer of eight stalling
    /// URLs would hold a reconcile slot for eight timeouts.
    pub async fn within_deadline<T>(
        &self,
        client: &cfssl::Client,
        call: cfssl::Call,
        work: impl Future<Output = Result<T, cfssl::Error>>,
    ) -> Result<T, cfssl::Error> {
        match tokio::time::timeout(self.deadline, work).await {
            Ok(result) => result,
            Err(_) => {
                let config = client.config();
                let attempt =
                    cfssl::Attempt::new(call, cfssl::redact_list(&config.url), config.label.clone());
                Err(attempt.failed(cfssl::Failure::Timeout {
                    timeout: self.deadline,
                }))
            }
        }
    }

    /// Runs one CFSSL call, recording its latency and, when it fails, its error class.
    pub async fn timed<K: AnyIssuer, T>(
        &self,
        issuer: &K,
        call: &'static str,
        work: impl Future<Output = Result<T, cfssl::Error>>,
    ) -> Result<T, cfssl::Error> {
        let started = Instant::now();
        let result = work.await;
        let labels = CallLabels {
            issuer: key(issuer),
            label: issuer.spec().label.clone(),
            call,
        };
        let class = result.as_ref().err().map(|err| class_label(err.class()));
        self.metrics
            .observe_call(labels, started.elapsed().as_secs_f64(), class);
        result
    }
}

/// What a client for `issuer` built from its Secret at `secret_version` is known by.
fn fingerprint<K: AnyIssuer>(issuer: &K, secret_version: String) -> Fingerprint {
    Fingerprint {
        issuer_uid: issuer.uid().unwrap_or_default(),
        generation: issuer.meta().generation.unwrap_or_default(),
        secret_version,
    }
}

/// Pure: the client settings an issuer's spec and credentials describe.
pub fn client_config(
    spec: &IssuerSpec,
    credentials: Credentials,
    timeout: std::time::Duration,
) -> ClientConfig {
    let mut config = ClientConfig::new(spec.url.clone(), spec.label.clone(), credentials.key);
    config.profile = spec.profile.clone().unwrap_or_default();
    config.bundle = spec.bundle.unwrap_or(false);
    config.ca_bundle_pem = spec.ca_bundle.as_ref().map(|b| b.0.clone());
    config.timeout = timeout;
    config
}

/// The metrics label of an error class.
pub fn class_label(class: Class) -> &'static str {
    match class {
        Class::Retryable => "retryable",
        Class::Permanent => "permanent",
        Class::Issuer(_) => "issuer",
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::cfssl::{AuthKey, Call};
    use crate::controllers::kit::testing::shared;

    /// One deadline over a whole call, every URL included: a call still running at it fails as
    /// a retryable timeout naming every URL (credentials hidden); one that ends in time passes.
    #[tokio::test]
    async fn a_call_past_the_sign_deadline_is_a_timeout() {
        let shared = shared();
        let mut config = shared.config.clone();
        config.sign_deadline = Duration::from_millis(20);
        let signer = Signer::new(
            shared.client.clone(),
            &config,
            shared.clock.clone(),
            shared.metrics.clone(),
        );
        let key = AuthKey::from_hex("00112233445566778899aabbccddeeff").unwrap();
        let urls = "https://ca1.example:8888,https://user:pw@ca2.example";
        let client = cfssl::Client::new(ClientConfig::new(urls, "intermediate", key)).unwrap();
        let run = async {
            let stalled = signer
                .within_deadline::<()>(&client, Call::AuthSign, futures::future::pending())
                .await
                .unwrap_err();
            let in_time = signer.within_deadline(&client, Call::Info, async { Ok(7) }).await;
            (stalled, in_time.ok())
        };
        let (stalled, in_time) = tokio::time::timeout(Duration::from_secs(5), run).await.unwrap();
        assert_eq!(
            (stalled.to_string(), stalled.class(), in_time),
            (
                "authsign at https://ca1.example:8888,https://***@ca2.example (label \"intermediate\"): no answer within 20ms"
                    .to_string(),
                Class::Retryable,
                Some(7)
            )
        );
    }
}
