//! The RBAC an install renders (`config/default` plus kustomize components, as `kubectl
//! kustomize` renders it) and what it grants one ServiceAccount: to install it on a real
//! kube-apiserver, and to check every request a manager made against it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::Value;

/// What of a rendering decides who may do what: its RBAC, and standalone mode's admission
/// policy on approvals.
pub const KINDS: [&str; 6] = [
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
];
/// The manager's ServiceAccount, as `config/default` installs it.
pub const MANAGER_NAMESPACE: &str = "cfssl-issuer-system";
pub const MANAGER_SA: &str = "cfssl-issuer-controller-manager";

/// The RBAC objects (and admission policies) of `config/default` with `components` (under `config/components/`),
/// rendered through an overlay written under `scratch`.
pub fn render(scratch: &Path, components: &[&str]) -> anyhow::Result<Vec<Value>> {
    let config = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../config")
        .canonicalize()?;
    let overlay = scratch.join("rbac-overlay");
    std::fs::create_dir_all(&overlay)?;
    let overlay = overlay.canonicalize()?;
    // kustomize takes only relative paths: up to `/` from the overlay, then down to config/.
    let up = "../".repeat(overlay.components().count().saturating_sub(1));
    let relative = |p: PathBuf| format!("{up}{}", p.strip_prefix("/").unwrap_or(&p).display());
    let components: Vec<String> = components
        .iter()
        .map(|c| relative(config.join("components").join(c)))
        .collect();
    let kustomization = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [{}]\ncomponents: [{}]\n",
        relative(config.join("default")),
        components.join(", "),
    );
    std::fs::write(overlay.join("kustomization.yaml"), kustomization)?;
    let out = std::process::Command::new(super::kubectl_bin())
        .arg("kustomize")
        .arg(&overlay)
        .output()
        .context("run kubectl kustomize")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    anyhow::ensure!(out.status.success(), "kubectl kustomize: {stderr}");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&String::from_utf8(out.stdout)?)?;
    Ok(docs
        .into_iter()
        .filter(|d| d["kind"].as_str().is_some_and(|k| KINDS.contains(&k)))
        .collect())
}

/// One permission: (namespace, or "*" cluster-wide; API group; resource, `/sub` included;
/// verb; the one object `resourceNames` restricts it to, or "" for any).
pub type Grant = (String, String, String, String, String);

/// What a rendering grants one ServiceAccount, through every (Cluster)RoleBinding naming it.
#[derive(Debug, Default)]
pub struct Grants(pub BTreeSet<Grant>);

impl Grants {
    pub fn of(docs: &[Value], namespace: &str, sa: &str) -> Grants {
        let binds = |b: &&Value| {
            b["subjects"].as_array().is_some_and(|subjects| {
                subjects
                    .iter()
                    .any(|s| s["kind"] == "ServiceAccount" && s["name"] == sa && s["namespace"] == namespace)
            })
        };
        let of_kind = |kind: &'static str| docs.iter().filter(move |d| d["kind"] == kind);
        let role = |kind: &str, name: &str, ns: Option<&str>| {
            docs.iter().find(|d| {
                d["kind"] == kind
                    && d["metadata"]["name"] == name
                    && ns.is_none_or(|ns| d["metadata"]["namespace"] == ns)
            })
        };
        let mut set = BTreeSet::new();
        for binding in of_kind("ClusterRoleBinding").filter(binds) {
            let name = binding["roleRef"]["name"].as_str().unwrap_or_default();
            set.extend(
                role("ClusterRole", name, None)
                    .map(|r| expand(r, "*"))
                    .unwrap_or_default(),
            );
        }
        for binding in of_kind("RoleBinding").filter(binds) {
            let scope = binding["metadata"]["namespace"].as_str().unwrap_or_default();
            let name = binding["roleRef"]["name"].as_str().unwrap_or_default();
            let found = match binding["roleRef"]["kind"].as_str() {
                Some("Role") => role("Role", name, Some(scope)),
                _ => role("ClusterRole", name, None),
            };
            set.extend(found.map(|r| expand(r, scope)).unwrap_or_default());
        }
        Grants(set)
    }

    /// Whether a request is granted, as kube-apiserver's RBAC decides: a rule in its namespace
    /// (or cluster-wide), for its object when the rule names objects.
    pub fn allows(
        &self,
        verb: &str,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> bool {
        self.0.iter().any(|(ns, g, r, v, object)| {
            (ns == "*" || Some(ns.as_str()) == namespace)
                && g == group
                && r == resource
                && v == verb
                && (object.is_empty() || Some(object.as_str()) == name)
        })
    }

    /// Grants in `to` whatever is granted in `from`: a copy of `from`'s Roles and bindings.
    pub fn copy_namespace(&mut self, from: &str, to: &str) {
        let copies: Vec<Grant> = self
            .0
            .iter()
            .filter(|(ns, ..)| ns == from)
            .map(|(_, g, r, v, o)| (to.to_string(), g.clone(), r.clone(), v.clone(), o.clone()))
            .collect();
        self.0.extend(copies);
    }

    /// Whether any rule grants anything on `resource` of `group` cluster-wide.
    pub fn cluster_wide(&self, group: &str, resource: &str) -> bool {
        self.0
            .iter()
            .any(|(ns, g, r, ..)| ns == "*" && g == group && r == resource)
    }
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Every rule of `role` as grants in `scope`, one per object when the rule names objects.
fn expand(role: &Value, scope: &str) -> BTreeSet<Grant> {
    let mut set = BTreeSet::new();
    for rule in role["rules"].as_array().into_iter().flatten() {
        let names = match strings(&rule["resourceNames"]) {
            names if names.is_empty() => vec![""],
            names => names,
        };
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    for object in &names {
                        set.insert((
                            scope.into(),
                            group.into(),
                            resource.into(),
                            verb.into(),
                            (*object).into(),
                        ));
                    }
                }
            }
        }
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Role grants in its namespace only, a ClusterRole everywhere, `resourceNames` one object.
    #[test]
    fn grants_follow_bindings_namespaces_and_resource_names() {
        let docs: Vec<Value> = serde_json::from_value(serde_json::json!([
            {"kind": "Role", "metadata": {"name": "r", "namespace": "a"},
             "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]},
            {"kind": "RoleBinding", "metadata": {"name": "r", "namespace": "a"},
             "roleRef": {"kind": "Role", "name": "r"},
             "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "sys"}]},
            {"kind": "ClusterRole", "metadata": {"name": "c"},
             "rules": [{"apiGroups": ["x"], "resources": ["things"], "verbs": ["list"],
                        "resourceNames": ["one"]}]},
            {"kind": "ClusterRoleBinding", "metadata": {"name": "c"},
             "roleRef": {"kind": "ClusterRole", "name": "c"},
             "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "sys"}]},
        ]))
        .unwrap();
        let grants = Grants::of(&docs, "sys", "sa");
        let table = [
            ("get", "", "secrets", Some("a"), Some("s"), true),
            ("get", "", "secrets", Some("b"), Some("s"), false),
            ("get", "", "secrets", None, None, false),
            ("list", "x", "things", None, Some("one"), true),
            ("list", "x", "things", Some("a"), Some("one"), true),
            ("list", "x", "things", None, None, false),
        ];
        for (verb, group, resource, ns, name, want) in table {
            assert_eq!(
                grants.allows(verb, group, resource, ns, name),
                want,
                "{verb} {resource} in {ns:?} named {name:?}"
            );
        }
        assert!(Grants::of(&docs, "sys", "other").0.is_empty());
        assert!(!grants.cluster_wide("", "secrets"));
    }
}
