//! What the server serves: built-in kinds plus those that CustomResourceDefinitions add.

use std::{cmp::Ordering, collections::BTreeMap, sync::Arc};

use serde_json::Value;

use super::error::ApiResult;

mod crd;
pub mod csr;

pub use crd::crd_types;

/// Where objects live. All served versions of a CRD share one, and so do both Event APIs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StorageKey {
    pub group: String,
    pub plural: String,
}

/// How a served version's objects differ from the stored form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Same fields; only `apiVersion` changes (CRDs without a conversion webhook).
    Plain,
    /// `events.k8s.io/v1` Event, stored as a core/v1 Event.
    EventsV1,
}

/// A `kubectl get` column: `jsonPath` from `additionalPrinterColumns`, or a key count.
#[derive(Debug, Clone)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub description: String,
    pub priority: i64,
    pub value: ColumnValue,
}

#[derive(Debug, Clone)]
pub enum ColumnValue {
    JsonPath(String),
    /// Number of entries in the map at this JSONPath (Secret and ConfigMap `DATA`).
    Count(String),
    /// A value the server's printer computes from the object (CSR `CONDITION`).
    Computed(fn(&Value) -> Value),
}

/// One served (group, version, resource).
#[derive(Debug, Clone)]
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub list_kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    pub status_subresource: bool,
    /// Whether `metadata.generation` is maintained (custom resources and CRDs).
    pub tracks_generation: bool,
    pub storage: StorageKey,
    pub shape: Shape,
    /// `openAPIV3Schema` of this version, for custom resources.
    pub schema: Option<Value>,
    pub columns: Vec<PrinterColumn>,
    /// The CustomResourceDefinition that defines it, if any.
    pub crd: Option<String>,
    /// The fields a field selector may name: for custom resources `metadata.name`,
    /// `metadata.namespace` (namespaced kinds) and the version's `selectableFields`; None for
    /// built-in kinds, whose selectors may name any field here.
    pub selectable: Option<Vec<String>>,
}

