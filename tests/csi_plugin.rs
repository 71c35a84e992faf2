//! The CSI node plugin on a temporary unix socket, driven by a real gRPC client as kubelet
//! drives it (`:authority` `localhost`: tonic refuses a socket path there). Issuance and
//! mounts are fakes here: the plugin's own CertificateRequests and mounts are tested apart.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use cfssl_issuer::csi::identity::{IdentityService, Ready};
use cfssl_issuer::csi::node::{Issue, Issued, NodeService, Publish};
use cfssl_issuer::csi::proto::identity_client::IdentityClient;
use cfssl_issuer::csi::proto::node_client::NodeClient;
use cfssl_issuer::csi::proto::volume_capability::{AccessType, MountVolume};
use cfssl_issuer::csi::proto::*;
use cfssl_issuer::csi::server::{listen, serve};
use cfssl_issuer::csi::store::{Mounter, Store};
use hyper_util::rt::TokioIo;
use tonic::Code;
use tonic::transport::{Channel, Endpoint};

const TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.the-pods-token";

/// Records mounts; kubelet's target is never touched.
#[derive(Default)]
struct FakeMounts(Mutex<HashSet<PathBuf>>);

impl Mounter for FakeMounts {
    fn mount(&self, _: &Path, target: &Path) -> std::io::Result<()> {
        self.0.lock().unwrap().insert(target.to_path_buf());
        Ok(())
    }
    fn unmount(&self, target: &Path) -> std::io::Result<()> {
        self.0.lock().unwrap().remove(target);
        Ok(())
    }
    fn is_mounted(&self, _: &Path, target: &Path) -> std::io::Result<bool> {
        Ok(self.0.lock().unwrap().contains(target))
    }
}

/// A self-signed certificate for the volume's DNS names; `issuer-name: refused` is refused.
#[derive(Default)]
struct FakeIssuer(AtomicU32, Mutex<Vec<String>>);

impl Issue for FakeIssuer {
    async fn refused(&self, publish: &Publish, reason: &str, message: &str) {
        let told = format!("{} {reason}: {message}", publish.pod.name);
        self.1.lock().unwrap().push(told);
    }

    async fn issue(&self, publish: &Publish) -> Result<Issued, tonic::Status> {
        self.0.fetch_add(1, Ordering::SeqCst);
        if publish.attributes.issuer.name == "refused" {
            return Err(tonic::Status::failed_precondition("denied by the approver"));
        }
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(publish.attributes.dns_names.clone()).unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ok(Issued {
            private_key_pem: key.serialize_pem(),
            certificate_pem: cert.pem(),
            ca_pem: cert.pem(),
            keystores: Vec::new(),
            next_issuance_time: jiff::Timestamp::now(),
            not_after: jiff::Timestamp::now(),
        })
    }
}

async fn connect(socket: PathBuf) -> Channel {
    Endpoint::try_from("http://localhost")
        .unwrap()
        .connect_with_connector(tower::service_fn(move |_: http::Uri| {
            let socket = socket.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(socket).await?)) }
        }))
        .await
        .unwrap()
}

