//! Many Certificates at once, for standalone mode: created together, renewed together with a
//! manual trigger (as `cmctl renew` does), waited for with a watch, and their
//! Secrets checked against their certificates.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use cfssl_issuer::api::certmanager::{Certificate, ISSUING};
use cfssl_issuer::pki::keys::{Key, KeySpec};

use super::parse_leaf;

const GROUP: &str = "cfssl-issuer.wikimedia.org";
/// The field manager of the manual trigger (`cmctl renew` writes as `cmctl`).
pub const TRIGGER_MANAGER: &str = "cmctl";

/// A Certificate `name` in `namespace` for `<name>.example.com`, into the Secret `<name>-tls`,
/// from our Issuer `issuer`, with a key as `key` asks.
pub fn certificate(namespace: &str, name: &str, issuer: &str, key: KeySpec) -> anyhow::Result<Certificate> {
    let private_key = match key {
        KeySpec::Rsa(size) => json!({"algorithm": "RSA", "size": size}),
        KeySpec::Ecdsa(size) => json!({"algorithm": "ECDSA", "size": size}),
        KeySpec::Ed25519 => json!({"algorithm": "Ed25519"}),
    };
    Ok(serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "secretName": secret_name(name),
            "dnsNames": [format!("{name}.example.com")],
            "privateKey": private_key,
            "issuerRef": {"group": GROUP, "kind": "Issuer", "name": issuer},
        },
    }))?)
}

/// The Secret [`certificate`] names.
pub fn secret_name(certificate: &str) -> String {
    format!("{certificate}-tls")
}

/// Creates every Certificate, `concurrency` at a time.
pub async fn create_all(
    client: &Client,
    namespace: &str,
    certificates: &[Certificate],
    concurrency: usize,
) -> anyhow::Result<()> {
    let api = Api::<Certificate>::namespaced(client.clone(), namespace);
    super::all_at_once(
        certificates.iter().map(|crt| {
            let api = &api;
            async move {
                api.create(&PostParams::default(), crt).await?;
                anyhow::Ok(())
            }
        }),
        concurrency,
    )
    .await
}

