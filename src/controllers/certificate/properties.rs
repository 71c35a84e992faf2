//! Each Certificate controller's `decide` returns, whatever it is shown: conditions absent,
//! True or False; revisions from none to the extremes; times around now; Secrets absent, good
//! or holding random bytes; requests absent, signed, failed, denied, for any revision. Only
//! "no panic" is asserted: the tables say what the plans are.

use std::sync::Arc;
use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use proptest::prelude::*;

use super::{approver, issuing, keymanager, readiness, requestmanager, revisionmanager, trigger};
use crate::api::certmanager::{
    Certificate, CertificateCondition, CertificateRequest, CertificateRequestCondition, ISSUING, READY,
};
use crate::certificates::fixtures;
use crate::certificates::keys::{annotation, data};
use crate::certificates::policy::checks::Input;
use crate::certificates::secret::certificate_owner_reference;
use crate::pki::keys::{Encoding, Key};

/// Cases per property: 64 unless `PROPTEST_CASES` asks for more.
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(64);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

/// Bytes as a Secret or request may hold them: a good certificate or key, or noise.
#[derive(Debug, Clone)]
enum Bytes {
    Good,
    Noise(Vec<u8>),
}

/// A request of the Certificate's.
#[derive(Debug, Clone)]
struct Request {
    revision: Option<&'static str>,
    /// `(type, True?, reason)`.
    condition: Option<(&'static str, bool, &'static str)>,
    certificate: Option<Bytes>,
    failed_at: Option<i64>,
    controlled: bool,
}

/// Everything the seven controllers see of one Certificate.
#[derive(Debug, Clone)]
struct World {
    issuing: Option<bool>,
    ready: Option<bool>,
    since: i64,
    revision: Option<i64>,
    attempts: Option<i64>,
    failed_at: Option<i64>,
    renewal_at: Option<i64>,
    /// `status.nextPrivateKeySecretName` (an earlier version's, or anyone's): never trusted.
    named: Option<&'static str>,
    rotation: &'static str,
    limit: Option<i32>,
    /// The target Secret: `tls.crt` and `tls.key`.
    secret: Option<(Bytes, Bytes)>,
    /// The next-key Secrets: name, revision annotation, key.
    key_secrets: Vec<(&'static str, Option<&'static str>, Bytes)>,
    requests: Vec<Request>,
    owns_secret: bool,
}

const DAY: i64 = 24 * 3600;

fn noise() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        Just(Bytes::Good),
        proptest::collection::vec(any::<u8>(), 0..48).prop_map(Bytes::Noise),
    ]
}

fn offset() -> impl Strategy<Value = i64> {
    -120 * DAY..120 * DAY
}

fn revision() -> impl Strategy<Value = Option<i64>> {
    prop_oneof![
        Just(None),
        (-2i64..4).prop_map(Some),
        Just(Some(i64::MAX)),
        Just(Some(i64::MIN)),
    ]
}

fn annotation_value() -> impl Strategy<Value = Option<&'static str>> {
    proptest::option::of(proptest::sample::select(vec!["0", "1", "2", "x", "", "-1"]))
}

fn request() -> impl Strategy<Value = Request> {
    let condition = proptest::option::of((
        proptest::sample::select(vec![READY, "Denied", "InvalidRequest", "Approved"]),
        any::<bool>(),
        proptest::sample::select(vec!["Issued", "Failed", "Pending", ""]),
    ));
    (
        annotation_value(),
        condition,
        proptest::option::of(noise()),
        proptest::option::of(offset()),
        any::<bool>(),
    )
        .prop_map(
            |(revision, condition, certificate, failed_at, controlled)| Request {
                revision,
                condition,
                certificate,
                failed_at,
                controlled,
            },
        )
}

fn world() -> impl Strategy<Value = World> {
    let status = (
        proptest::option::of(any::<bool>()),
        proptest::option::of(any::<bool>()),
        offset(),
        revision(),
        proptest::option::of(any::<i64>()),
        proptest::option::of(offset()),
        proptest::option::of(offset()),
    );
    let spec = (
        proptest::option::of(proptest::sample::select(vec!["derived", "k1", ""])),
        proptest::sample::select(vec!["", "Always", "Never", "Sometimes"]),
        proptest::option::of(-1i32..3),
    );
    let objects = (
        proptest::option::of((noise(), noise())),
        proptest::collection::vec(
            (
                proptest::sample::select(vec!["derived", "k1", "k2"]),
                annotation_value(),
                noise(),
            ),
            0..3,
        ),
        proptest::collection::vec(request(), 0..3),
        any::<bool>(),
    );
    (status, spec, objects).prop_map(|(status, spec, objects)| World {
        issuing: status.0,
        ready: status.1,
        since: status.2,
        revision: status.3,
        attempts: status.4,
        failed_at: status.5,
        renewal_at: status.6,
        named: spec.0,
        rotation: spec.1,
        limit: spec.2,
        secret: objects.0,
        key_secrets: objects.1,
        requests: objects.2,
        owns_secret: objects.3,
    })
}

