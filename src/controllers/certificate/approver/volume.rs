//! The approver's judgement of a request that looks like the CSI plugin's (`cfssl-issuer csi`):
//! one per pod volume, owned by the Pod, with csi-lib's node and volume labels.
//!
//! No webhook fills `spec.username`, so who created a request is unknown: anyone who may create
//! requests in a namespace can make one that looks like the plugin's. So nothing the request
//! says is believed; it is approved only when the live Pod it names (read by name, its UID
//! compared) is scheduled, not terminated, has an inline volume of our driver whose kubelet ID
//! hashes to the volume label on the node the node label names, and that volume's attributes,
//! read as the plugin reads them, ask for exactly this request. What a tenant can forge is then
//! only a request the pod's own volume would have made anyway. Anything else is left
//! unapproved, never denied (approver-policy may still decide it), with one Event saying which
//! check failed.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::api::certmanager::{APPROVED, CertificateRequest, DENIED};
use crate::api::{GROUP, IssuerKind};
use crate::controllers::kit::events::Notice;
use crate::controllers::kit::plan::{Next, Plan};
use crate::csi::approval::{request_differs, volume_of};
use crate::csi::issue::shape::{NODE_ID_HASH, VOLUME_ID_HASH, hash_identifier};

/// Which check a request that looks like the plugin's failed: the Event's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failed {
    #[error("it must have exactly one ownerReference, a Pod")]
    Owner,
    #[error("its Pod {0:?} does not exist")]
    PodGone(String),
    #[error("its Pod {0:?} has another UID (the owner was deleted, or never existed)")]
    PodUid(String),
    #[error("its Pod {0:?} is not scheduled to a node")]
    NotScheduled(String),
    #[error("its Pod {0:?} has terminated or is being deleted")]
    Terminated(String),
    #[error("its {NODE_ID_HASH} label is not the hash of its Pod's node {0:?}")]
    Node(String),
    #[error("its {VOLUME_ID_HASH} label names no inline volume of driver {driver} of its Pod {0:?}", driver = crate::csi::identity::DRIVER_NAME)]
    Volume(String),
    #[error("the attributes of volume {0:?} are invalid: {1}")]
    Attributes(String, String),
    #[error("its CSR cannot be read: {0}")]
    Csr(String),
    #[error("it asks for other {fields} than volume {0:?} does", fields = .1.join(", "))]
    Differs(String, Vec<String>),
    #[error("its issuerRef kind {0:?} is not one of ours (Issuer, ClusterIssuer)")]
    IssuerKind(String),
}

/// The judgement: approve (`Ok`), or the check that failed.
pub type Verdict = Result<(), Failed>;

/// Whether `cr` is the plugin's kind of request, for this judgement: undecided, for one of our
/// issuers, and claiming a Pod or carrying csi-lib's labels (a request with neither is no
/// business of the approver).
pub fn claims(cr: &CertificateRequest) -> bool {
    if cr.condition(APPROVED).is_some() || cr.condition(DENIED).is_some() {
        return false;
    }
    let labels = cr.labels();
    cr.spec.issuer_ref.group == GROUP
        && (labels.contains_key(NODE_ID_HASH)
            || labels.contains_key(VOLUME_ID_HASH)
            || cr.owner_references().iter().any(|o| o.kind == "Pod"))
}

/// The name of the Pod to read: the one owner reference, when it is a Pod.
pub fn pod_name(cr: &CertificateRequest) -> Option<&str> {
    match cr.owner_references() {
        [owner] if owner.kind == "Pod" && owner.api_version == "v1" => Some(&owner.name),
        _ => None,
    }
}