impl ResourceType {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `plural` or `plural.group`, as error messages name resources.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `Kind` or `Kind.group`, as validation messages name kinds.
    pub fn kind_qualified(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn builtin(
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    short: &[&str],
    namespaced: bool,
    status: bool,
    columns: Vec<PrinterColumn>,
) -> ResourceType {
    ResourceType {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        list_kind: format!("{kind}List"),
        plural: plural.into(),
        singular: kind.to_lowercase(),
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: vec![],
        namespaced,
        status_subresource: status,
        tracks_generation: false,
        storage: StorageKey {
            group: group.into(),
            plural: plural.into(),
        },
        shape: Shape::Plain,
        schema: None,
        columns,
        crd: None,
        selectable: None,
    }
}

fn column(name: &str, value: ColumnValue) -> PrinterColumn {
    let type_ = if matches!(value, ColumnValue::Count(_)) {
        "integer"
    } else {
        "string"
    };
    PrinterColumn {
        name: name.into(),
        type_: type_.into(),
        description: String::new(),
        priority: 0,
        value,
    }
}

fn path_column(name: &str, path: &str) -> PrinterColumn {
    column(name, ColumnValue::JsonPath(path.into()))
}

fn age_column() -> PrinterColumn {
    PrinterColumn {
        type_: "date".into(),
        ..path_column("Age", ".metadata.creationTimestamp")
    }
}

fn builtins() -> Vec<ResourceType> {
    let age = age_column;
    let mut events_v1 = builtin(
        "events.k8s.io",
        "v1",
        "Event",
        "events",
        &["ev"],
        true,
        false,
        vec![
            path_column("Type", ".type"),
            path_column("Reason", ".reason"),
            age(),
        ],
    );
    events_v1.storage = StorageKey {
        group: String::new(),
        plural: "events".into(),
    };
    events_v1.shape = Shape::EventsV1;
    let mut crds = builtin(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        &["crd", "crds"],
        false,
        true,
        vec![path_column("Created At", ".metadata.creationTimestamp")],
    );
    crds.tracks_generation = true;
    crds.categories = vec!["api-extensions".into()];
    vec![
        builtin(
            "",
            "v1",
            "Namespace",
            "namespaces",
            &["ns"],
            false,
            true,
            vec![path_column("Status", ".status.phase"), age()],
        ),
        builtin(
            "",
            "v1",
            "Secret",
            "secrets",
            &[],
            true,
            false,
            vec![
                path_column("Type", ".type"),
                column("Data", ColumnValue::Count(".data".into())),
                age(),
            ],
        ),
        // Pods are stored, never run: what a CSI plugin's requests are owned by and its
        // Events are about.
        builtin(
            "",
            "v1",
            "Pod",
            "pods",
            &["po"],
            true,
            true,
            vec![path_column("Status", ".status.phase"), age()],
        ),
        builtin(
            "",
            "v1",
            "ConfigMap",
            "configmaps",
            &["cm"],
            true,
            false,
            vec![column("Data", ColumnValue::Count(".data".into())), age()],
        ),
        builtin(
            "",
            "v1",
            "ServiceAccount",
            "serviceaccounts",
            &["sa"],
            true,
            false,
            vec![age()],
        ),
        builtin(
            "",
            "v1",
            "Event",
            "events",
            &["ev"],
            true,
            false,
            vec![
                path_column("Type", ".type"),
                path_column("Reason", ".reason"),
                path_column("Object", ".involvedObject.name"),
                path_column("Message", ".message"),
                age(),
            ],
        ),
        events_v1,
        builtin(
            "coordination.k8s.io",
            "v1",
            "Lease",
            "leases",
            &[],
            true,
            false,
            vec![path_column("Holder", ".spec.holderIdentity"), age()],
        ),
        crds,
        csr::csr_type(),
        builtin(
            "authorization.k8s.io",
            "v1",
            "SubjectAccessReview",
            "subjectaccessreviews",
            &[],
            false,
            false,
            vec![],
        ),
    ]
}

/// SubjectAccessReviews are answered, never stored (`access.rs`).
pub fn is_access_review(rt: &ResourceType) -> bool {
    rt.group == "authorization.k8s.io" && rt.plural == "subjectaccessreviews"
}

/// Orders versions the way discovery does: GA before beta before alpha, higher numbers first,
/// anything else last and alphabetical.
pub fn version_priority(a: &str, b: &str) -> Ordering {
    fn parse(v: &str) -> Option<(u64, u8, u64)> {
        let rest = v.strip_prefix('v')?;
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let major: u64 = rest[..digits].parse().ok()?;
        let tail = &rest[digits..];
        let (stage, num) = if tail.is_empty() {
            (2, 0)
        } else if let Some(n) = tail.strip_prefix("beta") {
            (1, n.parse().ok()?)
        } else if let Some(n) = tail.strip_prefix("alpha") {
            (0, n.parse().ok()?)
        } else {
            return None;
        };
        Some((major, stage, num))
    }
    match (parse(a), parse(b)) {
        (Some((ma, sa, na)), Some((mb, sb, nb))) => sb.cmp(&sa).then(mb.cmp(&ma)).then(nb.cmp(&na)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// All served resources, keyed by (group, version, plural).
#[derive(Debug, Clone)]
pub struct Registry {
    types: BTreeMap<(String, String, String), Arc<ResourceType>>,
}

impl Default for Registry {
    fn default() -> Self {
        let types = builtins()
            .into_iter()
            .map(|rt| {
                (
                    (rt.group.clone(), rt.version.clone(), rt.plural.clone()),
                    Arc::new(rt),
                )
            })
            .collect();
        Registry { types }
    }
}

impl Registry {
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.types
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    /// The type a `apiVersion`/`kind` pair (as in an ownerReference) names.
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceType>> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.types
            .values()
            .find(|rt| rt.group == group && rt.version == version && rt.kind == kind)
            .cloned()
    }

    /// Any served version of this storage, preferring the plain (non-converted) shape.
    pub fn by_storage(&self, key: &StorageKey) -> Option<Arc<ResourceType>> {
        let mut matches: Vec<_> = self.types.values().filter(|rt| &rt.storage == key).collect();
        matches.sort_by(|a, b| {
            (a.shape != Shape::Plain)
                .cmp(&(b.shape != Shape::Plain))
                .then(version_priority(&a.version, &b.version))
        });
        matches.first().map(|rt| Arc::clone(rt))
    }

    /// Group names with their versions in priority order; the core group is not included.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (group, version, _) in self.types.keys() {
            if group.is_empty() {
                continue;
            }
            let versions = groups.entry(group).or_default();
            if !versions.contains(version) {
                versions.push(version.clone());
            }
        }
        groups
            .into_iter()
            .map(|(group, mut versions)| {
                versions.sort_by(|a, b| version_priority(a, b));
                (group.to_string(), versions)
            })
            .collect()
    }

    pub fn resources(&self, group: &str, version: &str) -> Vec<Arc<ResourceType>> {
        self.types
            .values()
            .filter(|rt| rt.group == group && rt.version == version)
            .cloned()
            .collect()
    }

    /// Serves every `served` version of a CRD, replacing what an older revision of it served.
    pub fn register_crd(&mut self, crd: &Value) -> ApiResult<()> {
        let types = crd_types(crd)?;
        let name = types.first().and_then(|t| t.crd.clone()).unwrap_or_default();
        self.unregister_crd(&name);
        for rt in types {
            self.types.insert(
                (rt.group.clone(), rt.version.clone(), rt.plural.clone()),
                Arc::new(rt),
            );
        }
        Ok(())
    }

    pub fn unregister_crd(&mut self, name: &str) {
        self.types.retain(|_, rt| rt.crd.as_deref() != Some(name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_like_kubernetes() {
        let mut v = vec!["v1alpha1", "v1", "foo", "v2beta1", "v1beta2", "v2"];
        v.sort_by(|a, b| version_priority(a, b));
        assert_eq!(v, ["v2", "v1", "v2beta1", "v1beta2", "v1alpha1", "foo"]);
    }
}
