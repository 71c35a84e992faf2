//! The issuing controller's decisions, pure: while issuing, what the one request for the next
//! revision says (wait, fail and count it, or write the Secret and end the issuance); while
//! not issuing, whether the Secret needs its metadata, key encoding or keystores repaired.
//! [`contents`] decides what the Secret holds; [`decide`] makes it the whole plan, the Secret
//! encoded (keystores and all) and applied before the status.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value, json};
use x509_parser::prelude::{FromDer, X509Certificate};

use super::super::observe::{next_revision, revision_of};
use super::super::requestmanager::failed_before_issuing;
use super::super::status::{condition, document, time};
use crate::api::ConditionStatus;
use crate::api::certmanager::{
    Certificate, CertificateRequest, DENIED, INVALID_REQUEST, ISSUING, READY, REASON_FAILED, REASON_ISSUED,
};
use crate::certificates::decode;
use crate::certificates::keys::{annotation, data};
use crate::certificates::matching::{private_key_matches_spec, request_has_key, request_matches_spec};
use crate::certificates::next_key::cannot_make;
use crate::certificates::policy::chains::TEMPORARY_CERTIFICATE;
use crate::certificates::policy::checks::Input;
use crate::certificates::policy::evaluate;
use crate::certificates::renewal::Jitter;
use crate::certificates::secret::{
    self, BodyOptions, PasswordError, Passwords, REASON_PASSWORD_SECRET_NOT_FOUND, Repair, secret_data_of,
};
use crate::certificates::temporary::{TemporaryError, temporary_certificate};
use crate::controllers::kit::events::Notice;
use crate::controllers::kit::plan::{FullPlan, Next, Plan, Write};
use crate::pki::keys::{Encoding, Key};
use crate::pki::keystore::Unopened;

/// How long to wait when the Secret cannot be made yet (a keystore password Secret that does
/// not exist yet, a keystore that does not encode, a temporary certificate that cannot be made).
pub const BLOCKED_RETRY: Duration = Duration::from_secs(30);

/// What the Secret holds after a write (owned: it outlives the observed objects).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Contents {
    pub private_key: Vec<u8>,
    pub certificate: Vec<u8>,
    pub ca: Vec<u8>,
    pub certificate_name: String,
    pub issuer: [String; 3],
}

impl Contents {
    pub fn data(&self) -> secret::SecretData<'_> {
        secret::SecretData {
            private_key: &self.private_key,
            certificate: &self.certificate,
            ca: &self.ca,
            certificate_name: &self.certificate_name,
            issuer_name: &self.issuer[0],
            issuer_kind: &self.issuer[1],
            issuer_group: &self.issuer[2],
        }
    }
}

impl std::fmt::Debug for Contents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.data(), f)
    }
}

impl Drop for Contents {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.private_key);
    }
}

/// The Secret by name and data keys only: its data holds the private key.
impl std::fmt::Debug for Facts<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Facts")
            .field("certificate", &self.certificate)
            .field("next_key", &self.next_key)
            .field("requests", &self.requests)
            .field("secret", &crate::redact::secret(self.secret))
            .field("field_manager", &self.field_manager)
            .field("owner_ref_enabled", &self.owner_ref_enabled)
            .field("stale_keystore", &self.stale_keystore)
            .field("passwords", &self.passwords)
            .field("now", &self.now)
            .finish()
    }
}

/// What the Secret is to hold (written first), and the plan carried out after it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub write: Option<Contents>,
    pub plan: Plan<()>,
}

impl Decision {
    fn idle() -> Self {
        Decision {
            write: None,
            plan: Plan::idle(Next::AwaitChange),
        }
    }
}

