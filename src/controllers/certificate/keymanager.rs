//! The key manager: while a Certificate is issuing, keeps the private key of the next
//! certificate in a Secret of its own (labelled, controlled by the Certificate, under the name
//! [`next_key_name`] derives from its UID); when not issuing, deletes it. `rotationPolicy: Never`
//! reuses the key already in the target Secret.
//!
//! The derived name is how every controller finds the key Secret: a retry after a crash finds
//! the Secret it made instead of making a second one, and no status field names it (one write
//! less each way, and nothing whoever may write status could point elsewhere).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use serde_json::json;

use super::status::document;
use super::{CertificateContext, Error, computed, execute, log_and_retry, observe};
use crate::api::certmanager::{Certificate, ISSUING};
use crate::certificates::go::list as go_list;
use crate::certificates::keys::{data, label};
use crate::certificates::matching::private_key_matches_spec;
pub use crate::certificates::next_key::next_key_name;
use crate::certificates::rotation::RotationPolicy;
use crate::certificates::secret::{certificate_owner_reference, data_of};
use crate::controllers::kit::events::Notice;
use crate::controllers::kit::plan::{Announce, FullPlan, IfTaken, Next, Plan, Requeue, Write, requeue_at};
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

/// The key manager's plan. While issuing: the key Secret of the derived name is kept when good
/// and made when missing, every other key Secret of the Certificate deleted first (one of
/// another name, such as cert-manager's generated one a migrated Certificate's status still
/// names, is never used). No status is written then. When not issuing, the key Secrets go, and
/// a `nextPrivateKeySecretName` an earlier version of this manager applied (same field manager)
/// is removed once, so an upgrade leaves no stale name behind.
pub fn decide(facts: &Facts<'_>) -> FullPlan<KeyNeeded> {
    let crt = facts.certificate;
    if !crt.has_true(ISSUING) {
        let named = crt
            .status
            .as_ref()
            .is_some_and(|s| s.next_private_key_secret_name.is_some());
        let plan = Plan {
            status: named.then(|| document(json!({}))),
            event: None,
            next: Next::AwaitChange,
        };
        return plan.followed_by(deletes(&facts.owned));
    }
    let name = next_key_name(crt);
    let (derived, others): (Vec<&Secret>, Vec<&Secret>) =
        facts.owned.iter().partition(|s| s.name_any() == name);
    let others = deletes(&others);
    match derived.first() {
        Some(secret) => check(facts, secret, others),
        None => create(facts, &name, others),
    }
}

fn deletes(secrets: &[&Secret]) -> Vec<Write> {
    secrets.iter().filter_map(|s| Write::delete(*s)).collect()
}

/// The key Secret of the derived name exists: keep it, or delete it (one made for an earlier
/// issuance, or whose key no longer decodes or fits the spec) after the `others`.
fn check(facts: &Facts<'_>, secret: &Secret, others: Vec<Write>) -> FullPlan<KeyNeeded> {
    let delete = |event| {
        let plan = Plan {
            status: None,
            event,
            next: Next::AwaitChange,
        };
        plan.followed_by(others.iter().cloned().chain(deletes(&[secret])).collect())
    };
    if observe::made_for_another_revision(secret, facts.certificate) {
        return delete(None);
    }
    let Ok(key) = Key::from_pem(secret_key(secret)) else {
        return delete(None);
    };
    let violations = private_key_matches_spec(key.spec, &facts.certificate.spec);
    if violations.is_empty() {
        return Plan::idle(Next::AwaitChange).followed_by(others);
    }
    let note = format!(
        "Regenerating private key due to change in fields: {}",
        go_list(&violations)
    );
    delete(Some(Notice::normal("Deleted", "KeyManager", &note)))
}

/// No key Secret of the derived name yet: make one, from a new key or (`Never`) the target
/// Secret's, after deleting the `others`.
fn create(facts: &Facts<'_>, name: &str, others: Vec<Write>) -> FullPlan<KeyNeeded> {
    let crt = facts.certificate;
    // Validation reports a bad key spec on Ready; nothing to make.
    let Ok(spec) = KeySpec::of(crt.spec.private_key.as_ref()) else {
        return Plan::idle(Next::AwaitChange).followed_by(others);
    };
    let new = NewKey { name, others, spec };
    let never = reuses_key(crt);
    let existing = facts.target.map(secret_key).filter(|k| !k.is_empty());
    match (never, existing) {
        (true, Some(pem)) => reuse(facts, new, pem),
        // The issuing controller fails the issuance and says why; nothing to make or retry.
        _ if spec.can_generate().is_err() => Plan::idle(Next::AwaitChange).followed_by(new.writes(None)),
        _ => fresh_key(facts, new, None),
    }
}

/// The key Secret to make: its name, the other key Secrets' deletes to do first, the key.
struct NewKey<'a> {
    name: &'a str,
    others: Vec<Write>,
    spec: KeySpec,
}

impl NewKey<'_> {
    /// The deletes of the other key Secrets, then `make` when there is one.
    fn writes(self, make: Option<Write>) -> Vec<Write> {
        self.others.into_iter().chain(make).collect()
    }
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
        status: None,
        event,
        next: Next::AwaitChange,
    };
    let make = make(facts.certificate, new.name, pem, announce);
    plan.followed_by(new.writes(Some(make)))
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
        let plan = Plan {
            status: None,
            event,
            next: Next::AwaitChange,
        };
        return plan.followed_by(new.writes(None));
    }
    let note = format!("Reusing private key stored in existing Secret resource {secret_name:?}");
    let plan = Plan {
        status: None,
        event: Some(Notice::normal("Reused", "KeyManager", &note)),
        next: Next::AwaitChange,
    };
    let make = make(crt, new.name, pem, Announce::default());
    plan.followed_by(new.writes(Some(make)))
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

pub async fn reconcile(crt: Arc<Certificate>, ctx: Arc<CertificateContext>) -> Result<Requeue, Error> {
    if !ctx.acts_on(FieldManager::KEY_MANAGER, &crt) {
        return Ok(Requeue::AWAIT_CHANGE);
    }
    let owned = observe::next_key_secrets(&ctx, &crt);
    let never = reuses_key(&crt);
    let name = next_key_name(&crt);
    let made = owned.iter().any(|s| s.name_any() == name);
    let target = if never && !made && crt.has_true(ISSUING) {
        observe::target_secret(&ctx, &crt).await?
    } else {
        None
    };
    let fresh: Vec<u8>;
    let mut facts = Facts {
        certificate: &crt,
        owned: owned.iter().map(AsRef::as_ref).collect(),
        target: target.as_deref(),
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
    Ok(requeue_at(&next, || std::time::Duration::from_secs(1)))
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

pub fn error_policy(crt: Arc<Certificate>, err: &Error, ctx: Arc<CertificateContext>) -> Requeue {
    log_and_retry(NAME, &crt, err, &ctx)
}

#[cfg(test)]
mod tests;
