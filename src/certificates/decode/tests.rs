use x509_parser::certification_request::X509CertificationRequest;

use super::*;
use crate::certificates::fixtures::{self, certificate_pem, csr_pem, key_pem};

const GARBAGE_CERT: &[u8] = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";

#[test]
fn private_key_errors_read_as_cert_manager_s() {
    let cert = certificate_pem(&fixtures::spec(), fixtures::ec(), (2026, 1, 1), (2026, 4, 1));
    let table: &[(&[u8], &str)] = &[
        (
            b"",
            "error decoding private key PEM block: no PEM data was found in given input",
        ),
        (
            b"junk",
            "error decoding private key PEM block: no PEM data was found in given input",
        ),
        (&cert, "unknown private key type: CERTIFICATE"),
        (
            &[b'a'; 13_001],
            "error decoding private key PEM block: provided PEM data was larger than the maximum 13000B",
        ),
    ];
    let broken = |tag: &str| format!("-----BEGIN {tag}-----\nAAAA\n-----END {tag}-----\n").into_bytes();
    let (ec, rsa, pkcs8) = (
        broken("EC PRIVATE KEY"),
        broken("RSA PRIVATE KEY"),
        broken("PRIVATE KEY"),
    );
    let table = [
        table,
        &[
            (
                &ec[..],
                "error parsing ecdsa private key: the ECDSA private key cannot be read",
            ),
            (
                &rsa[..],
                "error parsing rsa private key: the RSA private key cannot be read",
            ),
            (
                &pkcs8[..],
                "error parsing pkcs#8 private key: the PKCS#8 private key cannot be read",
            ),
        ],
    ]
    .concat();
    for (pem, message) in table {
        let err = private_key(pem).expect_err("not a key");
        assert_eq!(err.to_string(), message);
    }
    let key = fixtures::ec();
    assert_eq!(private_key(&key_pem(key)).as_ref(), Ok(key));
}

#[test]
fn certificate_errors_read_as_cert_manager_s() {
    let key = key_pem(fixtures::ec());
    let cert = certificate_pem(&fixtures::spec(), fixtures::ec(), (2026, 1, 1), (2026, 4, 1));
    let table: &[(Vec<u8>, &str)] = &[
        (
            b"".to_vec(),
            "error decoding certificate PEM block: no valid certificates found",
        ),
        (
            b"junk".to_vec(),
            "error decoding certificate PEM block: no valid certificates found",
        ),
        (
            vec![b'a'; 330_001],
            "provided PEM data was larger than the maximum 330000B",
        ),
    ];
    for (pem, message) in table {
        assert_eq!(
            certificates(pem).map_err(|e| e.to_string()),
            Err((*message).to_string())
        );
    }
    // Every block is read as a certificate, a key too (Go's decodeMultipleCerts).
    for bad in [GARBAGE_CERT.to_vec(), [cert.clone(), key].concat()] {
        let err = certificates(&bad).expect_err("bad block").to_string();
        assert!(err.starts_with("error parsing X.509 certificate: "), "{err}");
    }
    let two = [cert.clone(), cert.clone()].concat();
    assert_eq!(certificates(&two).map(|d| d.len()), Ok(2));
    assert_eq!(leaf_certificate(&cert).map(|d| d.is_empty()), Ok(false));
}

/// The leaf is the bundle's first certificate, on the first read and on a remembered one; a
/// bundle with a block that is no certificate fails every time (errors are not remembered).
#[test]
fn leaf_certificate_is_the_first_of_a_sound_bundle() {
    let leaf = certificate_pem(&fixtures::spec(), fixtures::ec(), (2026, 1, 1), (2026, 4, 1));
    let other = certificate_pem(&fixtures::spec(), fixtures::ec(), (2025, 1, 1), (2025, 4, 1));
    let want = certificates(&leaf).unwrap().remove(0);
    let bundle = [leaf.clone(), other].concat();
    for _ in 0..2 {
        assert_eq!(leaf_certificate(&bundle), Ok(want.clone()));
    }
    let bad = [leaf, key_pem(fixtures::ec())].concat();
    for _ in 0..2 {
        let err = leaf_certificate(&bad)
            .expect_err("a key in the bundle")
            .to_string();
        assert!(err.starts_with("error parsing X.509 certificate: "), "{err}");
    }
}

#[test]
fn public_keys_equal_compares_algorithm_and_key() {
    use crate::pki::keys::KeySpec;
    let spec = fixtures::spec();
    let ec = fixtures::ec();
    let ec2 = fixtures::key(KeySpec::Ecdsa(256), true);
    let rsa = fixtures::key(KeySpec::Rsa(2048), false);
    let ed = fixtures::key(KeySpec::Ed25519, false);
    let table: &[(&Key, &Key, bool)] = &[
        (ec, ec, true),
        (ec, ec2, false),
        (rsa, rsa, true),
        (rsa, ec, false),
        (ed, ed, true),
        (ed, rsa, false),
    ];
    for (signer, held, expected) in table {
        let der = csr(&csr_pem(&spec, signer)).expect("csr");
        let (_, parsed) = X509CertificationRequest::from_der(&der).expect("parse");
        let public = &parsed.certification_request_info.subject_pki;
        assert_eq!(
            public_keys_equal(public, held),
            Ok(*expected),
            "{:?} vs {:?}",
            signer.spec,
            held.spec
        );
    }
}

/// A key's facts are what rcgen derives from its PKCS#8 (the key parsed and checked again,
/// as this module once did): the public half the key carries is the same, for every kind.
#[test]
fn key_facts_are_what_parsing_the_key_again_derives() {
    use crate::pki::keys::Encoding;
    for spec in [
        KeySpec::Rsa(2048),
        KeySpec::Ecdsa(256),
        KeySpec::Ecdsa(384),
        KeySpec::Ecdsa(521),
        KeySpec::Ed25519,
    ] {
        let key = Key::generate(spec).unwrap();
        let derived = rcgen::KeyPair::try_from(key.pkcs8_der())
            .unwrap()
            .public_key_raw()
            .to_vec();
        let want = KeyFacts {
            spec,
            public: Ok(derived),
        };
        assert_eq!(KeyFacts::of(&key), want, "{spec:?}");
        let pem = key.to_pem(Encoding::Pkcs8).unwrap();
        assert_eq!(private_key_facts(pem.as_bytes()), Ok(want), "{spec:?}");
    }
}
