//! An in-process Kubernetes API server for tests.
//!
//! It speaks the real HTTP API (discovery, CRUD, patch and server-side apply, watch with
//! bookmarks and 410 relists, metadata-only answers, Tables for kubectl) on 127.0.0.1, over
//! HTTPS with a throwaway CA or plain HTTP, and writes a kubeconfig for it, so `kube::Client`,
//! kubectl and a manager binary work against it unchanged. Tests can count requests, inject
//! faults, add latency and cut watches.
//!
//! ```no_run
//! # async fn demo() -> Result<(), kube_testserver::Error> {
//! use kube_testserver::{Fault, FaultKind, Options, TestServer, Verb};
//! let server = TestServer::start(Options::default()).await?;
//! let client = server.client()?;
//! server.inject(Fault::new(FaultKind::InternalError).verb(Verb::Create).resource("secrets"));
//! // ... drive `client`, kubectl (`server.kubeconfig_path()`), or a manager binary ...
//! assert_eq!(server.counts().get(Verb::Create, "secrets"), 0);
//! server.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! What it simplifies, in short (each module's docs say more):
//! - **Server-side apply** (`apply.rs`) tracks each apply manager's last configuration and
//!   derives ownership from it; `metadata.managedFields` (`managed_fields.rs`) carries one
//!   `Apply` entry per manager and subresource, encoded as kube-apiserver encodes `FieldsV1`.
//!   Update and patch writers get no `Update` entry and own nothing: a leaf they change or
//!   remove just stops being the applier's, and an apply never conflicts with them (a real
//!   server would report a conflict with the updater). managedFields sent in a body are
//!   ignored (`managedFields: []` does not reset them). List-maps merge by key: schema markers
//!   for custom resources (an unmarked list is atomic, `conditions` included), ObjectMeta's
//!   lists and `conditions` by `type` for built-in kinds; fields a manager stops applying are
//!   removed unless another apply manager owns them; conflicts are reported only between apply
//!   managers. As on a real server, an applied field the schema does not declare fails the
//!   apply (500, "field not declared in schema") where other writes prune it.
//! - **Validation** (`schema.rs`) defaults, prunes and checks types, `required`, `enum` and
//!   `nullable`, but not formats, patterns, bounds or CEL rules.
//! - **Garbage collection** is synchronous; foreground deletion holds the owner with the
//!   `foregroundDeletion` finalizer until no dependent with `blockOwnerDeletion` is left, but
//!   deletes the dependents themselves in the background; deleting a CRD drops its objects at
//!   once, without waiting for their finalizers.
//! - **Field selectors** on custom resources accept only `metadata.name`, `metadata.namespace`
//!   and the CRD's `selectableFields` (400 "field label not supported" otherwise), as real
//!   servers do; on built-in kinds they accept any dotted path. **Lists** are not snapshots
//!   across pages (later pages show current data, but report the first page's resourceVersion
//!   so watches replay).
//! - **Strategic merge patch** knows only the merge keys of the built-in kinds served here, and
//!   acts as a merge patch on custom resources (a real server answers 415 there).
//! - **CertificateSigningRequests** (`resources/csr.rs`) follow kube-apiserver's registry and
//!   validation rules, with `status` and `approval` subresources; the requester recorded on
//!   create is the caller: the user `Impersonate-User`/`-Group` headers name (impersonation is
//!   never refused), else an added user, else `kubernetes-admin` (groups `system:masters`,
//!   `system:authenticated`); without authentication what the body says is kept.
//! - **SubjectAccessReviews** (`access.rs`) are answered from the rules a test grants with
//!   [`TestServer::allow_access`]; nothing else is authorized.
//! - No RBAC (a 403 can be injected as a fault), admission, conversion webhooks, protobuf
//!   (except the CSR `/approval` and `/status` bodies kubectl sends), aggregated discovery, or
//!   OpenAPI schemas (OpenAPI v3 is a skeleton that tells kubectl the server validates fields).

mod access;
mod apply;
mod control;
mod convert;
mod discovery;
mod error;
mod faults;
mod handlers;
mod http;
mod managed_fields;
mod meta;
mod negotiate;
mod openapi;
mod patch;
mod protobuf;
mod resources;
mod schema;
mod selector;
mod store;
mod table;
mod tls;
mod watch;

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::{net::TcpListener, sync::watch as signal, task::JoinHandle};

