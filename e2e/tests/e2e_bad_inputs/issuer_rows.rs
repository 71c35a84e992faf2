//! Rows for the credential Secret and the Issuer spec.
//!
//! Each row gets its own namespace, its own CA (simple-cfssl with a key of its own, so that a
//! leak of one row's key is told apart from every other's) and one issuer, and all rows run at
//! once against one manager and one API server. A row's outcome is what a user sees: the
//! issuer's `Ready` condition (status, reason, a fragment of the message in the manager's own
//! words), whether it keeps being retried, whether its CA saw any request, the Event it got and,
//! for some rows, how a CertificateRequest to it ends. At the end no row's secret material (its
//! hex key, `additional_data`, URL password) may show in any issuer or request status, any
//! Event or the manager's log.

use std::time::{Duration, Instant};

use base64::Engine as _;
use e2e::harness::objects::{self, Kind};
use e2e::harness::redirector::{Redirector, via};
use e2e::harness::{Ca, Cluster, Csr, Manager, ManagerOptions};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, PostParams};
use kube_testserver::{Fault, FaultKind, Verb};
use serde_json::json;

use cfssl_issuer::api::certmanager::CertificateRequest;
use cfssl_issuer::api::{AnyIssuer as _, ClusterIssuer, Issuer, READY};

const GROUP: &str = "cfssl-issuer.wikimedia.org";
/// How long one row may take to show its outcome.
const ROW_WAIT: Duration = Duration::from_secs(40);
/// How long a failing row has to be checked again by itself (backoff starts at 1 s, doubling).
const RETRY_WAIT: Duration = Duration::from_secs(12);
/// The whole table.
const TOTAL: Duration = Duration::from_secs(110);
/// A URL password; rows that use one must never see it shown.
const PASSWORD: &str = "pw-catalogue-7f3a";
/// The table's manager only lets namespaced Issuers reach these CA hosts: every row's CA is on
/// 127.0.0.1, and `localhost` (the same CA by a name) is not on it, since names are never
/// resolved.
const ALLOWED_HOSTS: &str = "127.0.0.0/8,*.svc.cluster.local";

/// How the row's CA serves.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Serve {
    Https,
    /// Plain HTTP (in-process only).
    Http,
}

/// What happens after the first outcome.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Then {
    Nothing,
    /// Wait for Ready, then delete the Secret: the outcome is what follows.
    DeleteSecretAfterReady,
}

/// After the outcome: checked again with backoff by itself, or healthy (next look at the
/// health-check interval).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Follow {
    Retried,
    Healthy,
}

/// What the row writes: the Secret and the issuer spec. Starts as a working issuer of the row's
/// kind pointing at the row's CA; each row's `setup` breaks one thing.
struct Input {
    /// The Secret's entries; `None`: no Secret.
    secret: Option<Vec<(&'static str, Vec<u8>)>>,
    secret_type: Option<&'static str>,
    /// A ClusterIssuer's Secret written to the row's namespace instead of the cluster resource
    /// namespace.
    secret_in_row_namespace: bool,
    url: String,
    label: String,
    profile: String,
    /// `spec.caBundle` (raw bytes, base64-encoded when written).
    ca_bundle: Option<Vec<u8>>,
    /// The API server answers the manager's GET of the Secret 403 (in-process only).
    forbidden: bool,
    then: Then,
    /// Secret text this row wrote that must never be shown (besides the Secret's entries).
    secrets: Vec<String>,
}

/// What `setup` may use.
struct Materials<'a> {
    /// The row CA's base URL, as the manager reaches it.
    url: &'a str,
    /// The row CA's key.
    key: &'a str,
    /// TLS trust of a CA that is not this row's.
    other_tls_pem: &'a str,
    /// The base URL of the table's [`Redirector`].
    redirector: &'a str,
}

/// What the row must show.
struct Want {
    /// The kind of the row's issuer, which shows the outcome.
    on: Kind,
    ready: bool,
    reason: &'static str,
    /// In the `Ready` message; `{ns}`, `{name}` and `{system}` stand for the row's namespace,
    /// its issuer and Secret name, and the cluster resource namespace.
    fragment: &'static str,
    follow: Follow,
    /// Whether the row's CA got any HTTP request (a TLS handshake that failed is none).
    ca_saw: bool,
    /// The Event on the issuer: `(type, reason)`.
    event: (&'static str, &'static str),
    /// A CertificateRequest to the issuer, made after the outcome, ends with this reason.
    request: Option<&'static str>,
}