/// What `cmctl renew` does: condition `Issuing=True`, reason `ManuallyTriggered`, written to
/// the status; here as a merge patch carrying the other conditions unchanged (a merge patch
/// replaces the whole list).
pub async fn manual_trigger(api: &Api<Certificate>, crt: &Certificate) -> anyhow::Result<()> {
    let name = crt.metadata.name.as_deref().unwrap_or_default();
    let mut conditions: Vec<Value> = crt
        .status
        .iter()
        .flat_map(|s| s.conditions.iter())
        .filter(|c| c.type_ != ISSUING)
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()?;
    conditions.push(json!({
        "type": ISSUING, "status": "True", "reason": "ManuallyTriggered",
        "message": "Certificate re-issuance manually triggered",
        "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().to_string(),
        "observedGeneration": crt.metadata.generation,
    }));
    let patch = json!({"status": {"conditions": conditions}});
    api.patch_status(
        name,
        &PatchParams {
            field_manager: Some(TRIGGER_MANAGER.into()),
            ..Default::default()
        },
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

/// [`manual_trigger`] on every Certificate, `concurrency` at a time.
pub async fn trigger_all(
    client: &Client,
    namespace: &str,
    certificates: &[Certificate],
    concurrency: usize,
) -> anyhow::Result<()> {
    let api = Api::<Certificate>::namespaced(client.clone(), namespace);
    super::all_at_once(
        certificates.iter().map(|crt| manual_trigger(&api, crt)),
        concurrency,
    )
    .await
}

/// Whether `crt` is Ready at `revision` with no issuance under way.
pub fn ready_at(crt: &Certificate, revision: i64) -> bool {
    ready_since(crt, revision) && revision_of(crt) == Some(revision)
}

/// Whether `crt` is Ready at `revision` or a later one, with no issuance under way.
pub fn ready_since(crt: &Certificate, revision: i64) -> bool {
    crt.has_true("Ready") && !crt.has_true(ISSUING) && revision_of(crt).is_some_and(|r| r >= revision)
}

pub fn revision_of(crt: &Certificate) -> Option<i64> {
    crt.status.as_ref().and_then(|s| s.revision)
}

/// Every Certificate of a namespace and every Secret once all `n` are [`ready_since`]
/// `revision` and each Secret they name exists.
pub struct Settled {
    pub certificates: Vec<Certificate>,
    pub secrets: Vec<Secret>,
    /// Lists of Certificates and of Secrets the wait made (to take from the server's counts).
    pub certificate_lists: u64,
    pub secret_lists: u64,
    /// Watches of Certificates the wait opened (one per list of its watcher).
    pub certificate_watches: u64,
    /// When the last list returned.
    pub at: tokio::time::Instant,
}

/// Follows the namespace's Certificates with one watch until all `n` are Ready at `revision`
/// (or later: a spurious re-issuance must show in the figures, not hang the wait), then lists
/// them and their Secrets every `poll` until each Certificate's Secret is there. A watch costs
/// the API server each change once; polling lists of thousands of Certificates would make the
/// bench, not the manager, what the figures measure.
pub async fn wait_all_ready(
    client: &Client,
    namespace: &str,
    n: usize,
    revision: i64,
    poll: Duration,
    timeout: Duration,
) -> anyhow::Result<Settled> {
    let certificates = Api::<Certificate>::namespaced(client.clone(), namespace);
    let secrets = Api::<Secret>::namespaced(client.clone(), namespace);
    let ready = |crt: &Certificate| ready_since(crt, revision);
    let lists = match super::load::follow_until(certificates.clone(), n, ready, timeout).await {
        Ok(followed) => followed.lists,
        Err(late) => {
            let waiting = late.waiting.map(|c| (c.name_any(), c.status));
            anyhow::bail!(
                "timed out after {timeout:?}: {} of {n} Certificates Ready at revision \
                 {revision}; e.g. {waiting:?}",
                late.done
            );
        }
    };
    let (mut certificate_lists, mut secret_lists) = (lists, 0);
    loop {
        certificate_lists += 1;
        secret_lists += 1;
        let listed = certificates.list(&ListParams::default()).await?.items;
        let present = secrets.list(&ListParams::default()).await?.items;
        if missing_secrets(&listed, &present) == 0 {
            return Ok(Settled {
                certificates: listed,
                secrets: present,
                certificate_lists,
                secret_lists,
                certificate_watches: lists,
                at: tokio::time::Instant::now(),
            });
        }
        tokio::time::sleep(poll).await;
    }
}

fn missing_secrets(certificates: &[Certificate], secrets: &[Secret]) -> usize {
    let names: std::collections::HashSet<&str> = secrets
        .iter()
        .filter_map(|s| s.metadata.name.as_deref())
        .collect();
    certificates
        .iter()
        .filter(|c| !names.contains(c.spec.secret_name.as_str()))
        .count()
}

/// What the Secrets of a set of Certificates hold.
#[derive(Debug, Default)]
pub struct SecretCheck {
    /// Secrets whose `tls.key` is not the key of the leaf in `tls.crt` (or is unreadable).
    pub mismatched: usize,
    /// Secrets whose key is not the algorithm and size asked for.
    pub wrong_key: usize,
    /// The public key (SPKI DER) of each Certificate's Secret, by Certificate name.
    pub public_keys: HashMap<String, Vec<u8>>,
}

/// Checks every Certificate's Secret: the key matches the leaf and is `spec`.
pub fn check_secrets(certificates: &[Certificate], secrets: &[Secret], spec: KeySpec) -> SecretCheck {
    let by_name: HashMap<&str, &Secret> = secrets
        .iter()
        .filter_map(|s| Some((s.metadata.name.as_deref()?, s)))
        .collect();
    let mut check = SecretCheck::default();
    for crt in certificates {
        let name = crt.metadata.name.clone().unwrap_or_default();
        let Some(secret) = by_name.get(crt.spec.secret_name.as_str()) else {
            check.mismatched += 1;
            continue;
        };
        match secret_key(secret) {
            Some((key, leaf_spki)) if key.public_key_der() == leaf_spki.as_slice() => {
                if !key.matches(spec) {
                    check.wrong_key += 1;
                }
                check.public_keys.insert(name, leaf_spki);
            }
            _ => check.mismatched += 1,
        }
    }
    check
}

/// The Secret's private key and the public key of its leaf certificate.
fn secret_key(secret: &Secret) -> Option<(Key, Vec<u8>)> {
    let data = secret.data.as_ref()?;
    let key = Key::from_pem(&data.get("tls.key")?.0).ok()?;
    let leaf = parse_leaf(&data.get("tls.crt")?.0).ok()?;
    Some((key, leaf.spki))
}
