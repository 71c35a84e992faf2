//! What the Certificate controllers read: a Certificate's requests and key Secrets from the
//! caches, its target Secret (cache first, else one live GET), and the policy-chain input.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, ResourceExt};

use super::summary::is_summary;
use super::{CertificateContext, Error};
use crate::api::certmanager::{Certificate, CertificateRequest, ISSUING, READY};
use crate::certificates::keys::annotation;
use crate::certificates::next_key::next_key_name;
use crate::certificates::policy::checks::Input;
use crate::controllers::kit::index::Index;

mod picked;
pub use self::picked::{live_request, picked_requests, unpin_requests};

/// Whether standalone mode acts on `crt`: its issuerRef names our group.
pub fn is_ours(crt: &Certificate) -> bool {
    crt.spec.issuer_ref.group == crate::api::GROUP
}

/// Whether `meta` has a controller owner reference to `crt` (by UID).
pub fn controlled_by(meta: &ObjectMeta, crt: &Certificate) -> bool {
    let Some(uid) = crt.metadata.uid.as_deref() else {
        return false;
    };
    meta.owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && r.uid == uid)
}

/// The revision a request was made for, from its annotation (or its summary).
pub fn revision_of(cr: &CertificateRequest) -> Option<i64> {
    cr.revision(annotation::CERTIFICATE_REVISION)
}

/// The revision now in the Secret (0 before the first issuance).
pub fn current_revision(crt: &Certificate) -> i64 {
    crt.status.as_ref().and_then(|s| s.revision).unwrap_or(0)
}

/// The revision the next issuance makes. Saturating: a status written by hand with the largest
/// revision must not overflow a reconcile.
pub fn next_revision(crt: &Certificate) -> i64 {
    current_revision(crt).saturating_add(1)
}

/// The requests `crt` controls, from the cache, by name; finished ones as summaries
/// ([`picked_requests`] reads the current and next revision's whole).
pub fn owned_requests(ctx: &CertificateContext, crt: &Certificate) -> Vec<Arc<CertificateRequest>> {
    owned(&ctx.requests, &ctx.indexes.requests, crt)
        .filter(|cr| controlled_by(&cr.metadata, crt) && !ctx.deleted(&cr.metadata))
        .collect()
}

/// The Certificates of `crt`'s namespace that name its `secretName` (itself included), from
/// the cache.
pub fn naming_secret(ctx: &CertificateContext, crt: &Certificate) -> Vec<Arc<Certificate>> {
    let namespace = crt.namespace().unwrap_or_default();
    let names = ctx.indexes.certificates.get(&namespace, &crt.spec.secret_name);
    names
        .into_iter()
        .filter_map(|name| ctx.certificates.get(&ObjectRef::new(&name).within(&namespace)))
        .filter(|c| named_secrets(c).contains(&crt.spec.secret_name))
        .collect()
}

/// The Secrets a Certificate names: `secretName`, and its keystores' password Secrets.
pub fn named_secrets(crt: &Certificate) -> Vec<String> {
    let stores = crt.spec.keystores.as_ref();
    let password_refs = [
        stores
            .and_then(|k| k.pkcs12.as_ref())
            .and_then(|p| p.password_secret_ref.as_ref()),
        stores
            .and_then(|k| k.jks.as_ref())
            .and_then(|j| j.password_secret_ref.as_ref()),
    ];
    let mut names: Vec<String> = std::iter::once(crt.spec.secret_name.clone())
        .chain(password_refs.iter().flatten().map(|r| r.name.clone()))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The objects `index` files under `crt`'s UID, from `store`.
fn owned<'a, K>(
    store: &'a Store<K>,
    index: &Index<K>,
    crt: &Certificate,
) -> impl Iterator<Item = Arc<K>> + use<'a, K>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    let namespace = crt.namespace().unwrap_or_default();
    let names = match crt.metadata.uid.as_deref() {
        Some(uid) => index.get(&namespace, uid),
        None => Vec::new(),
    };
    names
        .into_iter()
        .filter_map(move |name| store.get(&ObjectRef::new(&name).within(&namespace)))
}

/// The first of `requests` made for `revision`.
pub fn for_revision(requests: &[Arc<CertificateRequest>], revision: i64) -> Option<Arc<CertificateRequest>> {
    requests
        .iter()
        .find(|cr| revision_of(cr) == Some(revision))
        .cloned()
}

