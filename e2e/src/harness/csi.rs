//! Driving the CSI node plugin as kubelet does: its unix socket, a Publish of a pod's inline
//! volume with kubelet's pod info, and a Pod object that declares the volume (what standalone
//! mode's approver reads).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use cfssl_issuer::csi::identity::DRIVER_NAME;
use cfssl_issuer::csi::proto::volume_capability::{AccessType, MountVolume};
use cfssl_issuer::csi::proto::{NodePublishVolumeRequest, VolumeCapability};
use k8s_openapi::api::core::v1::Pod;
use tonic::transport::{Channel, Endpoint};

/// The pod a volume is for, as kubelet's pod info keys name it.
#[derive(Debug, Clone, Copy)]
pub struct PodRef<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    pub uid: &'a str,
}

/// kubelet's target for inline volume `volume` of the pod with `uid`.
pub fn kubelet_target(uid: &str, volume: &str) -> String {
    format!("/var/lib/kubelet/pods/{uid}/volumes/kubernetes.io~csi/{volume}/mount")
}

/// kubelet's Publish of `volume_id` onto `target`: `attributes` with the pod's info, read-only,
/// a mount volume.
pub fn publish_request(
    volume_id: &str,
    target: String,
    pod: PodRef<'_>,
    attributes: impl IntoIterator<Item = (String, String)>,
) -> NodePublishVolumeRequest {
    let mut context: HashMap<String, String> = attributes.into_iter().collect();
    for (k, v) in [
        ("csi.storage.k8s.io/pod.name", pod.name),
        ("csi.storage.k8s.io/pod.namespace", pod.namespace),
        ("csi.storage.k8s.io/pod.uid", pod.uid),
        ("csi.storage.k8s.io/serviceAccount.name", "default"),
        ("csi.storage.k8s.io/ephemeral", "true"),
    ] {
        context.insert(k.into(), v.into());
    }
    NodePublishVolumeRequest {
        volume_id: volume_id.into(),
        target_path: target,
        volume_capability: Some(VolumeCapability {
            access_type: Some(AccessType::Mount(MountVolume::default())),
            access_mode: None,
        }),
        readonly: true,
        volume_context: context,
        ..Default::default()
    }
}

/// What the scenarios' volumes ask: an ECDSA key and the pod's service name from Issuer
/// `team-ca`.
pub const TEAM_CA_ECDSA: [(&str, &str); 3] = [
    ("csi.cert-manager.io/issuer-name", "team-ca"),
    (
        "csi.cert-manager.io/dns-names",
        "${POD_NAME}.${POD_NAMESPACE}.svc",
    ),
    ("csi.cert-manager.io/key-algorithm", "ECDSA"),
];

/// kubelet's Publish of inline volume `volume` (its ID as the volume's name) onto its target
/// under `/var/lib/kubelet`.
pub fn inline_publish(
    volume: &str,
    pod: PodRef<'_>,
    attributes: BTreeMap<String, String>,
) -> NodePublishVolumeRequest {
    publish_request(volume, kubelet_target(pod.uid, volume), pod, attributes)
}

/// `pairs` as owned attributes.
pub fn attributes(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A Pod `name` scheduled to `node` whose inline volume `tls` of our driver asks `attributes`.
pub fn pod_with_volume(name: &str, node: &str, attributes: &BTreeMap<String, String>) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "serviceAccountName": "default",
            "containers": [{"name": "app", "image": "registry.example/app:1"}],
            "volumes": [{"name": "tls", "csi": {
                "driver": DRIVER_NAME, "readOnly": true, "volumeAttributes": attributes,
            }}],
        },
    }))?)
}

/// A gRPC channel to the plugin's unix socket (`:authority` `localhost`: tonic refuses a path).
pub async fn connect(socket: PathBuf) -> anyhow::Result<Channel> {
    Ok(Endpoint::try_from("http://localhost")?
        .connect_with_connector(tower::service_fn(move |_: http::Uri| {
            let socket = socket.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(socket).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
        .await?)
}

/// `openssl <args> -in <file>`'s output: how the scenarios read a volume's files, with a tool
/// that is not our code.
pub fn openssl_in(args: &[&str], file: &std::path::Path) -> anyhow::Result<String> {
    let out = std::process::Command::new("openssl")
        .args(args)
        .arg("-in")
        .arg(file)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
}
