use k8s_openapi::ByteString;
use std::sync::Arc;

use super::*;
use crate::api::certmanager::{CertificateStatus, PrivateKey, Renewal as RenewalSpec};
use crate::certificates::fixtures::{self, at, certificate_pem, input, key_pem, request_for};
use crate::pki::keys::KeySpec;

type Change = fn(&mut Input);
type Row = (&'static str, Change, Option<(&'static str, &'static str)>);

fn run_table(check: fn(&Input) -> Option<Violation>, table: &[Row]) {
    for (name, change, expected) in table {
        let mut input = input();
        change(&mut input);
        let expected = expected.map(|(reason, message)| Violation::new(reason, message));
        assert_eq!(check(&input), expected, "{name}");
    }
}

fn secret(input: &mut Input) -> &mut Secret {
    input.secret.as_mut().map(Arc::make_mut).expect("secret")
}

fn set_data(input: &mut Input, key: &str, value: &[u8]) {
    let data = secret(input).data.get_or_insert_with(Default::default);
    data.insert(key.to_string(), ByteString(value.to_vec()));
}

fn remove_data(input: &mut Input, key: &str) {
    secret(input).data.as_mut().expect("data").remove(key);
}

fn set_annotation(input: &mut Input, key: &str, value: &str) {
    let annotations = secret(input)
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    annotations.insert(key.to_string(), value.to_string());
}

fn other_key(input: &mut Input) {
    let other = key_pem(fixtures::key(KeySpec::Ecdsa(256), true));
    set_data(input, data::TLS_KEY, &other);
}

fn other_request(input: &mut Input) {
    let other = fixtures::key(KeySpec::Ecdsa(256), true);
    input.current_request = Some(Arc::new(request_for(&input.certificate.spec, other)));
}

/// A certificate whose notBefore is its notAfter (2026-04-01), at that time.
fn no_lifetime_at_expiry(input: &mut Input) {
    let cert = certificate_pem(
        &input.certificate.spec,
        fixtures::ec(),
        (2026, 4, 1),
        (2026, 4, 1),
    );
    set_data(input, data::TLS_CRT, &cert);
    input.now = at("2026-04-01T00:00:00Z");
}

fn set_key_spec(input: &mut Input, algorithm: &str, size: i64) {
    Arc::make_mut(&mut input.certificate).spec.private_key = Some(PrivateKey {
        algorithm: algorithm.to_string(),
        size,
        ..Default::default()
    });
}

fn renewal_scheduled(input: &mut Input, text: &str) {
    Arc::make_mut(&mut input.certificate).status = Some(CertificateStatus {
        renewal_time: Some(Time(at(text))),
        ..Default::default()
    });
}

fn set_policy(input: &mut Input, policy: &str) {
    Arc::make_mut(&mut input.certificate).spec.renewal = Some(Box::new(RenewalSpec {
        policy: policy.to_string(),
        ..Default::default()
    }));
}

fn set_window(input: &mut Input, cron: &str) {
    Arc::make_mut(&mut input.certificate).spec.renewal = Some(Box::new(RenewalSpec {
        windows: vec![crate::api::certmanager::RenewalWindow {
            cron: cron.to_string(),
            window_duration: "2h".to_string(),
            ..Default::default()
        }],
        ..Default::default()
    }));
}

const DSA_CSR: &[u8] = include_bytes!("testdata/dsa.csr");
const DSA_CERT: &[u8] = include_bytes!("testdata/dsa.crt");

const NO_PEM_KEY: &str = "Issuing certificate as Secret contains invalid private key data: error decoding private key PEM block: no PEM data was found in given input";
const NO_CERT: &str = "Issuing certificate as Secret contains an invalid certificate: error decoding certificate PEM block: no valid certificates found";

/// Puts `csr` in the current request.
fn request_csr(i: &mut Input, csr: &[u8]) {
    let request = i.current_request.as_mut().map(Arc::make_mut).expect("request");
    request.spec.request = ByteString(csr.to_vec());
}

#[test]
fn secret_does_not_exist_table() {
    run_table(
        secret_does_not_exist,
        &[
            ("present", |_| {}, None),
            (
                "absent",
                |i| i.secret = None,
                Some((
                    reason::DOES_NOT_EXIST,
                    "Issuing certificate as Secret does not exist",
                )),
            ),
        ],
    );
}

#[test]
fn secret_is_missing_data_table() {
    run_table(
        secret_is_missing_data,
        &[
            ("complete", |_| {}, None),
            ("no secret: the first check's", |i| i.secret = None, None),
            (
                "no data",
                |i| secret(i).data = None,
                Some((
                    reason::MISSING_DATA,
                    "Issuing certificate as Secret does not contain any data",
                )),
            ),
            (
                "empty data",
                |i| secret(i).data = Some(std::collections::BTreeMap::new()),
                Some((
                    reason::MISSING_DATA,
                    "Issuing certificate as Secret does not contain a private key",
                )),
            ),
            (
                "no key",
                |i| remove_data(i, data::TLS_KEY),
                Some((
                    reason::MISSING_DATA,
                    "Issuing certificate as Secret does not contain a private key",
                )),
            ),
            (
                "empty key",
                |i| set_data(i, data::TLS_KEY, b""),
                Some((
                    reason::MISSING_DATA,
                    "Issuing certificate as Secret does not contain a private key",
                )),
            ),
            (
                "no certificate",
                |i| remove_data(i, data::TLS_CRT),
                Some((
                    reason::MISSING_DATA,
                    "Issuing certificate as Secret does not contain a certificate",
                )),
            ),
            (
                "empty certificate",
                |i| set_data(i, data::TLS_CRT, b""),
                Some((
                    reason::MISSING_DATA,
                    "Issuing certificate as Secret does not contain a certificate",
                )),
            ),
        ],
    );
}

#[test]
fn secret_public_keys_differ_table() {
    run_table(
        secret_public_keys_differ,
        &[
            ("matching pair", |_| {}, None),
            ("no secret", |i| i.secret = None, None),
            (
                "bad key",
                |i| set_data(i, data::TLS_KEY, b"junk"),
                Some((reason::INVALID_KEY_PAIR, NO_PEM_KEY)),
            ),
            (
                "bad certificate",
                |i| set_data(i, data::TLS_CRT, b"junk"),
                Some((reason::INVALID_CERTIFICATE, NO_CERT)),
            ),
            (
                "both bad: the key is read first",
                |i| {
                    set_data(i, data::TLS_KEY, b"junk");
                    set_data(i, data::TLS_CRT, b"junk");
                },
                Some((reason::INVALID_KEY_PAIR, NO_PEM_KEY)),
            ),
            (
                "a DSA certificate",
                |i| set_data(i, data::TLS_CRT, DSA_CERT),
                Some((
                    reason::INVALID_KEY_PAIR,
                    "Secret contains an invalid key-pair: unrecognised public key type: *dsa.PublicKey",
                )),
            ),
            (
                "another key",
                other_key,
                Some((
                    reason::INVALID_KEY_PAIR,
                    "Issuing certificate as Secret contains a private key that does not match the certificate",
                )),
            ),
        ],
    );
}

#[test]
fn secret_issuer_annotations_mismatch_table() {
    run_table(
        secret_issuer_annotations_mismatch,
        &[
            ("same issuer", |_| {}, None),
            ("no secret", |i| i.secret = None, None),
            (
                "other name",
                |i| set_annotation(i, annotation::ISSUER_NAME, "old"),
                Some((
                    reason::INCORRECT_ISSUER,
                    "Issuing certificate as Secret was previously issued by \"Issuer.cert-manager.io/old\"",
                )),
            ),
            (
                "other kind",
                |i| set_annotation(i, annotation::ISSUER_KIND, "OldKind"),
                Some((
                    reason::INCORRECT_ISSUER,
                    "Issuing certificate as Secret was previously issued by \"OldKind.cert-manager.io/ca\"",
                )),
            ),
            (
                "other group",
                |i| {
                    set_annotation(i, annotation::ISSUER_KIND, "IssuerKind");
                    set_annotation(i, annotation::ISSUER_GROUP, "new.example.com");
                },
                Some((
                    reason::INCORRECT_ISSUER,
                    "Issuing certificate as Secret was previously issued by \"IssuerKind.new.example.com/ca\"",
                )),
            ),
            (
                "no annotations, a ClusterIssuer asked",
                |i| {
                    secret(i).metadata.annotations = None;
                    Arc::make_mut(&mut i.certificate).spec.issuer_ref.kind = "ClusterIssuer".to_string();
                },
                Some((
                    reason::INCORRECT_ISSUER,
                    "Issuing certificate as Secret was previously issued by \"Issuer.cert-manager.io/\"",
                )),
            ),
            (
                "default kind spelled out",
                |i| Arc::make_mut(&mut i.certificate).spec.issuer_ref.kind = "Issuer".to_string(),
                None,
            ),
        ],
    );
}

#[test]
fn secret_certificate_name_annotations_mismatch_table() {
    run_table(
        secret_certificate_name_annotations_mismatch,
        &[
            ("same name", |_| {}, None),
            ("no annotation", |i| secret(i).metadata.annotations = None, None),
            (
                "another certificate",
                |i| set_annotation(i, annotation::CERTIFICATE_NAME, "other"),
                Some((
                    reason::INCORRECT_CERTIFICATE,
                    "Secret was issued for \"other\". If this message is not transient, you might have two conflicting Certificates pointing to the same secret.",
                )),
            ),
        ],
    );
}

#[test]
fn secret_private_key_mismatches_spec_table() {
    run_table(
        secret_private_key_mismatches_spec,
        &[
            ("ECDSA 256 asked and held", |_| {}, None),
            ("no secret", |i| i.secret = None, None),
            (
                "bad key",
                |i| set_data(i, data::TLS_KEY, b"junk"),
                Some((reason::INVALID_KEY_PAIR, NO_PEM_KEY)),
            ),
            (
                "RSA asked",
                |i| set_key_spec(i, "RSA", 0),
                Some((
                    reason::SECRET_MISMATCH,
                    "Existing private key is not up to date for spec: [spec.privateKey.algorithm]",
                )),
            ),
            (
                "ECDSA 384 asked",
                |i| set_key_spec(i, "ECDSA", 384),
                Some((
                    reason::SECRET_MISMATCH,
                    "Existing private key is not up to date for spec: [spec.privateKey.size]",
                )),
            ),
            (
                "only the encoding changed",
                |i| set_key_spec(i, "ECDSA", 256),
                None,
            ),
        ],
    );
}

#[test]
fn secret_public_key_differs_from_current_certificate_request_table() {
    run_table(
        secret_public_key_differs_from_current_certificate_request,
        &[
            ("same key", |_| {}, None),
            ("no current request", |i| i.current_request = None, None),
            (
                "request made with another key",
                other_request,
                Some((
                    reason::SECRET_MISMATCH,
                    "Secret contains a private key that does not match the current CertificateRequest",
                )),
            ),
            (
                "bad key",
                |i| set_data(i, data::TLS_KEY, b"junk"),
                Some((reason::INVALID_KEY_PAIR, NO_PEM_KEY)),
            ),
            (
                "a DSA request",
                |i| request_csr(i, DSA_CSR),
                Some((
                    reason::INVALID_CERTIFICATE_REQUEST,
                    "CertificateRequest's public key is invalid: unrecognised public key type: *dsa.PublicKey",
                )),
            ),
            (
                "unreadable request",
                |i| request_csr(i, b"junk"),
                Some((
                    reason::INVALID_CERTIFICATE_REQUEST,
                    "Failed to decode current CertificateRequest: error decoding certificate request PEM block: no PEM data was found in given input",
                )),
            ),
        ],
    );
}

#[test]
fn current_certificate_request_mismatches_spec_table() {
    run_table(
        current_certificate_request_mismatches_spec,
        &[
            ("up to date", |_| {}, None),
            (
                "common name changed",
                |i| Arc::make_mut(&mut i.certificate).spec.common_name = "other.example.com".to_string(),
                Some((
                    reason::REQUEST_CHANGED,
                    "Fields on existing CertificateRequest resource not up to date: [spec.commonName]",
                )),
            ),
            (
                "two fields changed",
                |i| {
                    Arc::make_mut(&mut i.certificate).spec.common_name = "other.example.com".to_string();
                    Arc::make_mut(&mut i.certificate).spec.is_ca = true;
                },
                Some((
                    reason::REQUEST_CHANGED,
                    "Fields on existing CertificateRequest resource not up to date: [spec.commonName spec.isCA]",
                )),
            ),
            (
                "unreadable request: not a reason to re-issue",
                |i| request_csr(i, b"junk"),
                None,
            ),
            ("no request, names unchanged", |i| i.current_request = None, None),
            (
                "no request, a DNS name added",
                |i| {
                    i.current_request = None;
                    Arc::make_mut(&mut i.certificate)
                        .spec
                        .dns_names
                        .push("www.example.com".to_string());
                },
                Some((
                    reason::SECRET_MISMATCH,
                    "Issuing certificate as Existing issued Secret is not up to date for spec: [spec.dnsNames]",
                )),
            ),
            (
                "no request, bad certificate",
                |i| {
                    i.current_request = None;
                    set_data(i, data::TLS_CRT, b"junk");
                },
                Some((reason::INVALID_CERTIFICATE, NO_CERT)),
            ),
            (
                "no request, only the duration changed",
                |i| {
                    i.current_request = None;
                    Arc::make_mut(&mut i.certificate).spec.duration = Some("1h".to_string());
                },
                None,
            ),
        ],
    );
}

#[test]
fn current_certificate_nearing_expiry_table() {
    run_table(
        current_certificate_nearing_expiry,
        &[
            ("before the renewal time", |_| {}, None),
            ("a second before", |i| i.now = at("2026-03-01T23:59:59Z"), None),
            (
                "at the renewal time",
                |i| {
                    i.now = at("2026-03-02T00:00:00Z");
                    renewal_scheduled(i, "2026-03-02T00:00:00Z");
                },
                Some((
                    reason::RENEWING,
                    "Renewing certificate as renewal was scheduled at 2026-03-02 00:00:00 +0000 UTC",
                )),
            ),
            (
                "no renewal time in status yet",
                |i| i.now = at("2026-03-03T00:00:00Z"),
                Some((
                    reason::RENEWING,
                    "Renewing certificate as renewal was scheduled at <nil>",
                )),
            ),
            (
                "renewBefore 240h: not yet",
                |i| {
                    i.now = at("2026-03-10T00:00:00Z");
                    Arc::make_mut(&mut i.certificate).spec.renew_before = Some("240h".to_string());
                },
                None,
            ),
            (
                "renewBeforePercentage 50: due",
                |i| {
                    i.now = at("2026-02-15T12:00:00Z");
                    Arc::make_mut(&mut i.certificate).spec.renew_before_percentage = Some(50);
                    renewal_scheduled(i, "2026-02-15T12:00:00Z");
                },
                Some((
                    reason::RENEWING,
                    "Renewing certificate as renewal was scheduled at 2026-02-15 12:00:00 +0000 UTC",
                )),
            ),
            (
                "policy Disabled, even after expiry",
                |i| {
                    i.now = at("2027-01-01T00:00:00Z");
                    set_policy(i, "Disabled");
                },
                None,
            ),
            (
                "policy RenewBefore",
                |i| {
                    i.now = at("2026-03-02T00:00:00Z");
                    set_policy(i, "RenewBefore");
                },
                Some((
                    reason::RENEWING,
                    "Renewing certificate as renewal was scheduled at <nil>",
                )),
            ),
            (
                "no lifetime: due at notAfter",
                no_lifetime_at_expiry,
                Some((
                    reason::RENEWING,
                    "Renewing certificate as renewal was scheduled at <nil>",
                )),
            ),
            (
                "no lifetime: not before notAfter",
                |i| {
                    no_lifetime_at_expiry(i);
                    i.now = at("2026-03-31T23:59:59Z");
                },
                None,
            ),
            (
                "unknown policy: not before the plain renewal time",
                |i| set_policy(i, "Sometimes"),
                None,
            ),
            (
                "unknown policy: reported at the plain renewal time",
                |i| {
                    set_policy(i, "Sometimes");
                    i.now = at("2026-03-02T00:00:00Z");
                },
                Some((reason::WINDOW_ERROR, "unsupported renewal policy: Sometimes")),
            ),
            (
                "a window moves the renewal later",
                |i| {
                    set_window(i, "0 10 * * *");
                    i.now = at("2026-03-02T09:59:59Z");
                },
                None,
            ),
            (
                "renewing inside the window",
                |i| {
                    set_window(i, "0 10 * * *");
                    i.now = at("2026-03-02T10:00:00Z");
                },
                Some((
                    reason::RENEWING,
                    "Renewing certificate as renewal was scheduled at <nil>",
                )),
            ),
            (
                "no window fits: renewing at the desired time with the window error",
                |i| {
                    set_window(i, "0 10 1 6 *");
                    i.now = at("2026-03-02T00:00:00Z");
                },
                Some((
                    reason::WINDOW_ERROR,
                    "cannot find a time with the given windows between 2026-01-01 00:00:00 +0000 UTC and \
                     2026-04-01 00:00:00 +0000 UTC for: 2026-03-02 00:00:00 +0000 UTC",
                )),
            ),
            (
                "no window fits: nothing before the desired time",
                |i| {
                    set_window(i, "0 10 1 6 *");
                    i.now = at("2026-03-01T23:59:59Z");
                },
                None,
            ),
            (
                "bad certificate",
                |i| set_data(i, data::TLS_CRT, b"junk"),
                Some((reason::INVALID_CERTIFICATE, NO_CERT)),
            ),
            ("no secret", |i| i.secret = None, None),
        ],
    );
}

#[test]
fn current_certificate_has_expired_table() {
    run_table(
        current_certificate_has_expired,
        &[
            ("valid", |_| {}, None),
            (
                "past the renewal time",
                |i| i.now = at("2026-03-30T00:00:00Z"),
                None,
            ),
            ("at notAfter", |i| i.now = at("2026-04-01T00:00:00Z"), None),
            (
                "a second after notAfter",
                |i| i.now = at("2026-04-01T00:00:01Z"),
                Some((
                    reason::EXPIRED,
                    "Certificate expired on Wed, 01 Apr 2026 00:00:00 UTC",
                )),
            ),
            (
                "policy Disabled still expires",
                |i| {
                    i.now = at("2027-01-01T00:00:00Z");
                    set_policy(i, "Disabled");
                },
                Some((
                    reason::EXPIRED,
                    "Certificate expired on Wed, 01 Apr 2026 00:00:00 UTC",
                )),
            ),
            (
                "bad certificate",
                |i| set_data(i, data::TLS_CRT, b"junk"),
                Some((reason::INVALID_CERTIFICATE, NO_CERT)),
            ),
        ],
    );
}

#[test]
fn times_print_as_go_prints_them() {
    let table = [
        (Some("2026-03-02T00:00:00Z"), "2026-03-02 00:00:00 +0000 UTC"),
        (Some("2026-03-02T00:00:00.5Z"), "2026-03-02 00:00:00.5 +0000 UTC"),
        (
            Some("2026-03-02T00:00:00.000000123Z"),
            "2026-03-02 00:00:00.000000123 +0000 UTC",
        ),
        (None, "<nil>"),
    ];
    for (time, expected) in table {
        assert_eq!(go_time(time.map(|t| Time(at(t))).as_ref()), expected);
    }
    assert_eq!(
        rfc1123(at("2030-01-06T07:08:09Z")),
        "Sun, 06 Jan 2030 07:08:09 UTC"
    );
    assert_eq!(go_list(Vec::<String>::new()), "[]");
    assert_eq!(go_list(&["a".to_string(), "b".to_string()]), "[a b]");
}

#[test]
fn a_key_matching_the_certificate_but_not_the_spec_is_caught_after_the_pair_check() {
    // An RSA pair in the Secret while ECDSA is asked: the pair is fine, the spec check fires.
    let mut input = input();
    let rsa = fixtures::key(KeySpec::Rsa(2048), false);
    let cert = certificate_pem(&input.certificate.spec, rsa, (2026, 1, 1), (2026, 4, 1));
    set_data(&mut input, data::TLS_KEY, &key_pem(rsa));
    set_data(&mut input, data::TLS_CRT, &cert);
    assert_eq!(secret_public_keys_differ(&input), None);
    assert_eq!(
        secret_private_key_mismatches_spec(&input),
        Some(Violation::new(
            reason::SECRET_MISMATCH,
            "Existing private key is not up to date for spec: [spec.privateKey.algorithm]"
        ))
    );
}
