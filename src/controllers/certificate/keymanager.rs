//! The key manager: while a Certificate is issuing, keeps the private key of the next
//! certificate in a Secret of its own (labelled, controlled by the Certificate, named in
//! `status.nextPrivateKeySecretName`); when not issuing, deletes it. `rotationPolicy: Never`
//! reuses the key already in the target Secret.
//!
//! The Secret's name is derived from the Certificate's UID, so a retry after a crash finds the
//! Secret it made instead of making a second one.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::status::document;
use super::{CertificateContext, Error, computed, execute, log_and_retry, observe};
use crate::api::certmanager::{Certificate, ISSUING};
use crate::certificates::go::list as go_list;
use crate::certificates::keys::{data, label};
use crate::certificates::matching::private_key_matches_spec;
use crate::certificates::rotation::RotationPolicy;
use crate::certificates::secret::{certificate_owner_reference, data_of};
use crate::controllers::kit::events::Notice;
use crate::controllers::kit::plan::{Announce, FullPlan, IfTaken, Next, Plan, Write, requeue};
use crate::controllers::kit::status::FieldManager;
use crate::pki::keys::{Encoding, Key, KeyError, KeySpec};

const NAME: &str = "keymanager";

/// What the key manager needs before it can plan a new key Secret: a fresh key of this spec.
/// The reconcile makes one and decides again with it in [`Facts::generated`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyNeeded(pub KeySpec);

/// What the key manager decides from.
#[derive(Clone)]
pub struct Facts<'a> {
    pub certificate: &'a Certificate,
    /// The Certificate's next-private-key Secrets.
    pub owned: Vec<&'a Secret>,
    /// The target Secret, read only with `rotationPolicy: Never`.
    pub target: Option<&'a Secret>,
    /// A key made for this decision (PKCS#8 PEM), once a plan asked for one.
    pub generated: Option<&'a [u8]>,
}

/// The Secrets by name and data keys only, and no generated key: they hold private keys.
impl std::fmt::Debug for Facts<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let owned: Vec<_> = self.owned.iter().map(|s| crate::redact::ShownSecret(s)).collect();
        f.debug_struct("Facts")
            .field("certificate", &self.certificate)
            .field("owned", &owned)
            .field("target", &crate::redact::secret(self.target))
            .field("generated", &crate::redact::option(&self.generated))
            .finish()
    }
}

/// The deterministic name of a Certificate's next-key Secret. Never the target Secret's name,
/// which anyone who reads the Certificate's UID could give it: that Secret is never taken for a
/// key Secret, so the key Secret could then never be made.
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

/// The key manager's plan. The name goes into status before its Secret is made (the Secret's
/// watch event then finds it named) and out of status before its Secret goes.
pub fn decide(facts: &Facts<'_>) -> FullPlan<KeyNeeded> {
    let crt = facts.certificate;
    let named = crt
        .status
        .as_ref()
        .and_then(|s| s.next_private_key_secret_name.clone());
    if !crt.has_true(ISSUING) {
        let plan = Plan {
            status: named.is_some().then(|| document(json!({}))),
            event: None,
            next: Next::AwaitChange,
        };
        return plan.followed_by(deletes(&facts.owned));
    }
    match facts.owned.as_slice() {
        [] => create(facts, named),
        [one] => check(facts, one, named),
        many => {
            let extra: Vec<&Secret> = many
                .iter()
                .filter(|s| Some(s.name_any()) != named)
                .copied()
                .collect();
            Plan::idle(Next::AwaitChange).followed_by(deletes(&extra))
        }
    }
}

fn deletes(secrets: &[&Secret]) -> Vec<Write> {
    secrets.iter().filter_map(|s| Write::delete(*s)).collect()
}

