//! Key specs, generation and every encoding, checked here and by openssl.

use std::process::Command;

use super::*;

fn private_key(algorithm: &str, size: i64, encoding: &str) -> PrivateKey {
    PrivateKey {
        algorithm: algorithm.into(),
        size,
        encoding: encoding.into(),
        ..PrivateKey::default()
    }
}

#[rustfmt::skip]
#[test]
fn spec_table() {
    let cases: Vec<(&str, i64, Result<KeySpec, &str>)> = vec![
        ("", 0, Ok(KeySpec::Rsa(2048))),
        ("RSA", 0, Ok(KeySpec::Rsa(2048))),
        ("RSA", 3072, Ok(KeySpec::Rsa(3072))),
        ("RSA", 2500, Ok(KeySpec::Rsa(2500))),
        ("RSA", 8192, Ok(KeySpec::Rsa(8192))),
        ("RSA", 1024, Err("RSA key size must be between 2048 and 8192, not 1024")),
        ("RSA", 16384, Err("RSA key size must be between 2048 and 8192, not 16384")),
        ("ECDSA", 0, Ok(KeySpec::Ecdsa(256))),
        ("ECDSA", 384, Ok(KeySpec::Ecdsa(384))),
        ("ECDSA", 521, Ok(KeySpec::Ecdsa(521))),
        ("ECDSA", 512, Err("ECDSA key size must be 256, 384 or 521, not 512")),
        ("Ed25519", 0, Ok(KeySpec::Ed25519)),
        ("Ed25519", 4096, Ok(KeySpec::Ed25519)),
        ("rsa", 0, Err("unsupported private key algorithm \"rsa\": use RSA, ECDSA or Ed25519")),
    ];
    for (algorithm, size, want) in cases {
        let got = KeySpec::of(Some(&private_key(algorithm, size, ""))).map_err(|e| e.to_string());
        assert_eq!(got, want.map_err(str::to_string), "{algorithm:?} {size}");
    }
    assert_eq!(KeySpec::of(None), Ok(KeySpec::Rsa(2048)), "no privateKey at all");
}

#[test]
fn encoding_table() {
    let cases = [
        ("", Ok(Encoding::Pkcs1)),
        ("PKCS1", Ok(Encoding::Pkcs1)),
        ("PKCS8", Ok(Encoding::Pkcs8)),
        ("pkcs8", Err(KeyError::UnknownEncoding("pkcs8".into()))),
    ];
    for (encoding, want) in cases {
        assert_eq!(
            Encoding::of(Some(&private_key("", 0, encoding))),
            want,
            "{encoding:?}"
        );
    }
}