/// What the issuing controller decides from.
#[derive(Clone)]
pub struct Facts<'a> {
    pub certificate: &'a Certificate,
    /// The next private key (trusted per #9224), decoded.
    pub next_key: Option<&'a Key>,
    pub requests: Vec<&'a CertificateRequest>,
    /// The target Secret, with its managedFields.
    pub secret: Option<&'a Secret>,
    /// The field manager the Secret is applied with.
    pub field_manager: &'a str,
    pub owner_ref_enabled: bool,
    /// A keystore in the Secret that does not open with the password the spec names now, and
    /// why (`None` when all open, or there are none): it is encoded again.
    pub stale_keystore: Option<StaleKeystore>,
    /// The passwords of the keystores the spec asks for, or why one cannot be had.
    pub passwords: Result<Passwords, PasswordError>,
    pub now: Timestamp,
}

/// A keystore of the Secret that does not open, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaleKeystore {
    /// Its data key (`keystore.p12`, `keystore.jks`).
    pub key: &'static str,
    pub why: Unopened,
}

/// The Event reason when a keystore was not checked because checking it would cost more than
/// the manager pays: it is written again, and the owner is told why.
pub const REASON_KEYSTORE_OVER_LIMIT: &str = "KeystoreOverLimit";

impl StaleKeystore {
    /// The Warning for a store written again unchecked; none for a store that was checked
    /// (a changed password re-encodes its stores quietly).
    fn notice(self) -> Option<Notice> {
        self.why.over_limit().then(|| {
            let note = format!("{} {}; writing it again", self.key, self.why);
            Notice::warning(REASON_KEYSTORE_OVER_LIMIT, "Issue", &note)
        })
    }
}

/// The issuing controller's plan: the Secret apply first (a crash before the status apply
/// leaves `Issuing=True` and the same request, and the next reconcile writes the same Secret
/// again), then the status and the Event. A Secret that cannot be made yet writes nothing and
/// says why.
pub fn decide(facts: &Facts<'_>) -> FullPlan<()> {
    let Decision { write, plan } = contents(facts);
    let Some(contents) = write else {
        return plan.into();
    };
    match encode(facts, &contents) {
        Encoded::Secret(write) => plan.preceded_by(vec![*write]),
        Encoded::Blocked(notice) => Plan {
            status: None,
            event: Some(notice),
            next: Next::After(BLOCKED_RETRY),
        }
        .into(),
    }
}

/// Whether deciding on `crt` may cost what a tenant's key or keystores make it, so that it runs
/// on the crypto pool: keystores to check or encode, a signed certificate to check against the
/// key, a temporary certificate to sign. Any other pass reads memoized facts, as readiness and
/// trigger do on the runtime thread, and a hand-off to the pool would cost more than it.
pub fn costly(crt: &Certificate, requests: &[&CertificateRequest]) -> bool {
    let keystores = crt.spec.keystores.as_ref().is_some_and(|k| {
        k.pkcs12.as_ref().is_some_and(|p| p.create) || k.jks.as_ref().is_some_and(|j| j.create)
    });
    if keystores {
        return true;
    }
    if !crt.has_true(ISSUING) {
        return false;
    }
    let temporary = crt
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(annotation::ISSUE_TEMPORARY_CERTIFICATE));
    let next = next_revision(crt);
    requests
        .iter()
        .filter(|cr| revision_of(cr) == Some(next))
        .filter_map(|cr| cr.condition(READY))
        .any(|c| c.reason == REASON_ISSUED || temporary)
}

/// Whether `cr` is the signed request this issuance ends with, held without its chain (a copy
/// of a request over the cache's budget: `certificaterequest::budget`), so it is read live.
pub fn needs_chain(crt: &Certificate, cr: &CertificateRequest) -> bool {
    crt.has_true(ISSUING)
        && revision_of(cr) == Some(next_revision(crt))
        && cr.condition(READY).is_some_and(|c| c.reason == REASON_ISSUED)
        && cr.status.as_ref().is_none_or(|s| s.certificate.is_none())
}

/// The most a signed request's chain and CA may hold, as the request cache's budget allows the
/// rest of a request: the live read that brings them bypasses that cache.
pub const MAX_CHAIN_BYTES: usize = 64 * 1024;

/// What the Secret holds after this reconcile, and the plan around it.
pub fn contents(facts: &Facts<'_>) -> Decision {
    if facts.certificate.has_true(ISSUING) {
        issuing(facts)
    } else {
        repair(facts)
    }
}