/// One key Secret exists: adopt it, keep it, or delete it (one made for an earlier issuance).
fn check(facts: &Facts<'_>, secret: &Secret, named: Option<String>) -> FullPlan<KeyNeeded> {
    let delete = |event| {
        let plan = Plan {
            status: None,
            event,
            next: Next::AwaitChange,
        };
        plan.followed_by(deletes(&[secret]))
    };
    if observe::made_for_another_revision(secret, facts.certificate) {
        return delete(None);
    }
    let Some(named) = named else {
        let status = document(json!({ "nextPrivateKeySecretName": secret.name_any() }));
        return Plan {
            status: Some(status),
            event: None,
            next: Next::AwaitChange,
        }
        .into();
    };
    if named != secret.name_any() {
        return delete(None);
    }
    let Ok(key) = Key::from_pem(secret_key(secret)) else {
        return delete(None);
    };
    let violations = private_key_matches_spec(key.spec, &facts.certificate.spec);
    if violations.is_empty() {
        return FullPlan::idle(Next::AwaitChange);
    }
    let note = format!(
        "Regenerating private key due to change in fields: {}",
        go_list(&violations)
    );
    delete(Some(Notice::normal("Deleted", "KeyManager", &note)))
}

/// No key Secret of this Certificate yet: make one under the derived name, from a new key or
/// (`Never`) the target Secret's. A name in status that is not one of its key Secrets (another
/// Certificate's, or any Secret someone pointed it at) is replaced, never used.
fn create(facts: &Facts<'_>, named: Option<String>) -> FullPlan<KeyNeeded> {
    let crt = facts.certificate;
    let name = next_key_name(crt);
    let status = (named.as_deref() != Some(name.as_str()))
        .then(|| document(json!({ "nextPrivateKeySecretName": name })));
    // Validation reports a bad key spec on Ready; nothing to make.
    let Ok(spec) = KeySpec::of(crt.spec.private_key.as_ref()) else {
        return FullPlan::idle(Next::AwaitChange);
    };
    let new = NewKey {
        name: &name,
        status,
        spec,
    };
    let never = reuses_key(crt);
    let existing = facts.target.map(secret_key).filter(|k| !k.is_empty());
    match (never, existing) {
        (true, Some(pem)) => reuse(facts, new, pem),
        _ => fresh_key(facts, new, None),
    }
}

/// The key Secret to make: its name, the status naming it (when status does not yet), the key.
struct NewKey<'a> {
    name: &'a str,
    status: Option<serde_json::Value>,
    spec: KeySpec,
}

/// The key Secret made from a fresh key; first, the fresh key.
fn fresh_key(facts: &Facts<'_>, new: NewKey<'_>, event: Option<Notice>) -> FullPlan<KeyNeeded> {
    let Some(pem) = facts.generated else {
        return FullPlan::idle(Next::Work(KeyNeeded(new.spec)));
    };
    let note = "Stored new private key in temporary Secret resource ";
    let announce = Announce {
        made: Some(Notice::normal("Generated", "KeyManager", note)),
        refused: None,
    };
    let plan = Plan {
        status: new.status,
        event,
        next: Next::AwaitChange,
    };
    plan.followed_by(vec![make(facts.certificate, new.name, pem, announce)])
}

/// `rotationPolicy: Never`: the key Secret made from the target Secret's key `pem`, when it
/// decodes (else a fresh one) and matches the spec (else nothing, and why).
fn reuse(facts: &Facts<'_>, new: NewKey<'_>, pem: &[u8]) -> FullPlan<KeyNeeded> {
    let crt = facts.certificate;
    let secret_name = &crt.spec.secret_name;
    let Ok(key) = Key::from_pem(pem) else {
        let note =
            format!("Failed to decode private key stored in Secret {secret_name:?} - generating new key");
        return fresh_key(
            facts,
            new,
            Some(Notice::warning("DecodeFailed", "KeyManager", &note)),
        );
    };
    let violations = private_key_matches_spec(key.spec, &crt.spec);
    if !violations.is_empty() {
        let note = format!(
            "User intervention required: existing private key in Secret {secret_name:?} does not match requirements on Certificate resource, mismatching fields: {}, but cert-manager cannot create new private key as the Certificate's .spec.privateKey.rotationPolicy is unset or set to Never. To allow cert-manager to create a new private key you can set .spec.privateKey.rotationPolicy to 'Always' (this will result in the private key being regenerated every time a cert is renewed) ",
            go_list(&violations)
        );
        let event = Some(Notice::warning("CannotRegenerateKey", "KeyManager", &note));
        return Plan {
            status: None,
            event,
            next: Next::AwaitChange,
        }
        .into();
    }
    let note = format!("Reusing private key stored in existing Secret resource {secret_name:?}");
    let plan = Plan {
        status: new.status,
        event: Some(Notice::normal("Reused", "KeyManager", &note)),
        next: Next::AwaitChange,
    };
    plan.followed_by(vec![make(crt, new.name, pem, Announce::default())])
}

