//! One timed phase of the standalone bench: N Certificates issued, or renewed, together; what
//! the manager spent on them, taken from the API server's counts less the bench's own requests.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, ListParams};

use cfssl_issuer::api::certmanager::Certificate;
use cfssl_issuer::pki::keys::KeySpec;
use e2e::harness::fleet::{self, SecretCheck, Settled};
use e2e::harness::{Manager, cpu, load};
use kube_testserver::{Counts, TestServer, Verb};

/// Requests the bench keeps in flight when creating or triggering: enough that the manager,
/// not the client, sets the pace.
const CLIENT_CONCURRENCY: usize = 32;
/// How often the bench lists the Certificates while waiting.
const POLL: Duration = Duration::from_millis(250);
const WAIT: Duration = Duration::from_secs(900);

/// What a phase runs against.
pub struct Bench<'a> {
    pub client: &'a Client,
    pub server: &'a TestServer,
    pub ca: &'a simple_cfssl::Running,
    pub manager: &'a Manager,
    pub n: usize,
}

/// What one phase measured.
pub struct Outcome {
    pub name: String,
    /// Certificates in the phase.
    pub n: usize,
    pub elapsed: Duration,
    /// The manager's API requests (the bench's own taken away).
    pub counts: Counts,
    /// Certificates the CA signed during the phase.
    pub signed: u64,
    pub check: SecretCheck,
    /// Renewals only: Certificates whose Secret holds a new key.
    pub rotated: Option<usize>,
    /// Certificates issued more than once in the phase (Ready at a later revision).
    pub reissued: usize,
    /// The manager's VmHWM when the phase ended.
    pub peak_kib: u64,
    /// CPU the manager, and this process (test API server, simple-cfssl, client), used.
    pub manager_cpu: Duration,
    pub bench_cpu: Duration,
    /// The Certificates as they ended the phase.
    pub certificates: Vec<Certificate>,
    /// Events posted in the phase's namespace during it, by type and reason.
    pub events: BTreeMap<String, u64>,
}

/// Writes of any kind (create, update, patch, delete) in `counts`.
pub fn writes(counts: &Counts) -> u64 {
    [
        Verb::Create,
        Verb::Update,
        Verb::Patch,
        Verb::Delete,
        Verb::DeleteCollection,
    ]
    .into_iter()
    .map(|v| counts.verb_total(v))
    .sum()
}

impl Outcome {
    pub fn rate(&self, n: usize) -> f64 {
        n as f64 / self.elapsed.as_secs_f64()
    }

    /// Writes of any kind (create, update, patch, delete) per Certificate.
    pub fn writes_per(&self, n: usize) -> f64 {
        writes(&self.counts) as f64 / n as f64
    }

    /// Event writes per Certificate (part of [`Outcome::writes_per`]).
    pub fn event_writes_per(&self, n: usize) -> f64 {
        load::event_writes(&self.counts) as f64 / n as f64
    }

    /// Writes per Certificate other than Events.
    pub fn object_writes_per(&self, n: usize) -> f64 {
        self.writes_per(n) - self.event_writes_per(n)
    }

    /// The manager's CPU per Certificate, in milliseconds.
    pub fn manager_ms_per(&self, n: usize) -> f64 {
        self.manager_cpu.as_secs_f64() * 1e3 / n as f64
    }

    /// This process's CPU per Certificate, in milliseconds.
    pub fn bench_ms_per(&self, n: usize) -> f64 {
        self.bench_cpu.as_secs_f64() * 1e3 / n as f64
    }
}

/// CPU meters of the manager and of this process, started together.
struct Meters([Option<cpu::Meter>; 2]);

impl Meters {
    fn start(manager: &Manager) -> Meters {
        let pids = [manager.pid(), Some(std::process::id())];
        Meters(pids.map(|p| p.and_then(cpu::Meter::start)))
    }

    fn used(&self) -> [Duration; 2] {
        self.0
            .each_ref()
            .map(|m| m.as_ref().and_then(cpu::Meter::used).unwrap_or_default())
    }
}