/// The Secret as it is applied, or why it cannot be made yet.
#[derive(Debug, Clone, PartialEq)]
pub enum Encoded {
    Secret(Box<Write>),
    /// The Warning saying why.
    Blocked(Notice),
}

/// The Secret apply holding `contents`, its keystores encoded with the spec's passwords.
pub fn encode(facts: &Facts<'_>, contents: &Contents) -> Encoded {
    let crt = facts.certificate;
    let warning = |reason: &'static str, err: &dyn std::fmt::Display| {
        Encoded::Blocked(Notice::warning(reason, "Issue", &err.to_string()))
    };
    let passwords = match &facts.passwords {
        Ok(passwords) => passwords,
        Err(err @ PasswordError::SecretNotFound { .. }) => {
            return warning(REASON_PASSWORD_SECRET_NOT_FOUND, err);
        }
        Err(err) => return warning("KeystorePasswordInvalid", err),
    };
    let data = contents.data();
    let keystores = match secret::encode_keystores(crt, &data, passwords, facts.now) {
        Ok(stores) => stores,
        Err(err) => return warning("KeystoreEncodeFailed", &err),
    };
    let options = BodyOptions {
        existing_type: facts.secret.and_then(|s| s.type_.as_deref()),
        owner_reference: facts.owner_ref_enabled,
    };
    match secret::secret_body(crt, &data, &keystores, options) {
        Ok(body) => Encoded::Secret(Box::new(Write::apply(&body))),
        Err(err) => warning("SecretBodyFailed", &err),
    }
}

fn issuing(facts: &Facts<'_>) -> Decision {
    let crt = facts.certificate;
    let Some(key) = facts
        .next_key
        .filter(|k| private_key_matches_spec(k.spec, &crt.spec).is_empty())
    else {
        // A key the provider cannot make fails the issuance at once, saying which sizes work.
        return cannot_make(crt, facts.secret).map_or_else(Decision::idle, |err| {
            failed(facts, REASON_FAILED, &err.to_string())
        });
    };
    let next = next_revision(crt);
    let matching: Vec<&&CertificateRequest> = facts
        .requests
        .iter()
        .filter(|cr| revision_of(cr) == Some(next))
        .filter(|cr| {
            request_matches_spec(cr, &crt.spec).is_ok_and(|v| v.is_empty()) && request_has_key(cr, key)
        })
        .collect();
    let [cr] = matching.as_slice() else {
        return Decision::idle();
    };
    if failed_before_issuing(crt, cr) {
        return Decision::idle();
    }
    let true_condition = |t: &str| {
        cr.condition(t)
            .filter(|c| c.status == ConditionStatus::True.as_str())
    };
    // Denied wins over a Ready a non-compliant issuer set anyway, then InvalidRequest.
    if let Some(c) = true_condition(DENIED).or_else(|| true_condition(INVALID_REQUEST)) {
        return failed(facts, &c.reason, &c.message);
    }
    match cr.condition(READY) {
        Some(c) if c.reason == REASON_FAILED => failed(facts, &c.reason, &c.message),
        Some(c) if c.reason == REASON_ISSUED => issued(facts, cr, key, next),
        Some(_) => temporary(facts, key),
        None => Decision::idle(),
    }
}

