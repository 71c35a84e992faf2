//! What the installed Issuer and ClusterIssuer CRDs let a status hold.
//!
//! Our CRDs declare `status.conditions[].observedGeneration`; the Go cfssl-issuer's CRDs, which
//! users may keep, do not. Against those a server-side apply that sets the field is refused
//! whole ("field not declared in schema"), and a condition can never carry it. The manager
//! learns at start, and again whenever a CRD changes, which schema is installed (one watch per
//! CRD, by name); the issuer controller writes only what the schema declares and the request
//! controller judges conditions by the same knowledge.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use tokio::sync::watch;

use crate::api::{GROUP, IssuerKind, VERSION};

/// Whether the installed schema has `status.conditions[].observedGeneration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObservedGeneration {
    /// Not learned yet: behave as with our CRDs.
    Assumed,
    /// Declared (our CRDs): written, and a condition without it is not current.
    Declared,
    /// Not declared (the Go CRDs): never written, and a condition without it is current.
    NotDeclared,
    /// The CRD cannot be read (403): written as with our CRDs, but a condition without it
    /// counts as current, since the schema may not be able to hold it.
    Unreadable,
}

/// Pure: whether a status write includes `observedGeneration`.
pub fn writes_observed_generation(schema: ObservedGeneration) -> bool {
    schema != ObservedGeneration::NotDeclared
}

/// Pure: whether a condition computed for generation `observed` is current for an object at
/// `generation`. One without `observedGeneration` is current only where the schema cannot
/// (or may not) hold the field.
pub fn is_current(schema: ObservedGeneration, observed: Option<i64>, generation: Option<i64>) -> bool {
    match observed {
        Some(_) => observed == generation,
        None => matches!(
            schema,
            ObservedGeneration::NotDeclared | ObservedGeneration::Unreadable
        ),
    }
}

/// Pure: what `crd`'s schema for our served version says. A schema that keeps unknown fields
/// on the way down (`x-kubernetes-preserve-unknown-fields`) holds the field too; a CRD without
/// our version or without a schema tells nothing, so our own CRDs' behaviour stays.
pub fn declared_by(crd: &CustomResourceDefinition) -> ObservedGeneration {
    let schema = crd
        .spec
        .versions
        .iter()
        .find(|v| v.name == VERSION)
        .and_then(|v| v.schema.as_ref())
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|s| serde_json::to_value(s).ok());
    let Some(mut node) = schema else {
        return ObservedGeneration::Declared;
    };
    for step in ["status", "conditions", "[]", "observedGeneration"] {
        if node
            .get("x-kubernetes-preserve-unknown-fields")
            .and_then(Value::as_bool)
            == Some(true)
        {
            return ObservedGeneration::Declared;
        }
        let next = if step == "[]" {
            node.get("items")
        } else {
            node.get("properties").and_then(|p| p.get(step))
        };
        match next {
            Some(n) => node = n.clone(),
            None => return ObservedGeneration::NotDeclared,
        }
    }
    ObservedGeneration::Declared
}

/// The name of the CRD that defines `kind`.
pub fn crd_name(kind: IssuerKind) -> String {
    let plural = match kind {
        IssuerKind::Issuer => "issuers",
        IssuerKind::ClusterIssuer => "clusterissuers",
    };
    format!("{plural}.{GROUP}")
}

/// Pure: what a watch error teaches. Only a 403 says something lasting (RBAC does not let us
/// read the CRD); anything else is retried by the watcher and changes nothing.
pub fn learned_from_error(err: &watcher::Error) -> Option<ObservedGeneration> {
    let code = match err {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => s.code,
        watcher::Error::WatchError(s) => s.code,
        _ => return None,
    };
    (code == 403).then_some(ObservedGeneration::Unreadable)
}

/// Pure: what a denied read (403) leaves known, given what was known. It only replaces the
/// not-yet-learned default: what a read or a refused write taught before stays (a refused
/// write teaches `NotDeclared` for good, and flipping back would cost a refused write per
/// retry of the watch).
pub fn after_denial(known: ObservedGeneration) -> ObservedGeneration {
    match known {
        ObservedGeneration::Assumed => ObservedGeneration::Unreadable,
        other => other,
    }
}

