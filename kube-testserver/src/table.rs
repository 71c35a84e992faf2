//! `meta.k8s.io/v1 Table` answers, which `kubectl get` asks for, with a small JSONPath for
//! printer columns (`.a.b`, `[0]`, `[*]`, `[?(@.type == "Ready")]`).

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::{
    convert, meta,
    resources::{ColumnValue, ResourceType},
};

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(usize),
    All,
    Filter {
        path: Vec<String>,
        equal: bool,
        value: Value,
    },
}

fn parse(path: &str) -> Option<Vec<Step>> {
    let path = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('$');
    let mut steps = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end > 0 {
                steps.push(Step::Field(r[..end].to_string()));
            }
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = r[..end].trim();
            rest = &r[end + 1..];
            steps.push(match inner {
                "*" => Step::All,
                _ if inner.starts_with("?(") => parse_filter(inner)?,
                _ if inner.starts_with('\'') || inner.starts_with('"') => {
                    Step::Field(inner.trim_matches(['\'', '"']).to_string())
                }
                _ => Step::Index(inner.parse().ok()?),
            });
        } else {
            return None;
        }
    }
    Some(steps)
}

fn parse_filter(inner: &str) -> Option<Step> {
    let expr = inner.strip_prefix("?(")?.strip_suffix(')')?.trim();
    let (lhs, equal, rhs) = if let Some((l, r)) = expr.split_once("!=") {
        (l, false, r)
    } else {
        let (l, r) = expr.split_once("==")?;
        (l, true, r)
    };
    let path = lhs
        .trim()
        .strip_prefix("@.")?
        .split('.')
        .map(String::from)
        .collect();
    let rhs = rhs.trim();
    let value = if rhs.starts_with('"') || rhs.starts_with('\'') {
        Value::String(rhs.trim_matches(['"', '\'']).to_string())
    } else {
        serde_json::from_str(rhs).ok()?
    };
    Some(Step::Filter { path, equal, value })
}

fn eval<'v>(steps: &[Step], v: &'v Value) -> Vec<&'v Value> {
    let Some((step, rest)) = steps.split_first() else {
        return vec![v];
    };
    let next: Vec<&Value> = match step {
        Step::Field(f) => v.get(f).into_iter().collect(),
        Step::Index(i) => v.get(i).into_iter().collect(),
        Step::All => v.as_array().map(|a| a.iter().collect()).unwrap_or_default(),
        Step::Filter { path, equal, value } => v
            .as_array()
            .into_iter()
            .flatten()
            .filter(|item| {
                let found = path.iter().try_fold(*item, |v, k| v.get(k));
                (found == Some(value)) == *equal
            })
            .collect(),
    };
    next.into_iter().flat_map(|n| eval(rest, n)).collect()
}

/// The first value a kubectl-style JSONPath finds.
pub fn find<'v>(path: &str, obj: &'v Value) -> Option<&'v Value> {
    eval(&parse(path)?, obj).into_iter().next()
}

fn cell(type_: &str, value: &ColumnValue, obj: &Value, now: Timestamp) -> Value {
    match value {
        ColumnValue::Count(path) => {
            let n = find(path, obj).and_then(Value::as_object).map_or(0, |m| m.len());
            n.into()
        }
        ColumnValue::Computed(f) => f(obj),
        ColumnValue::JsonPath(path) => match (type_, find(path, obj)) {
            (_, None) => Value::Null,
            ("date", Some(Value::String(s))) => match meta::parse_time(s) {
                Some(t) => meta::human_duration(now.duration_since(t).as_secs()).into(),
                None => s.clone().into(),
            },
            (_, Some(v)) => v.clone(),
        },
    }
}

/// How much of each object a row carries (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

/// A Table over objects already in `rt`'s served form.
pub fn table(rt: &ResourceType, objects: &[Value], include: IncludeObject, list_meta: Value) -> Value {
    let mut columns = vec![json!({
        "name": "Name", "type": "string", "format": "name", "priority": 0,
        "description": "Name must be unique within a namespace.",
    })];
    columns.extend(rt.columns.iter().map(|c| {
        json!({ "name": c.name, "type": c.type_, "format": "", "priority": c.priority, "description": c.description })
    }));
    let now = Timestamp::now();
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let mut cells = vec![Value::from(meta::name(obj).unwrap_or_default())];
            cells.extend(rt.columns.iter().map(|c| cell(&c.type_, &c.value, obj, now)));
            let object = match include {
                IncludeObject::None => Value::Null,
                IncludeObject::Metadata => convert::to_metadata(obj),
                IncludeObject::Object => obj.clone(),
            };
            json!({ "cells": cells, "object": object })
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": columns,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonpath_subset() {
        let obj = json!({ "spec": { "url": "u", "list": [{ "n": 1 }, { "n": 2 }] },
            "status": { "conditions": [{ "type": "Approved", "status": "True" }, { "type": "Ready", "status": "False" }] } });
        assert_eq!(find(".spec.url", &obj), Some(&json!("u")));
        assert_eq!(find(".spec.list[1].n", &obj), Some(&json!(2)));
        assert_eq!(find(".spec.list[*].n", &obj), Some(&json!(1)));
        assert_eq!(
            find(r#".status.conditions[?(@.type == "Ready")].status"#, &obj),
            Some(&json!("False"))
        );
        assert_eq!(
            find(r#"{.status.conditions[?(@.type=="Approved")].status}"#, &obj),
            Some(&json!("True"))
        );
        assert_eq!(find(".spec.missing", &obj), None);
    }
}
