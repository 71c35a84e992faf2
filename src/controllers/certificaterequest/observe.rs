//! Observe: what the request controller reads before it decides, all from the object and the
//! shared caches.

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use super::RequestContext;
use super::decide::{IssuerState, IssuerView, Ready, RequestView};
use crate::api::certmanager::{self, CertificateRequest, RequestReason};
use crate::api::{AnyIssuer, Condition, ConditionStatus, IssuerKind, ready_condition};
use crate::controllers::status::schema::{ObservedGeneration, is_current};
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
    }
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

/// The issuer the request names, from the shared caches; `None` when the request is not for
/// our group.
pub fn issuer_view(cr: &CertificateRequest, ctx: &RequestContext) -> Option<IssuerView> {
    let name = &cr.spec.issuer_ref.name;
    let kind = match IssuerKind::for_issuer_ref(&cr.spec.issuer_ref)? {
        Err(other) => return Some(IssuerView::UnknownKind(other)),
        Ok(kind) => kind,
    };
    let schema = ctx.shared.status_schemas.get(kind);
    let state = match kind {
        IssuerKind::Issuer => {
            let ns = cr.namespace().unwrap_or_default();
            state_of(
                ctx.issuers.get(&ObjectRef::new(name).within(&ns)).as_deref(),
                schema,
            )
        }
        IssuerKind::ClusterIssuer => {
            state_of(ctx.cluster_issuers.get(&ObjectRef::new(name)).as_deref(), schema)
        }
    };
    Some(IssuerView::Known {
        kind,
        name: name.clone(),
        state,
    })
}

fn state_of<K: AnyIssuer>(issuer: Option<&K>, schema: ObservedGeneration) -> IssuerState {
    match issuer {
        None => IssuerState::Missing,
        Some(issuer) => issuer_state(ready_condition(issuer.status()), issuer.meta().generation, schema),
    }
}

/// Pure: what an issuer's `Ready` condition says for requests. A condition computed for an
/// older spec, or (where the schema holds it) without saying for which, is not checked yet.
pub fn issuer_state(
    ready: Option<&Condition>,
    generation: Option<i64>,
    schema: ObservedGeneration,
) -> IssuerState {
    match ready {
        None => IssuerState::Unchecked,
        Some(c) if !is_current(schema, c.observed_generation, generation) => IssuerState::Unchecked,
        Some(c) if c.is_true() => IssuerState::Ready,
        Some(c) => IssuerState::NotReady {
            reason: c.reason.clone(),
            message: c.message.clone(),
        },
    }
}

/// The key of a request in backoff and memory: its UID.
pub fn request_key(cr: &CertificateRequest) -> String {
    cr.uid()
        .unwrap_or_else(|| format!("{}/{}", cr.namespace().unwrap_or_default(), cr.name_any()))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::api::ReadyReason;

    #[test]
    fn issuer_state_table() {
        use ObservedGeneration::{Declared, NotDeclared, Unreadable};
        let at = Timestamp::UNIX_EPOCH;
        let ready = |observed| Condition::ready(ReadyReason::Checked, "ok", at, observed);
        let down = Condition::ready(ReadyReason::CaUnreachable, "refused", at, Some(2));
        let not_ready = IssuerState::NotReady {
            reason: "CAUnreachable".into(),
            message: "refused".into(),
        };
        // (row, Ready condition, generation, schema, want)
        let cases = [
            ("no condition", None, Some(2), Declared, IssuerState::Unchecked),
            (
                "ready for this generation",
                Some(ready(Some(2))),
                Some(2),
                Declared,
                IssuerState::Ready,
            ),
            (
                "ready for an older generation",
                Some(ready(Some(1))),
                Some(2),
                Declared,
                IssuerState::Unchecked,
            ),
            ("not ready", Some(down), Some(2), Declared, not_ready),
            (
                "no observedGeneration, our CRD",
                Some(ready(None)),
                Some(2),
                Declared,
                IssuerState::Unchecked,
            ),
            (
                "no observedGeneration, Go CRD",
                Some(ready(None)),
                Some(2),
                NotDeclared,
                IssuerState::Ready,
            ),
            (
                "no observedGeneration, CRD unreadable",
                Some(ready(None)),
                Some(2),
                Unreadable,
                IssuerState::Ready,
            ),
        ];
        for (row, condition, generation, schema, want) in cases {
            assert_eq!(
                issuer_state(condition.as_ref(), generation, schema),
                want,
                "{row}"
            );
        }
    }
}