fn publish_request(volume: &str, issuer: &str) -> NodePublishVolumeRequest {
    let context: HashMap<String, String> = [
        ("csi.storage.k8s.io/pod.name", "web-0"),
        ("csi.storage.k8s.io/pod.namespace", "shop"),
        ("csi.storage.k8s.io/pod.uid", "0b9d"),
        ("csi.storage.k8s.io/serviceAccount.name", "web"),
        ("csi.storage.k8s.io/ephemeral", "true"),
        (
            "csi.storage.k8s.io/serviceAccount.tokens",
            &format!("{{\"\":{{\"token\":\"{TOKEN}\"}}}}"),
        ),
        ("csi.cert-manager.io/issuer-name", issuer),
        (
            "csi.cert-manager.io/dns-names",
            "${POD_NAME}.${POD_NAMESPACE}.svc",
        ),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    NodePublishVolumeRequest {
        volume_id: volume.into(),
        target_path: format!("/var/lib/kubelet/pods/0b9d/volumes/kubernetes.io~csi/{volume}/mount"),
        volume_capability: Some(VolumeCapability {
            access_type: Some(AccessType::Mount(MountVolume::default())),
            access_mode: None,
        }),
        readonly: true,
        volume_context: context,
        ..Default::default()
    }
}

struct Plugin {
    channel: Channel,
    store: PathBuf,
    mounts: Arc<FakeMounts>,
    issuer: Arc<FakeIssuer>,
    ready: Ready,
    _dir: tempfile::TempDir,
}

async fn start() -> Plugin {
    start_with(cfssl_issuer::csi::node::DEFAULT_MAX_VOLUMES).await
}

async fn start_with(max_volumes: usize) -> Plugin {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("csi.sock");
    let store_root = dir.path().join("volumes");
    let (mounts, issuer, ready) = (
        Arc::new(FakeMounts::default()),
        Arc::new(FakeIssuer::default()),
        Ready::default(),
    );
    let identity = IdentityService::new("csi.cfssl-issuer.wikimedia.org", ready.clone());
    let node = NodeService::new(
        "node-1",
        Store::open(&store_root).unwrap(),
        mounts.clone(),
        issuer.clone(),
    )
    .with_max_volumes(max_volumes);
    let listener = listen(&socket).unwrap();
    tokio::spawn(serve(listener, identity, node, std::future::pending()));
    Plugin {
        channel: connect(socket).await,
        store: store_root,
        mounts,
        issuer,
        ready,
        _dir: dir,
    }
}

#[tokio::test]
async fn identity_answers_and_probe_waits_for_the_store() {
    let plugin = start().await;
    let mut identity = IdentityClient::new(plugin.channel.clone());
    let info = identity
        .get_plugin_info(GetPluginInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.name, "csi.cfssl-issuer.wikimedia.org");
    assert_eq!(info.vendor_version, env!("CARGO_PKG_VERSION"));
    let caps = identity
        .get_plugin_capabilities(GetPluginCapabilitiesRequest {})
        .await
        .unwrap();
    assert!(caps.into_inner().capabilities.is_empty());
    let probe = identity.probe(ProbeRequest {}).await.unwrap().into_inner();
    assert_eq!(probe.ready, Some(false));
    plugin.ready.set();
    let probe = identity.probe(ProbeRequest {}).await.unwrap().into_inner();
    assert_eq!(probe.ready, Some(true));
}

#[tokio::test]
async fn node_info_and_capabilities() {
    let plugin = start().await;
    let mut node = NodeClient::new(plugin.channel.clone());
    let info = node
        .node_get_info(NodeGetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.node_id, "node-1");
    assert_eq!(info.max_volumes_per_node, 256, "--max-volumes' default");
    let caps = node
        .node_get_capabilities(NodeGetCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    let types: Vec<_> = caps
        .capabilities
        .iter()
        .map(|c| match &c.r#type {
            Some(node_service_capability::Type::Rpc(rpc)) => rpc.r#type(),
            None => panic!("empty capability"),
        })
        .collect();
    assert_eq!(types, [node_service_capability::rpc::Type::VolumeMountGroup]);
}

/// Calls the plugin does not declare: UNIMPLEMENTED, from the router.
#[tokio::test]
async fn undeclared_calls_are_unimplemented() {
    let plugin = start().await;
    for path in [
        "/csi.v1.Node/NodeStageVolume",
        "/csi.v1.Node/NodeGetVolumeStats",
        "/csi.v1.Controller/CreateVolume",
    ] {
        let mut grpc = tonic::client::Grpc::new(plugin.channel.clone());
        grpc.ready().await.unwrap();
        let codec = tonic_prost::ProstCodec::<NodeGetInfoRequest, NodeGetInfoResponse>::default();
        let method = http::uri::PathAndQuery::from_static(path);
        let status = grpc
            .unary(tonic::Request::new(NodeGetInfoRequest {}), method, codec)
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unimplemented, "{path}");
    }
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let kind = entry.file_type().unwrap();
        // Links lead to files that are listed where they are.
        if kind.is_dir() {
            files_under(&path, out);
        } else if kind.is_file() {
            out.push(path);
        }
    }
}