/// The request is pending. With `cert-manager.io/issue-temporary-certificate: "true"`, a Secret
/// without a certificate for its own key gets a temporary one for the next key, as cert-manager
/// writes it: no CA, no issuer annotations; the real one replaces it once signed.
fn temporary(facts: &Facts<'_>, key: &Key) -> Decision {
    let crt = facts.certificate;
    let asked = crt
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(annotation::ISSUE_TEMPORARY_CERTIFICATE))
        .is_some_and(|v| v == "true");
    if !asked {
        return Decision::idle();
    }
    let input = Input {
        certificate: Arc::new(crt.clone()),
        secret: facts.secret.cloned().map(Arc::new),
        current_request: None,
        next_request: None,
        now: facts.now,
        renewal_jitter: Jitter::OFF,
    };
    if evaluate(TEMPORARY_CERTIFICATE, &input).is_none() {
        return Decision::idle();
    }
    let encoding = Encoding::of(crt.spec.private_key.as_ref()).unwrap_or(Encoding::Pkcs1);
    let made = key
        .to_pem(encoding)
        .map_err(TemporaryError::from)
        .and_then(|pem| Ok((pem, temporary_certificate(&crt.spec, key, facts.now)?)));
    let (private_key, certificate) = match made {
        Ok(made) => made,
        Err(err) => {
            let note = format!("Failed to issue a temporary certificate: {err}");
            return Decision {
                write: None,
                plan: Plan {
                    status: None,
                    event: Some(Notice::warning("TemporaryCertificateFailed", "Issue", &note)),
                    next: Next::After(BLOCKED_RETRY),
                },
            };
        }
    };
    Decision {
        write: Some(Contents {
            private_key: private_key.into_bytes(),
            certificate: certificate.into_bytes(),
            ca: Vec::new(),
            certificate_name: kube::ResourceExt::name_any(crt),
            issuer: Default::default(),
        }),
        plan: Plan {
            status: None,
            event: Some(Notice::normal("Issuing", "Issue", "Issued temporary certificate")),
            next: Next::AwaitChange,
        },
    }
}

/// The request failed: count it, stop issuing, say why.
fn failed(facts: &Facts<'_>, reason: &str, message: &str) -> Decision {
    let crt = facts.certificate;
    let status = crt.status.clone().unwrap_or_default();
    let attempts = status.failed_issuance_attempts.unwrap_or(0).saturating_add(1);
    let message = format!("The certificate request has failed to complete and will be retried: {message}");
    let issuing = condition(crt, ISSUING, false, reason, &message, facts.now);
    let mut doc = Map::new();
    if let Some(revision) = status.revision {
        doc.insert("revision".into(), revision.into());
    }
    doc.insert("lastFailureTime".into(), time(facts.now));
    doc.insert("failedIssuanceAttempts".into(), attempts.into());
    doc.insert("conditions".into(), json!([issuing]));
    Decision {
        write: None,
        plan: Plan {
            status: Some(document(Value::Object(doc))),
            event: Some(Notice::warning(reason.to_string(), "Issue", &message)),
            next: Next::AwaitChange,
        },
    }
}

/// The request was signed: check the certificate, then write the Secret and end the issuance.
fn issued(facts: &Facts<'_>, cr: &CertificateRequest, key: &Key, next: i64) -> Decision {
    let crt = facts.certificate;
    let status = cr.status.clone().unwrap_or_default();
    let chain = status.certificate.map(|b| b.0).unwrap_or_default();
    let ca = status.ca.map(|b| b.0).unwrap_or_default();
    if chain.len() + ca.len() > MAX_CHAIN_BYTES {
        let message = format!(
            "Issuer returned a certificate chain and CA of {} bytes, over the {MAX_CHAIN_BYTES} a Secret takes",
            chain.len() + ca.len()
        );
        return failed(facts, "InvalidCertificate", &message);
    }
    if let Err(message) = check_issued(&chain, key, facts.now) {
        return failed(facts, "InvalidCertificate", &message);
    }
    let encoding = Encoding::of(crt.spec.private_key.as_ref()).unwrap_or(Encoding::Pkcs1);
    let Ok(private_key) = key.to_pem(encoding) else {
        return Decision::idle();
    };
    let issuer = &cr.spec.issuer_ref;
    let write = Contents {
        private_key: private_key.into_bytes(),
        certificate: chain,
        ca,
        certificate_name: kube::ResourceExt::name_any(crt),
        issuer: [issuer.name.clone(), issuer.kind.clone(), issuer.group.clone()],
    };
    let message = "The certificate has been successfully issued";
    let issuing = condition(crt, ISSUING, false, "Issued", message, facts.now);
    // Written already: this is a look at a Certificate whose `Issuing=False` the cache has not
    // seen yet (or a retry after the status apply failed). Only the status is (re)applied; a
    // second Secret write would re-encode the keystores (a new PKCS#12 salt) for nothing.
    let written = facts.secret.is_some_and(|s| {
        let data = secret_data_of(s);
        data.certificate == write.certificate.as_slice() && data.private_key == write.private_key.as_slice()
    });
    Decision {
        write: (!written).then_some(write),
        plan: Plan {
            status: Some(document(json!({ "revision": next, "conditions": [issuing] }))),
            event: Some(Notice::normal("Issuing", "Issue", message)),
            next: Next::AwaitChange,
        },
    }
}