struct Row {
    name: &'static str,
    serve: Serve,
    setup: fn(&mut Input, &Materials),
    want: Want,
}

fn key_entry(value: impl Into<Vec<u8>>) -> Option<Vec<(&'static str, Vec<u8>)>> {
    Some(vec![("key", value.into())])
}

const fn fails(on: Kind, reason: &'static str, fragment: &'static str, ca_saw: bool) -> Want {
    Want {
        on,
        ready: false,
        reason,
        fragment,
        follow: Follow::Retried,
        ca_saw,
        event: ("Warning", reason),
        request: None,
    }
}

const fn ready(on: Kind, request: Option<&'static str>) -> Want {
    Want {
        on,
        ready: true,
        reason: "Checked",
        fragment: "the CA accepted the label, profile and key",
        follow: Follow::Healthy,
        ca_saw: true,
        event: ("Normal", "Checked"),
        request,
    }
}

use Kind::{ClusterIssuer as CI, Issuer as I};

/// The table: one input each, and its outcome.
#[rustfmt::skip]
fn rows() -> Vec<Row> {
    let https = Serve::Https;
    vec![
        // --- the credential Secret ---
        Row { name: "secret missing", serve: https,
            setup: |i, _| i.secret = None,
            want: fails(I, "SecretNotFound", "Secret {ns}/{name} not found", false) },
        Row { name: "ClusterIssuer secret in the request's namespace, not the cluster resource namespace", serve: https,
            setup: |i, _| i.secret_in_row_namespace = true,
            want: fails(CI, "SecretNotFound", "Secret {system}/{name} not found; a ClusterIssuer's Secret must be in the cluster resource namespace", false) },
        Row { name: "secret without key entry", serve: https,
            setup: |i, m| i.secret = Some(vec![("hmac", m.key.as_bytes().to_vec())]),
            want: fails(I, "InvalidCredentials", "Secret {ns}/{name} has no \"key\" entry", false) },
        Row { name: "secret entry named Key (case)", serve: https,
            setup: |i, m| i.secret = Some(vec![("Key", m.key.as_bytes().to_vec())]),
            want: fails(I, "InvalidCredentials", "Secret {ns}/{name} has no \"key\" entry", false) },
        Row { name: "secret of type kubernetes.io/tls", serve: https,
            setup: |i, m| {
                i.secret_type = Some("kubernetes.io/tls");
                i.secret = Some(vec![("tls.crt", b"not-a-cert".to_vec()), ("tls.key", m.key.as_bytes().to_vec())]);
            },
            want: fails(I, "InvalidCredentials", "Secret {ns}/{name} has no \"key\" entry", false) },
        Row { name: "empty key", serve: https,
            setup: |i, _| i.secret = key_entry(""),
            want: fails(I, "InvalidCredentials", "Secret {ns}/{name}: \"key\": the key is empty", false) },
        Row { name: "whitespace-only key", serve: https,
            setup: |i, _| i.secret = key_entry(" \n"),
            want: fails(I, "InvalidCredentials", "Secret {ns}/{name}: \"key\": the key is empty", false) },
        Row { name: "odd-length hex key", serve: https,
            setup: |i, m| i.secret = key_entry(&m.key[1..]),
            want: fails(I, "InvalidCredentials", "\"key\": the key is not hex (odd number of digits)", false) },
        Row { name: "non-hex key", serve: https,
            setup: |i, m| i.secret = key_entry(format!("zz{}", &m.key[2..])),
            want: fails(I, "InvalidCredentials", "\"key\": the key is not hex (invalid digit at position 0)", false) },
        Row { name: "key with 0x prefix", serve: https,
            setup: |i, m| i.secret = key_entry(format!("0x{}", m.key)),
            want: fails(I, "InvalidCredentials", "\"key\": the key is not hex (invalid digit at position 1)", false) },
        Row { name: "non-UTF-8 key", serve: https,
            setup: |i, m| i.secret = key_entry([&[0xff, 0xfe][..], m.key.as_bytes()].concat()),
            want: fails(I, "InvalidCredentials", "Secret {ns}/{name}: \"key\" is not text", false) },
        Row { name: "key with surrounding whitespace and newline (accepted)", serve: https,
            setup: |i, m| i.secret = key_entry(format!("  {}\n", m.key)),
            want: ready(I, Some("Issued")) },
        Row { name: "key in upper-case hex (accepted)", serve: https,
            setup: |i, m| i.secret = key_entry(m.key.to_uppercase()),
            want: ready(I, Some("Issued")) },
        Row { name: "wrong key", serve: https,
            setup: |i, _| i.secret = key_entry(fresh_key()),
            want: fails(I, "InvalidCredentials", "refused: invalid token (HTTP 400, code 1)", true) },
        Row { name: "key of another length (4 bytes)", serve: https,
            setup: |i, m| i.secret = key_entry(&m.key[..8]),
            want: fails(I, "InvalidCredentials", "refused: invalid token (HTTP 400, code 1)", true) },
        Row { name: "additional_data against a CA without it", serve: https,
            setup: |i, m| i.secret = Some(vec![("key", m.key.as_bytes().to_vec()), ("additional_data", b"ad-catalogue-5e1c".to_vec())]),
            want: fails(I, "InvalidCredentials", "invalid token (HTTP 400, code 1); the Secret also has additional_data, which only a CA configured with the same data accepts", true) },
        Row { name: "secret unreadable (403 from the API server)", serve: https,
            setup: |i, _| i.forbidden = true,
            want: Want { event: ("Warning", "Pending"), ..fails(I, "Pending", "cannot read Secret {ns}/{name}: secrets is forbidden: injected fault: the user cannot access it (HTTP 403 Forbidden)", false) } },
        Row { name: "secret deleted after Ready", serve: https,
            setup: |i, _| i.then = Then::DeleteSecretAfterReady,
            want: Want { request: Some("Pending"), ..fails(I, "SecretNotFound", "Secret {ns}/{name} not found", true) } },
        Row { name: "ClusterIssuer healthy (control)", serve: https,
            setup: |_, _| {},
            want: ready(CI, Some("Issued")) },
        Row { name: "ClusterIssuer wrong key", serve: https,
            setup: |i, _| i.secret = key_entry(fresh_key()),
            want: fails(CI, "InvalidCredentials", "refused: invalid token (HTTP 400, code 1)", true) },
        // --- the Issuer spec ---
        Row { name: "empty url", serve: https,
            setup: |i, _| i.url = String::new(),
            want: fails(I, "InvalidConfig", "no CFSSL URL given", false) },
        Row { name: "garbage url", serve: https,
            setup: |i, _| i.url = "not a url".into(),
            want: fails(I, "InvalidConfig", "invalid CFSSL URL \"not a url\": relative URL without a base", false) },
        Row { name: "url without scheme (host:port)", serve: https,
            setup: |i, m| i.url = m.url.trim_start_matches("https://").replace("127.0.0.1", "localhost"),
            want: fails(I, "InvalidConfig", "no scheme: write it as https://localhost:", false) },
        Row { name: "url without scheme (ip:port)", serve: https,
            setup: |i, m| i.url = m.url.trim_start_matches("https://").into(),
            want: fails(I, "InvalidConfig", "no scheme: write it as https://127.0.0.1:", false) },
        Row { name: "ftp:// url", serve: https,
            setup: |i, m| i.url = m.url.replace("https://", "ftp://"),
            want: fails(I, "InvalidConfig", "scheme must be http or https", false) },
        Row { name: "url with a query", serve: https,
            setup: |i, m| i.url = format!("{}/?label=x", m.url),
            want: fails(I, "InvalidConfig", "must not carry a query or fragment", false) },
        Row { name: "one bad url in a list of good ones", serve: https,
            setup: |i, m| i.url = format!("{},not a url", m.url),
            want: fails(I, "InvalidConfig", "invalid CFSSL URL \"not a url\"", false) },
        Row { name: "url with a path the CA does not serve", serve: https,
            setup: |i, m| i.url = format!("{}/cfssl", m.url),
            want: fails(I, "CAUnreachable", "HTTP 404 without a CFSSL answer: \"404 page not found\"", true) },
        Row { name: "url with a trailing slash (accepted)", serve: https,
            setup: |i, m| i.url = format!("{}/", m.url),
            want: ready(I, None) },
        Row { name: "user:password@ url (accepted, password never shown)", serve: https,
            setup: |i, m| {
                i.url = m.url.replace("https://", &format!("https://operator:{PASSWORD}@"));
                i.secrets.push(PASSWORD.into());
            },
            want: ready(I, Some("Issued")) },
        Row { name: "user:password@ url, unknown label (password never shown)", serve: https,
            setup: |i, m| {
                i.url = m.url.replace("https://", &format!("https://operator:{PASSWORD}@"));
                i.label = "nope".into();
                i.secrets.push(PASSWORD.into());
            },
            want: fails(I, "InvalidConfig", "at https://***@127.0.0.1:", true) },
        Row { name: "unknown label", serve: https,
            setup: |i, _| i.label = "nope".into(),
            want: fails(I, "InvalidConfig", "(label \"nope\") refused: bad label", true) },
        Row { name: "label in the wrong case", serve: https,
            setup: |i, _| i.label = "Intermediate1".into(),
            want: fails(I, "InvalidConfig", "(label \"Intermediate1\") refused: bad label", true) },
        Row { name: "unknown profile", serve: https,
            setup: |i, _| i.profile = "nope".into(),
            want: fails(I, "InvalidConfig", "refused: invalid profile (HTTP 400, code 1)", true) },
        Row { name: "profile without an auth key", serve: https,
            setup: |i, _| i.profile = "noauth".into(),
            want: fails(I, "InvalidConfig", "refused: authorisation required (HTTP 401, code 1)", true) },
        Row { name: "CA answers 307 to another host (not followed)", serve: Serve::Http,
            setup: |i, m| i.url = via(m.redirector, 307, m.url),
            want: fails(I, "InvalidConfig", "the CA answered 307 Temporary Redirect to host 127.0.0.1; redirects are not followed", false) },
        Row { name: "CA answers 308 to another host (not followed)", serve: Serve::Http,
            setup: |i, m| i.url = via(m.redirector, 308, m.url),
            want: fails(I, "InvalidConfig", "the CA answered 308 Permanent Redirect to host 127.0.0.1; redirects are not followed", false) },
        Row { name: "more urls than the cap (9)", serve: https,
            setup: |i, m| i.url = [m.url; 9].join(","),
            want: fails(I, "InvalidConfig", "9 CFSSL URLs given; at most 8 are allowed", false) },
        Row { name: "Issuer at a host not on the namespaced allow-list (no request made)", serve: Serve::Http,
            setup: |i, m| i.url = m.url.replace("127.0.0.1", "localhost"),
            want: fails(I, "InvalidConfig", "the CA host localhost is not on the manager's allow-list for namespaced Issuers; no request was made", false) },
        Row { name: "ClusterIssuer at a host not on the namespaced allow-list (accepted)", serve: https,
            setup: |i, m| i.url = m.url.replace("127.0.0.1", "localhost"),
            want: ready(CI, None) },
        Row { name: "dead first url (fails over: Ready)", serve: https,
            setup: |i, m| i.url = format!("https://127.0.0.1:{},{}", dead_port(), m.url),
            want: ready(I, Some("Issued")) },
        Row { name: "all urls dead", serve: https,
            setup: |i, _| i.url = format!("https://127.0.0.1:{},https://127.0.0.1:{}", dead_port(), dead_port()),
            want: fails(I, "CAUnreachable", "cannot reach the CA", false) },
        Row { name: "caBundle not PEM", serve: https,
            setup: |i, _| i.ca_bundle = Some(b"this is not a certificate".to_vec()),
            want: fails(I, "TLSError", "invalid CA bundle", false) },
        Row { name: "caBundle of another CA", serve: https,
            setup: |i, m| i.ca_bundle = Some(m.other_tls_pem.as_bytes().to_vec()),
            want: fails(I, "TLSError", "TLS failure: client error (Connect): invalid peer certificate", false) },
        Row { name: "http:// url (accepted, Warning: not authenticated or encrypted)", serve: Serve::Http,
            setup: |i, _| i.ca_bundle = None,
            want: Want {
                fragment: "is plain http://: the connection is not authenticated or encrypted",
                event: ("Warning", "InsecureTransport"),
                ..ready(I, Some("Issued"))
            } },
    ]
}