/// Pure: whether the API server refused a status apply because the schema lacks
/// `observedGeneration` (a CRD swapped for the Go one behind an unreadable CRD).
pub fn refuses_observed_generation(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s)
        if s.message.contains("observedGeneration: field not declared in schema"))
}

/// The knowledge for both kinds, shared by the controllers and kept current by [`watch`].
#[derive(Debug, Clone)]
pub struct StatusSchemas {
    issuer: Arc<watch::Sender<ObservedGeneration>>,
    cluster_issuer: Arc<watch::Sender<ObservedGeneration>>,
    /// Whether "cannot read the CRD" was logged: once per process is enough.
    denied_logged: Arc<AtomicBool>,
}

impl Default for StatusSchemas {
    fn default() -> Self {
        let new = || Arc::new(watch::Sender::new(ObservedGeneration::Assumed));
        Self {
            issuer: new(),
            cluster_issuer: new(),
            denied_logged: Arc::default(),
        }
    }
}

impl StatusSchemas {
    fn sender(&self, kind: IssuerKind) -> &watch::Sender<ObservedGeneration> {
        match kind {
            IssuerKind::Issuer => &self.issuer,
            IssuerKind::ClusterIssuer => &self.cluster_issuer,
        }
    }

    pub fn get(&self, kind: IssuerKind) -> ObservedGeneration {
        *self.sender(kind).borrow()
    }

    /// Records what was learned; returns whether it changed anything.
    pub fn set(&self, kind: IssuerKind, value: ObservedGeneration) -> bool {
        self.sender(kind).send_if_modified(|current| {
            let changed = *current != value;
            *current = value;
            changed
        })
    }

    /// Yields each time what `kind`'s schema holds changes after it was first learned: the
    /// CRD was updated. The first learning, from the assumed default, is no such change.
    pub fn changes(&self, kind: IssuerKind) -> impl futures::Stream<Item = ()> + Send + 'static {
        let rx = self.sender(kind).subscribe();
        let last = *rx.borrow();
        futures::stream::unfold((rx, last), |(mut rx, mut last)| async move {
            loop {
                rx.changed().await.ok()?;
                let now = *rx.borrow_and_update();
                let was = std::mem::replace(&mut last, now);
                if was != ObservedGeneration::Assumed && was != now {
                    return Some(((), (rx, last)));
                }
            }
        })
    }

    /// Resolves once both kinds are learned (from the CRD or from a 403).
    pub async fn learned(&self) {
        for kind in [IssuerKind::Issuer, IssuerKind::ClusterIssuer] {
            let mut rx = self.sender(kind).subscribe();
            let _ = rx.wait_for(|v| *v != ObservedGeneration::Assumed).await;
        }
    }
}

/// Keeps `schemas` current from the two CRDs. Each is watched by `metadata.name`, which is how
/// a list or watch satisfies an RBAC rule restricted by `resourceNames`. When what a kind's
/// schema holds changes, `changed` is told, so its issuers are checked again and their
/// conditions rewritten in the new form.
pub async fn watch(client: kube::Client, schemas: StatusSchemas, changed: impl Fn(IssuerKind)) {
    futures::future::join(
        watch_one(&client, &schemas, IssuerKind::Issuer, &changed),
        watch_one(&client, &schemas, IssuerKind::ClusterIssuer, &changed),
    )
    .await;
}

