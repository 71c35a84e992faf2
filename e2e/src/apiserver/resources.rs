//! What the server serves: built-in kinds plus those that CustomResourceDefinitions add.

use std::{cmp::Ordering, collections::BTreeMap, sync::Arc};

use serde_json::Value;

use super::error::{ApiError, ApiResult};

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
    ]
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

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(v, |v, key| v.get(key))?
        .as_str()
        .filter(|s| !s.is_empty())
}

fn strings_at(v: &Value, path: &[&str]) -> Vec<String> {
    path.iter()
        .try_fold(v, |v, key| v.get(key))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// The structural checks apiextensions validation makes that matter here.
fn check_crd(crd: &Value) -> ApiResult<()> {
    let name = super::meta::name(crd).unwrap_or_default().to_string();
    let mut causes = Vec::new();
    let group = str_at(crd, &["spec", "group"]).unwrap_or_default().to_string();
    let plural = str_at(crd, &["spec", "names", "plural"])
        .unwrap_or_default()
        .to_string();
    let kind = str_at(crd, &["spec", "names", "kind"])
        .unwrap_or_default()
        .to_string();
    let scope = str_at(crd, &["spec", "scope"]).unwrap_or_default();
    if group.is_empty() {
        causes.push(("spec.group".into(), "Required value".into()));
    }
    if plural.is_empty() {
        causes.push(("spec.names.plural".into(), "Required value".into()));
    }
    if kind.is_empty() {
        causes.push(("spec.names.kind".into(), "Required value".into()));
    }
    if name != format!("{plural}.{group}") {
        causes.push((
            "metadata.name".into(),
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    if scope != "Namespaced" && scope != "Cluster" {
        causes.push((
            "spec.scope".into(),
            format!("Unsupported value: \"{scope}\": supported values: \"Cluster\", \"Namespaced\""),
        ));
    }
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let storage_count = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .count();
    if storage_count != 1 {
        causes.push((
            "spec.versions".into(),
            "Invalid value: must have exactly one version marked as storage version".into(),
        ));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(
            "CustomResourceDefinition.apiextensions.k8s.io",
            &name,
            &causes,
        ))
    }
}

/// Checks a CRD the way apiextensions validation would (the parts that matter here) and
/// derives one `ResourceType` per served version.
pub fn crd_types(crd: &Value) -> ApiResult<Vec<ResourceType>> {
    check_crd(crd)?;
    let name = super::meta::name(crd).unwrap_or_default().to_string();
    let text = |path: &[&str]| str_at(crd, path).unwrap_or_default().to_string();
    let (group, plural, kind) = (
        text(&["spec", "group"]),
        text(&["spec", "names", "plural"]),
        text(&["spec", "names", "kind"]),
    );
    let scope = text(&["spec", "scope"]);
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let singular = str_at(crd, &["spec", "names", "singular"])
        .map(String::from)
        .unwrap_or_else(|| kind.to_lowercase());
    let list_kind = str_at(crd, &["spec", "names", "listKind"])
        .map(String::from)
        .unwrap_or_else(|| format!("{kind}List"));
    let served = versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(false));
    Ok(served
        .map(|v| ResourceType {
            group: group.clone(),
            version: str_at(v, &["name"]).unwrap_or_default().to_string(),
            kind: kind.clone(),
            list_kind: list_kind.clone(),
            plural: plural.clone(),
            singular: singular.clone(),
            short_names: strings_at(crd, &["spec", "names", "shortNames"]),
            categories: strings_at(crd, &["spec", "names", "categories"]),
            namespaced: scope == "Namespaced",
            status_subresource: v.pointer("/subresources/status").is_some(),
            tracks_generation: true,
            storage: StorageKey {
                group: group.clone(),
                plural: plural.clone(),
            },
            shape: Shape::Plain,
            schema: v.pointer("/schema/openAPIV3Schema").cloned(),
            columns: crd_columns(v),
            crd: Some(name.clone()),
            selectable: Some(selectable_fields(v, scope == "Namespaced")),
        })
        .collect())
}

/// What a field selector may name on a CRD's version, as kube-apiserver allows it.
fn selectable_fields(version: &Value, namespaced: bool) -> Vec<String> {
    let mut out = vec!["metadata.name".to_string()];
    if namespaced {
        out.push("metadata.namespace".into());
    }
    let declared = version.get("selectableFields").and_then(Value::as_array);
    out.extend(declared.into_iter().flatten().filter_map(|f| {
        let path = f.get("jsonPath")?.as_str()?;
        Some(path.trim_start_matches('.').to_string())
    }));
    out
}

fn crd_columns(version: &Value) -> Vec<PrinterColumn> {
    let Some(columns) = version.get("additionalPrinterColumns").and_then(Value::as_array) else {
        return vec![age_column()];
    };
    columns
        .iter()
        .map(|c| PrinterColumn {
            name: str_at(c, &["name"]).unwrap_or_default().into(),
            type_: str_at(c, &["type"]).unwrap_or("string").into(),
            description: str_at(c, &["description"]).unwrap_or_default().into(),
            priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
            value: ColumnValue::JsonPath(str_at(c, &["jsonPath"]).unwrap_or_default().into()),
        })
        .collect()
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