/// Whether `secret` is one of `crt`'s next-private-key Secrets: labelled so and controlled by
/// it. cert-manager v1.21.3 (#9224) trusts `status.nextPrivateKeySecretName` only then:
/// otherwise whoever may write a Certificate's status could have another's key signed (this
/// manager goes further: it finds the key Secret by its derived name, never by status).
///
/// The target Secret (`spec.secretName`) never is one, whatever its labels: a
/// `cert-manager.io/next-private-key` label in `spec.secretTemplate` (cert-manager's webhook
/// refuses only `cert-manager.io/` annotations there, not labels) lands on the target Secret,
/// which with owner references on is controlled by the Certificate too, and the key manager
/// deletes the key Secrets it does not keep.
pub fn is_next_key_of(secret: &Secret, crt: &Certificate) -> bool {
    let target = secret.metadata.name.as_deref() == Some(crt.spec.secret_name.as_str());
    crate::certificates::next_key::labelled(secret) && !target && controlled_by(&secret.metadata, crt)
}

/// `crt`'s next-private-key Secrets, from the cache.
pub fn next_key_secrets(ctx: &CertificateContext, crt: &Certificate) -> Vec<Arc<Secret>> {
    owned(&ctx.secrets, &ctx.indexes.key_secrets, crt)
        .filter(|s| is_next_key_of(s, crt) && !ctx.deleted(&s.metadata))
        .collect()
}

/// The revision a next-key Secret was made for, on the key Secrets this manager makes (not
/// on cert-manager's: those are adopted as they are).
pub const KEY_REVISION: &str = "cfssl-issuer.wikimedia.org/next-key-revision";

/// Whether a next-key Secret was made for another revision than `crt`'s next: left by the
/// last issuance and not deleted yet when a new one began (a manual trigger right after an
/// issuance). Its key was used already; with `rotationPolicy: Always` it must not be again.
pub fn made_for_another_revision(secret: &Secret, crt: &Certificate) -> bool {
    secret
        .annotations()
        .get(KEY_REVISION)
        .is_some_and(|r| r.parse::<i64>().ok() != Some(next_revision(crt)))
}

/// The Secret of `crt`'s derived next-key name ([`next_key_name`]), if it is one of its key
/// Secrets, made for its next revision. `status.nextPrivateKeySecretName` is not read: whoever
/// may write a Certificate's status cannot point it at anything.
pub fn trusted_next_key(ctx: &CertificateContext, crt: &Certificate) -> Option<Arc<Secret>> {
    let name = next_key_name(crt);
    let secret = ctx
        .secrets
        .get(&ObjectRef::new(&name).within(&crt.namespace().unwrap_or_default()))?;
    (is_next_key_of(&secret, crt) && !made_for_another_revision(&secret, crt)).then_some(secret)
}

/// The trusted next-key Secret and its key, decoded (`None` when it does not decode).
pub fn next_key(
    ctx: &CertificateContext,
    crt: &Certificate,
) -> (Option<Arc<Secret>>, Option<crate::pki::keys::Key>) {
    let secret = trusted_next_key(ctx, crt);
    let key = secret.as_ref().and_then(|s| {
        let pem = s.data.as_ref()?.get(crate::certificates::keys::data::TLS_KEY)?;
        crate::pki::keys::Key::from_pem(&pem.0).ok()
    });
    (secret, key)
}

/// The Secret named `name` in `crt`'s namespace: from the cache of labelled Secrets, else read
/// live (a Secret the user made, not labelled yet) unless the metadata watch says it does not
/// exist; `None` when it does not. A cached copy the metadata watch has seen change or go since
/// is read live too: that watch may be ahead of the cache, and its delete may be the only news
/// of one (a missed delete left a deleted Secret unreissued until renewal). An issued Secret the
/// store keeps as a summary comes whole from `ctx.recent`, else live (and is remembered).
pub async fn secret_named(
    ctx: &CertificateContext,
    crt: &Certificate,
    name: &str,
) -> Result<Option<Arc<Secret>>, Error> {
    let namespace = crt.namespace().unwrap_or_default();
    if let Some(secret) = ctx.secrets.get(&ObjectRef::new(name).within(&namespace)) {
        let cached = secret.metadata.resource_version.as_deref();
        if ctx.secret_names.differs(&namespace, name, cached) {
            return Ok(live_secret(ctx, &namespace, name).await?.map(Arc::new));
        }
        if !is_summary(&secret) {
            return Ok(Some(secret));
        }
        let pin = !settled(crt);
        if let Some(whole) = ctx.recent.get(&namespace, name, cached, pin) {
            return Ok(Some(whole));
        }
        let live = live_secret(ctx, &namespace, name).await?.map(Arc::new);
        if let Some(whole) = &live {
            ctx.recent.remember(whole.clone(), pin);
        }
        return Ok(live);
    }
    if ctx.secret_names.surely_absent(&namespace, name) {
        return Ok(None);
    }
    Ok(live_secret(ctx, &namespace, name).await?.map(Arc::new))
}

