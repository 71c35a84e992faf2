//! Signing one request: at most one call to the CA at a time and ever, for each request (see
//! [`crate::controllers::signings`]), and the classification of what came back.

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use super::RequestContext;
use super::decide::Outcome;
use crate::api::certmanager::CertificateRequest;
use crate::api::{AnyIssuer, IssuerKind};
use crate::controllers::signer;
pub use crate::controllers::signings::Signings;
use crate::telemetry::metrics::CertificateLabels;

/// Act: signs `cr` with the issuer of `kind` it names, once; `None` when a sign of it is in
/// flight or done (its write brings the request back).
pub async fn sign(
    cr: &CertificateRequest,
    uid: &str,
    kind: IssuerKind,
    ctx: &RequestContext,
) -> Option<Outcome> {
    let flight = ctx.kept.signings.begin(uid)?;
    let name = &cr.spec.issuer_ref.name;
    let outcome = match kind {
        IssuerKind::Issuer => {
            let ns = cr.namespace().unwrap_or_default();
            let found = ctx.issuers.get(&ObjectRef::new(name).within(&ns));
            sign_with(cr, uid, found.as_deref(), ctx).await
        }
        IssuerKind::ClusterIssuer => {
            let found = ctx.cluster_issuers.get(&ObjectRef::new(name));
            sign_with(cr, uid, found.as_deref(), ctx).await
        }
    };
    if let Outcome::Issued(chain) = &outcome {
        flight.signed(chain.clone());
    }
    Some(outcome)
}

/// Signs with `issuer` (from the cache); an issued certificate gets its expiry series.
async fn sign_with<K: AnyIssuer>(
    cr: &CertificateRequest,
    uid: &str,
    issuer: Option<&K>,
    ctx: &RequestContext,
) -> Outcome {
    let Some(issuer) = issuer else {
        return Outcome::Retry(format!("{} {:?} disappeared", K::KIND, cr.spec.issuer_ref.name));
    };
    // The retry window starts at the first failed sign, not at creation.
    let first_failure = ctx.kept.memory.first_failure(uid);
    let (outcome, not_after) = ctx.signer.sign(issuer, &cr.spec.request.0, first_failure).await;
    if let (Outcome::Issued(_), Some(not_after)) = (&outcome, not_after) {
        record_expiry(ctx, cr, &signer::key(issuer), not_after);
    }
    outcome
}

fn record_expiry(ctx: &RequestContext, cr: &CertificateRequest, issuer: &str, not_after: i64) {
    let labels = expiry_labels(cr, issuer);
    ctx.shared
        .metrics
        .certificate_expiry
        .get_or_create(&labels)
        .set(not_after as f64);
    ctx.expiry.set(labels, &super::observe::request_key(cr));
}

/// The expiry series of a request signed by `issuer`. Keyed by Certificate, so the series
/// count follows Certificates, not requests.
pub fn expiry_labels(cr: &CertificateRequest, issuer: &str) -> CertificateLabels {
    let name = cr
        .annotations()
        .get("cert-manager.io/certificate-name")
        .cloned()
        .unwrap_or_else(|| cr.name_any());
    CertificateLabels {
        namespace: cr.namespace().unwrap_or_default(),
        name,
        issuer: issuer.into(),
    }
}
