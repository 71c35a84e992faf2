use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::decide::*;
use crate::api::certmanager::{Certificate, CertificateRequest, CertificateRequestCondition, ISSUING};
use crate::certificates::fixtures::{self, at, key};
use crate::certificates::keys::{annotation, data};
use crate::controllers::certificate::testing::{applied_condition, event, with_condition, with_status};
use crate::controllers::kit::plan::Next;
use crate::pki::keys::{Encoding, Key, KeySpec};

fn issuing(revision: Option<i64>, attempts: Option<i64>) -> Certificate {
    let crt = with_status(fixtures::certificate("web", fixtures::spec()), |s| {
        s.revision = revision;
        s.failed_issuance_attempts = attempts;
    });
    with_condition(crt, ISSUING, "True", "DoesNotExist", "2026-02-01T00:00:00Z")
}

fn request(revision: i64, key: &Key) -> CertificateRequest {
    let mut cr = fixtures::request_for(&fixtures::spec(), key);
    cr.metadata.name = Some(format!("web-{revision}"));
    cr.metadata.annotations = Some(BTreeMap::from([(
        annotation::CERTIFICATE_REVISION.to_string(),
        revision.to_string(),
    )]));
    cr
}

fn with(
    mut cr: CertificateRequest,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
) -> CertificateRequest {
    cr.status
        .get_or_insert_with(Default::default)
        .conditions
        .push(CertificateRequestCondition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            ..Default::default()
        });
    cr
}

fn signed(cr: CertificateRequest, chain: Vec<u8>) -> CertificateRequest {
    let mut cr = with(
        cr,
        "Ready",
        "True",
        "Issued",
        "Certificate fetched from issuer successfully",
    );
    let status = cr.status.get_or_insert_with(Default::default);
    status.certificate = Some(ByteString(chain));
    status.ca = Some(ByteString(b"CA PEM".to_vec()));
    cr
}

fn failed_at(cr: CertificateRequest, when: &str) -> CertificateRequest {
    let mut cr = with(cr, "Ready", "False", "Failed", "the CA said no");
    cr.status.get_or_insert_with(Default::default).failure_time = Some(Time(at(when)));
    cr
}

fn facts<'a>(crt: &'a Certificate, key: Option<&'a Key>, requests: Vec<&'a CertificateRequest>) -> Facts<'a> {
    Facts {
        certificate: crt,
        next_key: key,
        requests,
        secret: None,
        field_manager: "cfssl-issuer-issuing",
        owner_ref_enabled: false,
        stale_keystore: None,
        passwords: Ok(crate::certificates::secret::Passwords::default()),
        now: at("2026-02-03T00:00:00Z"),
    }
}

