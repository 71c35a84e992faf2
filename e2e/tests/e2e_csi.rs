//! The CSI node plugin issuing a volume through a CertificateRequest, against the in-process
//! API server, simple-cfssl and the manager binary that signs the request. The plugin runs in
//! this process on a temporary unix socket and is driven over gRPC as kubelet drives it; its
//! mounts are a fake (the real ones need root: `tests/csi_mounts.rs`). The test plays the
//! approver.

mod csi;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cfssl_issuer::api::certmanager::CertificateRequest;
use cfssl_issuer::csi::collect::{Collector, Verdict};
use cfssl_issuer::csi::issue::shape::{VOLUME_ID_HASH, hash_identifier};
use cfssl_issuer::csi::proto::node_client::NodeClient;
use cfssl_issuer::csi::proto::{NodePublishVolumeRequest, NodeUnpublishVolumeRequest};
use cfssl_issuer::csi::store::Store;
use e2e::harness::csi::{self as csi_harness, PodRef};
use e2e::harness::objects::{self, Kind};
use e2e::harness::{Ca, Cluster, Manager, ManagerOptions, eventually, openssl_verify};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, PostParams};
use tonic::Code;
use tonic::transport::Channel;

use csi::{GROUP, Plugin};

const WAIT: Duration = Duration::from_secs(60);
const TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.the-pods-own-token";
const NODE: &str = "node-1";
/// The plugin's own user on the test server: its requests are told apart in the audit.
const PLUGIN_USER: &str = "csi-node-1";

struct Env {
    cluster: Cluster,
    ca: Ca,
    _manager: Manager,
    ns: String,
    dir: tempfile::TempDir,
}

impl Env {
    /// `None` against a deployed cluster: the plugin is tested on the in-process server.
    async fn start() -> anyhow::Result<Option<Env>> {
        let cluster = Cluster::start().await?;
        if cluster.is_external() {
            return Ok(None);
        }
        let ca = Ca::simple(false).await?;
        let system = "cfssl-issuer-system";
        cluster.ensure_namespace(system).await?;
        let manager = Manager::start(ManagerOptions::new(cluster.manager_kubeconfig(), system)).await?;
        let ns = cluster.namespace("csi").await?;
        cluster.put_key_secret(&ns, "team-ca", &ca.key_hex).await?;
        let spec = objects::issuer_spec(&ca, "team-ca", "server");
        objects::create_issuer(&cluster.client, Kind::Issuer, &ns, "team-ca", spec).await?;
        objects::wait_issuer_reason(&cluster.client, Kind::Issuer, &ns, "team-ca", "Checked", WAIT).await?;
        Ok(Some(Env {
            cluster,
            ca,
            _manager: manager,
            ns,
            dir: tempfile::tempdir()?,
        }))
    }

    fn client(&self) -> &kube::Client {
        &self.cluster.client
    }

    fn requests(&self) -> Api<CertificateRequest> {
        Api::namespaced(self.client().clone(), &self.ns)
    }

    /// A Pod object (nothing runs it) and its UID.
    async fn pod(&self, name: &str) -> anyhow::Result<String> {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name},
            "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]},
        }))?;
        let created = Api::<Pod>::namespaced(self.client().clone(), &self.ns)
            .create(&PostParams::default(), &pod)
            .await?;
        Ok(created.metadata.uid.unwrap_or_default())
    }

    /// Starts a plugin waiting `wait` for each request; its channel and its store's root.
    async fn plugin(&self, name: &str, wait: Duration) -> anyhow::Result<(Channel, PathBuf)> {
        let plugin = Plugin {
            server: self.cluster.server().expect("in-process server"),
            dir: self.dir.path(),
            name,
            user: PLUGIN_USER,
            node: NODE,
        };
        plugin.start(wait).await
    }

    /// kubelet's Publish of volume `volume` of pod `pod`.
    fn publish(&self, pod: &str, uid: &str, volume: &str) -> NodePublishVolumeRequest {
        self.publish_with(pod, uid, volume, &[])
    }

    /// [`Env::publish`] with `extra` attributes.
    fn publish_with(
        &self,
        pod: &str,
        uid: &str,
        volume: &str,
        extra: &[(&str, &str)],
    ) -> NodePublishVolumeRequest {
        let token = format!("{{\"\":{{\"token\":\"{TOKEN}\"}}}}");
        let mut context = csi_harness::attributes(&csi_harness::TEAM_CA_ECDSA);
        context.extend(csi_harness::attributes(&[
            ("csi.storage.k8s.io/serviceAccount.tokens", token.as_str()),
            ("example.com/team", "payments"),
        ]));
        context.extend(csi_harness::attributes(extra));
        let namespace = &self.ns;
        csi_harness::inline_publish(
            volume,
            PodRef {
                name: pod,
                namespace,
                uid,
            },
            context,
        )
    }

    /// The requests of `volume` (by csi-lib's label), waiting for at least one.
    async fn requests_of(&self, volume: &str) -> anyhow::Result<Vec<CertificateRequest>> {
        let selector = format!("{VOLUME_ID_HASH}={}", hash_identifier(volume));
        let requests = self.requests();
        eventually(WAIT, &format!("a request of {volume}"), || async {
            let list = requests
                .list(&ListParams::default().labels(&selector))
                .await
                .ok()?;
            (!list.items.is_empty()).then_some(list.items)
        })
        .await
    }

    /// How many requests the plugin made so far.
    fn plugin_calls(&self) -> usize {
        let server = self.cluster.server().expect("in-process server");
        server.audit().iter().filter(|e| e.user == PLUGIN_USER).count()
    }
}

