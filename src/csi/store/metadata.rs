//! A volume's `metadata.json`, with csi-lib's field names so its layout stays familiar.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// kubelet's service-account tokens (with `tokenRequests` on the CSIDriver): never stored.
/// csi-lib writes them into its metadata; a token on disk outlives its pod's need of it.
pub const TOKENS_KEY: &str = "csi.storage.k8s.io/serviceAccount.tokens";

/// What the store keeps of a volume across restarts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    #[serde(rename = "volumeID")]
    pub volume_id: String,
    pub target_path: String,
    /// When to issue again; absent until the first issuance is written.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "rfc3339")]
    pub next_issuance_time: Option<Timestamp>,
    /// The issued certificate's notAfter (ours; csi-lib has no such field), for the metrics.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "rfc3339")]
    pub not_after: Option<Timestamp>,
    /// The volume's attributes and kubelet's pod info, without the token.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    volume_context: BTreeMap<String, String>,
    /// The pod's fsGroup as kubelet sent it (`volume_mount_group`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_mount_group: Option<String>,
}

impl Metadata {
    /// A new volume's metadata; the context's token, if any, is dropped here, the one way in.
    pub fn new(volume_id: &str, target_path: &str, context: &BTreeMap<String, String>) -> Self {
        let volume_context = context
            .iter()
            .filter(|(k, _)| k.as_str() != TOKENS_KEY)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Self {
            volume_id: volume_id.to_string(),
            target_path: target_path.to_string(),
            next_issuance_time: None,
            not_after: None,
            volume_context,
            volume_mount_group: None,
        }
    }

    pub fn volume_context(&self) -> &BTreeMap<String, String> {
        &self.volume_context
    }
}

/// `Option<Timestamp>` as RFC 3339 text, the form csi-lib writes.
mod rfc3339 {
    use jiff::Timestamp;
    use serde::{Deserialize, Deserializer, Serializer};

    #[allow(clippy::ref_option, reason = "serde's `with` passes the field by reference")]
    pub fn serialize<S: Serializer>(at: &Option<Timestamp>, out: S) -> Result<S::Ok, S::Error> {
        match at {
            Some(at) => out.serialize_str(&at.to_string()),
            None => out.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(input: D) -> Result<Option<Timestamp>, D::Error> {
        let text: Option<String> = Option::deserialize(input)?;
        text.map(|t| t.parse().map_err(serde::de::Error::custom))
            .transpose()
    }
}