pub use self::access::AccessRule;
pub use self::faults::{AuditEntry, Count, Counts, Fault, FaultKind, FaultRates, RateTally, Verb};
pub use self::tls::write_kubeconfig;
use self::{faults::Faults, store::Store, tls::ServingCert};

/// Why the server could not start (or a client could not be built for it).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("failed to bind 127.0.0.1:{port}")]
    Bind {
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("I/O error")]
    Io(#[from] std::io::Error),
    #[error("failed to generate the test CA or serving certificate")]
    Certificate(#[from] rcgen::Error),
    #[error("failed to configure TLS")]
    Tls(#[from] rustls::Error),
    #[error("failed to write the kubeconfig: {0}")]
    Kubeconfig(String),
    #[error("invalid server URL")]
    Url(#[from] ::http::uri::InvalidUri),
    #[error("failed to build a kube client")]
    Client(#[from] kube::Error),
}

/// How clients authenticate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// Every request is allowed.
    None,
    /// Requests must carry `Authorization: Bearer <token>`; the kubeconfig has it.
    Token(String),
}

#[derive(Debug, Clone)]
pub struct Options {
    /// Port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// HTTPS with a generated CA (the default), or plain HTTP.
    pub tls: bool,
    /// Defaults to a random bearer token.
    pub auth: Auth,
    /// Where to write the kubeconfig; by default a temporary directory the server owns.
    pub kubeconfig: Option<PathBuf>,
    /// The namespace of the kubeconfig's context (and of [`TestServer::client`]).
    pub namespace: String,
    /// How many changes watches can resume from; older resourceVersions get 410 Gone.
    pub history_limit: usize,
    /// How many changes a watch may fall behind its client before it is closed.
    pub watch_buffer: usize,
    /// How often watches with `allowWatchBookmarks=true` get a BOOKMARK.
    pub bookmark_interval: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            port: 0,
            tls: true,
            auth: Auth::Token(meta::random_token()),
            kubeconfig: None,
            namespace: "default".into(),
            history_limit: 10_000,
            watch_buffer: 16 * 1024,
            bookmark_interval: Duration::from_secs(1),
        }
    }
}

/// State the HTTP handlers share.
pub(crate) struct Shared {
    store: Mutex<Store>,
    faults: Mutex<Faults>,
    /// Bumped to end every open watch.
    closer: signal::Sender<u64>,
    token: Option<String>,
    /// Added users, by bearer token.
    users: Mutex<std::collections::BTreeMap<String, String>>,
    /// `host:port`, for `/api`'s serverAddressByClientCIDRs.
    address: String,
    bookmark_interval: Duration,
    /// What SubjectAccessReviews allow (`TestServer::allow_access`).
    access: Mutex<Vec<AccessRule>>,
    /// Every SubjectAccessReview answered, with its answer (`TestServer::access_reviews`).
    reviews: Mutex<Vec<serde_json::Value>>,
}

impl Shared {
    fn close_watches(&self) {
        self.closer.send_modify(|epoch| *epoch += 1);
    }
}

/// A running server; dropping it stops it.
pub struct TestServer {
    shared: Arc<Shared>,
    url: String,
    kubeconfig: PathBuf,
    ca_pem: Option<String>,
    token: Option<String>,
    namespace: String,
    shutdown: signal::Sender<bool>,
    task: Option<JoinHandle<()>>,
    /// The periodic watch drop, when on.
    watch_dropper: Mutex<Option<JoinHandle<()>>>,
    _dir: Option<tempfile::TempDir>,
}

impl TestServer {
    /// Binds, writes the kubeconfig and starts serving on the current tokio runtime.
    pub async fn start(options: Options) -> Result<TestServer, Error> {
        // kube, and anything else using rustls here, runs on ring; a second install is harmless.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let addr = SocketAddr::from(([127, 0, 0, 1], options.port));
        let listener = TcpListener::bind(addr).await.map_err(|source| Error::Bind {
            port: options.port,
            source,
        })?;
        let address = listener.local_addr()?.to_string();
        let (url, ca_pem, acceptor) = if options.tls {
            let cert = ServingCert::generate()?;
            (
                format!("https://{address}"),
                Some(cert.ca_pem.clone()),
                Some(cert.acceptor()?),
            )
        } else {
            (format!("http://{address}"), None, None)
        };
        let token = match options.auth {
            Auth::None => None,
            Auth::Token(token) => Some(token),
        };
        let (dir, kubeconfig) = match options.kubeconfig {
            // Absolute, so the printed KUBECONFIG= line works from any directory.
            Some(path) => (None, std::path::absolute(path)?),
            None => {
                let dir = tempfile::tempdir()?;
                let path = dir.path().join("kubeconfig");
                (Some(dir), path)
            }
        };
        tls::write_kubeconfig(
            &kubeconfig,
            &url,
            ca_pem.as_deref(),
            token.as_deref(),
            &options.namespace,
        )?;

        let shared = Arc::new(Shared {
            store: Mutex::new(Store::new(options.history_limit, options.watch_buffer)),
            faults: Mutex::new(Faults::default()),
            closer: signal::channel(0).0,
            token: token.clone(),
            users: Default::default(),
            address,
            bookmark_interval: options.bookmark_interval,
            access: Mutex::default(),
            reviews: Mutex::default(),
        });
        let (shutdown, stopped) = signal::channel(false);
        let app = http::router(Arc::clone(&shared));
        let task = tokio::spawn(http::accept_loop(listener, acceptor, app, stopped));
        tracing::info!(%url, kubeconfig = %kubeconfig.display(), "kube-testserver listening");
        Ok(TestServer {
            shared,
            url,
            kubeconfig,
            ca_pem,
            token,
            namespace: options.namespace,
            shutdown,
            task: Some(task),
            watch_dropper: Mutex::new(None),
            _dir: dir,
        })
    }

    /// `https://127.0.0.1:PORT` (or `http://`).
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The CA that signed the serving certificate, in PEM (None over plain HTTP).
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// The bearer token clients must send (None without auth).
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// A client for this server, configured as the kubeconfig describes.
    pub fn client(&self) -> Result<kube::Client, Error> {
        Ok(kube::Client::try_from(self.config()?)?)
    }

    /// The client configuration the kubeconfig describes, to adjust before building a client.
    pub fn config(&self) -> Result<kube::Config, Error> {
        let mut config = kube::Config::new(self.url.parse()?);
        config.default_namespace = self.namespace.clone();
        if let Some(ca) = &self.ca_pem {
            let der = rustls::pki_types::pem::PemObject::from_pem_slice(ca.as_bytes())
                .map(|c: rustls::pki_types::CertificateDer<'static>| c.to_vec())
                .map_err(|e| Error::Kubeconfig(format!("generated CA is not valid PEM: {e}")))?;
            config.root_cert = Some(vec![der]);
        }
        config.auth_info.token = self.token.clone().map(Into::into);
        Ok(config)
    }

    /// Adds a user with a bearer token of its own and writes a kubeconfig for it to `path`.
    /// The server logs each of that user's requests (see [`TestServer::audit`]), so a test can
    /// tell apart several clients, e.g. manager replicas, as kube-apiserver's audit log does.
    pub fn add_user(&self, name: &str, path: &Path) -> Result<(), Error> {
        let token = meta::random_token();
        tls::write_kubeconfig(
            path,
            &self.url,
            self.ca_pem.as_deref(),
            Some(&token),
            &self.namespace,
        )?;
        self.shared
            .users
            .lock()
            .expect("users lock")
            .insert(token, name.into());
        Ok(())
    }

    /// Grants what `rule` describes to SubjectAccessReviews from now on; a review no rule
    /// grants is answered `allowed: false`.
    pub fn allow_access(&self, rule: AccessRule) {
        self.shared.access.lock().expect("access lock").push(rule);
    }

    /// Every SubjectAccessReview answered so far, in order, as answered (spec and status).
    pub fn access_reviews(&self) -> Vec<serde_json::Value> {
        self.shared.reviews.lock().expect("reviews lock").clone()
    }

    /// Forgets every [`AccessRule`]: all reviews are denied again.
    pub fn clear_access(&self) {
        self.shared.access.lock().expect("access lock").clear();
    }

    /// Every request of the added users so far, in the order received.
    pub fn audit(&self) -> Vec<AuditEntry> {
        self.shared.faults.lock().expect("faults lock").audit.clone()
    }

    /// Requests served since start or the last [`TestServer::reset_counts`].
    pub fn counts(&self) -> Counts {
        self.shared.faults.lock().expect("faults lock").counts.clone()
    }

    /// Requests with `verb` for `resource` (plural, `/status` for the subresource) in
    /// `namespace` since start, only those for the object `name` when given; not reset by
    /// [`TestServer::reset_counts`].
    pub fn count_in(&self, namespace: &str, verb: Verb, resource: &str, name: Option<&str>) -> u64 {
        self.shared
            .faults
            .lock()
            .expect("faults lock")
            .count_in(namespace, verb, resource, name)
    }

    pub fn reset_counts(&self) {
        self.shared.faults.lock().expect("faults lock").counts = Counts::default();
    }

    /// Makes the next matching requests fail (see [`Fault`]).
    pub fn inject(&self, fault: Fault) {
        self.shared.faults.lock().expect("faults lock").inject(fault);
    }

    pub fn clear_faults(&self) {
        self.shared.faults.lock().expect("faults lock").clear();
    }

    /// Fails a share of the writes from now on (see [`FaultRates`]); None turns it off.
    pub fn set_fault_rates(&self, rates: Option<FaultRates>) {
        self.shared.faults.lock().expect("faults lock").set_rates(rates);
    }

    /// What the rate-based faults did since they were set.
    pub fn rate_tally(&self) -> RateTally {
        self.shared.faults.lock().expect("faults lock").rate_tally
    }

    /// Ends every open watch every `period` from now on (None stops it), as a flaky load
    /// balancer or an API server restart would; clients resume from their last resourceVersion.
    pub fn drop_watches_every(&self, period: Option<Duration>) {
        let task = period.map(|period| {
            let shared = Arc::downgrade(&self.shared);
            tokio::spawn(async move {
                let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
                loop {
                    ticker.tick().await;
                    match shared.upgrade() {
                        Some(shared) => shared.close_watches(),
                        None => return,
                    }
                }
            })
        });
        let mut dropper = self.watch_dropper.lock().expect("dropper lock");
        if let Some(old) = std::mem::replace(&mut *dropper, task) {
            old.abort();
        }
    }

    /// How many times every open watch was ended ([`TestServer::close_watches`] and the
    /// periodic drop).
    pub fn watch_closes(&self) -> u64 {
        *self.shared.closer.borrow()
    }

    /// Delays every API request by `latency` (zero turns it off).
    pub fn set_latency(&self, latency: Duration) {
        self.shared.faults.lock().expect("faults lock").latency = latency;
    }

    /// Ends every open watch; clients see their stream close and re-watch.
    pub fn close_watches(&self) {
        self.shared.close_watches();
    }

    /// Forgets watch history, so a watch resuming from any older resourceVersion gets
    /// 410 Gone and (with kube's watcher) relists.
    pub fn compact_history(&self) {
        self.shared.store.lock().expect("store lock").compact();
    }

    /// Creates `objects` of `group/version/plural` in the store directly: each goes through
    /// the same rules as a POST (validation, defaulting, a resourceVersion, a watch event) but
    /// without HTTP, so a scenario can have tens of thousands of objects present in seconds.
    /// Each object names its own namespace. The lock is released every 500 objects so the
    /// server keeps serving watches meanwhile.
    pub fn create_all(
        &self,
        group: &str,
        version: &str,
        plural: &str,
        objects: impl IntoIterator<Item = serde_json::Value>,
    ) -> Result<usize, String> {
        let rt = self
            .shared
            .store
            .lock()
            .expect("store lock")
            .registry
            .lookup(group, version, plural)
            .ok_or_else(|| format!("{group}/{version} {plural} is not served"))?;
        let mut objects = objects.into_iter().peekable();
        let mut created = 0;
        while objects.peek().is_some() {
            let mut store = self.shared.store.lock().expect("store lock");
            for obj in objects.by_ref().take(500) {
                let ns = meta::meta_str(&obj, "namespace").map(str::to_string);
                store
                    .create(&rt, ns.as_deref(), obj, &store::WriteOptions::default())
                    .map_err(|e| e.to_string())?;
                created += 1;
            }
        }
        Ok(created)
    }

    /// The latest resourceVersion handed out.
    pub fn resource_version(&self) -> u64 {
        self.shared.store.lock().expect("store lock").resource_version()
    }

    /// Stops accepting, drops open connections and ends watches.
    pub async fn shutdown(mut self) {
        self.stop();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    fn stop(&self) {
        if let Some(dropper) = self.watch_dropper.lock().expect("dropper lock").take() {
            dropper.abort();
        }
        let _ = self.shutdown.send(true);
        self.shared.close_watches();
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop();
    }
}