/// Every file under `dir`, followed through symlinks once (the `..data` layout).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).into_iter().flatten().flatten() {
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                found.push(entry.path());
            }
        }
    }
    found
}

/// `openssl <args> -in <file>` (the harness's, not our code).
fn openssl_public_key(args: &[&str], file: &Path) -> anyhow::Result<String> {
    csi_harness::openssl_in(args, file)
}

/// The volume's three files, 0440, the certificate for the key and signed by the CA.
fn assert_volume_files(data: &Path, ca: &Ca) -> anyhow::Result<()> {
    for name in ["tls.crt", "tls.key", "ca.crt"] {
        let mode = std::fs::metadata(data.join(name))?.permissions().mode() & 0o777;
        assert_eq!(mode, 0o440, "{name}");
    }
    let key = openssl_public_key(&["pkey", "-pubout"], &data.join("tls.key"))?;
    let cert = openssl_public_key(&["x509", "-noout", "-pubkey"], &data.join("tls.crt"))?;
    assert_eq!(key, cert, "the certificate is not for the volume's key");
    let chain = std::fs::read(data.join("tls.crt"))?;
    if let Some(root) = &ca.root_pem {
        openssl_verify(&chain, root)?;
    }
    Ok(())
}

/// The pod's token is in no log line of the plugin, which did log (kube's client logs each
/// request at debug level), so the check reads something.
fn assert_no_token_logged() {
    let logged = csi::logged();
    assert!(
        logged.contains("certificaterequests"),
        "the plugin logged its requests"
    );
    assert!(
        !logged.contains(TOKEN),
        "the service-account token is in a log line"
    );
    assert!(
        !logged.contains("serviceAccount.tokens"),
        "the tokens key is in a log line"
    );
}

