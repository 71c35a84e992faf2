//! `certificates.k8s.io/v1` CertificateSigningRequests: the type, and what kube-apiserver's
//! registry does to them on each write (pkg/registry/certificates/certificates/strategy.go);
//! the checks are in [`validation`].

mod validation;

use serde_json::{Value, json};

use super::{ColumnValue, PrinterColumn, ResourceType, age_column, builtin, path_column};
use crate::{access::UserInfo, meta};

pub use validation::{validate, validate_update};

pub const GROUP: &str = "certificates.k8s.io";
pub const PLURAL: &str = "certificatesigningrequests";

/// Which part of a CSR a write addresses, as far as the rules here care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Main,
    Status,
    Approval,
}

pub fn is_csr(rt: &ResourceType) -> bool {
    rt.group == GROUP && rt.plural == PLURAL
}

/// The served type, with the columns `kubectl get csr` shows.
pub(super) fn csr_type() -> ResourceType {
    let computed = |name: &str, f: fn(&Value) -> Value| PrinterColumn {
        name: name.into(),
        type_: "string".into(),
        description: String::new(),
        priority: 0,
        value: ColumnValue::Computed(f),
    };
    builtin(
        GROUP,
        "v1",
        "CertificateSigningRequest",
        PLURAL,
        &["csr"],
        false,
        true,
        vec![
            age_column(),
            path_column("SignerName", ".spec.signerName"),
            path_column("Requestor", ".spec.username"),
            computed("RequestedDuration", requested_duration),
            computed("Condition", condition_column),
        ],
    )
}

fn requested_duration(obj: &Value) -> Value {
    match obj.pointer("/spec/expirationSeconds").and_then(Value::as_i64) {
        Some(secs) => meta::human_duration(secs).into(),
        None => "<none>".into(),
    }
}

fn has_condition(obj: &Value, type_: &str) -> bool {
    conditions(obj)
        .iter()
        .any(|c| c.get("type").and_then(Value::as_str) == Some(type_))
}

/// kubectl's CONDITION: Denied, Approved or Pending, then `,Failed` and `,Issued`.
fn condition_column(obj: &Value) -> Value {
    let mut out = if has_condition(obj, "Denied") {
        "Denied".to_string()
    } else if has_condition(obj, "Approved") {
        "Approved".to_string()
    } else {
        "Pending".to_string()
    };
    if has_condition(obj, "Failed") {
        out.push_str(",Failed");
    }
    if obj
        .pointer("/status/certificate")
        .and_then(Value::as_str)
        .is_some_and(|c| !c.is_empty())
    {
        out.push_str(",Issued");
    }
    out.into()
}

pub(crate) fn conditions(obj: &Value) -> Vec<Value> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn is_approval(c: &Value) -> bool {
    matches!(c.get("type").and_then(Value::as_str), Some("Approved" | "Denied"))
}

/// A create: the requester comes from the caller (`None` keeps what the body says: a server
/// without authentication has no caller), and status starts empty, so nobody can create an
/// approved or signed request.
pub fn prepare_create(obj: &mut Value, caller: Option<&UserInfo>) {
    if let Some(user) = caller {
        let spec = obj
            .as_object_mut()
            .expect("objects only")
            .entry("spec")
            .or_insert_with(|| json!({}));
        if let Some(spec) = spec.as_object_mut() {
            for field in ["username", "uid", "groups", "extra"] {
                spec.remove(field);
            }
            spec.insert("username".into(), user.name.clone().into());
            if !user.uid.is_empty() {
                spec.insert("uid".into(), user.uid.clone().into());
            }
            if !user.groups.is_empty() {
                spec.insert("groups".into(), json!(user.groups));
            }
            if !user.extra.is_empty() {
                spec.insert("extra".into(), json!(user.extra));
            }
        }
    }
    obj["status"] = json!({});
}

/// An update of `part`: the main resource changes neither spec nor status; `/status` keeps
/// spec and the Approved/Denied conditions; `/approval` changes conditions only. Condition
/// timestamps are filled in where missing.
pub fn prepare_update(old: &Value, new: &mut Value, part: Part) {
    let old_spec = old.get("spec").cloned().unwrap_or(Value::Null);
    new["spec"] = old_spec;
    match part {
        Part::Main => {
            new["status"] = old.get("status").cloned().unwrap_or_else(|| json!({}));
            return;
        }
        Part::Status => {
            // The old Approved/Denied first, then the new others (the registry's order).
            let mut kept: Vec<Value> = conditions(old).into_iter().filter(is_approval).collect();
            kept.extend(conditions(new).into_iter().filter(|c| !is_approval(c)));
            set_conditions(new, kept);
        }
        Part::Approval => {
            let mut status = old.get("status").cloned().unwrap_or_else(|| json!({}));
            match new.pointer("/status/conditions") {
                Some(c) => status["conditions"] = c.clone(),
                None => {
                    if let Some(map) = status.as_object_mut() {
                        map.remove("conditions");
                    }
                }
            }
            new["status"] = status;
        }
    }
    fill_timestamps(old, new);
}

fn set_conditions(obj: &mut Value, list: Vec<Value>) {
    if !obj.get("status").is_some_and(Value::is_object) {
        obj["status"] = json!({});
    }
    let status = obj["status"].as_object_mut().expect("made an object");
    if list.is_empty() {
        status.remove("conditions");
    } else {
        status.insert("conditions".into(), list.into());
    }
}

/// `lastUpdateTime` now when missing; `lastTransitionTime` that of the old condition with the
/// same type and status, else now.
fn fill_timestamps(old: &Value, new: &mut Value) {
    let now = meta::now_rfc3339();
    let before = conditions(old);
    let Some(list) = new
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for c in list.iter_mut().filter(|c| c.is_object()) {
        let missing = |c: &Value, k: &str| c.get(k).and_then(Value::as_str).is_none_or(str::is_empty);
        if missing(c, "lastUpdateTime") {
            c["lastUpdateTime"] = now.clone().into();
        }
        if missing(c, "lastTransitionTime") {
            let same = before.iter().find(|o| {
                o.get("type") == c.get("type")
                    && o.get("status") == c.get("status")
                    && !missing(o, "lastTransitionTime")
            });
            c["lastTransitionTime"] =
                same.map_or_else(|| now.clone().into(), |o| o["lastTransitionTime"].clone());
        }
    }
}