/// What `openssl pkey <args> -in <file>` writes for a PEM private key.
fn openssl_pkey(pem: &str, args: &[&str]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("key.pem");
    std::fs::write(&path, pem).unwrap();
    let out = Command::new("openssl")
        .arg("pkey")
        .args(args)
        .arg("-in")
        .arg(&path)
        .output()
        .expect("openssl");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// What openssl says of a PEM private key: its type line (`Private-Key: (N bit...)` or the
/// Ed25519 one).
fn openssl_describes(pem: &str) -> String {
    let text = String::from_utf8(openssl_pkey(pem, &["-noout", "-text"])).unwrap();
    text.lines().next().unwrap_or_default().trim().to_string()
}

/// The DER `SubjectPublicKeyInfo` openssl derives from a PEM private key.
fn openssl_public_der(pem: &str) -> Vec<u8> {
    openssl_pkey(pem, &["-pubout", "-outform", "DER"])
}

#[test]
fn every_key_in_every_encoding_round_trips_and_openssl_reads_it() {
    use Encoding::{Pkcs1, Pkcs8};
    // (spec, encoding, PEM tag, openssl's first line)
    let cases = [
        (
            KeySpec::Rsa(2048),
            Pkcs1,
            "RSA PRIVATE KEY",
            "Private-Key: (2048 bit, 2 primes)",
        ),
        (
            KeySpec::Rsa(2048),
            Pkcs8,
            "PRIVATE KEY",
            "Private-Key: (2048 bit, 2 primes)",
        ),
        (
            KeySpec::Rsa(3072),
            Pkcs1,
            "RSA PRIVATE KEY",
            "Private-Key: (3072 bit, 2 primes)",
        ),
        (
            KeySpec::Rsa(4096),
            Pkcs8,
            "PRIVATE KEY",
            "Private-Key: (4096 bit, 2 primes)",
        ),
        (
            KeySpec::Rsa(8192),
            Pkcs1,
            "RSA PRIVATE KEY",
            "Private-Key: (8192 bit, 2 primes)",
        ),
        (
            KeySpec::Ecdsa(256),
            Pkcs1,
            "EC PRIVATE KEY",
            "Private-Key: (256 bit)",
        ),
        (
            KeySpec::Ecdsa(256),
            Pkcs8,
            "PRIVATE KEY",
            "Private-Key: (256 bit)",
        ),
        (
            KeySpec::Ecdsa(384),
            Pkcs1,
            "EC PRIVATE KEY",
            "Private-Key: (384 bit)",
        ),
        (
            KeySpec::Ecdsa(384),
            Pkcs8,
            "PRIVATE KEY",
            "Private-Key: (384 bit)",
        ),
        (
            KeySpec::Ecdsa(521),
            Pkcs1,
            "EC PRIVATE KEY",
            "Private-Key: (521 bit)",
        ),
        (
            KeySpec::Ecdsa(521),
            Pkcs8,
            "PRIVATE KEY",
            "Private-Key: (521 bit)",
        ),
        (KeySpec::Ed25519, Pkcs1, "PRIVATE KEY", "ED25519 Private-Key:"),
        (KeySpec::Ed25519, Pkcs8, "PRIVATE KEY", "ED25519 Private-Key:"),
    ];
    for (spec, encoding, tag, described) in cases {
        let key = Key::generate(spec).unwrap();
        let pem = key.to_pem(encoding).unwrap();
        let row = format!("{spec:?} {encoding:?}");
        assert_eq!(pem::parse(&pem).unwrap().tag(), tag, "{row}");
        assert_eq!(openssl_describes(&pem), described, "{row}");
        // Parsed, not through the memo `to_pem` filled: that the two are equal, byte for byte
        // (PKCS#8 and public half), is what lets `to_pem` remember its PEM as this key.
        let back = Key::parse_pem(pem.as_bytes()).unwrap();
        assert_eq!(back, key, "{row}: decodes to the same key");
        assert!(back.matches(spec), "{row}");
        assert_eq!(
            key.public_key_der(),
            openssl_public_der(&pem),
            "{row}: public half"
        );
        assert!(
            PARSED.holds(pem.as_bytes()),
            "{row}: what to_pem rendered is remembered"
        );
        assert_eq!(Key::from_pem(pem.as_bytes()).unwrap(), key, "{row}");
    }
}

#[test]
fn keys_openssl_writes_are_read() {
    // (openssl genpkey arguments, output format flag, want)
    let cases: [(&[&str], &[&str], KeySpec); 4] = [
        (
            &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:3072"],
            &[],
            KeySpec::Rsa(3072),
        ),
        (
            &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"],
            &[],
            KeySpec::Ecdsa(384),
        ),
        (&["-algorithm", "ED25519"], &[], KeySpec::Ed25519),
        (&["-algorithm", "RSA"], &["-traditional"], KeySpec::Rsa(2048)),
    ];
    for (algorithm, format, want) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key.pem");
        let status = Command::new("openssl")
            .arg("genpkey")
            .args(algorithm)
            .arg("-out")
            .arg(&path)
            .stderr(std::process::Stdio::null())
            .status()
            .expect("openssl");
        assert!(status.success());
        let pem = if format.is_empty() {
            std::fs::read(&path).unwrap()
        } else {
            let out = Command::new("openssl")
                .args(["pkey", "-in"])
                .arg(&path)
                .args(format)
                .output()
                .expect("openssl");
            out.stdout
        };
        let key = Key::from_pem(&pem);
        assert_eq!(key.as_ref().map(|k| k.spec), Ok(want), "{algorithm:?} {format:?}");
        let public = openssl_public_der(&String::from_utf8_lossy(&pem));
        assert_eq!(
            key.unwrap().public_key_der(),
            public,
            "{algorithm:?} {format:?}: public half"
        );
    }
}