fn now() -> Timestamp {
    fixtures::at("2026-02-01T00:00:00Z")
}

fn at(offset: i64) -> Time {
    Time(now() + SignedDuration::from_secs(offset))
}

/// A certificate for the fixture spec and key, valid 2026-01-01 to 2026-04-01.
fn good_certificate() -> &'static [u8] {
    static PEM: OnceLock<Vec<u8>> = OnceLock::new();
    PEM.get_or_init(|| {
        fixtures::certificate_pem(&fixtures::spec(), fixtures::ec(), (2026, 1, 1), (2026, 4, 1))
    })
}

fn good_key() -> &'static [u8] {
    static PEM: OnceLock<Vec<u8>> = OnceLock::new();
    PEM.get_or_init(|| fixtures::key_pem(fixtures::ec()))
}

/// The fixture spec's request for the fixture key (its CSR made once).
fn base_request() -> &'static CertificateRequest {
    static REQUEST: OnceLock<CertificateRequest> = OnceLock::new();
    REQUEST.get_or_init(|| fixtures::request_for(&fixtures::spec(), fixtures::ec()))
}

fn bytes(b: &Bytes, good: &[u8]) -> ByteString {
    match b {
        Bytes::Good => ByteString(good.to_vec()),
        Bytes::Noise(noise) => ByteString(noise.clone()),
    }
}

fn condition(type_: &str, status: bool, since: i64) -> CertificateCondition {
    CertificateCondition {
        type_: type_.to_string(),
        status: if status { "True" } else { "False" }.to_string(),
        reason: "Reason".to_string(),
        last_transition_time: Some(at(since)),
        ..CertificateCondition::default()
    }
}

fn certificate(w: &World) -> Certificate {
    let mut spec = fixtures::spec();
    spec.issuer_ref.group = crate::api::GROUP.to_string();
    spec.revision_history_limit = w.limit;
    if let Some(key) = spec.private_key.as_mut() {
        key.rotation_policy = w.rotation.to_string();
    }
    let mut crt = fixtures::certificate("web", spec);
    crt.metadata.namespace = Some("apps".into());
    crt.metadata.uid = Some("uid-web".into());
    let derived = keymanager::next_key_name(&crt);
    let status = crt.status.get_or_insert_with(Default::default);
    status.revision = w.revision;
    status.failed_issuance_attempts = w.attempts;
    status.last_failure_time = w.failed_at.map(at);
    status.renewal_time = w.renewal_at.map(at);
    status.next_private_key_secret_name = w.named.map(|n| {
        if n == "derived" {
            derived.clone()
        } else {
            n.to_string()
        }
    });
    let conditions = [(ISSUING, w.issuing), (READY, w.ready)];
    for (type_, state) in conditions {
        if let Some(state) = state {
            status.conditions.push(condition(type_, state, w.since));
        }
    }
    crt
}

fn target(w: &World) -> Option<k8s_openapi::api::core::v1::Secret> {
    let (crt, key) = w.secret.as_ref()?;
    let crt = bytes(crt, good_certificate());
    let key = bytes(key, good_key());
    let mut secret = fixtures::secret(&[(data::TLS_CRT, &crt.0), (data::TLS_KEY, &key.0)], &[]);
    secret.metadata.namespace = Some("apps".into());
    Some(secret)
}

fn key_secrets(w: &World, crt: &Certificate) -> Vec<k8s_openapi::api::core::v1::Secret> {
    let pkcs8 = fixtures::ec().to_pem(Encoding::Pkcs8).expect("pem").into_bytes();
    w.key_secrets
        .iter()
        .map(|(name, revision, key)| {
            let name = if *name == "derived" {
                keymanager::next_key_name(crt)
            } else {
                (*name).to_string()
            };
            let mut secret = keymanager::key_secret(crt, &name, bytes(key, &pkcs8).0);
            if let Some(annotations) = secret.metadata.annotations.as_mut() {
                match revision {
                    Some(r) => annotations.insert(super::observe::KEY_REVISION.into(), (*r).into()),
                    None => annotations.remove(super::observe::KEY_REVISION),
                };
            }
            secret
        })
        .collect()
}

fn requests(w: &World, crt: &Certificate) -> Vec<CertificateRequest> {
    w.requests
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut cr = base_request().clone();
            cr.metadata.name = Some(format!("web-{i}"));
            cr.metadata.namespace = Some("apps".into());
            cr.metadata.uid = Some(format!("uid-web-{i}"));
            cr.spec.issuer_ref = crt.spec.issuer_ref.clone();
            cr.metadata.annotations = r
                .revision
                .map(|v| [(annotation::CERTIFICATE_REVISION.to_string(), v.to_string())].into());
            if r.controlled {
                cr.metadata.owner_references = Some(vec![certificate_owner_reference(crt)]);
            }
            let status = cr.status.get_or_insert_with(Default::default);
            if let Some((type_, state, reason)) = r.condition {
                status.conditions.push(CertificateRequestCondition {
                    type_: type_.to_string(),
                    status: if state { "True" } else { "False" }.to_string(),
                    reason: reason.to_string(),
                    ..CertificateRequestCondition::default()
                });
            }
            status.certificate = r.certificate.as_ref().map(|b| bytes(b, good_certificate()));
            status.failure_time = r.failed_at.map(at);
            cr
        })
        .collect()
}

