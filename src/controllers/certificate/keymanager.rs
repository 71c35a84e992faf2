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
use kube::api::PostParams;
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::status::document;
use super::{CertificateContext, Error, acts_on, execute, log_and_retry, observe};
use crate::api::certmanager::{Certificate, ISSUING};
use crate::certificates::go::list as go_list;
use crate::certificates::keys::{data, label};
use crate::certificates::matching::private_key_matches_spec;
use crate::certificates::secret::{certificate_owner_reference, data_of};
use crate::controllers::kit::events::Notice;
use crate::controllers::kit::plan::{Next, Plan, requeue};
use crate::controllers::kit::status::FieldManager;
use crate::pki::keys::{Encoding, Key, KeySpec};

const NAME: &str = "keymanager";

/// Where the next key comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Generate(KeySpec),
    /// `rotationPolicy: Never`: the target Secret's key, as PEM.
    Reuse(Vec<u8>),
}

/// The key manager's writes besides status: Secrets to delete, and one to create.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Work {
    pub delete: Vec<String>,
    pub create: Option<(String, Source)>,
}

/// What the key manager decides from.
#[derive(Debug, Clone)]
pub struct Facts<'a> {
    pub certificate: &'a Certificate,
    /// The Certificate's next-private-key Secrets.
    pub owned: Vec<&'a Secret>,
    /// The target Secret, read only with `rotationPolicy: Never`.
    pub target: Option<&'a Secret>,
}

/// The deterministic name of a Certificate's next-key Secret.
pub fn next_key_name(crt: &Certificate) -> String {
    let name = crt.name_any();
    let digest = hex::encode(Sha256::digest(crt.uid().unwrap_or_default().as_bytes()));
    let prefix: String = name.chars().take(253 - 9).collect();
    format!("{}-{}", prefix.trim_end_matches(['-', '.']), &digest[..8])
}

/// The key manager's plan.
pub fn decide(facts: &Facts<'_>) -> Plan<Work> {
    let crt = facts.certificate;
    let named = crt
        .status
        .as_ref()
        .and_then(|s| s.next_private_key_secret_name.clone());
    let names_of = |secrets: &[&Secret]| secrets.iter().map(|s| s.name_any()).collect::<Vec<_>>();
    if !crt.has_true(ISSUING) {
        return Plan {
            status: named.is_some().then(|| document(json!({}))),
            event: None,
            next: work(Work {
                delete: names_of(&facts.owned),
                create: None,
            }),
        };
    }
    match facts.owned.as_slice() {
        [] => create(facts, named),
        [one] => check(facts, one, named),
        many => {
            let extra = many.iter().filter(|s| Some(s.name_any()) != named).copied();
            Plan::idle(work(Work {
                delete: names_of(&extra.collect::<Vec<_>>()),
                create: None,
            }))
        }
    }
}

/// One key Secret exists: adopt it, keep it, or delete it (one made for an earlier issuance).
fn check(facts: &Facts<'_>, secret: &Secret, named: Option<String>) -> Plan<Work> {
    let delete = || {
        work(Work {
            delete: vec![secret.name_any()],
            create: None,
        })
    };
    if observe::made_for_another_revision(secret, facts.certificate) {
        return Plan::idle(delete());
    }
    let Some(named) = named else {
        let status = document(json!({ "nextPrivateKeySecretName": secret.name_any() }));
        return Plan {
            status: Some(status),
            event: None,
            next: Next::AwaitChange,
        };
    };
    if named != secret.name_any() {
        return Plan::idle(delete());
    }
    let Ok(key) = Key::from_pem(secret_key(secret)) else {
        return Plan::idle(delete());
    };
    let violations = private_key_matches_spec(&key, &facts.certificate.spec);
    if violations.is_empty() {
        return Plan::idle(Next::AwaitChange);
    }
    let note = format!(
        "Regenerating private key due to change in fields: {}",
        go_list(&violations)
    );
    Plan {
        status: None,
        event: Some(Notice::normal("Deleted", "KeyManager", &note)),
        next: delete(),
    }
}