fn assert_no_token(root: &Path) -> anyhow::Result<()> {
    for file in files_under(root) {
        let text = std::fs::read(&file)?;
        let found = text.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes());
        assert!(!found, "the service-account token is in {}", file.display());
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_is_issued_through_an_approved_request() -> anyhow::Result<()> {
    let Some(env) = Env::start().await? else {
        return Ok(());
    };
    let uid = env.pod("web-0").await?;
    let (channel, root) = env.plugin("plugin", WAIT).await?;
    let publish = env.publish("web-0", &uid, "csi-a1");
    let mut node = NodeClient::new(channel);
    let published = tokio::spawn({
        let mut node = node.clone();
        let publish = publish.clone();
        async move { node.node_publish_volume(publish).await }
    });
    let requests = env.requests_of("csi-a1").await?;
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    let name = request.metadata.name.clone().expect("named");
    let owners = request.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(
        owners
            .iter()
            .map(|o| (o.kind.as_str(), o.name.as_str(), o.uid.as_str()))
            .collect::<Vec<_>>(),
        [("Pod", "web-0", uid.as_str())]
    );
    let labels = request.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("csi.cert-manager.io/node-id-hash"),
        Some(&hash_identifier(NODE))
    );
    let annotations = request.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations.get("example.com/team").map(String::as_str),
        Some("payments")
    );
    let issuer = &request.spec.issuer_ref;
    assert_eq!(
        (issuer.name.as_str(), issuer.kind.as_str(), issuer.group.as_str()),
        ("team-ca", "Issuer", GROUP)
    );
    objects::approve(env.client(), &env.ns, &name).await?;
    published.await??;

    let data = root.join("csi-a1/data");
    assert_volume_files(&data, &env.ca)?;
    assert!(
        !root.join("csi-a1/pending.json").exists(),
        "the key in flight is gone once issued"
    );
    assert_no_token(&root)?;
    assert_no_token_logged();

    let calls = env.plugin_calls();
    node.node_publish_volume(publish.clone()).await?;
    assert_eq!(
        env.plugin_calls(),
        calls,
        "a re-Publish of an issued volume asks nothing"
    );

    node.node_unpublish_volume(NodeUnpublishVolumeRequest {
        volume_id: "csi-a1".into(),
        target_path: publish.target_path.clone(),
    })
    .await?;
    assert!(!root.join("csi-a1").exists());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_request_fails_the_publish_and_tells_the_pod() -> anyhow::Result<()> {
    let Some(env) = Env::start().await? else {
        return Ok(());
    };
    let uid = env.pod("web-1").await?;
    let (channel, root) = env.plugin("plugin", WAIT).await?;
    let node = NodeClient::new(channel);
    let publish = env.publish("web-1", &uid, "csi-d1");
    let retry = |mut node: NodeClient<Channel>, publish: NodePublishVolumeRequest| {
        tokio::spawn(async move { node.node_publish_volume(publish).await })
    };
    let first = retry(node.clone(), publish.clone());
    let earlier = env.requests_of("csi-d1").await?[0]
        .metadata
        .name
        .clone()
        .expect("named");
    objects::decide(env.client(), &env.ns, &earlier, false).await?;
    assert_eq!(first.await?.expect_err("denied").code(), Code::FailedPrecondition);

    // kubelet retries: a new request, and the denied one is deleted (one per volume).
    let published = retry(node, publish);
    let requests = env.requests();
    let selector = format!("{VOLUME_ID_HASH}={}", hash_identifier("csi-d1"));
    let name = eventually(WAIT, "the retry's own request, alone", || async {
        let list = requests
            .list(&ListParams::default().labels(&selector))
            .await
            .ok()?;
        let names: Vec<String> = list
            .items
            .iter()
            .filter_map(|r| r.metadata.name.clone())
            .collect();
        (names.len() == 1 && names[0] != earlier).then(|| names[0].clone())
    })
    .await?;
    objects::decide(env.client(), &env.ns, &name, false).await?;
    let status = published.await?.expect_err("denied");
    assert_eq!(status.code(), Code::FailedPrecondition);
    let message = format!(
        "volume csi-d1: CertificateRequest {}/{name} was denied: Denied by the e2e suite",
        env.ns
    );
    assert_eq!(status.message(), message);
    assert!(
        !root.join("csi-d1").exists(),
        "nothing of a failed new volume is left"
    );
    let events = Api::<Event>::namespaced(env.client().clone(), &env.ns);
    let notes: Vec<(String, String)> = events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("web-1"))
        .map(|e| (e.type_.unwrap_or_default(), e.note.unwrap_or_default()))
        .filter(|(_, note)| note.contains(&name))
        .collect();
    assert_eq!(notes, [("Warning".to_string(), message)]);
    Ok(())
}

