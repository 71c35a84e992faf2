//! What the plugin's unit tests share: the volume context kubelet sends for one pod.

use crate::csi::attributes::{key, kubelet};

/// The context of a volume of pod `shop/web-0` asking issuer `ca`, with `extra` added or
/// replacing; as a `BTreeMap` (attributes) or a `HashMap` (a gRPC request).
pub fn pod_context<M: FromIterator<(String, String)>>(extra: &[(&str, &str)]) -> M {
    let base = [
        (kubelet::POD_NAME, "web-0"),
        (kubelet::POD_NAMESPACE, "shop"),
        (kubelet::POD_UID, "0b9d"),
        (kubelet::SERVICE_ACCOUNT_NAME, "web"),
        (kubelet::EPHEMERAL, "true"),
        (key::ISSUER_NAME, "ca"),
    ];
    let mut pairs: std::collections::BTreeMap<&str, &str> = base.into_iter().collect();
    pairs.extend(extra.iter().copied());
    pairs
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Pod `shop/web-0` (UID `0b9d`, service account `web`) on `node-1`, with an emptyDir `cache`
/// and volume `tls` of this driver asking for `attributes`.
pub fn pod(attributes: &[(&str, &str)]) -> k8s_openapi::api::core::v1::Pod {
    let attributes: std::collections::BTreeMap<&str, &str> = attributes.iter().copied().collect();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web-0", "namespace": "shop", "uid": "0b9d"},
        "spec": {
            "nodeName": "node-1",
            "serviceAccountName": "web",
            "containers": [{"name": "app"}],
            "volumes": [
                {"name": "cache", "emptyDir": {}},
                {"name": "tls", "csi": {
                    "driver": crate::csi::identity::DRIVER_NAME,
                    "readOnly": true,
                    "volumeAttributes": attributes,
                }},
            ],
        },
        "status": {"phase": "Running"},
    }))
    .expect("a pod")
}

/// The Publish kubelet sends for a read-only mount volume `volume_id` at `target`.
pub fn publish_request(
    volume_id: &str,
    target: &str,
    context: std::collections::HashMap<String, String>,
) -> crate::csi::proto::NodePublishVolumeRequest {
    use crate::csi::proto::volume_capability::{AccessType, MountVolume};
    crate::csi::proto::NodePublishVolumeRequest {
        volume_id: volume_id.into(),
        target_path: target.into(),
        volume_capability: Some(crate::csi::proto::VolumeCapability {
            access_type: Some(AccessType::Mount(MountVolume::default())),
            access_mode: None,
        }),
        readonly: true,
        volume_context: context,
        ..Default::default()
    }
}

/// The request the plugin on `node` makes for volume `volume` of `pod`, from the Publish
/// kubelet would send, its CSR signed with a fixture key of the spec the volume asks for.
pub fn plugin_request(
    pod: &k8s_openapi::api::core::v1::Pod,
    volume: &str,
    node: &str,
) -> crate::api::certmanager::CertificateRequest {
    use crate::csi::approval::{pod_info, volume_context, volume_handle};
    use crate::csi::issue::shape;
    let info = pod_info(pod);
    let given = pod.spec.as_ref().and_then(|s| s.volumes.as_ref()).and_then(|v| {
        v.iter()
            .find(|v| v.name == volume)
            .and_then(|v| v.csi.as_ref()?.volume_attributes.clone())
    });
    let context = volume_context(&given.unwrap_or_default().into_iter().collect(), &info);
    let target = format!(
        "/var/lib/kubelet/pods/{}/volumes/kubernetes.io~csi/{volume}/mount",
        info.uid
    );
    let request = publish_request(
        &volume_handle(&info.uid, volume),
        &target,
        context.into_iter().collect(),
    );
    let publish = crate::csi::node::decide::publish(&request).expect("a valid Publish");
    let key = crate::certificates::fixtures::key(publish.attributes.key, false);
    let spec = shape::certificate_spec(&publish.attributes);
    let csr = crate::pki::request::build_csr(&spec, key).expect("a CSR");
    shape::certificate_request(&publish, node, "3f1c0d4e-0000-4000-8000-000000000000", &csr)
}

/// The scripted end of a tower-test client: each request the code under test sends, answered
/// by the test.
pub type ApiHandle =
    tower_test::mock::Handle<http::Request<kube::client::Body>, http::Response<kube::client::Body>>;

/// The next request sent through `handle` within `step`: its method, URI (with the query), JSON
/// body (`Null` when none) and where its answer goes.
pub async fn next_call(
    handle: &mut ApiHandle,
    step: std::time::Duration,
) -> (
    http::Method,
    String,
    serde_json::Value,
    tower_test::mock::SendResponse<http::Response<kube::client::Body>>,
) {
    let (request, send) = tokio::time::timeout(step, handle.next_request())
        .await
        .expect("an API request in time")
        .expect("the client is alive");
    let method = request.method().clone();
    let uri = request.uri().to_string();
    let bytes = request.into_body().collect_bytes().await.unwrap();
    let body = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    (method, uri, body, send)
}

/// Answers a scripted request with `status` and the JSON `body`.
pub fn answer(
    send: tower_test::mock::SendResponse<http::Response<kube::client::Body>>,
    status: http::StatusCode,
    body: &serde_json::Value,
) {
    let body = kube::client::Body::from(serde_json::to_vec(body).unwrap());
    send.send_response(http::Response::builder().status(status).body(body).unwrap());
}
