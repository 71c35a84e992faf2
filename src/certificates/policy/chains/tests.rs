use k8s_openapi::ByteString;
use std::sync::Arc;

use super::*;
use crate::api::certmanager::{PrivateKey, Renewal};
use crate::certificates::fixtures::{self, at, input, key_pem, request_for};
use crate::certificates::keys::{annotation, data};
use crate::certificates::policy::evaluate;
use crate::pki::keys::KeySpec;

fn set_annotation(input: &mut Input, key: &str, value: &str) {
    let secret = Arc::make_mut(input.secret.as_mut().expect("secret"));
    let annotations = secret.metadata.annotations.get_or_insert_with(Default::default);
    annotations.insert(key.to_string(), value.to_string());
}

fn set_data(input: &mut Input, key: &str, value: &[u8]) {
    let secret = Arc::make_mut(input.secret.as_mut().expect("secret"));
    let data = secret.data.get_or_insert_with(Default::default);
    data.insert(key.to_string(), ByteString(value.to_vec()));
}

fn ask_rsa(input: &mut Input) {
    Arc::make_mut(&mut input.certificate).spec.private_key = Some(PrivateKey {
        algorithm: "RSA".to_string(),
        ..Default::default()
    });
}

fn other_request_key(input: &mut Input) {
    let other = fixtures::key(KeySpec::Ecdsa(256), true);
    input.current_request = Some(Arc::new(request_for(&input.certificate.spec, other)));
}

fn other_key(input: &mut Input) {
    set_data(
        input,
        data::TLS_KEY,
        &key_pem(fixtures::key(KeySpec::Ecdsa(256), true)),
    );
}

fn rename(input: &mut Input) {
    Arc::make_mut(&mut input.certificate).spec.common_name = "other.example.com".to_string();
}

type Change = fn(&mut Input);

/// Each row adds one more problem, found earlier in the chain than the ones before: so each
/// row shows which check wins when several fail. (name, change, trigger, readiness).
/// The check that fires and its reason.
type Found = Option<(&'static str, &'static str)>;

const ROWS: &[(&str, Change, Found, Found)] = &[
    ("all good", |_| {}, None, None),
    (
        "expired",
        |i| i.now = at("2026-04-02T00:00:00Z"),
        Some(("CurrentCertificateNearingExpiry", "Renewing")),
        Some(("CurrentCertificateHasExpired", "Expired")),
    ),
    (
        "renewal due, not expired",
        |i| i.now = at("2026-03-15T00:00:00Z"),
        Some(("CurrentCertificateNearingExpiry", "Renewing")),
        None,
    ),
    (
        "renewal Disabled and expired",
        |i| {
            i.now = at("2026-04-02T00:00:00Z");
            Arc::make_mut(&mut i.certificate).spec.renewal = Some(Box::new(Renewal {
                policy: "Disabled".to_string(),
                ..Default::default()
            }));
        },
        None,
        Some(("CurrentCertificateHasExpired", "Expired")),
    ),
    (
        "expired and the request changed",
        |i| {
            i.now = at("2026-04-02T00:00:00Z");
            rename(i);
        },
        Some(("CurrentCertificateRequestMismatchesSpec", "RequestChanged")),
        Some(("CurrentCertificateRequestMismatchesSpec", "RequestChanged")),
    ),
    (
        "request changed and made with another key",
        |i| {
            rename(i);
            other_request_key(i);
        },
        Some((
            "SecretPublicKeyDiffersFromCurrentCertificateRequest",
            "SecretMismatch",
        )),
        Some((
            "SecretPublicKeyDiffersFromCurrentCertificateRequest",
            "SecretMismatch",
        )),
    ),
    (
        "request by another key, RSA asked",
        |i| {
            other_request_key(i);
            ask_rsa(i);
        },
        Some(("SecretPrivateKeyMismatchesSpec", "SecretMismatch")),
        Some(("SecretPrivateKeyMismatchesSpec", "SecretMismatch")),
    ),
    (
        "RSA asked, another Certificate's Secret",
        |i| {
            ask_rsa(i);
            set_annotation(i, annotation::CERTIFICATE_NAME, "other");
        },
        Some(("SecretCertificateNameAnnotationsMismatch", "IncorrectCertificate")),
        Some(("SecretCertificateNameAnnotationsMismatch", "IncorrectCertificate")),
    ),
    (
        "another Certificate's Secret from another issuer",
        |i| {
            set_annotation(i, annotation::CERTIFICATE_NAME, "other");
            set_annotation(i, annotation::ISSUER_NAME, "old");
        },
        Some(("SecretIssuerAnnotationsMismatch", "IncorrectIssuer")),
        Some(("SecretIssuerAnnotationsMismatch", "IncorrectIssuer")),
    ),
    (
        "another issuer, a key not of the certificate",
        |i| {
            set_annotation(i, annotation::ISSUER_NAME, "old");
            other_key(i);
        },
        Some(("SecretPublicKeysDiffer", "InvalidKeyPair")),
        Some(("SecretPublicKeysDiffer", "InvalidKeyPair")),
    ),
    (
        "no certificate",
        |i| {
            other_key(i);
            set_data(i, data::TLS_CRT, b"");
        },
        Some(("SecretIsMissingData", "MissingData")),
        Some(("SecretIsMissingData", "MissingData")),
    ),
    (
        "no Secret",
        |i| i.secret = None,
        Some(("SecretDoesNotExist", "DoesNotExist")),
        Some(("SecretDoesNotExist", "DoesNotExist")),
    ),
];