type Expect = (Option<(&'static str, String)>, Option<i64>, Option<i64>, bool);

#[test]
fn issuing_table() {
    let ec = fixtures::ec();
    let spec = fixtures::spec();
    let good_chain = fixtures::certificate_pem(&spec, ec, (2026, 1, 1), (2026, 4, 1));
    let other_chain =
        fixtures::certificate_pem(&spec, key(KeySpec::Ecdsa(256), true), (2026, 1, 1), (2026, 4, 1));
    let expired_chain = fixtures::certificate_pem(&spec, ec, (2025, 1, 1), (2025, 4, 1));
    let retried =
        |m: &str| format!("The certificate request has failed to complete and will be retried: {m}");
    let crt = issuing(None, None);
    let again = issuing(Some(3), Some(2));
    let pending = request(1, ec);
    let failed = failed_at(request(1, ec), "2026-02-02T00:00:00Z");
    let failed_earlier = failed_at(request(1, ec), "2026-01-31T00:00:00Z");
    let denied = with(
        request(1, ec),
        "Denied",
        "True",
        "policy.example.com",
        "not for you",
    );
    let denied_and_issued = signed(denied.clone(), good_chain.clone());
    let invalid = with(request(1, ec), "InvalidRequest", "True", "BadCSR", "no names");
    let issued = signed(request(1, ec), good_chain.clone());
    let wrong_key = signed(request(1, ec), other_chain);
    let expired = signed(request(1, ec), expired_chain);
    let mut padded = good_chain.clone();
    padded.resize(MAX_CHAIN_BYTES, b'\n');
    let oversized = signed(request(1, ec), padded);
    let oversized_message = format!(
        "Issuer returned a certificate chain and CA of {} bytes, over the 65536 a Secret takes",
        MAX_CHAIN_BYTES + b"CA PEM".len()
    );
    let fourth = failed_at(request(4, ec), "2026-02-02T00:00:00Z");
    let rsa = key(KeySpec::Rsa(2048), false);
    let mismatch = "Issuer returned a certificate with a public key that does not match the CSR. This usually indicates a misconfigured issuer.";
    let expired_message = "Issuer returned an already expired certificate (notAfter: 2025-04-01T00:00:00Z). This usually indicates an expired CA certificate in the issuer.";
    type Row<'a> = (&'a str, Facts<'a>, Expect);
    let rows: Vec<Row> = vec![
        (
            "no next key",
            facts(&crt, None, vec![&issued]),
            (None, None, None, false),
        ),
        (
            "next key of another algorithm",
            facts(&crt, Some(rsa), vec![&issued]),
            (None, None, None, false),
        ),
        (
            "no request yet",
            facts(&crt, Some(ec), vec![]),
            (None, None, None, false),
        ),
        (
            "pending",
            facts(&crt, Some(ec), vec![&pending]),
            (None, None, None, false),
        ),
        (
            "failed earlier: wait for its replacement",
            facts(&crt, Some(ec), vec![&failed_earlier]),
            (None, None, None, false),
        ),
        (
            "failed",
            facts(&crt, Some(ec), vec![&failed]),
            (Some(("Failed", retried("the CA said no"))), None, Some(1), false),
        ),
        (
            "failed again: counts on, revision kept",
            facts(&again, Some(ec), vec![&fourth]),
            (
                Some(("Failed", retried("the CA said no"))),
                Some(3),
                Some(3),
                false,
            ),
        ),
        (
            "denied: the denier's reason",
            facts(&crt, Some(ec), vec![&denied]),
            (
                Some(("policy.example.com", retried("not for you"))),
                None,
                Some(1),
                false,
            ),
        ),
        (
            "denied wins over issued",
            facts(&crt, Some(ec), vec![&denied_and_issued]),
            (
                Some(("policy.example.com", retried("not for you"))),
                None,
                Some(1),
                false,
            ),
        ),
        (
            "invalid request",
            facts(&crt, Some(ec), vec![&invalid]),
            (Some(("BadCSR", retried("no names"))), None, Some(1), false),
        ),
        (
            "issued",
            facts(&crt, Some(ec), vec![&issued]),
            (
                Some(("Issued", "The certificate has been successfully issued".into())),
                Some(1),
                None,
                true,
            ),
        ),
        (
            "issued for another key",
            facts(&crt, Some(ec), vec![&wrong_key]),
            (
                Some(("InvalidCertificate", retried(mismatch))),
                None,
                Some(1),
                false,
            ),
        ),
        (
            "a chain and CA over what a Secret takes",
            facts(&crt, Some(ec), vec![&oversized]),
            (
                Some(("InvalidCertificate", retried(&oversized_message))),
                None,
                Some(1),
                false,
            ),
        ),
        (
            "issued already expired",
            facts(&crt, Some(ec), vec![&expired]),
            (
                Some(("InvalidCertificate", retried(expired_message))),
                None,
                Some(1),
                false,
            ),
        ),
    ];
    for (name, facts, (condition, revision, attempts, writes)) in rows {
        let Decision { write, plan } = contents(&facts);
        let issuing = applied_condition(&plan, ISSUING);
        assert_eq!(
            issuing,
            condition.map(|(r, m)| ("False".to_string(), r.to_string(), m)),
            "{name}"
        );
        let status = plan
            .status
            .as_ref()
            .map(|d| d["status"].clone())
            .unwrap_or_default();
        assert_eq!(
            status.get("revision").and_then(serde_json::Value::as_i64),
            revision,
            "{name}"
        );
        assert_eq!(
            status
                .get("failedIssuanceAttempts")
                .and_then(serde_json::Value::as_i64),
            attempts,
            "{name}"
        );
        assert_eq!(
            status.get("lastFailureTime").is_some(),
            attempts.is_some(),
            "{name}"
        );
        assert_eq!(write.is_some(), writes, "{name}");
        assert_eq!(plan.next, Next::AwaitChange, "{name}");
    }
}

#[test]
fn an_issuance_writes_the_key_in_the_asked_encoding_and_the_request_chain() {
    let ec = fixtures::ec();
    let chain = fixtures::certificate_pem(&fixtures::spec(), ec, (2026, 1, 1), (2026, 4, 1));
    let mut crt = issuing(None, None);
    if let Some(k) = crt.spec.private_key.as_mut() {
        k.encoding = "PKCS8".into();
    }
    let cr = signed(request(1, ec), chain.clone());
    let Decision { write, plan } = contents(&facts(&crt, Some(ec), vec![&cr]));
    let write = write.expect("a Secret write");
    assert_eq!(
        write.private_key,
        ec.to_pem(Encoding::Pkcs8).expect("pem").into_bytes()
    );
    assert_eq!((&write.certificate, &write.ca), (&chain, &b"CA PEM".to_vec()));
    assert_eq!(write.certificate_name, "web");
    assert_eq!(write.issuer, ["ca".to_string(), String::new(), String::new()]);
    let event = event(&plan).expect("an event");
    assert_eq!((event.0.as_str(), event.1.as_str()), ("Normal", "Issuing"));
}

#[test]
fn not_issuing_the_key_is_re_encoded_without_a_new_certificate() {
    let ec = fixtures::ec();
    let chain = fixtures::certificate_pem(&fixtures::spec(), ec, (2026, 1, 1), (2026, 4, 1));
    let pkcs1 = fixtures::key_pem(ec);
    let secret = fixtures::secret(&[(data::TLS_KEY, &pkcs1), (data::TLS_CRT, &chain)], &[]);
    let empty = fixtures::secret(&[(data::TLS_KEY, &pkcs1)], &[]);
    let mut pkcs8 = fixtures::certificate("web", fixtures::spec());
    if let Some(k) = pkcs8.spec.private_key.as_mut() {
        k.encoding = "PKCS8".into();
    }
    let pkcs1_spec = fixtures::certificate("web", fixtures::spec());
    let mut facts = facts(&pkcs8, None, vec![]);
    facts.secret = Some(&secret);
    let Decision { write, plan } = contents(&facts);
    let write = write.expect("re-encoded");
    assert_eq!(
        write.private_key,
        ec.to_pem(Encoding::Pkcs8).expect("pem").into_bytes()
    );
    assert_eq!(write.certificate, chain);
    assert_eq!((plan.status, plan.event), (None, None));
    facts.certificate = &pkcs1_spec;
    let data = crate::certificates::secret::SecretData {
        private_key: &pkcs1,
        certificate: &chain,
        certificate_name: "web",
        issuer_name: "ca",
        ..Default::default()
    };
    let mut body = crate::certificates::secret::secret_body(
        &pkcs1_spec,
        &data,
        &crate::certificates::secret::KeystoreData::default(),
        crate::certificates::secret::BodyOptions::default(),
    )
    .expect("body");
    body.metadata.managed_fields = Some(vec![applied_by("cfssl-issuer-issuing", &body)]);
    facts.secret = Some(&body);
    assert_eq!(contents(&facts).write, None, "PKCS1 as asked: nothing to do");
    for row in stale_keystore_rows() {
        facts.stale_keystore = Some(row.stale);
        let Decision { write, plan } = contents(&facts);
        let rewritten = write.expect("keystores written again");
        assert_eq!(
            (&rewritten.private_key, &rewritten.certificate),
            (&pkcs1, &chain),
            "{}",
            row.name
        );
        let want = row.warning.map(|note| {
            let reason = REASON_KEYSTORE_OVER_LIMIT.to_string();
            ("Warning".to_string(), reason, note.to_string())
        });
        assert_eq!(event(&plan), want, "{}", row.name);
        assert_eq!(
            (plan.status, plan.next),
            (None, Next::AwaitChange),
            "{}",
            row.name
        );
    }
    facts.stale_keystore = None;
    facts.secret = Some(&empty);
    assert_eq!(
        contents(&facts).write,
        None,
        "no certificate: the trigger re-issues, nothing to repair"
    );
    facts.secret = None;
    assert_eq!(contents(&facts).write, None);
}

/// The managedFields entry of `manager` owning every label, annotation and data key of `secret`
/// (what the API server records for the issuing controller's apply).
fn applied_by(
    manager: &str,
    secret: &k8s_openapi::api::core::v1::Secret,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry {
    let fields = |keys: Vec<&String>| {
        serde_json::Value::Object(
            keys.into_iter()
                .map(|k| (format!("f:{k}"), serde_json::json!({})))
                .collect(),
        )
    };
    let labels = secret
        .metadata
        .labels
        .as_ref()
        .map(|l| l.keys().collect())
        .unwrap_or_default();
    let annotations = secret
        .metadata
        .annotations
        .as_ref()
        .map(|a| a.keys().collect())
        .unwrap_or_default();
    let data = secret
        .data
        .as_ref()
        .map(|d| d.keys().collect())
        .unwrap_or_default();
    k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry {
        manager: Some(manager.to_string()),
        operation: Some("Apply".into()),
        api_version: Some("v1".into()),
        fields_type: Some("FieldsV1".into()),
        fields_v1: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1(
            serde_json::json!({
                "f:metadata": { "f:labels": fields(labels), "f:annotations": fields(annotations) },
                "f:data": fields(data),
                "f:type": {},
            }),
        )),
        ..Default::default()
    }
}

#[test]
fn the_secret_is_applied_before_the_status_that_ends_the_issuance() {
    use crate::controllers::kit::plan::Write;
    let ec = fixtures::ec();
    let chain = fixtures::certificate_pem(&fixtures::spec(), ec, (2026, 1, 1), (2026, 4, 1));
    let crt = issuing(None, None);
    let cr = signed(request(1, ec), chain);
    let facts = facts(&crt, Some(ec), vec![&cr]);
    let plan = decide(&facts);
    let [Write::Apply { object, body }] = plan.before_status.as_slice() else {
        panic!("one Secret apply first: {plan:?}");
    };
    assert_eq!(
        (object.describe(), object.collection.as_str()),
        ("Secret tls".to_string(), "/api/v1/secrets")
    );
    assert_eq!(
        (&body["apiVersion"], &body["kind"]),
        (&"v1".into(), &"Secret".into())
    );
    assert_eq!(plan.after_status, vec![]);
    assert_eq!(
        plan.plan,
        contents(&facts).plan,
        "the status and Event as decided"
    );
}

#[test]
fn a_secret_that_cannot_be_made_yet_writes_nothing_and_says_why() {
    use crate::certificates::secret::{Kind, PasswordError};
    let ec = fixtures::ec();
    let chain = fixtures::certificate_pem(&fixtures::spec(), ec, (2026, 1, 1), (2026, 4, 1));
    let crt = issuing(None, None);
    let cr = signed(request(1, ec), chain);
    let rows = [
        (
            PasswordError::SecretNotFound {
                kind: Kind::Pkcs12,
                name: "pw".into(),
            },
            "KeystorePasswordSecretNotFound",
        ),
        (
            PasswordError::EmptyLiteral { kind: Kind::Jks },
            "KeystorePasswordInvalid",
        ),
    ];
    for (err, reason) in rows {
        let mut facts = facts(&crt, Some(ec), vec![&cr]);
        facts.passwords = Err(err.clone());
        let plan = decide(&facts);
        assert_eq!(plan.writes().count(), 0, "{reason}");
        assert_eq!(plan.plan.status, None, "{reason}");
        assert_eq!(plan.plan.next, Next::After(BLOCKED_RETRY), "{reason}");
        assert_eq!(
            event(&plan.plan),
            Some(("Warning".into(), reason.into(), err.to_string())),
            "{reason}"
        );
    }
}

struct StaleRow {
    name: &'static str,
    stale: StaleKeystore,
    /// The Warning's note; none for a store that was checked and did not open.
    warning: Option<&'static str>,
}

/// Why a keystore is written again, and what its owner is told.
fn stale_keystore_rows() -> Vec<StaleRow> {
    use crate::pki::keystore::Unopened;
    let p12 = |why| StaleKeystore {
        key: data::PKCS12_KEYSTORE,
        why,
    };
    vec![
        StaleRow {
            name: "a changed password: quietly",
            stale: p12(Unopened::Password),
            warning: None,
        },
        StaleRow {
            name: "unreadable: quietly",
            stale: StaleKeystore {
                key: data::JKS_KEYSTORE,
                why: Unopened::Unreadable,
            },
            warning: None,
        },
        StaleRow {
            name: "2^31-1 MAC iterations claimed",
            stale: p12(Unopened::MacIterations {
                count: i32::MAX,
                max: 2048,
            }),
            warning: Some(
                "keystore.p12 claims 2147483647 MAC iterations, over the 2048 this manager checks; writing it again",
            ),
        },
        StaleRow {
            name: "a long MAC salt",
            stale: p12(Unopened::MacSalt { len: 65, max: 64 }),
            warning: Some(
                "keystore.p12 has a 65-byte MAC salt, over the 64 this manager checks; writing it again",
            ),
        },
        StaleRow {
            name: "a JKS store over the size cap",
            stale: StaleKeystore {
                key: data::JKS_KEYSTORE,
                why: Unopened::Size {
                    size: 1_048_577,
                    max: 1_048_576,
                },
            },
            warning: Some(
                "keystore.jks is 1048577 bytes, over the 1048576 this manager checks; writing it again",
            ),
        },
    ]
}

/// Which Secret a temporary-certificate row starts from.
#[derive(Clone, Copy, Debug)]
enum Held {
    None,
    /// `tls.key` only.
    KeyOnly,
    /// A certificate and key that belong together.
    Pair,
    /// A certificate for another key.
    Mismatched,
}

#[test]
fn a_pending_request_writes_a_temporary_certificate_only_when_asked_and_needed() {
    let ec = fixtures::ec();
    let spec = fixtures::spec();
    let other = key(KeySpec::Ecdsa(256), true);
    let pair = fixtures::certificate_pem(&spec, ec, (2026, 1, 1), (2026, 4, 1));
    let mismatched = fixtures::certificate_pem(&spec, other, (2026, 1, 1), (2026, 4, 1));
    let key_pem = fixtures::key_pem(ec);
    let secret_of = |held: Held| match held {
        Held::None => None,
        Held::KeyOnly => Some(fixtures::secret(&[(data::TLS_KEY, &key_pem)], &[])),
        Held::Pair => Some(fixtures::secret(
            &[(data::TLS_KEY, &key_pem), (data::TLS_CRT, &pair)],
            &[],
        )),
        Held::Mismatched => Some(fixtures::secret(
            &[(data::TLS_KEY, &key_pem), (data::TLS_CRT, &mismatched)],
            &[],
        )),
    };
    let pending = with(request(1, ec), "Ready", "False", "Pending", "waiting on the CA");
    let no_ready = request(1, ec);
    // (name, annotation, Secret held, request, temporary certificate written)
    let rows: [(&str, Option<&str>, Held, &CertificateRequest, bool); 7] = [
        ("asked, no Secret", Some("true"), Held::None, &pending, true),
        (
            "asked, a key without a certificate",
            Some("true"),
            Held::KeyOnly,
            &pending,
            true,
        ),
        (
            "asked, a certificate for another key",
            Some("true"),
            Held::Mismatched,
            &pending,
            true,
        ),
        (
            "asked, a pair already there",
            Some("true"),
            Held::Pair,
            &pending,
            false,
        ),
        ("not asked", None, Held::None, &pending, false),
        (
            "asked with another value",
            Some("yes"),
            Held::None,
            &pending,
            false,
        ),
        (
            "asked, the request has no Ready condition yet",
            Some("true"),
            Held::None,
            &no_ready,
            false,
        ),
    ];
    for (name, annotation_value, held, cr, want) in rows {
        let mut crt = issuing(None, None);
        if let Some(value) = annotation_value {
            crt.metadata.annotations = Some(BTreeMap::from([(
                annotation::ISSUE_TEMPORARY_CERTIFICATE.to_string(),
                value.to_string(),
            )]));
        }
        let secret = secret_of(held);
        let mut facts = facts(&crt, Some(ec), vec![cr]);
        facts.secret = secret.as_ref();
        let Decision { write, plan } = contents(&facts);
        assert_eq!((&plan.status, &plan.next), (&None, &Next::AwaitChange), "{name}");
        let Some(write) = write else {
            assert_eq!((want, event(&plan)), (false, None), "{name}");
            continue;
        };
        assert!(want, "{name}: written");
        let der = crate::certificates::decode::leaf_certificate(&write.certificate).expect("leaf");
        let (_, leaf) =
            <x509_parser::prelude::X509Certificate as x509_parser::prelude::FromDer<_>>::from_der(&der)
                .expect("x509");
        assert_eq!(
            (
                crate::certificates::decode::public_keys_equal(leaf.public_key(), ec),
                leaf.issuer().to_string(),
                write.private_key == ec.to_pem(Encoding::Pkcs1).expect("pem").into_bytes(),
                (
                    write.ca.is_empty(),
                    write.certificate_name.as_str(),
                    write.issuer.clone()
                ),
            ),
            (
                Ok(true),
                "CN=cert-manager.local".to_string(),
                true,
                (true, "web", Default::default())
            ),
            "{name}"
        );
        let note = "Issued temporary certificate".to_string();
        assert_eq!(
            event(&plan),
            Some(("Normal".into(), "Issuing".into(), note)),
            "{name}"
        );
    }
}

#[test]
fn only_keystores_and_a_request_to_check_against_the_key_go_to_the_crypto_pool() {
    use crate::api::certmanager::{JksKeystore, Keystores, Pkcs12Keystore};
    let ec = fixtures::ec();
    let chain = fixtures::certificate_pem(&fixtures::spec(), ec, (2026, 1, 1), (2026, 4, 1));
    let pending = with(request(1, ec), "Ready", "False", "Pending", "waiting on the CA");
    let issued = signed(request(1, ec), chain.clone());
    let issued_earlier = signed(request(1, ec), chain);
    let keystores = |pkcs12: bool, jks: bool| {
        let mut crt = fixtures::certificate("web", fixtures::spec());
        crt.spec.keystores = Some(Box::new(Keystores {
            pkcs12: Some(Pkcs12Keystore {
                create: pkcs12,
                ..Default::default()
            }),
            jks: Some(JksKeystore {
                create: jks,
                ..Default::default()
            }),
            ..Default::default()
        }));
        crt
    };
    let mut temporary = issuing(None, None);
    temporary.metadata.annotations = Some(BTreeMap::from([(
        annotation::ISSUE_TEMPORARY_CERTIFICATE.to_string(),
        "true".to_string(),
    )]));
    let rows: Vec<(&str, Certificate, Vec<&CertificateRequest>, bool)> = vec![
        (
            "not issuing",
            fixtures::certificate("web", fixtures::spec()),
            vec![],
            false,
        ),
        ("a PKCS#12 keystore", keystores(true, false), vec![], true),
        ("a JKS keystore", keystores(false, true), vec![], true),
        ("keystores not created", keystores(false, false), vec![], false),
        ("issuing, no request yet", issuing(None, None), vec![], false),
        (
            "issuing, the request pending",
            issuing(None, None),
            vec![&pending],
            false,
        ),
        (
            "pending, a temporary certificate asked",
            temporary,
            vec![&pending],
            true,
        ),
        (
            "issuing, the request signed",
            issuing(None, None),
            vec![&issued],
            true,
        ),
        (
            "signed for the revision before",
            issuing(Some(1), None),
            vec![&issued_earlier],
            false,
        ),
    ];
    for (name, crt, requests, costly) in rows {
        assert_eq!(super::decide::costly(&crt, &requests), costly, "{name}");
    }
}

/// Only the signed request this issuance ends with, cached without its chain, is read live.
#[test]
fn needs_chain_table() {
    let ec = fixtures::ec();
    let chain = fixtures::certificate_pem(&fixtures::spec(), ec, (2026, 1, 1), (2026, 4, 1));
    let issued = signed(request(1, ec), chain.clone());
    let chainless = {
        let mut cr = issued.clone();
        let status = cr.status.as_mut().unwrap();
        (status.certificate, status.ca) = (None, None);
        cr
    };
    let pending = with(request(1, ec), "Ready", "False", "Pending", "waiting on the CA");
    let rows: [(&str, Certificate, &CertificateRequest, bool); 5] = [
        (
            "issuing, signed, cached without its chain",
            issuing(None, None),
            &chainless,
            true,
        ),
        (
            "issuing, signed, with its chain",
            issuing(None, None),
            &issued,
            false,
        ),
        ("issuing, pending", issuing(None, None), &pending, false),
        (
            "issuing, the revision before",
            issuing(Some(1), None),
            &chainless,
            false,
        ),
        (
            "not issuing",
            fixtures::certificate("web", fixtures::spec()),
            &chainless,
            false,
        ),
    ];
    for (row, crt, cr, want) in rows {
        assert_eq!(needs_chain(&crt, cr), want, "{row}");
    }
}
