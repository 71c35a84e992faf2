//! What an approver needs to know of the plugin to judge a request that looks like one of its
//! own, from the Pod alone (pure): the volume ID kubelet gives an inline volume, a pod's
//! volumes of this driver with the context kubelet would send for each, and whether a request
//! asks for exactly what such a volume's attributes make the plugin ask.
//!
//! It stays here, beside the code that makes the request (`issue/shape.rs`), so the two
//! cannot drift apart unseen; the approver (in `controllers`) only calls it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use sha2::{Digest, Sha256};

use crate::api::certmanager::{CertificateRequest, CertificateSpec, IssuerRef};
use crate::certificates::go::format_go_duration;
use crate::certificates::matching::request_matches_spec;
use crate::csi::attributes::{self, Attributes, Invalid, PodInfo, kubelet};
use crate::csi::identity::DRIVER_NAME;
use crate::csi::issue::shape::{self, hash_identifier};
use crate::pki::check_csr_pem;

/// kubelet's ID of inline volume `volume` of the pod of `pod_uid`: `csi-` and the hex SHA-256
/// of the UID and the volume's name, concatenated (`makeVolumeHandle` in kubernetes'
/// `pkg/volume/csi/csi_mounter.go`, called by `NewMounter` in `csi_plugin.go` for a volume
/// source inline in the pod). It is what the plugin hashes into the request's volume label.
pub fn volume_handle(pod_uid: &str, volume: &str) -> String {
    let digest = Sha256::new()
        .chain_update(pod_uid.as_bytes())
        .chain_update(volume.as_bytes())
        .finalize();
    format!("csi-{}", hex::encode(digest))
}

/// One of a pod's inline volumes of this driver, as the plugin would read its Publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodVolume {
    /// The volume's name in the pod spec.
    pub name: String,
    /// kubelet's volume ID ([`volume_handle`]).
    pub id: String,
    /// The attributes, read exactly as the plugin reads them.
    pub attributes: Result<Attributes, Invalid>,
}

/// The pod info kubelet sends with `podInfoOnMount: true`: the service account is the spec's
/// `serviceAccountName` (`podAttributes` in `csi_mounter.go`).
pub fn pod_info(pod: &Pod) -> PodInfo {
    let spec = pod.spec.as_ref();
    PodInfo {
        name: pod.metadata.name.clone().unwrap_or_default(),
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        service_account: spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
    }
}

/// The context kubelet sends for a volume with `attributes` of `pod`: the volume's attributes,
/// then the pod info over them (kubelet's `mergeMap` lets its own keys win). The token is left
/// out: the plugin never reads it into a request.
pub fn volume_context(attributes: &BTreeMap<String, String>, pod: &PodInfo) -> BTreeMap<String, String> {
    let mut context = attributes.clone();
    for (key, value) in [
        (kubelet::POD_NAME, pod.name.as_str()),
        (kubelet::POD_NAMESPACE, pod.namespace.as_str()),
        (kubelet::POD_UID, pod.uid.as_str()),
        (kubelet::SERVICE_ACCOUNT_NAME, pod.service_account.as_str()),
        (kubelet::EPHEMERAL, "true"),
    ] {
        context.insert(key.to_string(), value.to_string());
    }
    context
}

/// The pod's inline volume of this driver whose ID hashes to `volume_hash` (a request's
/// `volume-id-hash` label), read as the plugin would read its Publish.
pub fn volume_of(pod: &Pod, volume_hash: &str) -> Option<PodVolume> {
    let info = pod_info(pod);
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref())?;
    volumes.iter().find_map(|volume| {
        let csi = volume.csi.as_ref().filter(|c| c.driver == DRIVER_NAME)?;
        let id = volume_handle(&info.uid, &volume.name);
        if hash_identifier(&id) != volume_hash {
            return None;
        }
        let given = csi.volume_attributes.clone().unwrap_or_default();
        let context = volume_context(&given.into_iter().collect(), &info);
        Some(PodVolume {
            name: volume.name.clone(),
            id,
            attributes: attributes::parse(&context, &info),
        })
    })
}

/// The Certificate spec a request the plugin made from `attributes` matches: its CSR's subject
/// and names (`shape::certificate_spec`, the builder's input), its issuer and its duration.
pub fn expected_spec(attributes: &Attributes) -> CertificateSpec {
    let nanos = i64::try_from(attributes.duration.as_nanos()).unwrap_or(i64::MAX);
    CertificateSpec {
        issuer_ref: IssuerRef {
            name: attributes.issuer.name.clone(),
            kind: attributes.issuer.kind.clone(),
            group: attributes.issuer.group.clone(),
            ..IssuerRef::default()
        },
        duration: Some(format_go_duration(nanos)),
        ..shape::certificate_spec(attributes)
    }
}

/// What of `request` differs from what the plugin asks for a volume of `attributes`, by field
/// (cert-manager's names, as its approver-policy reports them); empty when nothing does. The
/// CSR's values are compared decoded, never as bytes: the key, and so the CSR, is the
/// requester's own. `Err`: the CSR cannot be read or its signature does not verify.
pub fn request_differs(request: &CertificateRequest, attributes: &Attributes) -> Result<Vec<String>, String> {
    let checked = check_csr_pem(&request.spec.request.0).map_err(|e| e.to_string())?;
    let spec = expected_spec(attributes);
    let mut differ = request_matches_spec(request, &spec).map_err(|e| e.to_string())?;
    // `request_matches_spec` compares durations only when both name one; the plugin's always does.
    if request.spec.duration.is_none() {
        differ.push("spec.duration".into());
    }
    if checked.key_spec() != Some(attributes.key) {
        differ.push("spec.privateKey".into());
    }
    Ok(differ)
}

#[cfg(test)]
mod tests;