/// An issuer that gives up on a request (`Ready=False`, reason `Failed`, as cert-manager's
/// issuers write it): the Publish is ABORTED with the issuer's message, and nothing of the new
/// volume is left. Written by the test, unapproved, so the manager's own signer stays out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_request_aborts_the_publish_with_the_issuers_message() -> anyhow::Result<()> {
    let Some(env) = Env::start().await? else {
        return Ok(());
    };
    let uid = env.pod("web-3").await?;
    let (channel, root) = env.plugin("plugin", WAIT).await?;
    let mut node = NodeClient::new(channel);
    let publish = env.publish("web-3", &uid, "csi-f1");
    let published = tokio::spawn(async move { node.node_publish_volume(publish).await });
    let name = env.requests_of("csi-f1").await?[0]
        .metadata
        .name
        .clone()
        .expect("named");
    let body = serde_json::json!({
        "apiVersion": "cert-manager.io/v1", "kind": "CertificateRequest",
        "metadata": {"name": name, "namespace": env.ns},
        "status": {
            "conditions": [{
                "type": "Ready", "status": "False", "reason": "Failed",
                "message": "the CA refused profile \"server\"",
                "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().to_string(),
            }],
            "failureTime": k8s_openapi::jiff::Timestamp::now().to_string(),
        },
    });
    let params = kube::api::PatchParams::apply("e2e-issuer").force();
    env.requests()
        .patch_status(&name, &params, &kube::api::Patch::Apply(&body))
        .await?;
    let status = published.await?.expect_err("failed");
    assert_eq!(status.code(), Code::Aborted);
    let message = format!(
        "volume csi-f1: CertificateRequest {}/{name} failed: the CA refused profile \"server\"",
        env.ns
    );
    assert_eq!(status.message(), message);
    assert!(
        !root.join("csi-f1").exists(),
        "nothing of a failed new volume is left"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_past_its_deadline_is_resumed_by_the_next() -> anyhow::Result<()> {
    let Some(env) = Env::start().await? else {
        return Ok(());
    };
    let uid = env.pod("web-2").await?;
    let (channel, root) = env.plugin("plugin", Duration::from_secs(3)).await?;
    let mut node = NodeClient::new(channel);
    let publish = env.publish("web-2", &uid, "csi-t1");
    let status = node
        .node_publish_volume(publish.clone())
        .await
        .expect_err("not approved");
    assert_eq!(status.code(), Code::DeadlineExceeded);
    let requests = env.requests_of("csi-t1").await?;
    let name = requests[0].metadata.name.clone().expect("named");
    let message = format!(
        "volume csi-t1: CertificateRequest {}/{name} is not issued after 3s (not approved yet?); the next Publish waits for it again",
        env.ns
    );
    assert_eq!(status.message(), message);
    let pending = root.join("csi-t1/pending.json");
    assert_eq!(std::fs::metadata(&pending)?.permissions().mode() & 0o777, 0o600);
    assert_no_token(&root)?;
    assert_no_token_logged();

    objects::approve(env.client(), &env.ns, &name).await?;
    objects::wait_request_reason(env.client(), &env.ns, &name, "Issued", WAIT).await?;
    node.node_publish_volume(publish).await?;
    let requests = env.requests_of("csi-t1").await?;
    assert_eq!(requests.len(), 1, "the retried Publish resumed the same request");
    assert_volume_files(&root.join("csi-t1/data"), &env.ca)?;
    assert!(!pending.exists());
    Ok(())
}

/// A volume left pending at its deadline is collected with its request: at once when its Pod
/// is gone (kubelet will never unpublish it), after the age limit while the Pod is still there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_volumes_are_collected_when_their_pod_is_gone_or_they_are_too_old() -> anyhow::Result<()> {
    let Some(env) = Env::start().await? else {
        return Ok(());
    };
    let (channel, root) = env.plugin("plugin", Duration::from_secs(2)).await?;
    let mut node = NodeClient::new(channel);
    let mut names = Vec::new();
    for (pod, volume) in [("web-4", "csi-g1"), ("web-5", "csi-g2")] {
        let uid = env.pod(pod).await?;
        let status = node
            .node_publish_volume(env.publish(pod, &uid, volume))
            .await
            .expect_err("not approved");
        assert_eq!(status.code(), Code::DeadlineExceeded);
        names.push(
            env.requests_of(volume).await?[0]
                .metadata
                .name
                .clone()
                .expect("named"),
        );
    }
    let store = Store::open(&root)?;
    let collector = |clock| {
        Collector::new(
            env.client().clone(),
            store.clone(),
            Duration::from_secs(3600),
            clock,
        )
    };
    let now = cfssl_issuer::clock::system_clock();
    assert_eq!(collector(now.clone()).pass().await?, [], "young, with their pods");

    Api::<Pod>::namespaced(env.client().clone(), &env.ns)
        .delete("web-4", &Default::default())
        .await?;
    assert_eq!(
        collector(now).pass().await?,
        [("csi-g1".to_string(), Verdict::PodGone)]
    );
    assert!(!root.join("csi-g1").exists());

    let later = k8s_openapi::jiff::Timestamp::now() + k8s_openapi::jiff::SignedDuration::from_hours(2);
    let old = collector(cfssl_issuer::clock::fixed_clock(later)).pass().await?;
    assert_eq!(old, [("csi-g2".to_string(), Verdict::TooOld)]);
    assert!(!root.join("csi-g2").exists());
    for name in &names {
        let requests = env.requests();
        eventually(WAIT, &format!("request {name} deleted"), || async {
            requests.get_opt(name).await.ok()?.is_none().then_some(())
        })
        .await?;
    }
    Ok(())
}