#[test]
fn what_is_not_a_key_says_so() {
    let cases: [(&[u8], KeyError); 3] = [
        (b"not pem", KeyError::NotPem),
        (
            b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
            KeyError::NotAKey("CERTIFICATE".into()),
        ),
        (
            b"-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n",
            KeyError::Unreadable("RSA"),
        ),
    ];
    for (pem, want) in cases {
        assert_eq!(Key::from_pem(pem), Err(want));
    }
    assert_eq!(
        Key::generate(KeySpec::Rsa(2500)),
        Err(KeyError::CannotGenerate(2500))
    );
}

#[test]
fn a_key_matches_only_its_own_spec() {
    let key = Key::generate(KeySpec::Ecdsa(256)).unwrap();
    let cases = [
        (KeySpec::Ecdsa(256), true),
        (KeySpec::Ecdsa(384), false),
        (KeySpec::Rsa(2048), false),
        (KeySpec::Ed25519, false),
    ];
    for (spec, want) in cases {
        assert_eq!(key.matches(spec), want, "{spec:?}");
    }
    assert!(
        !format!("{key:?}").contains("pkcs8"),
        "Debug never shows key material"
    );
}

#[rustfmt::skip]
#[test]
fn signature_algorithm_table() {
    use SignatureAlgorithm::*;
    let mismatch = |name: &str, key: &'static str| Err(KeyError::SignatureAlgorithmMismatch(name.into(), key));
    // (row, signatureAlgorithm, key, want)
    let cases = [
        ("RSA 2048 default", "", KeySpec::Rsa(2048), Ok(Sha256WithRsa)),
        ("RSA 3071 default", "", KeySpec::Rsa(3071), Ok(Sha256WithRsa)),
        ("RSA 3072 default", "", KeySpec::Rsa(3072), Ok(Sha384WithRsa)),
        ("RSA 4096 default", "", KeySpec::Rsa(4096), Ok(Sha512WithRsa)),
        ("RSA 8192 default", "", KeySpec::Rsa(8192), Ok(Sha512WithRsa)),
        ("P-256 default", "", KeySpec::Ecdsa(256), Ok(EcdsaWithSha256)),
        ("P-384 default", "", KeySpec::Ecdsa(384), Ok(EcdsaWithSha384)),
        ("P-521 default", "", KeySpec::Ecdsa(521), Ok(EcdsaWithSha512)),
        ("Ed25519 default", "", KeySpec::Ed25519, Ok(PureEd25519)),
        ("asked for, fits", "SHA512WithRSA", KeySpec::Rsa(2048), Ok(Sha512WithRsa)),
        ("asked for, fits ECDSA", "ECDSAWithSHA384", KeySpec::Ecdsa(256), Ok(EcdsaWithSha384)),
        ("RSA algorithm for an ECDSA key", "SHA256WithRSA", KeySpec::Ecdsa(256), mismatch("SHA256WithRSA", "ECDSA")),
        ("Ed25519 algorithm for an RSA key", "PureEd25519", KeySpec::Rsa(2048), mismatch("PureEd25519", "RSA")),
        ("unknown", "SHA1WithRSA", KeySpec::Rsa(2048), Err(KeyError::UnknownSignatureAlgorithm("SHA1WithRSA".into()))),
    ];
    for (row, name, spec, want) in cases {
        assert_eq!(SignatureAlgorithm::of(name, spec), want, "{row}");
    }
}

