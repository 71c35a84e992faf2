//! The issuing controller: ends an issuance. While `Issuing=True` it waits for the one
//! request of the next revision, counts its failure (`failedIssuanceAttempts`,
//! `lastFailureTime`) or writes the signed certificate into the Secret (server-side apply with
//! force) and sets the new revision. While not issuing it keeps the Secret's metadata, output
//! formats, keystores and key encoding as the spec says, without a new certificate.
//!
//! The Secret is written before the status, so a crash in between leaves `Issuing=True` and
//! the same request, and the next reconcile writes the same Secret again.

pub mod decide;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};

use self::decide::{Decision, Facts, Write};
use super::{CertificateContext, Error, acts_on, execute, log_and_retry, observe};
use crate::api::certmanager::{Certificate, ISSUING};
use crate::certificates::keys::data as keys;
use crate::certificates::secret::{
    self, BodyOptions, Kind, PasswordError, Passwords, REASON_PASSWORD_SECRET_NOT_FOUND, keystore_password,
    password_secret_name,
};
use crate::controllers::kit::events::Notice;
use crate::controllers::kit::plan::requeue;
use crate::controllers::kit::status::FieldManager;
use crate::pki::keystore::{jks_opens_with, pkcs12_opens_with};

const NAME: &str = "issuing";

/// How long to wait for a keystore password Secret that does not exist yet.
const PASSWORD_RETRY: Duration = Duration::from_secs(30);

pub async fn reconcile(crt: Arc<Certificate>, ctx: Arc<CertificateContext>) -> Result<Action, Error> {
    if !acts_on(&crt) {
        return Ok(Action::await_change());
    }
    let (_, key) = observe::next_key(&ctx, &crt);
    let requests = observe::owned_requests(&ctx, &crt);
    let target = observe::target_secret(&ctx, &crt).await?;
    let keystores_open = keystores_open(&ctx, &crt, target.as_ref()).await?;
    let facts = Facts {
        certificate: &crt,
        next_key: key.as_ref(),
        requests: requests.iter().map(AsRef::as_ref).collect(),
        secret: target.as_ref(),
        field_manager: FieldManager::ISSUING.as_str(),
        owner_ref_enabled: ctx.settings.owner_reference,
        keystores_open,
        now: ctx.shared.now(),
    };
    let Decision { write, plan } = decide::decide(&facts);
    if let Some(write) = write
        && let Err(notice) = write_secret(&ctx, &crt, target.as_ref(), &write).await?
    {
        ctx.events.publish(&notice, &crt.object_ref(&())).await;
        return Ok(Action::requeue(PASSWORD_RETRY));
    }
    let next = execute(&ctx, &crt, FieldManager::ISSUING, plan).await?;
    ctx.settled(&super::retry_key(NAME, &crt));
    Ok(requeue(&next, || Duration::from_secs(1)))
}

/// Applies the Secret `write` describes; `Err(notice)` (inside `Ok`) when a keystore cannot
/// be made yet, with the Event saying why.
async fn write_secret(
    ctx: &CertificateContext,
    crt: &Certificate,
    existing: Option<&Secret>,
    write: &Write,
) -> Result<Result<(), Notice>, Error> {
    let passwords = match passwords(ctx, crt).await? {
        Ok(passwords) => passwords,
        Err(err) => return Ok(Err(password_notice(&err))),
    };
    let data = write.data();
    let keystores = match secret::encode_keystores(crt, &data, &passwords, ctx.shared.now()) {
        Ok(stores) => stores,
        Err(err) => {
            return Ok(Err(Notice::warning(
                "KeystoreEncodeFailed",
                "Issue",
                &err.to_string(),
            )));
        }
    };
    let options = BodyOptions {
        existing_type: existing.and_then(|s| s.type_.as_deref()),
        owner_reference: ctx.settings.owner_reference,
    };
    let body = match secret::secret_body(crt, &data, &keystores, options) {
        Ok(body) => body,
        Err(err) => {
            return Ok(Err(Notice::warning(
                "SecretBodyFailed",
                "Issue",
                &err.to_string(),
            )));
        }
    };
    let namespace = crt.namespace().unwrap_or_default();
    let params = PatchParams::apply(FieldManager::ISSUING.as_str()).force();
    let mut body = serde_json::to_value(&body).unwrap_or_default();
    body["apiVersion"] = "v1".into();
    body["kind"] = "Secret".into();
    Api::<Secret>::namespaced(ctx.shared.client.clone(), &namespace)
        .patch(&crt.spec.secret_name, &params, &Patch::Apply(&body))
        .await
        .map_err(Error::api(
            "applying Secret",
            format!("{namespace}/{}", crt.spec.secret_name),
        ))?;
    Ok(Ok(()))
}

