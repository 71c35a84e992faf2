//! The text rules of attribute values: `${POD_NAME}` expansion and comma-separated lists.

use super::PodInfo;

/// The variables a value may name, and where kubelet puts each (`podInfoOnMount: true`).
pub const VARIABLES: [&str; 4] = ["POD_NAME", "POD_NAMESPACE", "POD_UID", "SERVICE_ACCOUNT_NAME"];

fn lookup<'a>(name: &str, pod: &'a PodInfo) -> Option<&'a str> {
    Some(match name {
        "POD_NAME" => &pod.name,
        "POD_NAMESPACE" => &pod.namespace,
        "POD_UID" => &pod.uid,
        "SERVICE_ACCOUNT_NAME" => &pod.service_account,
        _ => return None,
    })
}

/// Where a `$` at the start of `after` (the text following it) leads.
enum Variable<'a> {
    /// `$` not followed by a name: kept as it is (as Go's `os.Expand` does).
    Literal,
    /// The name, and how many bytes after the `$` it took.
    Named(&'a str, usize),
}

fn variable(after: &str) -> Result<Variable<'_>, String> {
    if let Some(braced) = after.strip_prefix('{') {
        // csi-driver (Go's os.Expand) silently drops a broken `${`; we refuse it, since
        // a name lost that way is a certificate without it.
        return match braced.find('}') {
            None => Err("\"${\" without a closing \"}\"".to_string()),
            Some(0) => Err("an empty variable name \"${}\"".to_string()),
            Some(end) => Ok(Variable::Named(&braced[..end], end + 2)),
        };
    }
    let len = after
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count();
    Ok(if len == 0 {
        Variable::Literal
    } else {
        Variable::Named(&after[..len], len)
    })
}

/// Replaces `${NAME}` and `$NAME` with the pod's values; every unknown name is reported.
pub fn expand(text: &str, pod: &PodInfo) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut unknown: Vec<&str> = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        match variable(after)? {
            Variable::Literal => {
                out.push('$');
                rest = after;
            }
            Variable::Named(name, used) => {
                match lookup(name, pod) {
                    Some(value) => out.push_str(value),
                    None => unknown.push(name),
                }
                rest = &after[used..];
            }
        }
    }
    out.push_str(rest);
    if unknown.is_empty() {
        return Ok(out);
    }
    let names: Vec<String> = unknown.iter().map(|n| format!("{n:?}")).collect();
    Err(format!(
        "unknown variable {} (known: {})",
        names.join(", "),
        VARIABLES.join(", ")
    ))
}

/// A comma-separated list, each item trimmed; an empty item is refused (`a,,b` is a typo).
pub fn list(text: &str) -> Result<Vec<String>, String> {
    let items: Vec<String> = text.split(',').map(|s| s.trim().to_string()).collect();
    if items.iter().any(String::is_empty) {
        return Err("an empty item in the comma-separated list".to_string());
    }
    Ok(items)
}

/// A subject field list as cert-manager reads it (Go's CSV reader): items separated by
/// commas, leading spaces dropped, an item in double quotes may hold commas (`""` is a quote).
pub fn csv(text: &str) -> Result<Vec<String>, String> {
    let mut items = Vec::new();
    let mut rest = text;
    loop {
        rest = rest.trim_start_matches([' ', '\t']);
        let (item, after) = match rest.strip_prefix('"') {
            Some(quoted) => quoted_item(quoted)?,
            None => bare_item(rest)?,
        };
        items.push(item);
        match after.strip_prefix(',') {
            Some(next) => rest = next,
            None => return Ok(items),
        }
    }
}

/// An item after its opening quote: the text up to the closing quote, and what follows it
/// (the end, or a comma).
fn quoted_item(text: &str) -> Result<(String, &str), String> {
    let mut item = String::new();
    let mut rest = text;
    loop {
        let Some(end) = rest.find('"') else {
            return Err("a quoted item without its closing quote".to_string());
        };
        item.push_str(&rest[..end]);
        rest = &rest[end + 1..];
        if let Some(after) = rest.strip_prefix('"') {
            item.push('"');
            rest = after;
        } else if rest.is_empty() || rest.starts_with(',') {
            return Ok((item, rest));
        } else {
            return Err("text after a quoted item's closing quote".to_string());
        }
    }
}

fn bare_item(text: &str) -> Result<(String, &str), String> {
    let end = text.find(',').unwrap_or(text.len());
    let item = &text[..end];
    if item.contains('"') {
        return Err("a quote inside an unquoted item (quote the whole item)".to_string());
    }
    Ok((item.to_string(), &text[end..]))
}
