//! What the issuing controller reads besides the caches: the signed request's chain, the
//! keystore passwords (their Secrets read live), and whether the Secret's keystores open with
//! them (and if not, why).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;

use super::super::{CertificateContext, Error, observe};
use super::decide::{StaleKeystore, needs_chain};
use crate::api::certmanager::{Certificate, CertificateRequest, ISSUING, SecretKeySelector};
use crate::certificates::keys::data as keys;
use crate::certificates::secret::{Kind, PasswordError, Passwords, keystore_password, password_secret_name};
use crate::pki::keystore::{Unopened, jks_check, pkcs12_check};

/// `requests`, with the signed one this issuance ends with read live for its chain when it is
/// held without one (`decide::needs_chain`). A request gone since, or replaced by another of
/// the same name, stays as held, and the next event decides.
pub async fn with_chain(
    ctx: &CertificateContext,
    crt: &Certificate,
    mut requests: Vec<Arc<CertificateRequest>>,
) -> Result<Vec<Arc<CertificateRequest>>, Error> {
    for cr in requests.iter_mut().filter(|cr| needs_chain(crt, cr)) {
        if let Some(live) = observe::live_request(ctx, cr).await? {
            *cr = Arc::new(live);
        }
    }
    Ok(requests)
}

/// The passwords of the keystores `crt` asks for, reading password Secrets live; an error
/// inside when one cannot be had (the plan says why when it needs it).
pub async fn passwords(
    ctx: &CertificateContext,
    crt: &Certificate,
) -> Result<Result<Passwords, PasswordError>, Error> {
    let mut out = Passwords::default();
    for (kind, literal, secret_ref) in asked(crt) {
        let secret = match password_secret_name(secret_ref) {
            Some(name) => observe::live_secret(ctx, &crt.namespace().unwrap_or_default(), name).await?,
            None => None,
        };
        let found = match keystore_password(kind, literal, secret_ref, secret.as_ref()) {
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

/// The keystores `crt` asks to create: kind, literal password, password Secret reference.
fn asked(crt: &Certificate) -> Vec<(Kind, Option<&str>, Option<&SecretKeySelector>)> {
    let stores = crt.spec.keystores.as_ref();
    let pkcs12 = stores
        .and_then(|s| s.pkcs12.as_ref())
        .filter(|p| p.create)
        .map(|p| {
            (
                Kind::Pkcs12,
                p.password.as_deref(),
                p.password_secret_ref.as_ref(),
            )
        });
    let jks = stores
        .and_then(|s| s.jks.as_ref())
        .filter(|j| j.create)
        .map(|j| (Kind::Jks, j.password.as_deref(), j.password_secret_ref.as_ref()));
    pkcs12.into_iter().chain(jks).collect()
}

/// The first keystore in `secret` that does not open with the password the spec names now,
/// and why; `None` when issuing, when none is asked for or held, or when a password cannot be
/// had (nothing to re-encode with). What a check costs is capped (`pki::keystore`), whatever the
/// Secret claims.
pub fn stale_keystore(
    crt: &Certificate,
    secret: Option<&Secret>,
    passwords: &Result<Passwords, PasswordError>,
) -> Option<StaleKeystore> {
    let data = secret
        .and_then(|s| s.data.as_ref())
        .filter(|_| !asked(crt).is_empty() && !crt.has_true(ISSUING))?;
    let passwords = passwords.as_ref().ok()?;
    type Check = fn(&[u8], &str) -> Result<(), Unopened>;
    let stale = |key: &'static str, password: &Option<String>, check: Check| {
        let (store, password) = (data.get(key)?, password.as_deref()?);
        check(&store.0, password)
            .err()
            .map(|why| StaleKeystore { key, why })
    };
    stale(keys::PKCS12_KEYSTORE, &passwords.pkcs12, pkcs12_check)
        .or_else(|| stale(keys::JKS_KEYSTORE, &passwords.jks, jks_check))
}

#[cfg(test)]
mod tests;