/// Whether `cr` is what the CSI plugin asks for a volume of `pod` (the live Pod its owner
/// reference names, `None` when there is none): the checks in order, the first failure named.
pub fn verdict(cr: &CertificateRequest, pod: Option<&Pod>) -> Verdict {
    if let Some(Err(kind)) = IssuerKind::for_issuer_ref(&cr.spec.issuer_ref) {
        return Err(Failed::IssuerKind(kind));
    }
    let pod = the_pod(cr, pod)?;
    let name = pod.name_any();
    let node = scheduled(pod, &name)?;
    if cr.labels().get(NODE_ID_HASH) != Some(&hash_identifier(node)) {
        return Err(Failed::Node(node.to_string()));
    }
    let hash = cr.labels().get(VOLUME_ID_HASH).map_or("", String::as_str);
    let volume = volume_of(pod, hash).ok_or_else(|| Failed::Volume(name.clone()))?;
    let attributes = volume
        .attributes
        .map_err(|e| Failed::Attributes(volume.name.clone(), e.to_string()))?;
    match request_differs(cr, &attributes).map_err(Failed::Csr)? {
        differ if differ.is_empty() => Ok(()),
        differ => Err(Failed::Differs(volume.name, differ)),
    }
}

/// The Pod the one owner reference names, the same object (UID) and not another of its name.
fn the_pod<'a>(cr: &CertificateRequest, pod: Option<&'a Pod>) -> Result<&'a Pod, Failed> {
    let name = pod_name(cr).ok_or(Failed::Owner)?;
    let pod = pod.ok_or_else(|| Failed::PodGone(name.to_string()))?;
    let owner_uid = cr.owner_references().first().map(|o| o.uid.as_str());
    if pod.metadata.uid.as_deref() != owner_uid || pod.name_any() != name {
        return Err(Failed::PodUid(name.to_string()));
    }
    Ok(pod)
}

/// The node of a Pod that may still mount volumes: scheduled, not finished, not being deleted.
fn scheduled<'a>(pod: &'a Pod, name: &str) -> Result<&'a str, Failed> {
    let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
    let node = node
        .filter(|n| !n.is_empty())
        .ok_or_else(|| Failed::NotScheduled(name.into()))?;
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) || pod.metadata.deletion_timestamp.is_some() {
        return Err(Failed::Terminated(name.into()));
    }
    Ok(node)
}

/// The approver's plan for the verdict on a volume's request; `said` is the message of the
/// Event published on it before, if any: a failure already told is not told again on every
/// reconcile (each status write on the request brings it back).
pub fn decide(verdict: Verdict, said: Option<&str>, now: Timestamp) -> Plan<()> {
    match verdict {
        // As for a Certificate's request: the condition, and the Normal Event cert-manager's
        // approver records.
        Ok(()) => Plan {
            status: Some(super::approval(now)),
            event: Some(Notice::normal(super::REASON, "Approve", super::MESSAGE)),
            next: Next::AwaitChange,
        },
        Err(failed) => {
            let note = note(&failed);
            if said == Some(note.as_str()) {
                return Plan::idle(Next::AwaitChange);
            }
            Plan {
                status: None,
                event: Some(Notice::warning("NotApproved", "Approve", &note)),
                next: Next::AwaitChange,
            }
        }
    }
}

/// The Event's message for a failed check.
pub fn note(failed: &Failed) -> String {
    format!(
        "Not a request of the CSI driver's for a volume of its Pod ({failed}): not approved by cfssl-issuer"
    )
}

/// Entries beyond which [`Said`] starts over: one lives as long as its request is undecided.
const SAID_MAX: usize = 16_384;

/// By request UID, the message of the last Event the approver published on it.
#[derive(Default)]
pub struct Said(Mutex<HashMap<String, String>>);

impl Said {
    pub fn get(&self, uid: &str) -> Option<String> {
        crate::clock::lock(&self.0).get(uid).cloned()
    }

    pub fn set(&self, uid: &str, note: String) {
        let mut said = crate::clock::lock(&self.0);
        if said.len() >= SAID_MAX {
            said.clear();
        }
        said.insert(uid.to_string(), note);
    }
}

#[cfg(test)]
mod tests;