fn first(chain: &Chain<Input>, input: &Input) -> Option<(&'static str, &'static str)> {
    evaluate(chain, input).map(|(name, violation)| (name, violation.reason))
}

#[test]
fn trigger_and_readiness_report_the_first_violation_in_order() {
    for (name, change, trigger, readiness) in ROWS {
        let mut input = input();
        change(&mut input);
        assert_eq!(first(TRIGGER, &input), *trigger, "trigger: {name}");
        assert_eq!(first(READINESS, &input), *readiness, "readiness: {name}");
    }
}

#[test]
fn the_temporary_certificate_chain_checks_only_the_secret() {
    let table: &[(&str, Change, Found)] = &[
        ("all good", |_| {}, None),
        (
            "expired and renamed: not its business",
            |i| {
                i.now = at("2027-01-01T00:00:00Z");
                rename(i);
            },
            None,
        ),
        (
            "a key not of the certificate",
            other_key,
            Some(("SecretPublicKeysDiffer", "InvalidKeyPair")),
        ),
        (
            "no key",
            |i| set_data(i, data::TLS_KEY, b""),
            Some(("SecretIsMissingData", "MissingData")),
        ),
        (
            "no Secret",
            |i| i.secret = None,
            Some(("SecretDoesNotExist", "DoesNotExist")),
        ),
    ];
    for (name, change, expected) in table {
        let mut input = input();
        change(&mut input);
        assert_eq!(first(TEMPORARY_CERTIFICATE, &input), *expected, "{name}");
    }
}

#[test]
fn the_chains_are_cert_manager_s_in_order() {
    let names = |chain: &Chain<Input>| chain.iter().map(|c| c.name).collect::<Vec<_>>();
    let common = [
        "SecretDoesNotExist",
        "SecretIsMissingData",
        "SecretPublicKeysDiffer",
        "SecretIssuerAnnotationsMismatch",
        "SecretCertificateNameAnnotationsMismatch",
        "SecretPrivateKeyMismatchesSpec",
        "SecretPublicKeyDiffersFromCurrentCertificateRequest",
        "CurrentCertificateRequestMismatchesSpec",
    ];
    assert_eq!(
        names(TRIGGER),
        [&common[..], &["CurrentCertificateNearingExpiry"]].concat()
    );
    assert_eq!(
        names(READINESS),
        [&common[..], &["CurrentCertificateHasExpired"]].concat()
    );
    assert_eq!(names(TEMPORARY_CERTIFICATE), common[..3].to_vec());
}
