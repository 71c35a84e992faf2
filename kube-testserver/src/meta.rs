//! Small accessors over untyped objects (`serde_json::Value`) plus the identifiers a server mints.

use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value};

pub type Object = Map<String, Value>;

pub fn metadata(obj: &Value) -> Option<&Object> {
    obj.get("metadata")?.as_object()
}

/// The object's metadata map, created if missing or not a map.
pub fn metadata_mut(obj: &mut Value) -> &mut Object {
    if !obj.is_object() {
        *obj = Value::Object(Object::new());
    }
    let map = obj.as_object_mut().expect("just made an object");
    let meta = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Object::new()));
    if !meta.is_object() {
        *meta = Value::Object(Object::new());
    }
    meta.as_object_mut().expect("just made an object")
}

pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    metadata(obj)?.get(field)?.as_str().filter(|s| !s.is_empty())
}

pub fn name(obj: &Value) -> Option<&str> {
    meta_str(obj, "name")
}

pub fn uid(obj: &Value) -> Option<&str> {
    meta_str(obj, "uid")
}

pub fn labels(obj: &Value) -> Option<&Object> {
    metadata(obj)?.get("labels")?.as_object()
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    metadata(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(|f| f.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

pub fn is_deleting(obj: &Value) -> bool {
    metadata(obj)
        .and_then(|m| m.get("deletionTimestamp"))
        .is_some_and(|t| !t.is_null())
}

pub fn owner_references(obj: &Value) -> Vec<Value> {
    metadata(obj)
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

pub fn set_meta(obj: &mut Value, field: &str, value: impl Into<Value>) {
    metadata_mut(obj).insert(field.to_string(), value.into());
}

/// RFC 3339 at second precision, as `metav1.Time` serialises.
pub fn now_rfc3339() -> String {
    Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub fn parse_time(s: &str) -> Option<Timestamp> {
    s.parse().ok()
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    // The OS RNG failing is not something a test server can recover from.
    getrandom::fill(&mut buf).expect("OS random number generator");
    buf
}

/// A random (version 4) UUID.
pub fn new_uid() -> String {
    let mut b = random_bytes::<16>();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The suffix `generateName` gets: five characters from apiserver's consonant-and-digit alphabet.
pub fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    random_bytes::<5>()
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}

pub fn random_token() -> String {
    random_bytes::<24>().iter().map(|x| format!("{x:02x}")).collect()
}

/// A DNS-1123 subdomain, the rule for most object names.
pub fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// A DNS-1123 label, the rule for namespace names.
pub fn is_dns_label(name: &str) -> bool {
    name.len() <= 63 && !name.contains('.') && is_dns_subdomain(name)
}

/// Kubernetes' short human durations (`35s`, `4m12s`, `3h`, `2d5h`), as `kubectl get` shows ages.
pub fn human_duration(secs: i64) -> String {
    let secs = secs.max(0);
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86400);
    match () {
        _ if secs < 120 => format!("{secs}s"),
        _ if m < 10 => format!("{m}m{}s", secs % 60),
        _ if m < 180 => format!("{m}m"),
        _ if h < 8 => format!("{h}h{}m", m % 60),
        _ if h < 48 => format!("{h}h"),
        _ if h < 192 => format!("{d}d{}h", h % 24),
        _ => format!("{d}d"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uid_is_version_4() {
        let uid = new_uid();
        assert_eq!(uid.len(), 36);
        assert_eq!(&uid[14..15], "4");
    }

    #[test]
    fn names_follow_dns_rules() {
        assert!(is_dns_subdomain("issuers.cfssl-issuer.wikimedia.org"));
        assert!(!is_dns_subdomain("Upper"));
        assert!(!is_dns_label("a.b"));
        assert!(is_dns_label("kube-system"));
    }

    #[test]
    fn durations_read_like_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(250), "4m10s");
        assert_eq!(human_duration(3 * 3600), "3h0m");
        assert_eq!(human_duration(3 * 86400), "3d0h");
    }
}
