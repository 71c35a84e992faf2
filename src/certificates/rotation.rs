//! `spec.privateKey.rotationPolicy`: whether an issuance makes a new private key.

use crate::api::certmanager::PrivateKey;

/// cert-manager's rotation policies. The CRD field stays a string, so whatever cert-manager
/// accepts still deserializes; validation reports a value it refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RotationPolicy {
    /// A new key for every issuance: cert-manager's default.
    Always,
    /// The key already in the Secret is used again while it matches the spec.
    Never,
}

impl RotationPolicy {
    /// The policy `value` names (unset: `Always`, as cert-manager defaults it); `None` for a
    /// value cert-manager refuses.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "" | "Always" => Some(RotationPolicy::Always),
            "Never" => Some(RotationPolicy::Never),
            _ => None,
        }
    }

    /// The policy of a Certificate's `privateKey` (none: `Always`).
    pub fn of(private_key: Option<&PrivateKey>) -> Option<Self> {
        Self::parse(private_key.map_or("", |k| k.rotation_policy.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_policy_table() {
        let key = |policy: &str| PrivateKey {
            rotation_policy: policy.to_string(),
            ..PrivateKey::default()
        };
        let rows = [
            ("unset", Some(key("")), Some(RotationPolicy::Always)),
            ("no privateKey", None, Some(RotationPolicy::Always)),
            ("Always", Some(key("Always")), Some(RotationPolicy::Always)),
            ("Never", Some(key("Never")), Some(RotationPolicy::Never)),
            ("case matters", Some(key("never")), None),
            ("anything else", Some(key("Sometimes")), None),
        ];
        for (name, private_key, want) in rows {
            assert_eq!(RotationPolicy::of(private_key.as_ref()), want, "{name}");
        }
    }
}