/// A random 16-byte key, as hex.
fn fresh_key() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("random bytes");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A loopback port nothing listens on.
fn dead_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// The row's CA: a simple-cfssl of its own in this process, or the cluster's.
struct RowCa {
    url: String,
    key: String,
    tls_pem: Option<String>,
    running: Option<simple_cfssl::Running>,
}

impl RowCa {
    async fn start(serve: Serve, external: bool) -> anyhow::Result<RowCa> {
        if external {
            let ca = Ca::simple(true).await?;
            return Ok(RowCa {
                url: ca.url.clone(),
                key: ca.key_hex.clone(),
                tls_pem: ca.tls_ca_pem.clone(),
                running: None,
            });
        }
        let key = fresh_key();
        let mut config = simple_cfssl::Config::test_default(&key);
        config.tls = serve == Serve::Https;
        let running = simple_cfssl::spawn(config).await?;
        Ok(RowCa {
            url: running.url.clone(),
            key,
            tls_pem: running.tls_ca_pem.clone(),
            running: Some(running),
        })
    }

    /// Requests the CA received, when it runs here.
    fn requests(&self) -> Option<u64> {
        self.running.as_ref().map(simple_cfssl::Running::request_count)
    }
}

/// Everything the rows share.
struct Table {
    cluster: Cluster,
    manager: Option<Manager>,
    system: String,
    other_tls_pem: String,
    /// Answers every request with the redirect its path asks for (see [`via`]).
    redirector: Redirector,
}