/// Whether `crt` is Ready and not issuing: its Secret is not about to be read again and again.
pub fn settled(crt: &Certificate) -> bool {
    crt.has_true(READY) && !crt.has_true(ISSUING)
}

/// One live GET of a Secret; `None` on 404.
pub async fn live_secret(
    ctx: &CertificateContext,
    namespace: &str,
    name: &str,
) -> Result<Option<Secret>, Error> {
    Api::<Secret>::namespaced(ctx.shared.client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(Error::api("reading Secret", format!("{namespace}/{name}")))
}

/// The target Secret (`spec.secretName`).
pub async fn target_secret(
    ctx: &CertificateContext,
    crt: &Certificate,
) -> Result<Option<Arc<Secret>>, Error> {
    secret_named(ctx, crt, &crt.spec.secret_name).await
}

/// The policy chains' input: the Secret, and the requests of the current and next revision.
pub fn chain_input(
    crt: &Arc<Certificate>,
    secret: Option<Arc<Secret>>,
    requests: &[Arc<CertificateRequest>],
    now: k8s_openapi::jiff::Timestamp,
) -> Input {
    let current = crt
        .status
        .as_ref()
        .and_then(|s| s.revision)
        .and_then(|r| current_request(requests, r, secret.as_deref()));
    Input {
        certificate: Arc::clone(crt),
        secret,
        current_request: current,
        next_request: for_revision(requests, next_revision(crt)),
        now,
        // The caller sets the configured jitter.
        renewal_jitter: crate::certificates::renewal::Jitter::OFF,
    }
}

/// Whether issuing is between its two writes: the Secret already holds the certificate of the
/// request for a revision after the one the Certificate's status shows. Issuing's status write
/// always follows, and its event brings the Certificate back; deciding before it would take the
/// previous revision's request (or none) for the issuance, so the renewal guard would miss a
/// renewal due at issuance and write a time the trigger re-issues at.
pub fn issuing_in_flight(
    crt: &Certificate,
    secret: Option<&Secret>,
    requests: &[Arc<CertificateRequest>],
) -> bool {
    let Some(in_secret) = certificate_in(secret) else {
        return false;
    };
    let current = current_revision(crt);
    requests
        .iter()
        .any(|cr| revision_of(cr).is_some_and(|r| r > current) && cr.issued_chain(in_secret))
}

/// The `tls.crt` a Secret holds.
fn certificate_in(secret: Option<&Secret>) -> Option<&[u8]> {
    secret
        .and_then(|s| s.data.as_ref())
        .and_then(|d| d.get(crate::certificates::keys::data::TLS_CRT))
        .map(|b| b.0.as_slice())
}

/// The request of the current revision: the one whose certificate the Secret holds when more
/// than one was made for it (a replaced request the cache still shows must not read as the
/// current one, or the trigger would see its key differ from the Secret's and issue again).
pub fn current_request(
    requests: &[Arc<CertificateRequest>],
    revision: i64,
    secret: Option<&Secret>,
) -> Option<Arc<CertificateRequest>> {
    let candidates: Vec<&Arc<CertificateRequest>> = requests
        .iter()
        .filter(|cr| revision_of(cr) == Some(revision))
        .collect();
    // One candidate is the answer either way: no digest to compare.
    let [first, ..] = candidates.as_slice() else {
        return None;
    };
    if candidates.len() == 1 {
        return Some(Arc::clone(first));
    }
    let in_secret = certificate_in(secret);
    let holding = candidates
        .iter()
        .find(|cr| in_secret.is_some_and(|chain| cr.issued_chain(chain)));
    Some(Arc::clone(holding.unwrap_or(first)))
}

/// `Kind namespace/name` of a Certificate, for logs and errors.
pub fn describe(crt: &Certificate) -> String {
    crate::controllers::kit::plan::describe(crt)
}

#[cfg(test)]
mod naming_tests;
#[cfg(test)]
mod secret_tests;

#[cfg(test)]
mod in_flight_tests {
    use k8s_openapi::ByteString;
    use serde_json::json;

    use super::*;

    fn crt(revision: Option<i64>) -> Certificate {
        serde_json::from_value(json!({
            "metadata": { "name": "web", "namespace": "apps" },
            "spec": { "secretName": "web-tls", "issuerRef": { "name": "ca" } },
            "status": { "revision": revision },
        }))
        .unwrap()
    }

    fn request(revision: i64, certificate: Option<&str>) -> Arc<CertificateRequest> {
        let mut cr: CertificateRequest = serde_json::from_value(json!({
            "metadata": { "name": format!("web-{revision}"), "namespace": "apps",
                "annotations": { annotation::CERTIFICATE_REVISION: revision.to_string() } },
            "spec": { "request": "", "issuerRef": { "name": "ca" } },
        }))
        .unwrap();
        if let Some(pem) = certificate {
            cr.status = serde_json::from_value(json!({ "certificate": ByteString(pem.into()) })).unwrap();
        }
        Arc::new(cr)
    }

    /// As the standalone request cache holds a signed request: its summary, with its chain's
    /// digest.
    fn chainless(cr: &Arc<CertificateRequest>) -> Arc<CertificateRequest> {
        Arc::new(cr.summary(annotation::CERTIFICATE_REVISION))
    }

    /// The current request is the one whose certificate the Secret holds when its revision
    /// has more than one, whether the cache holds chains or their digests.
    #[test]
    fn the_current_request_is_the_one_the_secret_holds() {
        let mut replaced = CertificateRequest::clone(&request(2, Some("old")));
        replaced.metadata.name = Some("web-2-replaced".into());
        let (replaced, kept) = (Arc::new(replaced), request(2, Some("new")));
        let name = |cr: Option<Arc<CertificateRequest>>| cr.and_then(|cr| cr.metadata.name.clone());
        type Row<'a> = (&'a str, Vec<Arc<CertificateRequest>>, &'a str, Option<&'a str>);
        let rows: [Row; 5] = [
            ("one candidate", vec![kept.clone()], "other", Some("web-2")),
            (
                "two, the second held",
                vec![replaced.clone(), kept.clone()],
                "new",
                Some("web-2"),
            ),
            (
                "two, none held: the first",
                vec![replaced.clone(), kept.clone()],
                "x",
                Some("web-2-replaced"),
            ),
            (
                "another revision only",
                vec![request(1, Some("new"))],
                "new",
                None,
            ),
            ("none", vec![], "new", None),
        ];
        for (row, requests, in_secret, want) in rows {
            let secret = secret(in_secret);
            assert_eq!(
                name(current_request(&requests, 2, Some(&secret))),
                want.map(String::from),
                "{row}"
            );
            let chainless: Vec<_> = requests.iter().map(chainless).collect();
            assert_eq!(
                name(current_request(&chainless, 2, Some(&secret))),
                want.map(String::from),
                "{row}, cached without chains"
            );
        }
    }

    fn secret(tls_crt: &str) -> Secret {
        Secret {
            data: Some(
                [(
                    crate::certificates::keys::data::TLS_CRT.to_string(),
                    ByteString(tls_crt.into()),
                )]
                .into(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn only_a_later_revisions_certificate_in_the_secret_is_in_flight() {
        let rows = [
            (
                "first issuance, status not written yet",
                None,
                (1, Some("new")),
                Some("new"),
                true,
            ),
            (
                "renewal, status not written yet",
                Some(1),
                (2, Some("new")),
                Some("new"),
                true,
            ),
            ("status written", Some(2), (2, Some("new")), Some("new"), false),
            (
                "an older revision's certificate",
                Some(2),
                (1, Some("old")),
                Some("old"),
                false,
            ),
            (
                "the next request not signed yet",
                Some(1),
                (2, None),
                Some("old"),
                false,
            ),
            (
                "another certificate in the Secret",
                Some(1),
                (2, Some("new")),
                Some("other"),
                false,
            ),
            ("no Secret", None, (1, Some("new")), None, false),
        ];
        for (row, revision, (cr_revision, issued), in_secret, want) in rows {
            let requests = [request(cr_revision, issued)];
            let chainless = [chainless(&requests[0])];
            let secret = in_secret.map(secret);
            assert_eq!(
                issuing_in_flight(&crt(revision), secret.as_ref(), &chainless),
                want,
                "{row}, cached without its chain"
            );
            assert_eq!(
                issuing_in_flight(&crt(revision), secret.as_ref(), &requests),
                want,
                "{row}"
            );
        }
    }
}

#[cfg(test)]
mod picked_tests;