#[test]
fn sign_verifies_with_the_public_key_or_refuses_the_pair() {
    use SignatureAlgorithm as A;
    use aws_lc_rs::signature::{self as sig, UnparsedPublicKey, VerificationAlgorithm};
    use x509_parser::prelude::{FromDer, SubjectPublicKeyInfo};
    let rsa = Key::generate(KeySpec::Rsa(2048)).unwrap();
    let p256 = Key::generate(KeySpec::Ecdsa(256)).unwrap();
    let p384 = Key::generate(KeySpec::Ecdsa(384)).unwrap();
    let p521 = Key::generate(KeySpec::Ecdsa(521)).unwrap();
    let ed = Key::generate(KeySpec::Ed25519).unwrap();
    let signs: Vec<(&Key, A, &'static dyn VerificationAlgorithm)> = vec![
        (&p256, A::EcdsaWithSha384, &sig::ECDSA_P256_SHA384_ASN1),
        (&p256, A::EcdsaWithSha512, &sig::ECDSA_P256_SHA512_ASN1),
        (&p384, A::EcdsaWithSha256, &sig::ECDSA_P384_SHA256_ASN1),
        (&p384, A::EcdsaWithSha384, &sig::ECDSA_P384_SHA384_ASN1),
        (&p384, A::EcdsaWithSha512, &sig::ECDSA_P384_SHA512_ASN1),
        (&rsa, A::Sha256WithRsa, &sig::RSA_PKCS1_2048_8192_SHA256),
        (&rsa, A::Sha384WithRsa, &sig::RSA_PKCS1_2048_8192_SHA384),
        (&rsa, A::Sha512WithRsa, &sig::RSA_PKCS1_2048_8192_SHA512),
        (&p256, A::EcdsaWithSha256, &sig::ECDSA_P256_SHA256_ASN1),
        (&p521, A::EcdsaWithSha256, &sig::ECDSA_P521_SHA256_ASN1),
        (&p521, A::EcdsaWithSha384, &sig::ECDSA_P521_SHA384_ASN1),
        (&p521, A::EcdsaWithSha512, &sig::ECDSA_P521_SHA512_ASN1),
        (&ed, A::PureEd25519, &sig::ED25519),
    ];
    for (key, algorithm, verify) in signs {
        let signature = key.sign(algorithm, b"message").unwrap();
        // The SPKI's BIT STRING is the raw public key aws-lc-rs verifies with.
        let (_, info) = SubjectPublicKeyInfo::from_der(key.public_key_der()).unwrap();
        let public = UnparsedPublicKey::new(verify, info.subject_public_key.data.to_vec());
        assert!(public.verify(b"message", &signature).is_ok(), "{algorithm:?}");
        assert!(public.verify(b"other", &signature).is_err(), "{algorithm:?}");
    }
    let refused = [
        (
            &p256,
            A::Sha256WithRsa,
            "cannot sign with SHA256WithRSA using a ECDSA 256 key",
        ),
        (
            &rsa,
            A::PureEd25519,
            "cannot sign with PureEd25519 using a RSA 2048 key",
        ),
        (
            &ed,
            A::Sha256WithRsa,
            "cannot sign with SHA256WithRSA using a Ed25519 key",
        ),
    ];
    for (key, algorithm, message) in refused {
        assert_eq!(key.sign(algorithm, b"m").unwrap_err().to_string(), message);
    }
}

#[test]
fn rsa_keys_of_every_multiple_of_128_are_made_and_others_refused_at_once() {
    // (size asked, openssl's first line, or the refusal)
    let cases: [(u32, Result<&str, KeyError>); 6] = [
        (2176, Ok("Private-Key: (2176 bit, 2 primes)")),
        (2560, Ok("Private-Key: (2560 bit, 2 primes)")),
        (3072, Ok("Private-Key: (3072 bit, 2 primes)")),
        (6144, Ok("Private-Key: (6144 bit, 2 primes)")),
        (2500, Err(KeyError::CannotGenerate(2500))),
        (8191, Err(KeyError::CannotGenerate(8191))),
    ];
    for (bits, want) in cases {
        let spec = KeySpec::Rsa(bits);
        match want {
            Ok(described) => {
                assert_eq!(spec.can_generate(), Ok(()), "{bits}");
                let key = Key::generate(spec).unwrap();
                assert_eq!(key.spec, spec, "{bits}");
                let pem = key.to_pem(Encoding::Pkcs1).unwrap();
                assert_eq!(openssl_describes(&pem), described, "{bits}");
                assert_eq!(Key::from_pem(pem.as_bytes()).map(|k| k.spec), Ok(spec), "{bits}");
            }
            Err(refused) => {
                assert_eq!(spec.can_generate(), Err(refused.clone()), "{bits}");
                assert_eq!(Key::generate(spec), Err(refused), "{bits}");
            }
        }
    }
    assert_eq!(
        KeyError::CannotGenerate(2500).to_string(),
        "cannot generate an RSA key of 2500 bits: this manager's crypto provider (AWS-LC) makes RSA \
         keys in multiples of 128 bits; use a size from 2048 to 8192 that is a multiple of 128 \
         (2048, 2176, 2304, ..., 3072, ..., 4096, ..., 8192)"
    );
}