#[tokio::test]
async fn publish_writes_files_then_republish_and_unpublish() {
    let plugin = start().await;
    let mut node = NodeClient::new(plugin.channel.clone());
    let request = publish_request("csi-0b9d", "ca");

    let mut read_write = request.clone();
    read_write.readonly = false;
    let status = node.node_publish_volume(read_write).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(
        status.message(),
        "pod.spec.volumes[].csi.readOnly must be true: the certificate files are read-only"
    );

    node.node_publish_volume(request.clone()).await.unwrap();
    let data = plugin.store.join("csi-0b9d/data");
    for name in ["tls.crt", "tls.key", "ca.crt"] {
        let mode = std::fs::metadata(data.join(name)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o440, "{name}");
    }
    let cert = std::fs::read(data.join("tls.crt")).unwrap();
    let (_, pem) = x509_parser::pem::parse_x509_pem(&cert).unwrap();
    let parsed = pem.parse_x509().unwrap();
    let san = parsed.subject_alternative_name().unwrap().unwrap();
    assert_eq!(
        format!("{:?}", san.value.general_names),
        "[DNSName(\"web-0.shop.svc\")]"
    );
    assert!(
        plugin
            .mounts
            .is_mounted(Path::new(""), Path::new(&request.target_path))
            .unwrap()
    );

    // kubelet's retry, or its periodic re-publish with a fresh token: nothing issued again.
    let mut again = request.clone();
    again
        .volume_context
        .insert("csi.storage.k8s.io/serviceAccount.tokens".into(), "{}".into());
    node.node_publish_volume(again).await.unwrap();
    assert_eq!(plugin.issuer.0.load(Ordering::SeqCst), 1);

    let mut other = request.clone();
    other
        .volume_context
        .insert("csi.cert-manager.io/common-name".into(), "x".into());
    let status = node.node_publish_volume(other).await.unwrap_err();
    assert_eq!(
        (status.code(), status.message()),
        (
            Code::AlreadyExists,
            "volume csi-0b9d is published with other attributes"
        )
    );

    let mut files = Vec::new();
    files_under(&plugin.store, &mut files);
    assert_eq!(files.len(), 4, "metadata.json and three files: {files:?}");
    for file in &files {
        let text = std::fs::read(file).unwrap();
        assert!(
            !String::from_utf8_lossy(&text).contains(TOKEN),
            "the token is in {}",
            file.display()
        );
    }

    let unpublish = NodeUnpublishVolumeRequest {
        volume_id: request.volume_id.clone(),
        target_path: request.target_path.clone(),
    };
    node.node_unpublish_volume(unpublish.clone()).await.unwrap();
    assert!(
        !plugin
            .mounts
            .is_mounted(Path::new(""), Path::new(&request.target_path))
            .unwrap()
    );
    assert!(!plugin.store.join("csi-0b9d").exists());
    // Unknown volume, missing target: done already.
    node.node_unpublish_volume(unpublish).await.unwrap();
}

#[tokio::test]
async fn a_failed_issuance_leaves_nothing_behind() {
    let plugin = start().await;
    let mut node = NodeClient::new(plugin.channel.clone());
    let status = node
        .node_publish_volume(publish_request("csi-1", "refused"))
        .await
        .unwrap_err();
    assert_eq!(
        (status.code(), status.message()),
        (Code::FailedPrecondition, "denied by the approver")
    );
    assert!(!plugin.store.join("csi-1").exists());
    assert!(plugin.mounts.0.lock().unwrap().is_empty());
}