/// No key Secret of this Certificate yet: make one under the derived name, from a new key or
/// (`Never`) the target Secret's. A name in status that is not one of its key Secrets (another
/// Certificate's, or any Secret someone pointed it at) is replaced, never used.
fn create(facts: &Facts<'_>, named: Option<String>) -> Plan<Work> {
    let crt = facts.certificate;
    let name = next_key_name(crt);
    let status = (named.as_deref() != Some(name.as_str()))
        .then(|| document(json!({ "nextPrivateKeySecretName": name })));
    // Validation reports a bad key spec on Ready; nothing to make.
    let Ok(spec) = KeySpec::of(crt.spec.private_key.as_ref()) else {
        return Plan::idle(Next::AwaitChange);
    };
    let generate = |event| Plan {
        status: status.clone(),
        event,
        next: work(Work {
            delete: Vec::new(),
            create: Some((name.clone(), Source::Generate(spec))),
        }),
    };
    let never = crt
        .spec
        .private_key
        .as_ref()
        .is_some_and(|k| k.rotation_policy == "Never");
    let existing = facts.target.map(secret_key).filter(|k| !k.is_empty());
    let (true, Some(pem)) = (never, existing) else {
        return generate(None);
    };
    let secret_name = &crt.spec.secret_name;
    let Ok(key) = Key::from_pem(pem) else {
        let note =
            format!("Failed to decode private key stored in Secret {secret_name:?} - generating new key");
        return generate(Some(Notice::warning("DecodeFailed", "KeyManager", &note)));
    };
    let violations = private_key_matches_spec(&key, &crt.spec);
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
        };
    }
    let note = format!("Reusing private key stored in existing Secret resource {secret_name:?}");
    Plan {
        status,
        event: Some(Notice::normal("Reused", "KeyManager", &note)),
        next: work(Work {
            delete: Vec::new(),
            create: Some((name, Source::Reuse(pem.to_vec()))),
        }),
    }
}

fn work(work: Work) -> Next<Work> {
    if work == Work::default() {
        Next::AwaitChange
    } else {
        Next::Work(work)
    }
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
                (observe::current_revision(crt) + 1).to_string(),
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
    if !acts_on(&crt) {
        return Ok(Action::await_change());
    }
    let owned = observe::next_key_secrets(&ctx, &crt);
    let never = crt
        .spec
        .private_key
        .as_ref()
        .is_some_and(|k| k.rotation_policy == "Never");
    let target = if never && owned.is_empty() && crt.has_true(ISSUING) {
        observe::target_secret(&ctx, &crt).await?
    } else {
        None
    };
    let facts = Facts {
        certificate: &crt,
        owned: owned.iter().map(AsRef::as_ref).collect(),
        target: target.as_ref(),
    };
    let plan = decide(&facts);
    let next = execute(&ctx, &crt, FieldManager::KEY_MANAGER, plan).await?;
    if let Next::Work(work) = &next {
        act(&ctx, &crt, work).await?;
    }
    ctx.settled(&super::retry_key(NAME, &crt));
    Ok(requeue(&next, || std::time::Duration::from_secs(1)))
}

async fn act(ctx: &CertificateContext, crt: &Certificate, work: &Work) -> Result<(), Error> {
    let namespace = crt.namespace().unwrap_or_default();
    let api = Api::<Secret>::namespaced(ctx.shared.client.clone(), &namespace);
    for name in &work.delete {
        super::delete_ignoring_missing(&api, name).await?;
    }
    let Some((name, source)) = &work.create else {
        return Ok(());
    };
    let pem = match source {
        Source::Reuse(pem) => pem.clone(),
        Source::Generate(spec) => {
            let key = Key::generate(*spec).map_err(|source| Error::Key {
                object: observe::describe(crt),
                source,
            })?;
            let pem = key.to_pem(Encoding::Pkcs8).map_err(|source| Error::Key {
                object: observe::describe(crt),
                source,
            })?;
            pem.into_bytes()
        }
    };
    let secret = key_secret(crt, name, pem);
    let params = PostParams {
        field_manager: Some(FieldManager::KEY_MANAGER.as_str().to_string()),
        ..PostParams::default()
    };
    match api.create(&params, &secret).await {
        Ok(_) => {
            let note = format!("Stored new private key in temporary Secret resource {name:?}");
            if matches!(source, Source::Generate(_)) {
                ctx.events
                    .publish(
                        &Notice::normal("Generated", "KeyManager", &note),
                        &crt.object_ref(&()),
                    )
                    .await;
            }
            Ok(())
        }
        // Made by an earlier attempt: the next reconcile checks it.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(source) => Err(Error::api("creating Secret", format!("{namespace}/{name}"))(
            source,
        )),
    }
}

pub fn error_policy(crt: Arc<Certificate>, err: &Error, ctx: Arc<CertificateContext>) -> Action {
    log_and_retry(NAME, &crt, err, &ctx)
}

#[cfg(test)]
mod tests;