/// What a row did, for the report and the leak check.
struct Outcome {
    name: &'static str,
    kind: Kind,
    namespace: String,
    issuer: String,
    /// Text that must never be shown.
    secrets: Vec<String>,
    /// Why the row failed; empty when it passed.
    failures: Vec<String>,
    skipped: Option<&'static str>,
    shown: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalogue_issuer_rows() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let system = std::env::var("E2E_SYSTEM_NAMESPACE").unwrap_or_else(|_| "cfssl-issuer-system".into());
    cluster.ensure_namespace(&system).await?;
    let manager = match cluster.is_external() {
        true => None,
        // Debug lines too: every line is searched for secrets at the end.
        false => {
            let options = ManagerOptions::new(cluster.manager_kubeconfig(), &system)
                .env("RUST_LOG", "info,cfssl_issuer=debug")
                .env("NAMESPACED_ISSUER_ALLOWED_HOSTS", ALLOWED_HOSTS);
            Some(Manager::start(options).await?)
        }
    };
    // The TLS CA of a CA no row uses: what "a caBundle of another CA" trusts.
    let other = simple_cfssl::spawn(simple_cfssl::Config {
        tls: true,
        ..simple_cfssl::Config::test_default(&fresh_key())
    })
    .await?;
    let table = Table {
        cluster,
        manager,
        system,
        other_tls_pem: other.tls_ca_pem.clone().expect("TLS on"),
        redirector: Redirector::start().await?,
    };
    let started = Instant::now();
    let rows = rows();
    let runs = rows.iter().map(|row| run_row(&table, row));
    let mut outcomes = tokio::time::timeout(TOTAL, futures::future::join_all(runs))
        .await
        .map_err(|_| anyhow::anyhow!("the issuer rows took over {TOTAL:?}"))?;
    check_events(&table, &rows, &mut outcomes).await?;
    check_nothing_secret_shown(&table, &mut outcomes).await?;

