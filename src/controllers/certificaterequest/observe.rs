//! Observe: what the request controller reads before it decides, all from the object and the
//! shared caches.

use kube::ResourceExt;

use super::budget::Oversize;
use super::decide::{IssuerView, Ready, RequestView};
use crate::api::certmanager::{self, CertificateRequest, RequestReason};
use crate::api::{ConditionStatus, IssuerKind};
use crate::controllers::signing::IssuerName;
use crate::controllers::signing::pipeline::{Core, Observed};
use crate::pki::Chain;

/// The request's own state.
pub fn request_view(cr: &CertificateRequest) -> RequestView {
    let status = cr.status.as_ref();
    let ready = ready_of(cr);
    let pem = |bytes: Option<&k8s_openapi::ByteString>| {
        bytes
            .filter(|b| !b.0.is_empty())
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
    };
    let certificate = pem(status.and_then(|s| s.certificate.as_ref())).map(|certificates| Chain {
        certificates,
        ca: pem(status.and_then(|s| s.ca.as_ref())),
    });
    RequestView {
        ready,
        approved: cr.has_true(certmanager::APPROVED),
        denied: cr.has_true(certmanager::DENIED),
        invalid_request: cr.has_true(certmanager::INVALID_REQUEST),
        certificate,
        failure_time: status.and_then(|s| s.failure_time.clone()),
        created: cr.metadata.creation_timestamp.as_ref().map(|t| t.0),
        oversize: Oversize::of(cr),
        edited: edited(&cr.metadata),
    }
}

/// The generation of a request whose spec changed after it was made. A CertificateRequest's
/// spec is immutable (cert-manager's webhook, our CRDs' rule); where neither is installed a
/// tenant could have an approved request's CSR replaced, so the signer reads the API server's
/// count of spec changes: `metadata.generation` starts at 1 and grows with each spec change,
/// and once more when a deletion with finalizers begins.
pub fn edited(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<i64> {
    let generation = meta.generation?;
    let unchanged = if meta.deletion_timestamp.is_some() { 2 } else { 1 };
    (generation > unchanged).then_some(generation)
}

/// The request's `Ready` condition, typed.
pub fn ready_of(cr: &CertificateRequest) -> Option<Ready> {
    cr.condition(certmanager::READY).map(|c| Ready {
        status: ConditionStatus::parse(&c.status).unwrap_or(ConditionStatus::Unknown),
        reason: RequestReason::parse(&c.reason),
        message: c.message.clone(),
        since: c.last_transition_time.clone(),
    })
}

/// Whether the request is done (Issued, Failed, Denied), from its conditions alone.
pub fn is_terminal(cr: &CertificateRequest) -> bool {
    super::decide::is_terminal(&RequestView {
        ready: ready_of(cr),
        ..RequestView::default()
    })
}

/// What the request controller observed of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    pub request: RequestView,
    pub issuer: IssuerView,
}

/// Observe: the request and the issuer it names, from the shared caches; `None` when the
/// request is not for our group.
pub fn observe(cr: &CertificateRequest, core: &Core) -> Option<Observed<Observation>> {
    let name = &cr.spec.issuer_ref.name;
    let kind = match IssuerKind::for_issuer_ref(&cr.spec.issuer_ref)? {
        Err(other) => {
            return Some(Observed {
                issuer: None,
                view: Observation {
                    request: request_view(cr),
                    issuer: IssuerView::UnknownKind(other),
                },
            });
        }
        Ok(kind) => kind,
    };
    let issuer = IssuerName {
        kind,
        namespace: match kind {
            IssuerKind::Issuer => Some(cr.namespace().unwrap_or_default()),
            IssuerKind::ClusterIssuer => None,
        },
        name: name.clone(),
    };
    let state = core.issuers.readiness(&issuer, &core.shared.status_schemas);
    Some(Observed {
        issuer: Some(issuer),
        view: Observation {
            request: request_view(cr),
            issuer: IssuerView::Known {
                kind,
                name: name.clone(),
                state,
            },
        },
    })
}

/// The key of a request in backoff and memory: its UID.
pub fn request_key(cr: &CertificateRequest) -> String {
    cr.uid()
        .unwrap_or_else(|| format!("{}/{}", cr.namespace().unwrap_or_default(), cr.name_any()))
}