/// A kubeconfig naming an API server nobody listens on: the plugin starts (a client is
/// built without a connection), and a Publish that reaches its request fails to create it.
fn unreachable_kubeconfig(dir: &Path) -> PathBuf {
    let path = dir.join("kubeconfig");
    let text = "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
        clusters: [{name: c, cluster: {server: \"http://127.0.0.1:9\"}}]\n\
        users: [{name: u, user: {token: t}}]\n\
        contexts: [{name: c, context: {cluster: c, user: u, namespace: default}}]\n";
    std::fs::write(&path, text).unwrap();
    path
}

/// The binary's `csi` subcommand serves on the socket its flags name. It mounts its tmpfs at
/// start, so it runs as root in a private mount namespace (`unshare`), where its mount ends
/// with it; elsewhere the test says it is skipped.
#[tokio::test]
async fn the_subcommand_serves() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIPPED the_subcommand_serves: the plugin mounts its tmpfs at start, which needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("plugin.sock");
    let metrics = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut child = tokio::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private"])
        .arg(env!("CARGO_BIN_EXE_cfssl-issuer"))
        .env("KUBECONFIG", unreachable_kubeconfig(dir.path()))
        .arg("csi")
        .arg(format!("--endpoint=unix://{}", socket.display()))
        .arg("--node-id=node-7")
        .arg(format!("--data-root={}", dir.path().join("data").display()))
        .arg(format!("--metrics-addr={metrics}"))
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    for _ in 0..200 {
        if socket.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let channel = connect(socket).await;
    let probe = IdentityClient::new(channel.clone())
        .probe(ProbeRequest {})
        .await
        .unwrap();
    assert_eq!(probe.into_inner().ready, Some(true));
    let info = NodeClient::new(channel.clone())
        .node_get_info(NodeGetInfoRequest {})
        .await
        .unwrap();
    assert_eq!(info.into_inner().node_id, "node-7");
    let status = NodeClient::new(channel)
        .node_publish_volume(publish_request("csi-2", "ca"))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert!(
        status
            .message()
            .starts_with("volume csi-2: cannot create CertificateRequest shop/"),
        "{}",
        status.message()
    );
    assert!(!dir.path().join("data/volumes/csi-2").exists());
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let scraped = reqwest::get(format!("http://{metrics}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "cfssl_issuer_csi_publish_duration_seconds_count{code=\"Unavailable\"} 1",
        "cfssl_issuer_csi_issuance_duration_seconds_count{code=\"Unavailable\"} 1",
        "cfssl_issuer_csi_volumes{state=\"issued\"} 0",
        "cfssl_issuer_csi_requests_created_total 0",
    ] {
        assert!(scraped.contains(line), "{line} in\n{scraped}");
    }
    child.kill().await.unwrap();
}

/// A node holding `--max-volumes` refuses a new volume with RESOURCE_EXHAUSTED and tells its
/// pod, before any issuance; a volume it holds is still served, and a released one makes room.
#[tokio::test]
async fn a_full_node_refuses_new_volumes_and_tells_the_pod() {
    let plugin = start_with(1).await;
    let mut node = NodeClient::new(plugin.channel.clone());
    let first = publish_request("csi-1", "team-ca");
    node.node_publish_volume(first.clone()).await.unwrap();
    let refused = node
        .node_publish_volume(publish_request("csi-2", "team-ca"))
        .await
        .unwrap_err();
    let message = "node node-1 holds 1 certificate volumes, its limit (--max-volumes 1); \
                   kubelet retries once other pods' volumes are released";
    assert_eq!(
        (refused.code(), refused.message()),
        (Code::ResourceExhausted, message)
    );
    assert_eq!(
        plugin.issuer.0.load(Ordering::SeqCst),
        1,
        "no issuance for the refused volume"
    );
    assert_eq!(
        *plugin.issuer.1.lock().unwrap(),
        [format!("web-0 VolumeLimitReached: {message}")]
    );
    assert!(!plugin.store.join("csi-2").exists());
    node.node_publish_volume(first.clone()).await.unwrap();
    node.node_unpublish_volume(NodeUnpublishVolumeRequest {
        volume_id: "csi-1".into(),
        target_path: first.target_path.clone(),
    })
    .await
    .unwrap();
    node.node_publish_volume(publish_request("csi-2", "team-ca"))
        .await
        .unwrap();
    assert_eq!(plugin.issuer.0.load(Ordering::SeqCst), 2);
}
