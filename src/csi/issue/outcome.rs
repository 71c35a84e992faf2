//! What a CertificateRequest's status means for the volume waiting on it, and the Event a
//! denial leaves on the Pod: pure.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

use crate::api::certmanager::{
    CertificateRequest, CertificateRequestCondition, DENIED, INVALID_REQUEST, READY, REASON_DENIED,
    REASON_FAILED,
};
use crate::api::cut_at_char;
use crate::csi::attributes::PodInfo;
use crate::csi::node::Publish;

/// The longest `status.certificate` (or `status.ca`) taken into a volume: a leaf and a long
/// chain are a few KiB each; anything near this is not a chain a pod should be handed.
pub const MAX_PEM: usize = 256 * 1024;
/// The longest approver or issuer message repeated in an answer or an Event (the API server
/// takes Event notes of 1 KiB).
pub const MAX_NOTE: usize = 1000;

/// Where a request stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Neither issued nor refused yet (waiting for approval, or for the issuer).
    Waiting,
    Issued {
        certificate: String,
        ca: String,
    },
    /// The approver said no (`Denied=True`, or `Ready=False` with reason `Denied`).
    Denied(String),
    /// The issuer (or cert-manager, `InvalidRequest`) gave up on it.
    Failed(String),
}

fn condition<'a>(request: &'a CertificateRequest, type_: &str) -> Option<&'a CertificateRequestCondition> {
    request
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

fn note(message: &str) -> String {
    let mut note = message.to_string();
    if note.len() > MAX_NOTE {
        cut_at_char(&mut note, MAX_NOTE);
        note.push_str("...");
    }
    note
}

/// The request's outcome, as csi-lib reads it: a denial first, then a terminal `Ready`.
/// An issued certificate is taken without waiting for `Approved` (an issuer only signs what
/// was approved, and cert-manager's own issuers do the same).
pub fn outcome(request: &CertificateRequest) -> Outcome {
    if let Some(denied) = condition(request, DENIED).filter(|c| c.is_true()) {
        return Outcome::Denied(note(&denied.message));
    }
    if let Some(invalid) = condition(request, INVALID_REQUEST).filter(|c| c.is_true()) {
        return Outcome::Failed(note(&invalid.message));
    }
    let Some(ready) = condition(request, READY) else {
        return Outcome::Waiting;
    };
    match (ready.status.as_str(), ready.reason.as_str()) {
        ("True", _) => issued(request),
        ("False", REASON_DENIED) => Outcome::Denied(note(&ready.message)),
        ("False", REASON_FAILED) => Outcome::Failed(note(&ready.message)),
        _ => Outcome::Waiting,
    }
}

/// `Ready=True`: the certificate and CA, each bounded and text.
fn issued(request: &CertificateRequest) -> Outcome {
    let status = request.status.as_ref();
    let text = |field: &str, bytes: Option<&Vec<u8>>| -> Result<String, String> {
        let bytes = bytes.map(Vec::as_slice).unwrap_or_default();
        if bytes.len() > MAX_PEM {
            return Err(format!("its {field} is larger than {MAX_PEM} bytes"));
        }
        String::from_utf8(bytes.to_vec()).map_err(|_| format!("its {field} is not PEM text"))
    };
    let certificate = text(
        "certificate",
        status.and_then(|s| s.certificate.as_ref()).map(|b| &b.0),
    );
    let ca = text("ca", status.and_then(|s| s.ca.as_ref()).map(|b| &b.0));
    match (certificate, ca) {
        (Ok(certificate), _) if certificate.trim().is_empty() => {
            Outcome::Failed("it is Ready but has no certificate".to_string())
        }
        (Ok(certificate), Ok(ca)) => Outcome::Issued { certificate, ca },
        (Err(problem), _) | (_, Err(problem)) => Outcome::Failed(problem),
    }
}

/// Who reports the plugin's Events.
pub const REPORTER: &str = "cfssl-issuer-csi";

/// This node's plugin as an Event's `reportingInstance`, which the API server takes up to
/// 128 bytes of (a node name may be 253).
fn instance(node_id: &str) -> String {
    let mut instance = format!("{REPORTER}-{node_id}");
    cut_at_char(&mut instance, 128);
    instance
}

/// The Warning Event a denied request leaves on its Pod (the pod's owner sees it in
/// `kubectl describe pod`, where a failed mount is looked for).
pub fn denied_event(publish: &Publish, node_id: &str, request: &str, message: &str, now: Timestamp) -> Event {
    let note = format!(
        "volume {}: CertificateRequest {request} was denied: {message}",
        publish.volume_id
    );
    pod_event(
        &publish.pod,
        node_id,
        ("CertificateRequestDenied", "Issuing"),
        &note,
        now,
    )
}

/// A Warning Event on `pod` from this node's plugin with its `(reason, action)`, named as
/// client-go names a first occurrence: `<pod>.<nanoseconds in hex>`.
pub fn pod_event(
    pod: &PodInfo,
    node_id: &str,
    (reason, action): (&str, &str),
    message: &str,
    now: Timestamp,
) -> Event {
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{}.{:x}", pod.name, now.as_nanosecond())),
            namespace: Some(pod.namespace.clone()),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(now)),
        type_: Some("Warning".into()),
        reason: Some(reason.into()),
        action: Some(action.into()),
        note: Some(note(message)),
        regarding: Some(ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(pod.name.clone()),
            namespace: Some(pod.namespace.clone()),
            uid: Some(pod.uid.clone()),
            ..ObjectReference::default()
        }),
        reporting_controller: Some(REPORTER.into()),
        reporting_instance: Some(instance(node_id)),
        ..Event::default()
    }
}
