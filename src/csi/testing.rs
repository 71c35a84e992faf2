//! What the plugin's unit tests share: the volume context kubelet sends for one pod.

use crate::csi::attributes::{key, kubelet};

/// The context of a volume of pod `shop/web-0` asking issuer `ca`, with `extra` added or
/// replacing; as a `BTreeMap` (attributes) or a `HashMap` (a gRPC request).
pub fn pod_context<M: FromIterator<(String, String)>>(extra: &[(&str, &str)]) -> M {
    let base = [
        (kubelet::POD_NAME, "web-0"),
        (kubelet::POD_NAMESPACE, "shop"),
        (kubelet::POD_UID, "0b9d"),
        (kubelet::SERVICE_ACCOUNT_NAME, "web"),
        (kubelet::EPHEMERAL, "true"),
        (key::ISSUER_NAME, "ca"),
    ];
    let mut pairs: std::collections::BTreeMap<&str, &str> = base.into_iter().collect();
    pairs.extend(extra.iter().copied());
    pairs
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