/// cert-manager's checks of a signed certificate, with its messages.
fn check_issued(chain: &[u8], key: &Key, now: Timestamp) -> Result<(), String> {
    let invalid =
        |e: &dyn std::fmt::Display| format!("Issuer returned an invalid certificate: failed to decode: {e}");
    let der = decode::leaf_certificate(chain).map_err(|e| invalid(&e))?;
    let (_, cert) = X509Certificate::from_der(&der).map_err(|e| invalid(&e))?;
    match decode::public_keys_equal(cert.public_key(), key) {
        Ok(true) => {}
        Ok(false) => {
            return Err("Issuer returned a certificate with a public key that does not match the CSR. This usually indicates a misconfigured issuer.".into());
        }
        Err(e) => return Err(format!("Failed to compare certificate and CSR public keys: {e}")),
    }
    let not_after = Timestamp::from_second(cert.validity().not_after.timestamp()).unwrap_or(now);
    if now > not_after {
        return Err(format!(
            "Issuer returned an already expired certificate (notAfter: {}). This usually indicates an expired CA certificate in the issuer.",
            not_after.strftime("%Y-%m-%dT%H:%M:%SZ")
        ));
    }
    Ok(())
}

/// Not issuing: re-apply the Secret from what it holds when its metadata, output formats or
/// keystores are not as the spec says, or `tls.key` is not in the asked encoding. Never a
/// new certificate.
fn repair(facts: &Facts<'_>) -> Decision {
    let Some(secret) = facts.secret.filter(|s| has_data(s)) else {
        return Decision::idle();
    };
    let input = secret::Input {
        certificate: facts.certificate,
        secret,
        field_manager: facts.field_manager,
        owner_ref_enabled: facts.owner_ref_enabled,
    };
    let reapply = matches!(secret::decide_repair(&input), Repair::Reapply { .. });
    let data = secret_data_of(secret);
    let reencoded = reencoded_key(facts.certificate, data.private_key);
    if !reapply && reencoded.is_none() && facts.stale_keystore.is_none() {
        return Decision::idle();
    }
    let mut write = owned(&data);
    if let Some(pem) = reencoded {
        write.private_key = pem;
    }
    Decision {
        write: Some(write),
        plan: Plan {
            status: None,
            event: facts.stale_keystore.and_then(StaleKeystore::notice),
            next: Next::AwaitChange,
        },
    }
}

/// `tls.key` in the encoding the spec asks for, when it is stored in another.
fn reencoded_key(crt: &Certificate, stored: &[u8]) -> Option<Vec<u8>> {
    let encoding = Encoding::of(crt.spec.private_key.as_ref()).ok()?;
    let key = Key::from_pem(stored).ok()?;
    let pem = key.to_pem(encoding).ok()?;
    (pem.trim_end().as_bytes() != String::from_utf8_lossy(stored).trim_end().as_bytes())
        .then(|| pem.into_bytes())
}

fn owned(data: &secret::SecretData<'_>) -> Contents {
    Contents {
        private_key: data.private_key.to_vec(),
        certificate: data.certificate.to_vec(),
        ca: data.ca.to_vec(),
        certificate_name: data.certificate_name.to_string(),
        issuer: [
            data.issuer_name.to_string(),
            data.issuer_kind.to_string(),
            data.issuer_group.to_string(),
        ],
    }
}

/// Whether the Secret has the data a repair needs.
pub fn has_data(secret: &Secret) -> bool {
    [data::TLS_CRT, data::TLS_KEY]
        .iter()
        .all(|k| !secret::data_of(secret, k).is_empty())
}
