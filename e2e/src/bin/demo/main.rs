//! `make demo`: cfssl-issuer at work with no cluster. Starts the in-process API server,
//! simple-cfssl over TLS and the real manager binary, applies `config/samples/` as a user
//! would (server-side apply), approves the requests as cert-manager's approver would, and
//! prints what the issuers and requests became. The manager runs in standalone mode
//! (`--certificate-controllers`), so the sample Certificates become Secrets with no cert-manager,
//! and one of them renews; a Kubernetes CertificateSigningRequest for the sample ClusterIssuer
//! is signed too. Ctrl-C at any point stops everything.

mod csr;
mod standalone;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{self, Scope};
use serde_json::{Value, json};

use cfssl_issuer::api::certmanager::CertificateRequest;
use cfssl_issuer::api::{ClusterIssuer, Condition, Issuer, READY};
use e2e::harness::{Ca, Cluster, Manager, ManagerOptions, eventually, parse_leaf, scrape};

/// The samples, in the order a user applies them.
const SAMPLES: [&str; 6] = [
    "namespace.yaml",
    "issuer.yaml",
    "clusterissuer.yaml",
    "bundleissuer.yaml",
    "certificaterequests.yaml",
    "certificates.yaml",
];
/// Where the samples expect simple-cfssl: its Service in a cluster.
const IN_CLUSTER_CA: &str = "https://simple-cfssl.simple-cfssl.svc:8888";
/// The manager's cluster resource namespace, as config/default installs it.
const SYSTEM_NAMESPACE: &str = "cfssl-issuer-system";
const FIELD_MANAGER: &str = "cfssl-issuer-demo";
const WAIT: Duration = Duration::from_secs(60);

#[derive(Parser)]
#[command(
    name = "demo",
    about = "cfssl-issuer with no cluster: API server, CA, manager, config/samples"
)]
struct Args {
    /// Keep everything running after the report, for kubectl, until Ctrl-C.
    #[arg(long)]
    hold: bool,
}