impl Bench<'_> {
    /// `n` Certificates `<prefix>-00000`… with keys as `key` asks, created at once, timed from
    /// the first create until every one is Ready at revision 1 and every Secret exists.
    pub async fn issue(&self, namespace: &str, issuer: &str, key: KeySpec) -> anyhow::Result<Outcome> {
        self.issue_n(namespace, issuer, key, self.n).await
    }

    /// [`Bench::issue`] of `n` Certificates.
    pub async fn issue_n(
        &self,
        namespace: &str,
        issuer: &str,
        key: KeySpec,
        n: usize,
    ) -> anyhow::Result<Outcome> {
        let certificates = (0..n)
            .map(|i| fleet::certificate(namespace, &format!("crt-{i:05}"), issuer, key))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let signed = self.ca.issued_count();
        let events = self.events(namespace).await?;
        self.server.reset_counts();
        let (start, meters) = (tokio::time::Instant::now(), Meters::start(self.manager));
        fleet::create_all(self.client, namespace, &certificates, CLIENT_CONCURRENCY).await?;
        eprintln!("  created {n} Certificates in {:.2?}", start.elapsed());
        let settled = self.settle(namespace, n, 1).await?;
        let own = [
            (Verb::Create, "certificates", n as u64),
            (Verb::List, "events", 1),
        ];
        let name = match n == self.n {
            true => format!("issue {}", describe(key)),
            false => format!("issue {}, N={n}", describe(key)),
        };
        let mut outcome = self.outcome(name, (start, &meters), settled, &own, signed, (key, 1));
        outcome.events = since(&events, &self.events(namespace).await?);
        Ok(outcome)
    }

    /// The Certificates of `before` renewed together: a manual trigger on each (as `cmctl
    /// renew`), timed from the first trigger until every one is Ready at revision 2.
    pub async fn renew(&self, namespace: &str, before: &Outcome, key: KeySpec) -> anyhow::Result<Outcome> {
        let signed = self.ca.issued_count();
        let events = self.events(namespace).await?;
        self.server.reset_counts();
        let (start, meters) = (tokio::time::Instant::now(), Meters::start(self.manager));
        fleet::trigger_all(self.client, namespace, &before.certificates, CLIENT_CONCURRENCY).await?;
        eprintln!("  triggered {} renewals in {:.2?}", self.n, start.elapsed());
        let settled = self.settle(namespace, self.n, 2).await?;
        let own = [
            (Verb::Patch, "certificates/status", self.n as u64),
            (Verb::List, "events", 1),
        ];
        let mut outcome = self.outcome(
            format!("renew {} (manual trigger)", describe(key)),
            (start, &meters),
            settled,
            &own,
            signed,
            (key, 2),
        );
        outcome.events = since(&events, &self.events(namespace).await?);
        let previous = &before.check.public_keys;
        outcome.rotated = Some(
            outcome
                .check
                .public_keys
                .iter()
                .filter(|(name, spki)| previous.get(*name).is_some_and(|p| p != *spki))
                .count(),
        );
        Ok(outcome)
    }

    async fn settle(&self, namespace: &str, n: usize, revision: i64) -> anyhow::Result<Settled> {
        let wait = fleet::wait_all_ready(self.client, namespace, n, revision, POLL, WAIT);
        match wait.await {
            Ok(settled) => Ok(settled),
            Err(err) => {
                // The manager's log lives in a temporary directory: keep it for the post-mortem.
                let path = std::env::temp_dir().join("bench-standalone-manager.log");
                std::fs::write(&path, self.manager.log())?;
                Err(err.context(format!("manager log in {}", path.display())))
            }
        }
    }

    fn outcome(
        &self,
        name: String,
        (start, meters): (tokio::time::Instant, &Meters),
        settled: Settled,
        own: &[(Verb, &str, u64)],
        signed_before: u64,
        (key, revision): (KeySpec, i64),
    ) -> Outcome {
        let [manager_cpu, bench_cpu] = meters.used();
        let counts = self.server.counts();
        let lists = [
            (Verb::List, "certificates", settled.certificate_lists),
            (Verb::List, "secrets", settled.secret_lists),
            (Verb::Watch, "certificates", settled.certificate_watches),
        ];
        let own: Vec<_> = own.iter().copied().chain(lists).collect();
        let check = fleet::check_secrets(&settled.certificates, &settled.secrets, key);
        let reissued = settled
            .certificates
            .iter()
            .filter(|c| fleet::revision_of(c) > Some(revision))
            .count();
        Outcome {
            name,
            n: settled.certificates.len(),
            elapsed: settled.at - start,
            counts: load::without(&counts, &own),
            signed: self.ca.issued_count() - signed_before,
            check,
            rotated: None,
            events: BTreeMap::new(),
            reissued,
            peak_kib: self.manager.peak_rss_kib().unwrap_or(0),
            manager_cpu,
            bench_cpu,
            certificates: settled.certificates,
        }
    }

    /// The Events in `namespace` by type and reason, in one list (the bench's own request).
    async fn events(&self, namespace: &str) -> anyhow::Result<BTreeMap<String, u64>> {
        let events = Api::<Event>::namespaced(self.client.clone(), namespace)
            .list(&ListParams::default())
            .await?;
        let mut out = BTreeMap::new();
        for event in events {
            let kind = event.type_.unwrap_or_default();
            let reason = event.reason.unwrap_or_default();
            *out.entry(format!("{kind} {reason}")).or_default() += 1;
        }
        Ok(out)
    }
}

/// What `after` counts more than `before`.
fn since(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(reason, n)| {
            (
                reason.clone(),
                n.saturating_sub(before.get(reason).copied().unwrap_or(0)),
            )
        })
        .filter(|(_, n)| *n > 0)
        .collect()
}

pub fn describe(key: KeySpec) -> String {
    match key {
        KeySpec::Rsa(bits) => format!("RSA-{bits}"),
        KeySpec::Ecdsa(bits) => format!("ECDSA P-{bits}"),
        KeySpec::Ed25519 => "Ed25519".into(),
    }
}