/// The policy chains' input for `w`.
fn input(w: &World) -> Input {
    let crt = certificate(w);
    let requests: Vec<_> = requests(w, &crt)
        .into_iter()
        .filter(|cr| super::observe::controlled_by(&cr.metadata, &crt))
        .map(Arc::new)
        .collect();
    super::observe::chain_input(&Arc::new(crt), target(w).map(Arc::new), &requests, now())
}

/// The next key as the controllers read it: the trusted key Secret's key, decoded. The
/// Secret is found by its derived name; the name in status (any of `World::named`) is ignored.
fn next_key(crt: &Certificate, secrets: &[k8s_openapi::api::core::v1::Secret]) -> Option<(String, Key)> {
    let named = keymanager::next_key_name(crt);
    let secret = secrets.iter().find(|s| s.name_any() == named)?;
    let trusted = super::observe::is_next_key_of(secret, crt)
        && !super::observe::made_for_another_revision(secret, crt);
    let pem = secret.data.as_ref()?.get(data::TLS_KEY)?;
    trusted
        .then(|| Key::from_pem(&pem.0).ok())
        .flatten()
        .map(|key| (named, key))
}

const HOUR: Duration = Duration::from_secs(3600);

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_trigger_decides_anything(w in world()) {
        let facts = trigger::Facts { input: input(&w), owns_secret: w.owns_secret, backoff: (HOUR, 32 * HOUR) };
        trigger::decide(&facts);
    }

    #[test]
    fn the_key_manager_decides_anything(w in world(), generated in any::<bool>()) {
        let crt = certificate(&w);
        let secrets = key_secrets(&w, &crt);
        let target = target(&w);
        let pkcs8 = fixtures::ec().to_pem(Encoding::Pkcs8).expect("pem").into_bytes();
        let facts = keymanager::Facts {
            certificate: &crt,
            owned: secrets.iter().filter(|s| super::observe::is_next_key_of(s, &crt)).collect(),
            target: target.as_ref(),
            generated: generated.then_some(pkcs8.as_slice()),
        };
        keymanager::decide(&facts);
    }

    #[test]
    fn the_request_manager_decides_anything(w in world()) {
        let crt = certificate(&w);
        let secrets = key_secrets(&w, &crt);
        let next = next_key(&crt, &secrets);
        let requests = requests(&w, &crt);
        let facts = requestmanager::Facts {
            certificate: &crt,
            next_key: next.as_ref().map(|(_, key)| key),
            key_secret: next.as_ref().map_or("", |(name, _)| name.as_str()),
            requests: requests.iter().filter(|cr| super::observe::controlled_by(&cr.metadata, &crt)).collect(),
            prefixes: &["*".to_string()],
        };
        requestmanager::decide(&facts);
    }

    #[test]
    fn the_approver_decides_anything(w in world(), owner_known in any::<bool>()) {
        let crt = certificate(&w);
        let secrets = key_secrets(&w, &crt);
        let next = next_key(&crt, &secrets);
        for cr in requests(&w, &crt) {
            let verdict = approver::verdict(&cr, owner_known.then_some(&crt), || next.as_ref().map(|(_, key)| key.clone()));
            approver::decide(&cr, verdict, now());
        }
    }

    #[test]
    fn issuing_decides_anything(w in world(), keystores_open in any::<bool>()) {
        let crt = certificate(&w);
        let secrets = key_secrets(&w, &crt);
        let next = next_key(&crt, &secrets);
        let requests = requests(&w, &crt);
        let target = target(&w);
        let facts = issuing::decide::Facts {
            certificate: &crt,
            next_key: next.as_ref().map(|(_, key)| key),
            requests: requests.iter().filter(|cr| super::observe::controlled_by(&cr.metadata, &crt)).collect(),
            secret: target.as_ref(),
            field_manager: "cfssl-issuer-issuing",
            owner_ref_enabled: w.owns_secret,
            stale_keystore: (!keystores_open).then_some(issuing::decide::StaleKeystore {
                key: crate::certificates::keys::data::PKCS12_KEYSTORE,
                why: crate::pki::keystore::Unopened::Password,
            }),
            passwords: Ok(crate::certificates::secret::Passwords::default()),
            now: now(),
        };
        issuing::decide::decide(&facts);
    }

    #[test]
    fn readiness_decides_anything(w in world()) {
        readiness::decide(&input(&w));
    }

    #[test]
    fn the_revision_manager_decides_anything(w in world()) {
        let crt = certificate(&w);
        let requests = requests(&w, &crt);
        revisionmanager::decide(&crt, &requests.iter().collect::<Vec<_>>());
    }
}