async fn watch_one(
    client: &kube::Client,
    schemas: &StatusSchemas,
    kind: IssuerKind,
    changed: &impl Fn(IssuerKind),
) {
    let name = crd_name(kind);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let mut events = watcher(api, config).default_backoff().boxed();
    while let Some(event) = events.next().await {
        let learned = match event {
            Ok(watcher::Event::Apply(crd) | watcher::Event::InitApply(crd)) => Some(declared_by(&crd)),
            // Deleted: its issuers go with it; keep what was known for when it returns.
            Ok(_) => None,
            Err(err) => {
                let learned = learned_from_error(&err);
                if learned.is_some() && !schemas.denied_logged.swap(true, Ordering::Relaxed) {
                    tracing::warn!(crd = %name, error = %err,
                        "cannot read the CRD; writing observedGeneration, and counting conditions without it as current");
                } else if learned.is_none() {
                    tracing::debug!(crd = %name, error = %err, "CRD watch failed; retrying");
                }
                learned
            }
        };
        let learned = learned.map(|value| match value {
            ObservedGeneration::Unreadable => after_denial(schemas.get(kind)),
            value => value,
        });
        if let Some(value) = learned
            && schemas.set(kind, value)
        {
            tracing::info!(kind = kind.as_str(), observed_generation = ?value, "issuer status schema learned");
            changed(kind);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ObservedGeneration::*;
    use super::*;

    #[test]
    fn observed_generation_is_written_unless_the_schema_lacks_it() {
        let cases = [
            (Assumed, true),
            (Declared, true),
            (NotDeclared, false),
            (Unreadable, true),
        ];
        for (schema, want) in cases {
            assert_eq!(writes_observed_generation(schema), want, "{schema:?}");
        }
    }

    #[test]
    fn currency_of_a_condition() {
        let cases = [
            // (schema, observed, generation, current)
            (Declared, Some(2), Some(2), true),
            (Declared, Some(1), Some(2), false),
            (Declared, None, Some(2), false),
            (Assumed, None, Some(2), false),
            (Assumed, Some(2), Some(2), true),
            (NotDeclared, None, Some(2), true),
            (NotDeclared, None, None, true),
            (NotDeclared, Some(1), Some(2), false),
            (Unreadable, None, Some(2), true),
            (Unreadable, Some(1), Some(2), false),
            (Unreadable, Some(2), Some(2), true),
        ];
        for (schema, observed, generation, want) in cases {
            assert_eq!(
                is_current(schema, observed, generation),
                want,
                "{schema:?} observed={observed:?} generation={generation:?}"
            );
        }
    }

    fn go_crd(file: &str) -> CustomResourceDefinition {
        serde_saphyr::from_str(file).unwrap()
    }

    #[test]
    fn what_each_crd_declares() {
        let ours = crate::api::crds();
        let go = [
            go_crd(include_str!(
                "../../../../tests/data/crds/cfssl-issuer.wikimedia.org_issuers.yaml"
            )),
            go_crd(include_str!(
                "../../../../tests/data/crds/cfssl-issuer.wikimedia.org_clusterissuers.yaml"
            )),
        ];
        let mut preserving = go[0].clone();
        let status = serde_json::json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        preserving.spec.versions[0]
            .schema
            .as_mut()
            .unwrap()
            .open_api_v3_schema
            .as_mut()
            .unwrap()
            .properties
            .as_mut()
            .unwrap()
            .insert("status".into(), serde_json::from_value(status).unwrap());
        let mut other_version = ours[0].clone();
        other_version.spec.versions[0].name = "v2".into();
        let cases = [
            ("our Issuer", &ours[0], Declared),
            ("our ClusterIssuer", &ours[1], Declared),
            ("Go Issuer", &go[0], NotDeclared),
            ("Go ClusterIssuer", &go[1], NotDeclared),
            ("status keeps unknown fields", &preserving, Declared),
            ("no v1alpha1", &other_version, Declared),
        ];
        for (name, crd, want) in cases {
            assert_eq!(declared_by(crd), want, "{name}");
        }
        assert_eq!(crd_name(IssuerKind::Issuer), "issuers.cfssl-issuer.wikimedia.org");
        assert_eq!(
            crd_name(IssuerKind::ClusterIssuer),
            "clusterissuers.cfssl-issuer.wikimedia.org"
        );
    }

    fn api_error(code: u16, message: &str) -> kube::Error {
        let status: kube::core::Status =
            serde_json::from_value(serde_json::json!({"code": code, "message": message})).unwrap();
        kube::Error::Api(Box::new(status))
    }

    #[test]
    fn only_a_403_teaches_something() {
        let cases = [
            (
                watcher::Error::InitialListFailed(api_error(403, "forbidden")),
                Some(Unreadable),
            ),
            (
                watcher::Error::WatchStartFailed(api_error(403, "forbidden")),
                Some(Unreadable),
            ),
            (
                watcher::Error::WatchFailed(api_error(403, "forbidden")),
                Some(Unreadable),
            ),
            (watcher::Error::InitialListFailed(api_error(500, "x")), None),
            (watcher::Error::InitialListFailed(api_error(404, "x")), None),
            (watcher::Error::NoResourceVersion, None),
        ];
        for (err, want) in cases {
            assert_eq!(learned_from_error(&err), want, "{err}");
        }
    }

    #[test]
    fn a_denied_read_replaces_only_the_default() {
        let cases = [
            (Assumed, Unreadable),
            (Unreadable, Unreadable),
            (Declared, Declared),
            (NotDeclared, NotDeclared),
        ];
        for (known, want) in cases {
            assert_eq!(after_denial(known), want, "{known:?}");
        }
    }

    #[test]
    fn a_refused_observed_generation_is_recognised() {
        let refused = "failed to create typed patch object (ns/ca; cfssl-issuer.wikimedia.org/v1alpha1, Kind=Issuer): \
                       .status.conditions[0].observedGeneration: field not declared in schema";
        let cases = [
            (api_error(500, refused), true),
            (api_error(400, refused), true),
            (api_error(500, ".spec.x: field not declared in schema"), false),
            (api_error(409, "conflict"), false),
        ];
        for (err, want) in cases {
            assert_eq!(refuses_observed_generation(&err), want, "{err}");
        }
    }

    #[tokio::test]
    async fn knowledge_is_shared_and_learned_once_both_kinds_are_known() {
        let schemas = StatusSchemas::default();
        let copy = schemas.clone();
        assert_eq!(schemas.get(IssuerKind::Issuer), Assumed);
        assert!(copy.set(IssuerKind::Issuer, NotDeclared));
        assert!(!copy.set(IssuerKind::Issuer, NotDeclared), "no change");
        assert_eq!(schemas.get(IssuerKind::Issuer), NotDeclared);
        assert_eq!(schemas.get(IssuerKind::ClusterIssuer), Assumed);
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), schemas.learned()).await;
        assert!(waiting.is_err(), "ClusterIssuer not learned yet");
        copy.set(IssuerKind::ClusterIssuer, Declared);
        tokio::time::timeout(std::time::Duration::from_secs(1), schemas.learned())
            .await
            .expect("both learned");
    }
}

#[cfg(test)]
mod changes_tests {
    use super::*;
    use std::time::Duration;

    /// Each value set in turn, and whether `changes` yields for it: the first learning is not
    /// a schema change; an update of the CRD (one learned value to another) is.
    #[tokio::test]
    async fn a_schema_change_after_the_first_learning_yields() {
        use ObservedGeneration::*;
        let schemas = StatusSchemas::default();
        let mut changes = Box::pin(schemas.changes(IssuerKind::Issuer));
        let rows = [
            (Declared, false),    // learned at start
            (NotDeclared, true),  // the Go CRDs applied
            (NotDeclared, false), // no change
            (Unreadable, true),   // RBAC took the CRD away
            (Declared, true),     // our CRDs
        ];
        for (value, want) in rows {
            schemas.set(IssuerKind::Issuer, value);
            let yielded = tokio::time::timeout(Duration::from_millis(50), changes.next()).await;
            assert_eq!(yielded.is_ok(), want, "{value:?}");
        }
        schemas.set(IssuerKind::ClusterIssuer, NotDeclared);
        let other = tokio::time::timeout(Duration::from_millis(50), changes.next()).await;
        assert!(other.is_err(), "the other kind's change is not this kind's");
    }
}