/// The create of the key Secret `name` holding `pem`. One already there was made by an
/// earlier attempt: the next reconcile checks it.
fn make(crt: &Certificate, name: &str, pem: &[u8], announce: Announce) -> Write {
    Write::create(&key_secret(crt, name, pem.to_vec()), IfTaken::Done, announce)
}

/// Whether `crt` keeps the key already in its Secret (`rotationPolicy: Never`).
fn reuses_key(crt: &Certificate) -> bool {
    RotationPolicy::of(crt.spec.private_key.as_ref()) == Some(RotationPolicy::Never)
}

/// The Secret's `tls.key`; empty when absent.
fn secret_key(secret: &Secret) -> &[u8] {
    data_of(secret, data::TLS_KEY)
}

/// The next-key Secret for `crt`: `tls.key` as PKCS#8 PEM, labelled, controlled by `crt`.
pub fn key_secret(crt: &Certificate, name: &str, pem: Vec<u8>) -> Secret {
    let labels = BTreeMap::from([
        (label::NEXT_PRIVATE_KEY.to_string(), "true".to_string()),
        (label::PART_OF_CERT_MANAGER.to_string(), "true".to_string()),
    ]);
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: crt.namespace(),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(
                observe::KEY_REVISION.to_string(),
                observe::next_revision(crt).to_string(),
            )])),
            owner_references: Some(vec![certificate_owner_reference(crt)]),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(data::TLS_KEY.to_string(), ByteString(pem))])),
        type_: Some("Opaque".to_string()),
        ..Secret::default()
    }
}

pub async fn reconcile(crt: Arc<Certificate>, ctx: Arc<CertificateContext>) -> Result<Action, Error> {
    if !ctx.acts_on(FieldManager::KEY_MANAGER, &crt) {
        return Ok(Action::await_change());
    }
    let owned = observe::next_key_secrets(&ctx, &crt);
    let never = reuses_key(&crt);
    let target = if never && owned.is_empty() && crt.has_true(ISSUING) {
        observe::target_secret(&ctx, &crt).await?
    } else {
        None
    };
    let fresh: Vec<u8>;
    let mut facts = Facts {
        certificate: &crt,
        owned: owned.iter().map(AsRef::as_ref).collect(),
        target: target.as_ref(),
        generated: None,
    };
    let mut plan = decide(&facts);
    if let Next::Work(KeyNeeded(spec)) = plan.plan.next {
        fresh = generate(&ctx, &crt, spec).await?;
        facts.generated = Some(&fresh);
        plan = decide(&facts);
    }
    let next = execute(&ctx, &crt, FieldManager::KEY_MANAGER, plan).await?;
    ctx.settled(&super::retry_key(NAME, &crt));
    Ok(requeue(&next, || std::time::Duration::from_secs(1)))
}

/// A new private key of `spec`, as PKCS#8 PEM, made on the crypto pool (an RSA-8192 key takes
/// seconds of a CPU).
async fn generate(ctx: &CertificateContext, crt: &Certificate, spec: KeySpec) -> Result<Vec<u8>, Error> {
    let made = computed(ctx, crt, move || -> Result<Vec<u8>, KeyError> {
        let key = Key::generate(spec)?;
        Ok(key.to_pem(Encoding::Pkcs8)?.into_bytes())
    })
    .await?;
    made.map_err(|source| Error::Key {
        object: observe::describe(crt),
        source,
    })
}

pub fn error_policy(crt: Arc<Certificate>, err: &Error, ctx: Arc<CertificateContext>) -> Action {
    log_and_retry(NAME, &crt, err, &ctx)
}

#[cfg(test)]
mod tests;