    let ran: Vec<&Outcome> = outcomes.iter().filter(|o| o.skipped.is_none()).collect();
    let passed = ran.iter().filter(|o| o.failures.is_empty()).count();
    println!(
        "catalogue issuer rows: {} rows, {passed} passed ({} skipped, {:.1} s)",
        ran.len(),
        outcomes.len() - ran.len(),
        started.elapsed().as_secs_f64()
    );
    for o in &outcomes {
        let verdict = match (o.skipped, o.failures.is_empty()) {
            (Some(_), _) => "skip",
            (None, true) => "ok",
            (None, false) => "FAIL",
        };
        println!("  {verdict:4} {}: {}", o.name, o.skipped.unwrap_or(&o.shown));
    }
    let failing: Vec<String> = outcomes
        .iter()
        .filter(|o| !o.failures.is_empty())
        .map(|o| format!("{}:\n    {}", o.name, o.failures.join("\n    ")))
        .collect();
    if !failing.is_empty() {
        let log = table.manager.as_ref().map(Manager::log).unwrap_or_default();
        anyhow::bail!(
            "{} of {} issuer rows failed:\n{}\nmanager log (tail):\n{}",
            failing.len(),
            ran.len(),
            failing.join("\n"),
            tail(&log, 60)
        );
    }
    Ok(())
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Sets up one row and checks its outcome; never returns early with an error, so that every
/// row is reported.
async fn run_row(table: &Table, row: &Row) -> Outcome {
    let mut outcome = Outcome {
        name: row.name,
        kind: row.want.on,
        namespace: String::new(),
        issuer: String::new(),
        secrets: Vec::new(),
        failures: Vec::new(),
        skipped: None,
        shown: String::new(),
    };
    if table.cluster.is_external() && row.serve == Serve::Http {
        outcome.skipped = Some("skipped against a deployed manager: needs this process's CA and manager");
        return outcome;
    }
    if table.cluster.server().is_none() && row.setup_is_forbidden() {
        outcome.skipped = Some("skipped: needs the in-process API server's injected 403");
        return outcome;
    }
    if let Err(err) = try_row(table, row, &mut outcome).await {
        outcome.failures.push(format!("{err:#}"));
    }
    outcome
}

impl Row {
    fn setup_is_forbidden(&self) -> bool {
        let mut input = blank_input();
        let materials = Materials {
            url: "https://127.0.0.1:1",
            key: e2e::harness::KEY_HEX,
            other_tls_pem: "",
            redirector: "http://127.0.0.1:1",
        };
        (self.setup)(&mut input, &materials);
        input.forbidden
    }
}

fn blank_input() -> Input {
    Input {
        secret: None,
        secret_type: None,
        secret_in_row_namespace: false,
        url: String::new(),
        label: "intermediate1".into(),
        profile: "server".into(),
        ca_bundle: None,
        forbidden: false,
        then: Then::Nothing,
        secrets: Vec::new(),
    }
}

async fn try_row(table: &Table, row: &Row, outcome: &mut Outcome) -> anyhow::Result<()> {
    let cluster = &table.cluster;
    let client = &cluster.client;
    let ca = RowCa::start(row.serve, cluster.is_external()).await?;
    let ns = cluster.namespace("cat").await?;
    let name = e2e::harness::unique("row");
    outcome.namespace = ns.clone();
    outcome.issuer = name.clone();
    let mut input = Input {
        secret: key_entry(ca.key.as_bytes()),
        url: ca.url.clone(),
        ca_bundle: ca.tls_pem.clone().map(String::into_bytes),
        ..blank_input()
    };
    let materials = Materials {
        url: &ca.url,
        key: &ca.key,
        other_tls_pem: &table.other_tls_pem,
        redirector: &table.redirector.url,
    };
    (row.setup)(&mut input, &materials);
    outcome.secrets = secret_texts(&input, &ca.key);

    let kind = row.want.on;
    let secret_ns = match kind {
        Kind::ClusterIssuer if !input.secret_in_row_namespace => table.system.clone(),
        _ => ns.clone(),
    };
    if input.forbidden {
        let server = cluster.server().expect("in-process");
        let denied = Fault::new(FaultKind::Forbidden)
            .verb(Verb::Get)
            .resource("secrets")
            .namespace(&ns)
            .times(u32::MAX);
        server.inject(denied);
    }
    if let Some(entries) = &input.secret {
        put_secret(client, &secret_ns, &name, input.secret_type, entries).await?;
    }
    let mut spec = json!({
        "url": input.url, "label": input.label, "profile": input.profile, "authSecretName": name,
    });
    if let Some(bundle) = &input.ca_bundle {
        spec["caBundle"] = base64::engine::general_purpose::STANDARD.encode(bundle).into();
    }
    let issuer_ns = if kind == Kind::Issuer { ns.as_str() } else { "" };
    objects::create_issuer(client, kind, issuer_ns, &name, spec).await?;
    if kind == Kind::ClusterIssuer {
        cluster.track_cluster_issuer(&name);
    }
    if input.then == Then::DeleteSecretAfterReady {
        objects::wait_issuer_reason(client, kind, issuer_ns, &name, "Checked", ROW_WAIT).await?;
        Api::<Secret>::namespaced(client.clone(), &secret_ns)
            .delete(&name, &DeleteParams::default())
            .await?;
    }

    let want = &row.want;
    let ready = wait_ready(client, kind, issuer_ns, &name, want.reason).await;
    let (status, reason, message) = match ready {
        Ok(found) => found,
        Err(last) => anyhow::bail!(
            "Ready reason {} not seen within {ROW_WAIT:?}; last: {last}",
            want.reason
        ),
    };
    outcome.shown = format!("{} Ready={status} {reason}: {message}", kind.as_str());
    let fragment = want
        .fragment
        .replace("{ns}", &ns)
        .replace("{name}", &name)
        .replace("{system}", &table.system);
    let want_status = if want.ready { "True" } else { "False" };
    if status != want_status {
        outcome
            .failures
            .push(format!("status {status}, want {want_status}"));
    }
    if !message.contains(&fragment) {
        outcome
            .failures
            .push(format!("message {message:?} lacks {fragment:?}"));
    }
    if let Some(count) = ca.requests()
        && want.ca_saw != (count > 0)
    {
        outcome
            .failures
            .push(format!("the CA got {count} requests; want some: {}", want.ca_saw));
    }
    // Where the manager reads the Secret from, whatever namespace the row wrote it to.
    let read_ns = match kind {
        Kind::ClusterIssuer => &table.system,
        Kind::Issuer => &ns,
    };
    check_follow(table, want, read_ns, &name, outcome).await;
    if let Some(reason) = want.request {
        check_request(client, &ns, kind, &name, reason, outcome).await?;
    }
    Ok(())
}

/// Texts of the row that must never be shown: the CA's key and every Secret entry (or the
/// runs of text in it, for bytes that are not UTF-8), and the row's own extras.
fn secret_texts(input: &Input, ca_key: &str) -> Vec<String> {
    let mut texts = vec![ca_key.to_string()];
    texts.extend(input.secrets.iter().cloned());
    for (entry, value) in input.secret.iter().flatten() {
        if *entry == "tls.crt" {
            continue;
        }
        let text = String::from_utf8_lossy(value);
        texts.extend(
            text.split('\u{fffd}')
                .map(str::trim)
                .filter(|t| t.len() >= 6)
                .map(str::to_string),
        );
    }
    texts.sort();
    texts.dedup();
    texts
}

async fn put_secret(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    type_: Option<&str>,
    entries: &[(&str, Vec<u8>)],
) -> anyhow::Result<()> {
    let data: serde_json::Map<String, serde_json::Value> = entries
        .iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                base64::engine::general_purpose::STANDARD.encode(v).into(),
            )
        })
        .collect();
    let mut secret = json!({"metadata": {"name": name, "namespace": namespace}, "data": data});
    if let Some(type_) = type_ {
        secret["type"] = type_.into();
    }
    let secret: Secret = serde_json::from_value(secret)?;
    Api::<Secret>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &secret)
        .await?;
    Ok(())
}

