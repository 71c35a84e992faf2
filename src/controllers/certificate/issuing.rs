//! The issuing controller: ends an issuance. While `Issuing=True` it waits for the one
//! request of the next revision, counts its failure (`failedIssuanceAttempts`,
//! `lastFailureTime`) or writes the signed certificate into the Secret (server-side apply with
//! force) and sets the new revision. While not issuing it keeps the Secret's metadata, output
//! formats, keystores and key encoding as the spec says, without a new certificate.
//!
//! The Secret is written before the status, so a crash in between leaves `Issuing=True` and
//! the same request, and the next reconcile writes the same Secret again. What cert-manager
//! wrote is taken over around it (`takeover`).

pub mod decide;
mod observe;
pub mod takeover;

use std::sync::Arc;
use std::time::Duration;

use self::decide::Facts;
use super::{CertificateContext, Error, computed, execute, log_and_retry, observe as seen};
use crate::api::certmanager::Certificate;
use crate::controllers::kit::plan::{Requeue, requeue_at};
use crate::controllers::kit::status::FieldManager;

const NAME: &str = "issuing";

pub async fn reconcile(crt: Arc<Certificate>, ctx: Arc<CertificateContext>) -> Result<Requeue, Error> {
    if !ctx.acts_on(FieldManager::ISSUING, &crt) {
        return Ok(Requeue::AWAIT_CHANGE);
    }
    let (_, key) = seen::next_key(&ctx, &crt);
    let requests = observe::with_chain(&ctx, &crt, seen::picked_requests(&ctx, &crt).await?).await?;
    let target = seen::target_secret(&ctx, &crt).await?;
    let passwords = observe::passwords(&ctx, &crt).await?;
    let (owner_ref_enabled, now) = (ctx.settings.owner_reference, ctx.shared.now());
    let costly = decide::costly(&crt, &requests.iter().map(AsRef::as_ref).collect::<Vec<_>>());
    let decision = {
        let crt = crt.clone();
        move || {
            let facts = Facts {
                certificate: &crt,
                next_key: key.as_ref(),
                requests: requests.iter().map(AsRef::as_ref).collect(),
                secret: target.as_deref(),
                field_manager: FieldManager::ISSUING.as_str(),
                owner_ref_enabled,
                stale_keystore: observe::stale_keystore(&crt, target.as_deref(), &passwords),
                passwords,
                now,
            };
            let plan = decide::decide(&facts);
            let takeover = takeover::decide(&crt, facts.secret, facts.field_manager, &plan);
            (plan, takeover)
        }
    };
    // Checking and encoding keystores, and the keys and chains they hold, cost what the
    // tenant's Secret and Certificate make them: off the runtime thread.
    let (plan, takeover) = if costly {
        computed(&ctx, &crt, decision).await?
    } else {
        decision()
    };
    takeover::before(&ctx, &crt, &takeover).await?;
    let next = execute(&ctx, &crt, FieldManager::ISSUING, plan).await?;
    takeover::after(&ctx, &crt, &takeover).await?;
    ctx.settled(&super::retry_key(NAME, &crt));
    Ok(requeue_at(&next, || Duration::from_secs(1)))
}

pub fn error_policy(crt: Arc<Certificate>, err: &Error, ctx: Arc<CertificateContext>) -> Requeue {
    log_and_retry(NAME, &crt, err, &ctx)
}

#[cfg(test)]
mod tests;
