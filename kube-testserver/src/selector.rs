//! `labelSelector` and `fieldSelector` query parameters.

use serde_json::Value;

use super::{
    error::{ApiError, ApiResult},
    meta,
};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Eq,
    NotEq,
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

#[derive(Debug, Clone)]
struct Requirement {
    key: String,
    op: Op,
    values: Vec<String>,
}

/// A parsed label selector; all requirements must hold.
#[derive(Debug, Clone, Default)]
pub struct LabelSelector(Vec<Requirement>);

/// Splits on commas that are not inside `( )`.
fn split_terms(s: &str) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0i32, 0, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter().map(str::trim).filter(|t| !t.is_empty()).collect()
}

fn invalid(s: &str, why: &str) -> ApiError {
    ApiError::bad_request(format!("unable to parse requirement: {why}: \"{s}\""))
}

impl LabelSelector {
    pub fn parse(s: &str) -> ApiResult<Self> {
        split_terms(s)
            .into_iter()
            .map(Self::parse_term)
            .collect::<ApiResult<_>>()
            .map(LabelSelector)
    }

    fn parse_term(term: &str) -> ApiResult<Requirement> {
        let req = |key: &str, op, values: Vec<String>| {
            let key = key.trim();
            if key.is_empty() || key.contains(char::is_whitespace) {
                return Err(invalid(term, "invalid label key"));
            }
            Ok(Requirement {
                key: key.to_string(),
                op,
                values,
            })
        };
        if let Some(key) = term.strip_prefix('!') {
            return req(key, Op::DoesNotExist, vec![]);
        }
        if let Some(open) = term.find('(') {
            let inner = term[open + 1..]
                .strip_suffix(')')
                .ok_or_else(|| invalid(term, "missing ')'"))?;
            let mut words = term[..open].split_whitespace();
            let (key, op) = (words.next().unwrap_or_default(), words.next().unwrap_or_default());
            let op = match op {
                "in" => Op::In,
                "notin" => Op::NotIn,
                _ => return Err(invalid(term, "expected 'in' or 'notin'")),
            };
            let values = inner
                .split(',')
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect();
            return req(key, op, values);
        }
        for (token, op) in [("!=", Op::NotEq), ("==", Op::Eq), ("=", Op::Eq)] {
            if let Some((key, value)) = term.split_once(token) {
                return req(key, op, vec![value.trim().to_string()]);
            }
        }
        req(term, Op::Exists, vec![])
    }

    pub fn matches(&self, obj: &Value) -> bool {
        if self.0.is_empty() {
            return true;
        }
        let labels = meta::labels(obj);
        self.0.iter().all(|r| {
            let value = labels.and_then(|l| l.get(&r.key)).and_then(Value::as_str);
            match r.op {
                Op::Eq | Op::In => value.is_some_and(|v| r.values.iter().any(|x| x == v)),
                Op::NotEq | Op::NotIn => value.is_none_or(|v| r.values.iter().all(|x| x != v)),
                Op::Exists => value.is_some(),
                Op::DoesNotExist => value.is_none(),
            }
        })
    }
}

/// A parsed field selector over dotted paths (`metadata.name`, `involvedObject.uid`, `type`).
///
/// Real servers accept only a per-kind list of fields. Custom resources here accept only
/// theirs (see [`FieldSelector::check`]); built-in kinds accept any path. Values compare by
/// their string form (missing fields compare as "").
#[derive(Debug, Clone, Default)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    pub fn parse(s: &str) -> ApiResult<Self> {
        let mut out = Vec::new();
        for term in split_terms(s) {
            let parsed = [("!=", false), ("==", true), ("=", true)]
                .into_iter()
                .find_map(|(token, eq)| {
                    term.split_once(token)
                        .map(|(k, v)| (k.trim().to_string(), eq, v.trim().to_string()))
                });
            let Some(parsed) = parsed else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                )));
            };
            out.push(parsed);
        }
        Ok(FieldSelector(out))
    }

    /// Refuses a field the kind does not let selectors name (`allowed`; None allows any), as
    /// kube-apiserver's field label conversion does: 400 "field label not supported: <path>".
    pub fn check(&self, allowed: Option<&[String]>) -> ApiResult<()> {
        let Some(allowed) = allowed else {
            return Ok(());
        };
        match self.0.iter().find(|(path, _, _)| !allowed.contains(path)) {
            Some((path, _, _)) => Err(ApiError::bad_request(format!(
                "field label not supported: {path}"
            ))),
            None => Ok(()),
        }
    }

    /// The name an equality term on `metadata.name` pins, as kube's watcher of one object asks.
    pub fn pinned_name(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|(path, eq, _)| path == "metadata.name" && *eq)
            .map(|(_, _, name)| name.as_str())
    }

    /// Whether every term names a `metadata.` path, which reads the same in the stored form
    /// and every served one, so matching needs no converted copy of the object.
    pub fn reads_metadata_only(&self) -> bool {
        self.0.iter().all(|(path, _, _)| path.starts_with("metadata."))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(path, eq, want)| {
            let found = path.split('.').try_fold(obj, |v, key| v.get(key));
            let actual = match found {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (actual == *want) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj(labels: Value) -> Value {
        json!({ "metadata": { "name": "a", "namespace": "ns", "labels": labels }, "type": "Opaque" })
    }

    #[test]
    fn label_operators() {
        let o = obj(json!({ "app": "web", "tier": "front" }));
        let matches = |s: &str| LabelSelector::parse(s).unwrap().matches(&o);
        assert!(matches("app=web"));
        assert!(matches("app==web,tier"));
        assert!(matches("app!=db"));
        assert!(matches("tier in (front, back)"));
        assert!(matches("tier notin (back),!missing"));
        assert!(!matches("app in (db)"));
        assert!(!matches("missing"));
        assert!(matches(""));
    }

    #[test]
    fn field_paths() {
        let o = obj(json!({}));
        let matches = |s: &str| FieldSelector::parse(s).unwrap().matches(&o);
        assert!(matches("metadata.name=a,metadata.namespace==ns"));
        assert!(matches("metadata.name!=b"));
        assert!(matches("type=Opaque"));
        assert!(!matches("metadata.name=b"));
    }

    #[test]
    fn only_allowed_fields_pass_the_check() {
        let allowed = ["metadata.name".to_string(), "spec.issuerRef.name".to_string()];
        let check = |s: &str, allowed: Option<&[String]>| {
            FieldSelector::parse(s)
                .unwrap()
                .check(allowed)
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            check("metadata.name=a,spec.issuerRef.name!=b", Some(&allowed)),
            Ok(())
        );
        assert_eq!(check("spec.other=x", None), Ok(()));
        let err = check("metadata.name=a,spec.other=x", Some(&allowed)).unwrap_err();
        assert!(err.contains("field label not supported: spec.other"), "{err}");
    }
}