/// Whether the keystores in `secret` open with the passwords the spec names now; true when
/// issuing, when none is asked for or held, or when a password cannot be read (nothing to
/// re-encode with).
async fn keystores_open(
    ctx: &CertificateContext,
    crt: &Certificate,
    secret: Option<&Secret>,
) -> Result<bool, Error> {
    let asked = crt.spec.keystores.as_ref();
    let wanted = asked.is_some_and(|k| {
        k.pkcs12.as_ref().is_some_and(|p| p.create) || k.jks.as_ref().is_some_and(|j| j.create)
    });
    let Some(data) = secret
        .and_then(|s| s.data.as_ref())
        .filter(|_| wanted && !crt.has_true(ISSUING))
    else {
        return Ok(true);
    };
    let Ok(passwords) = passwords(ctx, crt).await? else {
        return Ok(true);
    };
    let opens = |key: &str, password: &Option<String>, check: fn(&[u8], &str) -> bool| match (
        data.get(key),
        password,
    ) {
        (Some(store), Some(password)) => check(&store.0, password),
        _ => true,
    };
    Ok(opens(keys::PKCS12_KEYSTORE, &passwords.pkcs12, pkcs12_opens_with)
        && opens(keys::JKS_KEYSTORE, &passwords.jks, jks_opens_with))
}

fn password_notice(err: &PasswordError) -> Notice {
    let reason = match err {
        PasswordError::SecretNotFound { .. } => REASON_PASSWORD_SECRET_NOT_FOUND,
        _ => "KeystorePasswordInvalid",
    };
    Notice::warning(reason, "Issue", &err.to_string())
}

/// The passwords of the keystores `crt` asks for, reading password Secrets live.
async fn passwords(
    ctx: &CertificateContext,
    crt: &Certificate,
) -> Result<Result<Passwords, PasswordError>, Error> {
    let mut out = Passwords::default();
    let stores = crt.spec.keystores.as_ref();
    let asked = [
        stores
            .and_then(|s| s.pkcs12.as_ref())
            .filter(|p| p.create)
            .map(|p| {
                (
                    Kind::Pkcs12,
                    p.password.as_deref(),
                    p.password_secret_ref.as_ref(),
                )
            }),
        stores
            .and_then(|s| s.jks.as_ref())
            .filter(|j| j.create)
            .map(|j| (Kind::Jks, j.password.as_deref(), j.password_secret_ref.as_ref())),
    ];
    for (kind, literal, secret_ref) in asked.into_iter().flatten() {
        let found = match password(ctx, crt, kind, literal, secret_ref).await? {
            Ok(found) => found,
            Err(err) => return Ok(Err(err)),
        };
        match kind {
            Kind::Pkcs12 => out.pkcs12 = Some(found),
            Kind::Jks => out.jks = Some(found),
        }
    }
    Ok(Ok(out))
}

async fn password(
    ctx: &CertificateContext,
    crt: &Certificate,
    kind: Kind,
    literal: Option<&str>,
    secret_ref: Option<&crate::api::certmanager::SecretKeySelector>,
) -> Result<Result<String, PasswordError>, Error> {
    let secret = match password_secret_name(secret_ref) {
        Some(name) => observe::live_secret(ctx, &crt.namespace().unwrap_or_default(), name).await?,
        None => None,
    };
    Ok(keystore_password(kind, literal, secret_ref, secret.as_ref()))
}

pub fn error_policy(crt: Arc<Certificate>, err: &Error, ctx: Arc<CertificateContext>) -> Action {
    log_and_retry(NAME, &crt, err, &ctx)
}

#[cfg(test)]
mod tests;
