//! The name of a Certificate's next-private-key Secret: derived from its UID, so a retry after
//! a crash finds the Secret it made instead of making a second one, and so the controllers
//! find it without `status.nextPrivateKeySecretName`, which they neither write nor trust:
//! whoever may write a Certificate's status cannot point it at another Secret's key.

use kube::ResourceExt;
use sha2::{Digest, Sha256};

use crate::api::certmanager::Certificate;

/// The deterministic name of `crt`'s next-key Secret. Never the target Secret's name, which
/// anyone who reads the Certificate's UID could give it: that Secret is never taken for a key
/// Secret, so the key Secret could then never be made.
pub fn next_key_name(crt: &Certificate) -> String {
    let name = crt.name_any();
    let digest = hex::encode(Sha256::digest(crt.uid().unwrap_or_default().as_bytes()));
    let prefix: String = name.chars().take(253 - 9).collect();
    let prefix = prefix.trim_end_matches(['-', '.']);
    let first = format!("{prefix}-{}", &digest[..8]);
    if first == crt.spec.secret_name {
        format!("{prefix}-{}", &digest[8..16])
    } else {
        first
    }
}
