//! What a Node call asks, checked before anything is touched: pure, so each refusal is a
//! table row with its gRPC code and exact message.

use std::collections::BTreeMap;

use tonic::{Code, Status};

use crate::csi::attributes::{self, Attributes, PodInfo, kubelet};
use crate::csi::proto::volume_capability::AccessType;
use crate::csi::proto::{NodePublishVolumeRequest, NodeUnpublishVolumeRequest};
use crate::csi::store::{Metadata, valid_volume_id};

/// A Publish that may go ahead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publish {
    pub volume_id: String,
    pub target_path: String,
    pub pod: PodInfo,
    pub attributes: Attributes,
    /// The group the files are given: `fs-group`, else the pod's fsGroup from kubelet.
    pub group: Option<u32>,
    /// What the store keeps (the token dropped).
    pub metadata: Metadata,
}

fn invalid(message: impl Into<String>) -> Status {
    Status::new(Code::InvalidArgument, message)
}

fn volume_id(id: &str) -> Result<(), Status> {
    if id.is_empty() {
        return Err(invalid("volume_id is empty"));
    }
    if !valid_volume_id(id) {
        return Err(invalid(format!(
            "volume_id {id:?} is not one this plugin can store: letters, digits, '-', '_' and \
             '.', not first, at most 128"
        )));
    }
    Ok(())
}

/// The request's shape: everything kubelet decides, before the volume's attributes.
fn shape(request: &NodePublishVolumeRequest) -> Result<Option<u32>, Status> {
    volume_id(&request.volume_id)?;
    if request.target_path.is_empty() {
        return Err(invalid("target_path is empty"));
    }
    let Some(capability) = &request.volume_capability else {
        return Err(invalid("volume_capability is missing"));
    };
    let mount = match &capability.access_type {
        Some(AccessType::Mount(mount)) => mount,
        Some(AccessType::Block(_)) => {
            return Err(invalid(
                "a block volume cannot hold certificate files: this driver serves mount volumes",
            ));
        }
        None => return Err(invalid("volume_capability has no access type (mount)")),
    };
    if !request.readonly {
        return Err(invalid(
            "pod.spec.volumes[].csi.readOnly must be true: the certificate files are read-only",
        ));
    }
    mount_group(&mount.volume_mount_group)
}

fn mount_group(group: &str) -> Result<Option<u32>, Status> {
    if group.is_empty() {
        return Ok(None);
    }
    match group.parse::<u32>() {
        Ok(gid) => Ok(Some(gid)),
        Err(_) => Err(invalid(format!("volume_mount_group {group:?} is not a group ID"))),
    }
}

/// Checks a Publish: its shape, an inline volume with kubelet's pod info, and every attribute.
pub fn publish(request: &NodePublishVolumeRequest) -> Result<Publish, Status> {
    let mount_group = shape(request)?;
    // Ordered: problems and stored metadata come out the same every time.
    let context: &BTreeMap<String, String> = &request.volume_context.clone().into_iter().collect();
    if context.get(kubelet::EPHEMERAL).map(String::as_str) != Some("true") {
        return Err(invalid(format!(
            "only inline pod volumes are served, and {} is not \"true\": the CSIDriver needs \
             volumeLifecycleModes [Ephemeral] and podInfoOnMount true",
            kubelet::EPHEMERAL
        )));
    }
    let Some(pod) = PodInfo::from_context(context) else {
        return Err(invalid(
            "kubelet sent no pod name, namespace and UID: the CSIDriver needs podInfoOnMount true",
        ));
    };
    let attributes = attributes::parse(context, &pod).map_err(|e| invalid(e.to_string()))?;
    let group = attributes.fs_group.or(mount_group);
    let mut metadata = Metadata::new(&request.volume_id, &request.target_path, context);
    metadata.volume_mount_group = mount_group.map(|g| g.to_string());
    Ok(Publish {
        volume_id: request.volume_id.clone(),
        target_path: request.target_path.clone(),
        pod,
        attributes,
        group,
        metadata,
    })
}

/// A Publish of a volume the store already holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Again {
    /// The same volume: nothing to issue, only make sure it is mounted.
    Issued,
    /// Never issued (a Publish that failed or is still waiting): issue.
    Pending,
}

/// Compares a Publish with what the store holds of the same volume ID.
pub fn again(stored: &Metadata, publish: &Publish) -> Result<Again, Status> {
    if stored.target_path != publish.target_path {
        return Err(Status::already_exists(format!(
            "volume {} is published at another target, {}",
            publish.volume_id, stored.target_path
        )));
    }
    // The token is not kept, so a re-publish with a fresh one (requiresRepublish) matches.
    if stored.volume_context() != publish.metadata.volume_context()
        || stored.volume_mount_group != publish.metadata.volume_mount_group
    {
        return Err(Status::already_exists(format!(
            "volume {} is published with other attributes",
            publish.volume_id
        )));
    }
    Ok(match stored.next_issuance_time {
        Some(_) => Again::Issued,
        None => Again::Pending,
    })
}

/// Checks an Unpublish; a volume the store does not hold is no error (the spec asks for it).
pub fn unpublish(request: &NodeUnpublishVolumeRequest) -> Result<(), Status> {
    if request.volume_id.is_empty() {
        return Err(invalid("volume_id is empty"));
    }
    if request.target_path.is_empty() {
        return Err(invalid("target_path is empty"));
    }
    Ok(())
}

/// Whether a volume whose issuance failed with `code` stays in the store: only one whose
/// request is still in flight (DEADLINE_EXCEEDED), so kubelet's retry resumes the same request
/// and key; after any other failure nothing of a volume is left, since kubelet never
/// unpublishes a volume whose Publish failed.
pub fn keep_after(code: Code) -> bool {
    code == Code::DeadlineExceeded
}

/// Whether a node holding `held` volumes may take a new one. The scheduler does not count
/// inline CSI volumes, so a full node keeps getting pods: each waits, with this message, until
/// volumes are released (kubelet retries the Publish).
pub fn room(held: usize, max: usize, node: &str) -> Result<(), Status> {
    if held < max {
        return Ok(());
    }
    Err(Status::resource_exhausted(format!(
        "node {node} holds {held} certificate volumes, its limit (--max-volumes {max}); \
         kubelet retries once other pods' volumes are released"
    )))
}
