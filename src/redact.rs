//! `Debug` output that leaves secrets out. Types holding private keys, keystores, keystore
//! passwords or Secret data write their `Debug` by hand with these, so logging one with `{:?}`
//! never prints the secret: what is shown is that the field is there, not what it holds.

use std::fmt;

use k8s_openapi::api::core::v1::Secret;

/// Stands for a secret value in `Debug` output: prints `<redacted>`.
pub struct Redacted;

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// `Some(<redacted>)` or `None`: whether an optional secret is there.
pub fn option<T>(value: &Option<T>) -> Option<Redacted> {
    value.as_ref().map(|_| Redacted)
}

/// A Secret as `Debug` shows it where it is part of another value: the object it is and the
/// keys of its data, never their values.
pub struct ShownSecret<'a>(pub &'a Secret);

impl fmt::Debug for ShownSecret<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let meta = &self.0.metadata;
        let keys: Vec<&String> = self.0.data.iter().flatten().map(|(k, _)| k).collect();
        let string_keys: Vec<&String> = self.0.string_data.iter().flatten().map(|(k, _)| k).collect();
        f.debug_struct("Secret")
            .field("namespace", &meta.namespace)
            .field("name", &meta.name)
            .field("uid", &meta.uid)
            .field("resource_version", &meta.resource_version)
            .field("type", &self.0.type_)
            .field("data", &keys)
            .field("string_data", &string_keys)
            .finish_non_exhaustive()
    }
}

/// [`ShownSecret`] of an optional Secret.
pub fn secret(secret: Option<&Secret>) -> Option<ShownSecret<'_>> {
    secret.map(ShownSecret)
}

/// An object's JSON body as `Debug` shows it: a Secret's `data` and `stringData` values
/// replaced by `<redacted>` (their keys kept); any other kind as it is.
pub fn body(kind: &str, body: &serde_json::Value) -> serde_json::Value {
    let mut shown = body.clone();
    if kind == "Secret" {
        for field in ["data", "stringData"] {
            if let Some(map) = shown.get_mut(field).and_then(serde_json::Value::as_object_mut) {
                map.values_mut().for_each(|v| *v = "<redacted>".into());
            }
        }
    }
    shown
}

#[cfg(test)]
mod tests;
