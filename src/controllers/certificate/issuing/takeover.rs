//! Taking over from cert-manager what its issuing controller wrote, so later edits behave.
//!
//! Under server-side apply a field stays while any manager owns it. A Secret cert-manager
//! wrote keeps its field manager's entry: a template label dropped later would stay, owned by
//! cert-manager alone. Once this controller's own apply holds everything the Secret should
//! hold, cert-manager's manager is released: an empty apply under its name drops its entry,
//! and with it what only it owned. cert-manager writes a Secret only by apply, so only its
//! apply entries need this.
//!
//! The failure record (`lastFailureTime`, `failedIssuanceAttempts`) cert-manager kept may be
//! owned by its manager through an update (its default mode) that no apply can release: when
//! this controller's status apply records no failure and the Certificate still shows one, both
//! fields are removed by a merge patch, whoever wrote them.

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use super::super::{CertificateContext, Error, observe};
use crate::api::certmanager::Certificate;
use crate::certificates::secret::CERT_MANAGER_SECRET_MANAGERS;
use crate::controllers::kit::plan::{FullPlan, Write};
use crate::controllers::kit::status::FieldManager;

/// What is taken over after the plan is carried out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Takeover {
    /// cert-manager's field managers to release from the Secret, after this plan's writes.
    pub release: Vec<&'static str>,
    /// Remove `lastFailureTime` and `failedIssuanceAttempts` from the status.
    pub clear_failures: bool,
}

/// What to take over once `plan` is carried out on `crt`, whose Secret is `secret` as read
/// (with its managedFields) and is applied under `ours`.
pub fn decide(crt: &Certificate, secret: Option<&Secret>, ours: &str, plan: &FullPlan<()>) -> Takeover {
    let applied = |manager: &str| {
        secret
            .and_then(|s| s.metadata.managed_fields.as_ref())
            .into_iter()
            .flatten()
            .any(|e| e.manager.as_deref() == Some(manager) && e.operation.as_deref() == Some("Apply"))
    };
    let writes_secret = plan
        .writes()
        .any(|w| matches!(w, Write::Apply { object, .. } if object.kind == "Secret"));
    // Released only once this controller holds the Secret: what it wants kept is its own.
    let holds = secret.is_some() && (writes_secret || applied(ours));
    let release = CERT_MANAGER_SECRET_MANAGERS
        .iter()
        .copied()
        .filter(|m| holds && applied(m))
        .collect();
    let status = crt.status.as_ref();
    let has_failures =
        status.is_some_and(|s| s.last_failure_time.is_some() || s.failed_issuance_attempts.is_some());
    let records_none = plan
        .plan
        .status
        .as_ref()
        .and_then(|doc| doc.get("status"))
        .is_some_and(|s| s.get("lastFailureTime").is_none() && s.get("failedIssuanceAttempts").is_none());
    Takeover {
        release,
        clear_failures: has_failures && records_none,
    }
}

/// Clears the failure record when asked, before the plan's writes: no reader sees the new
/// revision beside the old failure. Issuing stays True until the plan's status apply, so a
/// crash in between only repeats the success.
pub async fn before(ctx: &CertificateContext, crt: &Certificate, takeover: &Takeover) -> Result<(), Error> {
    if !takeover.clear_failures {
        return Ok(());
    }
    let params = PatchParams {
        field_manager: Some(FieldManager::ISSUING.as_str().to_string()),
        ..PatchParams::default()
    };
    let cleared =
        json!({ "status": { "lastFailureTime": Value::Null, "failedIssuanceAttempts": Value::Null } });
    Api::<Certificate>::namespaced(ctx.shared.client.clone(), &crt.namespace().unwrap_or_default())
        .patch_status(&crt.name_any(), &params, &Patch::Merge(&cleared))
        .await
        .map(drop)
        .map_err(Error::api("clearing the failure record", observe::describe(crt)))
}

/// Releases cert-manager's managers from the Secret, after the plan's writes (which made
/// what the Secret should hold this controller's own).
pub async fn after(ctx: &CertificateContext, crt: &Certificate, takeover: &Takeover) -> Result<(), Error> {
    let namespace = crt.namespace().unwrap_or_default();
    let secret_name = &crt.spec.secret_name;
    let empty = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": { "name": secret_name, "namespace": namespace },
    });
    for manager in &takeover.release {
        Api::<Secret>::namespaced(ctx.shared.client.clone(), &namespace)
            .patch(
                secret_name,
                &PatchParams::apply(manager).force(),
                &Patch::Apply(&empty),
            )
            .await
            .map_err(Error::api(
                "releasing Secret fields",
                format!("{namespace}/{secret_name}"),
            ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