/// A volume asking for csi-driver's PKCS#12 keystore and our JKS keystore and bundle gets files
/// that `openssl pkcs12` and `keytool` open with their passwords, holding the volume's key and
/// certificate; the bundle is the key file then the certificate file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keystores_in_a_volume_open_with_openssl_and_keytool() -> anyhow::Result<()> {
    let Some(env) = Env::start().await? else {
        return Ok(());
    };
    let uid = env.pod("java-0").await?;
    let (channel, root) = env.plugin("plugin", WAIT).await?;
    let publish = env.publish_with(
        "java-0",
        &uid,
        "csi-k1",
        &[
            ("csi.cert-manager.io/pkcs12-enable", "true"),
            ("csi.cert-manager.io/pkcs12-password", "p12-secret"),
            ("csi.cfssl-issuer.wikimedia.org/jks-enable", "true"),
            ("csi.cfssl-issuer.wikimedia.org/jks-password", "jks-secret"),
            ("csi.cfssl-issuer.wikimedia.org/bundle-file", "tls-combined.pem"),
        ],
    );
    let mut node = NodeClient::new(channel);
    let published = tokio::spawn(async move { node.node_publish_volume(publish).await });
    let name = env.requests_of("csi-k1").await?[0]
        .metadata
        .name
        .clone()
        .expect("named");
    objects::approve(env.client(), &env.ns, &name).await?;
    published.await??;

    let data = root.join("csi-k1/data");
    assert_volume_files(&data, &env.ca)?;
    let read = |name: &str| std::fs::read(data.join(name));
    let (key, cert) = (read("tls.key")?, read("tls.crt")?);
    assert_eq!(
        read("tls-combined.pem")?,
        [key.as_slice(), cert.as_slice()].concat()
    );
    let cert_key = openssl_public_key(&["x509", "-noout", "-pubkey"], &data.join("tls.crt"))?;

    let p12 = data.join("keystore.p12");
    let p12_args = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["pkcs12", "-legacy", "-passin", "pass:p12-secret", "-in"];
        args.push(p12.to_str().expect("path"));
        args.extend_from_slice(extra);
        args.iter().map(|s| s.to_string()).collect()
    };
    let opened = run("openssl", &p12_args(&["-nodes"]))?;
    let chain = String::from_utf8(cert.clone())?;
    assert_eq!(
        opened.matches("BEGIN CERTIFICATE").count(),
        chain.matches("BEGIN CERTIFICATE").count(),
        "the chain as issued, no CA (as csi-driver): {opened}"
    );
    let dir = tempfile::tempdir()?;
    std::fs::write(
        dir.path().join("leaf.pem"),
        run("openssl", &p12_args(&["-nokeys", "-clcerts"]))?,
    )?;
    let leaf_key = openssl_public_key(&["x509", "-noout", "-pubkey"], &dir.path().join("leaf.pem"))?;
    assert_eq!(leaf_key, cert_key, "the keystore holds the volume's certificate");
    assert!(run("openssl", &p12_args(&["-nodes", "-passin", "pass:wrong"])).is_err());

    let jks = data.join("keystore.jks");
    let jks = jks.to_str().expect("path");
    let listed = run(
        "keytool",
        &[
            "-list",
            "-storetype",
            "JKS",
            "-storepass",
            "jks-secret",
            "-keystore",
            jks,
        ]
        .map(String::from),
    )?;
    assert!(
        listed.contains("certificate, ") && listed.contains("PrivateKeyEntry"),
        "{listed}"
    );
    // The CAs as trusted entries `ca`, `ca-1`, ...: none when the issuer sends no CA.
    let cas = String::from_utf8(read("ca.crt")?)?
        .matches("BEGIN CERTIFICATE")
        .count();
    assert_eq!(listed.matches("trustedCertEntry").count(), cas, "{listed}");
    assert_eq!(listed.matches("PrivateKeyEntry").count(), 1, "{listed}");
    Ok(())
}

/// `program args` succeeded: its standard output.
fn run(program: &str, args: &[String]) -> anyhow::Result<String> {
    let out = std::process::Command::new(program).args(args).output()?;
    anyhow::ensure!(
        out.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
}
