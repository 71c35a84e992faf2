//! Name and address syntax as apimachinery and Go's `net` package check it, with their messages.

use std::net::IpAddr;

const DNS1123_SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// apimachinery's `RegexError`.
fn regex_error(msg: &str, regex: &str, examples: &[&str]) -> String {
    // Go appends " or " after the "', " ending the previous example: two spaces.
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{msg} (e.g. {}regex used for validation is '{regex}')",
        examples.join(" or ")
    )
}

fn max_len_error(max: usize) -> String {
    format!("must be no more than {max} characters")
}

fn is_dns1123_label(label: &str) -> bool {
    let bytes = label.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            alnum(first) && alnum(last) && bytes.iter().all(|b| alnum(b) || *b == b'-')
        }
        _ => false,
    }
}

/// apimachinery's `IsDNS1123Subdomain`: the messages for `value`, none when it is valid.
pub fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 253 {
        errors.push(max_len_error(253));
    }
    if !value.split('.').all(is_dns1123_label) {
        errors.push(regex_error(
            DNS1123_SUBDOMAIN_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errors
}

/// Matches `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn is_label_key_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    let ext = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric() && last.is_ascii_alphanumeric() && bytes.iter().all(ext)
        }
        _ => false,
    }
}

/// apimachinery's `IsQualifiedName` (label and annotation keys).
pub fn qualified_name(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_string());
            } else {
                errors.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            let regex = regex_error(LABEL_KEY_MSG, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"]);
            errors.push(format!(
                "a valid label key {regex} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ));
            return errors;
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errors.push(format!("name part {}", max_len_error(63)));
    }
    if !is_label_key_name(name) {
        let regex = regex_error(LABEL_KEY_MSG, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"]);
        errors.push(format!("name part {regex}"));
    }
    errors
}

/// apimachinery's `IsValidLabelValue`.
pub fn label_value(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push(max_len_error(63));
    }
    if !value.is_empty() && !is_label_key_name(value) {
        let regex = format!("({LABEL_KEY_FMT})?");
        errors.push(regex_error(
            LABEL_VALUE_MSG,
            &regex,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errors
}

/// Whether Go's `net.ParseIP` accepts `text` (dotted IPv4 without leading zeros, or IPv6
/// without a zone).
pub fn is_ip(text: &str) -> bool {
    text.parse::<IpAddr>().is_ok()
}

/// Whether Go's `net.ParseCIDR` accepts `text`: an address, `/`, and a decimal prefix length
/// no longer than the address.
pub fn is_cidr(text: &str) -> bool {
    let Some((addr, bits)) = text.split_once('/') else {
        return false;
    };
    let Ok(addr) = addr.parse::<IpAddr>() else {
        return false;
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    !bits.is_empty()
        && bits.bytes().all(|b| b.is_ascii_digit())
        && bits.parse::<u32>().is_ok_and(|n| n <= max)
}

/// Whether cert-manager's `pki.ParseObjectIdentifier` accepts `text`: dot-separated parts,
/// each a Go `strconv.Atoi` integer.
pub fn is_oid(text: &str) -> bool {
    !text.is_empty() && text.split('.').all(crate::certificates::go::atoi_ok)
}