/// What is running; `stop` ends it, and dropping it kills whatever is left.
#[derive(Default)]
struct Demo {
    cluster: Option<Cluster>,
    ca: Option<Ca>,
    manager: Option<Manager>,
    _dir: Option<tempfile::TempDir>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let mut demo = Demo::default();
    let outcome = tokio::select! {
        outcome = demo.run(args.hold) => outcome.map(Some),
        () = interrupted() => {
            println!("\ninterrupted");
            Ok(None)
        }
    };
    demo.stop().await;
    match outcome {
        Ok(Some(true)) => ExitCode::SUCCESS,
        Ok(Some(false)) => ExitCode::FAILURE,
        // As a shell reports a SIGINT.
        Ok(None) => ExitCode::from(130),
        Err(err) => {
            eprintln!("demo failed: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// SIGINT (Ctrl-C) or SIGTERM.
async fn interrupted() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

impl Demo {
    /// Returns whether every issuer became Ready and every request Issued.
    async fn run(&mut self, hold: bool) -> anyhow::Result<bool> {
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        if std::env::var_os("E2E_KUBECONFIG").is_some() {
            anyhow::bail!("unset E2E_KUBECONFIG: the demo runs its own API server");
        }
        let cluster = self.cluster.insert(Cluster::start().await?);
        let kubeconfig = cluster.kubeconfig.clone();
        let client = cluster.client.clone();
        println!("API server (in-process, CRDs installed). While the demo runs:");
        println!("  export KUBECONFIG={}", kubeconfig.display());
        println!("  kubectl get issuers,clusterissuers,certificaterequests,certificates,csr -A");

        let ca = self.ca.insert(Ca::simple(false).await?);
        let dir = self._dir.insert(tempfile::tempdir()?);
        let tls_ca = ca.tls_ca_file(dir.path())?.context("simple-cfssl serves TLS")?;
        let ca_url = ca.url.clone();
        println!(
            "\nsimple-cfssl (CFSSL multirootca API) on {ca_url}, TLS CA in {}",
            tls_ca.display()
        );

        cluster.ensure_namespace(SYSTEM_NAMESPACE).await?;
        // The manager trusts simple-cfssl's TLS CA as it would in a pod: SSL_CERT_FILE, read
        // by rustls-native-certs. The samples stay free of any caBundle.
        let options = ManagerOptions::new(&kubeconfig, SYSTEM_NAMESPACE)
            .arg("--certificate-controllers")
            .env("SSL_CERT_FILE", tls_ca.display().to_string());
        let manager = self.manager.insert(Manager::start(options).await?);
        println!(
            "manager: cfssl-issuer run --cluster-resource-namespace {SYSTEM_NAMESPACE} \
             --certificate-controllers (pid {}), \
             SSL_CERT_FILE={}, probes on {}, metrics on {}",
            manager.pid().unwrap_or_default(),
            tls_ca.display(),
            manager.health_addr,
            manager.metrics_addr
        );

        let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/samples");
        println!("\nkubectl apply --server-side, one file at a time, from config/samples/:");
        println!("  (every url {IN_CLUSTER_CA} becomes {ca_url}; nothing else changes, so");
        println!("  issuer-sample still tries https://dead.end.local first and fails over)");
        let mut applied = Vec::new();
        for file in SAMPLES {
            for doc in read_documents(&samples.join(file))? {
                let doc = localize(doc, &ca_url);
                let id = apply(&client, &doc)
                    .await
                    .with_context(|| format!("apply {file}"))?;
                println!("  {file}: {} {}", id.kind, id.display());
                applied.push(id);
            }
        }

        println!(
            "\nApproving each CertificateRequest of certificaterequests.yaml as cert-manager's approver \
             does (condition Approved, reason cert-manager.io); the manager approves the ones its \
             Certificate controllers create itself:"
        );
        for id in applied.iter().filter(|id| id.kind == "CertificateRequest") {
            approve(&client, id).await?;
            println!("  approved {}", id.display());
        }

        let mut all_good = true;
        println!("\nIssuers:");
        for id in applied.iter().filter(|id| id.kind.ends_with("Issuer")) {
            let ready = wait_issuer(&client, id).await;
            all_good &= ready.as_ref().is_some_and(|c| c.status.as_str() == "True");
            println!("  {} {}: {}", id.kind, id.display(), describe(ready.as_ref()));
        }
        println!("\nCertificateRequests:");
        for id in applied.iter().filter(|id| id.kind == "CertificateRequest") {
            let request = wait_request(&client, id).await?;
            let status = request.status.unwrap_or_default();
            let ready = status.conditions.iter().find(|c| c.type_ == READY);
            let reason = ready.map(|c| c.reason.as_str()).unwrap_or("none");
            all_good &= reason == "Issued";
            println!(
                "  {}: Ready={} ({reason}) {}",
                id.display(),
                ready.map(|c| c.status.as_str()).unwrap_or("-"),
                ready.map(|c| c.message.as_str()).unwrap_or("")
            );
            if let Some(chain) = status.certificate.filter(|c| !c.0.is_empty()) {
                let leaf = parse_leaf(&chain.0)?;
                let blocks = ::pem::parse_many(&chain.0)?.len();
                println!("      subject:  {}", leaf.subject);
                println!("      issuer:   {}", leaf.issuer);
                println!("      SANs:     {}", leaf.dns_names.join(", "));
                println!("      notAfter: {}", leaf.not_after);
                let root = match status.ca.filter(|c| !c.0.is_empty()) {
                    Some(ca) => format!("ca.crt: {}", parse_leaf(&ca.0)?.subject),
                    None => "no ca.crt".into(),
                };
                println!("      chain:    {blocks} certificate(s) in tls.crt, {root}");
            }
        }

        all_good &= standalone::show(&client, &kubeconfig, &applied).await?;
        all_good &= csr::show(self.cluster.as_ref().context("started")?).await?;

        let metrics = scrape::scrape(&manager.metrics_addr).await?;
        println!("\nFrom /metrics:");
        let mut issued: Vec<_> = metrics
            .find("cfssl_issuer_certificates_issued_total", &[])
            .collect();
        issued.sort_by(|a, b| a.labels["issuer"].cmp(&b.labels["issuer"]));
        for sample in issued {
            println!(
                "  cfssl_issuer_certificates_issued_total{{issuer={:?}}} {}",
                sample.labels["issuer"], sample.value
            );
        }
        println!(
            "  simple-cfssl signed {} certificate(s)",
            ca.issued_count().unwrap_or(0)
        );
        if !all_good {
            println!(
                "\nnot everything became Ready; the manager's log:\n{}",
                manager.log()
            );
        }
        if hold {
            println!("\nStill running (KUBECONFIG above); Ctrl-C stops everything.");
            std::future::pending::<()>().await;
        }
        Ok(all_good)
    }

    /// SIGTERM to the manager (it releases what it holds and exits), then the CA and the API
    /// server. Whatever does not stop here is killed when dropped.
    async fn stop(&mut self) {
        if let Some(mut manager) = self.manager.take() {
            match manager.terminate(Duration::from_secs(10)).await {
                Ok(status) => println!("\nstopped the manager ({status})"),
                Err(err) => println!("\nkilled the manager: {err:#}"),
            }
        }
        self.ca.take();
        self.cluster.take();
        println!("stopped simple-cfssl and the API server");
    }
}

/// The YAML documents of one sample file.
fn read_documents(path: &PathBuf) -> anyhow::Result<Vec<Value>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&text).with_context(|| format!("parse {}", path.display()))?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// The one change a laptop needs: the CA's in-cluster address in `spec.url` becomes ours.
/// Other URLs in the list (the sample's dead first entry) stay, so failover still shows.
fn localize(mut doc: Value, ca_url: &str) -> Value {
    if let Some(Value::String(url)) = doc.pointer_mut("/spec/url") {
        *url = url.replace(IN_CLUSTER_CA, ca_url);
    }
    doc
}

struct Applied {
    kind: String,
    namespace: Option<String>,
    name: String,
}

impl Applied {
    fn display(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        }
    }
}

/// Server-side apply of one document, its resource found by discovery as kubectl finds it.
async fn apply(client: &kube::Client, doc: &Value) -> anyhow::Result<Applied> {
    let text = |pointer: &str| doc.pointer(pointer).and_then(Value::as_str).map(str::to_string);
    let api_version = text("/apiVersion").context("no apiVersion")?;
    let kind = text("/kind").context("no kind")?;
    let name = text("/metadata/name").context("no metadata.name")?;
    let (group, version) = api_version.split_once('/').unwrap_or(("", &api_version));
    let gvk = GroupVersionKind::gvk(group, version, &kind);
    let (resource, caps) = discovery::pinned_kind(client, &gvk).await?;
    let namespace = (caps.scope == Scope::Namespaced)
        .then(|| text("/metadata/namespace").unwrap_or_else(|| "default".into()));
    let api: Api<DynamicObject> = match &namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    api.patch(&name, &PatchParams::apply(FIELD_MANAGER), &Patch::Apply(doc))
        .await?;
    Ok(Applied {
        kind,
        namespace,
        name,
    })
}

/// What cert-manager's approver writes: `Approved` under its own field manager.
async fn approve(client: &kube::Client, id: &Applied) -> anyhow::Result<()> {
    let ns = id.namespace.as_deref().context("requests are namespaced")?;
    let body = json!({
        "apiVersion": "cert-manager.io/v1", "kind": "CertificateRequest",
        "metadata": {"name": id.name, "namespace": ns},
        "status": {"conditions": [{
            "type": "Approved", "status": "True", "reason": "cert-manager.io",
            "message": "Certificate request has been approved by cert-manager.io",
            "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().to_string(),
        }]},
    });
    Api::<CertificateRequest>::namespaced(client.clone(), ns)
        .patch_status(
            &id.name,
            &PatchParams::apply("cert-manager-certificaterequests-approver").force(),
            &Patch::Apply(&body),
        )
        .await?;
    Ok(())
}

/// The issuer's Ready condition once it is True, or whatever it is after [`WAIT`].
async fn wait_issuer(client: &kube::Client, id: &Applied) -> Option<Condition> {
    let ready = || async {
        let conditions = match &id.namespace {
            Some(ns) => {
                Api::<Issuer>::namespaced(client.clone(), ns)
                    .get(&id.name)
                    .await
                    .ok()?
                    .status?
                    .conditions
            }
            None => {
                Api::<ClusterIssuer>::all(client.clone())
                    .get(&id.name)
                    .await
                    .ok()?
                    .status?
                    .conditions
            }
        };
        conditions.into_iter().find(|c| c.type_ == READY)
    };
    let wait = eventually(WAIT, "issuer Ready", || async {
        ready().await.filter(|c| c.status.as_str() == "True")
    });
    match wait.await {
        Ok(condition) => Some(condition),
        Err(_) => ready().await,
    }
}

fn describe(condition: Option<&Condition>) -> String {
    match condition {
        Some(c) => format!("Ready={} ({}) {}", c.status.as_str(), c.reason, c.message),
        None => "no Ready condition yet".into(),
    }
}

/// The request once its Ready reason is final (Issued, Failed, Denied), or as it is after [`WAIT`].
async fn wait_request(client: &kube::Client, id: &Applied) -> anyhow::Result<CertificateRequest> {
    let api =
        Api::<CertificateRequest>::namespaced(client.clone(), id.namespace.as_deref().unwrap_or_default());
    let done = eventually(WAIT, "request done", || async {
        let request = api.get(&id.name).await.ok()?;
        let reason = request.condition(READY)?.reason.clone();
        ["Issued", "Failed", "Denied"]
            .contains(&reason.as_str())
            .then_some(request)
    })
    .await;
    match done {
        Ok(request) => Ok(request),
        Err(_) => Ok(api.get(&id.name).await?),
    }
}