/// The issuer's Ready `(status, reason, message)` once its reason is `reason`; else the last
/// one seen, as text.
async fn wait_ready(
    client: &kube::Client,
    kind: Kind,
    namespace: &str,
    name: &str,
    reason: &str,
) -> Result<(String, String, String), String> {
    let deadline = Instant::now() + ROW_WAIT;
    let mut last = String::from("no Ready condition");
    loop {
        if let Some((status, got, message)) = ready_of(client, kind, namespace, name).await {
            if got == reason {
                return Ok((status, got, message));
            }
            last = format!("{status} {got}: {message}");
        }
        if Instant::now() >= deadline {
            return Err(last);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn ready_of(
    client: &kube::Client,
    kind: Kind,
    namespace: &str,
    name: &str,
) -> Option<(String, String, String)> {
    let conditions = match kind {
        Kind::Issuer => Api::<Issuer>::namespaced(client.clone(), namespace)
            .get(name)
            .await
            .ok()?
            .conditions()
            .to_vec(),
        Kind::ClusterIssuer => Api::<ClusterIssuer>::all(client.clone())
            .get(name)
            .await
            .ok()?
            .conditions()
            .to_vec(),
    };
    let ready = conditions.into_iter().find(|c| c.type_ == READY)?;
    Some((ready.status.as_str().to_string(), ready.reason, ready.message))
}

/// A failing row is checked again by itself, with nothing changed: each check starts by
/// reading the issuer's Secret (`namespace/name`), so the API server sees another GET of it
/// within [`RETRY_WAIT`] (backoff starts at 1 s).
async fn check_follow(table: &Table, want: &Want, namespace: &str, name: &str, outcome: &mut Outcome) {
    if want.follow != Follow::Retried {
        return;
    }
    let Some(server) = table.cluster.server() else {
        return; // a real cluster does not count requests
    };
    let reads = || server.count_in(namespace, Verb::Get, "secrets", Some(name));
    let before = reads();
    let deadline = Instant::now() + RETRY_WAIT;
    while Instant::now() < deadline {
        if reads() > before {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    outcome.failures.push(format!(
        "not retried: no new read of Secret {namespace}/{name} within {RETRY_WAIT:?}"
    ));
}

/// A request to the row's issuer, made after its outcome, ends with `reason`.
async fn check_request(
    client: &kube::Client,
    namespace: &str,
    kind: Kind,
    issuer: &str,
    reason: &str,
    outcome: &mut Outcome,
) -> anyhow::Result<()> {
    let csr = Csr::new(&format!("row.{namespace}.svc"))?;
    objects::create_request(client, namespace, "probe", GROUP, kind.as_str(), issuer, &csr.pem).await?;
    objects::approve(client, namespace, "probe").await?;
    match objects::wait_request_reason(client, namespace, "probe", reason, ROW_WAIT).await {
        Ok(request) => {
            let message = request
                .condition(READY)
                .map(|c| c.message.clone())
                .unwrap_or_default();
            outcome.shown.push_str(&format!("; request {reason}: {message}"));
            let signed = request.status.and_then(|s| s.certificate).is_some();
            if signed != (reason == "Issued") {
                outcome
                    .failures
                    .push(format!("request {reason} but signed: {signed}"));
            }
        }
        Err(err) => outcome.failures.push(format!("request: {err:#}")),
    }
    Ok(())
}

/// Each row's issuer got its Event (all namespaces are listed: a ClusterIssuer's Events go to
/// `default`, as kube's Recorder does).
async fn check_events(table: &Table, rows: &[Row], outcomes: &mut [Outcome]) -> anyhow::Result<()> {
    let events = Api::<Event>::all(table.cluster.client.clone());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let all = events.list(&Default::default()).await?.items;
        let mut missing = Vec::new();
        for (row, outcome) in rows.iter().zip(outcomes.iter()) {
            if outcome.skipped.is_some() || outcome.issuer.is_empty() {
                continue;
            }
            let (type_, reason) = row.want.event;
            let found = all.iter().any(|e| {
                let regarding = e.regarding.as_ref();
                regarding.and_then(|r| r.name.as_deref()) == Some(outcome.issuer.as_str())
                    && regarding.and_then(|r| r.kind.as_deref()) == Some(outcome.kind.as_str())
                    && e.type_.as_deref() == Some(type_)
                    && e.reason.as_deref() == Some(reason)
            });
            if !found {
                missing.push((outcome.name, type_, reason));
            }
        }
        if missing.is_empty() || Instant::now() >= deadline {
            for (name, type_, reason) in missing {
                let outcome = outcomes.iter_mut().find(|o| o.name == name).expect("row");
                outcome
                    .failures
                    .push(format!("no {type_} Event {reason} on the issuer"));
            }
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// No row's secret text in any issuer or request status, any Event or the manager's log.
async fn check_nothing_secret_shown(table: &Table, outcomes: &mut [Outcome]) -> anyhow::Result<()> {
    let client = &table.cluster.client;
    let issuers = Api::<Issuer>::all(client.clone())
        .list(&Default::default())
        .await?;
    let cluster_issuers = Api::<ClusterIssuer>::all(client.clone())
        .list(&Default::default())
        .await?;
    let requests = Api::<CertificateRequest>::all(client.clone())
        .list(&Default::default())
        .await?;
    let events = Api::<Event>::all(client.clone())
        .list(&Default::default())
        .await?;
    let mut shown = vec![
        (
            "issuer status",
            serde_json::to_string(&issuers.items.iter().map(|i| &i.status).collect::<Vec<_>>())?,
        ),
        (
            "ClusterIssuer status",
            serde_json::to_string(
                &cluster_issuers
                    .items
                    .iter()
                    .map(|i| &i.status)
                    .collect::<Vec<_>>(),
            )?,
        ),
        (
            "request status",
            serde_json::to_string(&requests.items.iter().map(|r| &r.status).collect::<Vec<_>>())?,
        ),
        ("Events", serde_json::to_string(&events.items)?),
    ];
    if let Some(manager) = &table.manager {
        shown.push(("manager log", manager.log()));
    }
    for outcome in outcomes.iter_mut() {
        for secret in &outcome.secrets {
            for (place, text) in &shown {
                if text.contains(secret.as_str()) {
                    outcome
                        .failures
                        .push(format!("secret {secret:?} shown in the {place}"));
                }
            }
        }
    }
    Ok(())
}
