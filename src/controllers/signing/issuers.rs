//! The issuers a signing controller signs through: which one an object names ([`IssuerName`]),
//! what the caches show of it ([`Readiness`]), and the issuer itself ([`Found`]) to sign with.

use std::sync::Arc;

use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::{AnyIssuer, ClusterIssuer, Condition, Issuer, IssuerKind, ready_condition};
use crate::controllers::kit::status::schema::{ObservedGeneration, StatusSchemas, is_current};

/// One issuer, by kind, namespace (an Issuer's) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IssuerName {
    pub kind: IssuerKind,
    /// An Issuer's namespace; `None` for a ClusterIssuer.
    pub namespace: Option<String>,
    pub name: String,
}

impl IssuerName {
    pub fn of<K: AnyIssuer>(issuer: &K) -> Self {
        IssuerName {
            kind: K::KIND,
            namespace: issuer.namespace(),
            name: issuer.name_any(),
        }
    }

    /// `ClusterIssuer name` or `Issuer namespace/name`.
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }

    /// The stable key of logs, backoff, metrics and the client cache (see [`super::signer::key`]).
    pub fn key(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{}/{ns}/{}", self.kind, self.name),
            None => format!("{}/{}", self.kind, self.name),
        }
    }
}

/// What the caches show of an issuer, for the objects that name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    Missing,
    /// No Ready condition yet.
    Unchecked,
    /// A Ready condition computed for an older spec, or (where the schema holds it) without
    /// saying for which.
    Outdated,
    NotReady {
        reason: String,
        message: String,
    },
    Ready,
}

/// Pure: what an issuer's `Ready` condition says for the objects that name it.
pub fn readiness(
    ready: Option<&Condition>,
    generation: Option<i64>,
    schema: ObservedGeneration,
) -> Readiness {
    match ready {
        None => Readiness::Unchecked,
        Some(c) if !is_current(schema, c.observed_generation, generation) => Readiness::Outdated,
        Some(c) if c.is_true() => Readiness::Ready,
        Some(c) => Readiness::NotReady {
            reason: c.reason.clone(),
            message: c.message.clone(),
        },
    }
}

/// An issuer found in the caches, of either kind.
#[derive(Debug, Clone)]
pub enum Found {
    Issuer(Arc<Issuer>),
    ClusterIssuer(Arc<ClusterIssuer>),
}

/// The two issuer caches.
#[derive(Clone)]
pub struct Issuers {
    pub issuers: Store<Issuer>,
    pub cluster_issuers: Store<ClusterIssuer>,
}

impl Issuers {
    /// The issuer `name` names, from the caches.
    pub fn find(&self, name: &IssuerName) -> Option<Found> {
        match (name.kind, &name.namespace) {
            (IssuerKind::Issuer, Some(ns)) => self
                .issuers
                .get(&ObjectRef::new(&name.name).within(ns))
                .map(Found::Issuer),
            (IssuerKind::Issuer, None) => None,
            (IssuerKind::ClusterIssuer, _) => self
                .cluster_issuers
                .get(&ObjectRef::new(&name.name))
                .map(Found::ClusterIssuer),
        }
    }

    /// What the caches show of the issuer `name` names.
    pub fn readiness(&self, name: &IssuerName, schemas: &StatusSchemas) -> Readiness {
        let schema = schemas.get(name.kind);
        match self.find(name) {
            None => Readiness::Missing,
            Some(Found::Issuer(i)) => of(&*i, schema),
            Some(Found::ClusterIssuer(i)) => of(&*i, schema),
        }
    }

    /// Every issuer of `kind` in the cache.
    pub fn all(&self, kind: IssuerKind) -> Vec<IssuerName> {
        match kind {
            IssuerKind::Issuer => self
                .issuers
                .state()
                .iter()
                .map(|i| IssuerName::of(&**i))
                .collect(),
            IssuerKind::ClusterIssuer => self
                .cluster_issuers
                .state()
                .iter()
                .map(|i| IssuerName::of(&**i))
                .collect(),
        }
    }
}

fn of<K: AnyIssuer>(issuer: &K, schema: ObservedGeneration) -> Readiness {
    readiness(ready_condition(issuer.status()), issuer.meta().generation, schema)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::api::ReadyReason;

    struct Case {
        name: &'static str,
        ready: Option<Condition>,
        generation: Option<i64>,
        schema: ObservedGeneration,
        want: Readiness,
    }

    #[test]
    fn readiness_table() {
        use ObservedGeneration::{Declared, NotDeclared, Unreadable};
        let at = Timestamp::UNIX_EPOCH;
        let ready = |observed| Some(Condition::ready(ReadyReason::Checked, "ok", at, observed));
        let down = Condition::ready(ReadyReason::CaUnreachable, "refused", at, Some(2));
        let not_ready = Readiness::NotReady {
            reason: "CAUnreachable".into(),
            message: "refused".into(),
        };
        let cases = [
            Case {
                name: "no condition",
                ready: None,
                generation: Some(2),
                schema: Declared,
                want: Readiness::Unchecked,
            },
            Case {
                name: "ready for this generation",
                ready: ready(Some(2)),
                generation: Some(2),
                schema: Declared,
                want: Readiness::Ready,
            },
            Case {
                name: "ready for an older generation",
                ready: ready(Some(1)),
                generation: Some(2),
                schema: Declared,
                want: Readiness::Outdated,
            },
            Case {
                name: "not ready",
                ready: Some(down),
                generation: Some(2),
                schema: Declared,
                want: not_ready,
            },
            Case {
                name: "no observedGeneration, our CRD",
                ready: ready(None),
                generation: Some(2),
                schema: Declared,
                want: Readiness::Outdated,
            },
            Case {
                name: "no observedGeneration, Go CRD",
                ready: ready(None),
                generation: Some(2),
                schema: NotDeclared,
                want: Readiness::Ready,
            },
            Case {
                name: "no observedGeneration, CRD unreadable",
                ready: ready(None),
                generation: Some(2),
                schema: Unreadable,
                want: Readiness::Ready,
            },
        ];
        for case in cases {
            let got = readiness(case.ready.as_ref(), case.generation, case.schema);
            assert_eq!(got, case.want, "{}", case.name);
        }
    }
}
