//! Local CSR checks, so that a bad CSR fails fast and permanently without a trip to the CA.

use x509_parser::error::X509Error;
use x509_parser::prelude::{FromDer, X509CertificationRequest};
use x509_parser::public_key::PublicKey;
use x509_parser::x509::SubjectPublicKeyInfo;

use super::keys::KeySpec;

use super::signature::{self, KeyType, SignatureError};

/// The largest CSR (PEM text) accepted; cert-manager's largest, RSA 8192, is under 4 KiB.
pub const MAX_CSR_BYTES: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum CsrError {
    #[error("the CSR is {size} bytes, over the {} KiB limit", MAX_CSR_BYTES / 1024)]
    TooLarge { size: usize },
    /// The cause is the `pem` crate's error.
    #[error("the CSR is not PEM: {0}")]
    NotPem(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The PEM block type found instead.
    #[error("PEM block type must be CERTIFICATE REQUEST, found {0:?}")]
    WrongType(String),
    #[error("the CSR does not parse: {0}")]
    Malformed(#[source] x509_parser::nom::Err<X509Error>),
    /// The DER parsed but did not end where the CSR does.
    #[error("the CSR does not parse: {count} trailing bytes")]
    TrailingBytes { count: usize },
    #[error("the CSR signature does not verify: {0}")]
    BadSignature(#[source] SignatureError),
}

/// A CSR that parsed and whose self-signature verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedCsr {
    /// The first PEM block, re-armoured: what is sent to the CA.
    pub pem: String,
    /// DER SubjectPublicKeyInfo, to check that the issued certificate carries the same key.
    pub public_key_der: Vec<u8>,
    pub key_type: KeyType,
}

impl CheckedCsr {
    /// The key's algorithm and size, as a Certificate's `privateKey` names them: what an
    /// approver compares with what was asked, since the key itself is the requester's own.
    /// `None` for a key no spec names (another curve, an RSA key beyond `u32` bits).
    pub fn key_spec(&self) -> Option<KeySpec> {
        Some(match self.key_type {
            KeyType::EcdsaP256 => KeySpec::Ecdsa(256),
            KeyType::EcdsaP384 => KeySpec::Ecdsa(384),
            KeyType::EcdsaP521 => KeySpec::Ecdsa(521),
            KeyType::Ed25519 => KeySpec::Ed25519,
            KeyType::Other => return None,
            KeyType::Rsa => {
                let (_, spki) = SubjectPublicKeyInfo::from_der(&self.public_key_der).ok()?;
                match spki.parsed().ok()? {
                    PublicKey::RSA(rsa) => KeySpec::Rsa(u32::try_from(rsa.key_size()).ok()?),
                    _ => return None,
                }
            }
        })
    }
}

/// Checks PEM input the way CFSSL will read it (first block only) and verifies its signature.
pub fn check_csr_pem(input: &[u8]) -> Result<CheckedCsr, CsrError> {
    if input.len() > MAX_CSR_BYTES {
        return Err(CsrError::TooLarge { size: input.len() });
    }
    let block = pem::parse(input).map_err(|e| CsrError::NotPem(Box::new(e)))?;
    // "NEW CERTIFICATE REQUEST" is what older tools (Netscape, some Java) write.
    if !matches!(block.tag(), "CERTIFICATE REQUEST" | "NEW CERTIFICATE REQUEST") {
        return Err(CsrError::WrongType(block.tag().to_string()));
    }
    let (rest, csr) = X509CertificationRequest::from_der(block.contents()).map_err(CsrError::Malformed)?;
    if !rest.is_empty() {
        return Err(CsrError::TrailingBytes { count: rest.len() });
    }
    let info = &csr.certification_request_info;
    let key_type = signature::verify(
        &info.subject_pki,
        &csr.signature_algorithm,
        &csr.signature_value.data,
        info.raw,
    )
    .map_err(CsrError::BadSignature)?;
    let public_key_der = info.subject_pki.raw.to_vec();
    let pem = super::pem_lf(&pem::Pem::new("CERTIFICATE REQUEST", block.contents()));
    Ok(CheckedCsr {
        pem,
        public_key_der,
        key_type,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn csr_pem(dns: &str) -> (String, rcgen::KeyPair) {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec![dns.to_string()]).unwrap();
        (params.serialize_request(&key).unwrap().pem().unwrap(), key)
    }

    fn tampered(pem_text: &str) -> String {
        let mut block = pem::parse(pem_text).unwrap();
        let mut der = block.contents().to_vec();
        // Flip a byte inside the subject's DNS name: still parses, signature breaks.
        let pos = der
            .windows(4)
            .position(|w| w == b"svc.")
            .expect("dns name in DER");
        der[pos] ^= 0x20;
        block = pem::Pem::new(block.tag(), der);
        pem::encode(&block)
    }

    #[test]
    fn check_table() {
        let (good, key) = csr_pem("svc.example.org");
        let cert = rcgen::CertificateParams::new(vec!["x".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        type Want = fn(&Result<CheckedCsr, CsrError>) -> bool;
        let cases: Vec<(&str, String, Want)> = vec![
            ("valid", good.clone(), |r| r.is_ok()),
            ("valid with leading text", format!("junk\n{good}"), |r| r.is_ok()),
            ("not pem", "hello".into(), |r| {
                matches!(r, Err(CsrError::NotPem(_)))
            }),
            ("empty", String::new(), |r| matches!(r, Err(CsrError::NotPem(_)))),
            (
                "certificate",
                cert.pem(),
                |r| matches!(r, Err(CsrError::WrongType(t)) if t == "CERTIFICATE"),
            ),
            (
                "garbage der",
                "-----BEGIN CERTIFICATE REQUEST-----\naGVsbG8=\n-----END CERTIFICATE REQUEST-----\n".into(),
                |r| matches!(r, Err(CsrError::Malformed(_))),
            ),
            ("bad signature", tampered(&good), |r| {
                matches!(r, Err(CsrError::BadSignature(_)))
            }),
        ];
        for (name, input, want) in cases {
            let got = check_csr_pem(input.as_bytes());
            assert!(want(&got), "{name}: {got:?}");
        }
    }

    /// `openssl genpkey` arguments for each key cert-manager makes.
    const KEYS: [(&str, &[&str], KeyType); 8] = [
        (
            "rsa2048",
            &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
            KeyType::Rsa,
        ),
        (
            "rsa3072",
            &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:3072"],
            KeyType::Rsa,
        ),
        (
            "rsa4096",
            &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:4096"],
            KeyType::Rsa,
        ),
        (
            "rsa8192",
            &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:8192"],
            KeyType::Rsa,
        ),
        (
            "p256",
            &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
            KeyType::EcdsaP256,
        ),
        (
            "p384",
            &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"],
            KeyType::EcdsaP384,
        ),
        (
            "p521",
            &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-521"],
            KeyType::EcdsaP521,
        ),
        ("ed25519", &["-algorithm", "ED25519"], KeyType::Ed25519),
    ];

    fn openssl(args: &[&str]) -> Vec<u8> {
        let out = std::process::Command::new("openssl")
            .args(args)
            .output()
            .expect("openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    /// A CSR made by `openssl req` (not by our own stack) for `key` with `digest`.
    fn openssl_csr(key: &std::path::Path, digest: Option<&str>) -> String {
        let key = key.to_str().unwrap();
        let mut args = vec!["req", "-new", "-key", key, "-subj", "/CN=svc.example.org"];
        args.extend(digest);
        String::from_utf8(openssl(&args)).unwrap()
    }

    /// The signature error is the CSR error's source; the message is the one it always had.
    #[test]
    fn a_bad_signature_keeps_its_cause() {
        let (good, _) = csr_pem("svc.example.org");
        let err = check_csr_pem(tampered(&good).as_bytes()).unwrap_err();
        let source = std::error::Error::source(&err).and_then(|s| s.downcast_ref::<SignatureError>());
        assert_eq!(
            source,
            Some(&SignatureError::Mismatch {
                key: KeyType::EcdsaP256
            })
        );
        assert_eq!(
            err.to_string(),
            "the CSR signature does not verify: the ECDSA P-256 signature does not match the CSR's contents"
        );
    }

    /// What a refused signature says; any other failure is named as such.
    fn signature_problem<T>(got: Result<T, CsrError>) -> Result<T, String> {
        got.map_err(|err| match err {
            CsrError::BadSignature(e) => e.to_string(),
            other => format!("not a signature error: {other}"),
        })
    }

    fn broken_signature(pem_text: &str) -> String {
        let block = pem::parse(pem_text).unwrap();
        let mut der = block.contents().to_vec();
        // The last byte of a CSR is the last byte of its signature (for ECDSA, of `s`).
        *der.last_mut().unwrap() ^= 0x01;
        pem::encode(&pem::Pem::new(block.tag(), der))
    }

    /// Every key and hash cert-manager produces verifies; the same CSR with one signature bit
    /// flipped is refused.
    #[test]
    fn every_cert_manager_key_and_hash_verifies() {
        let dir = tempfile::tempdir().unwrap();
        for (name, genpkey, key_type) in KEYS {
            let key = dir.path().join(format!("{name}.key"));
            let mut args = vec!["genpkey", "-out", key.to_str().unwrap()];
            args.extend(genpkey);
            openssl(&args);
            let digests: &[Option<&str>] = match key_type {
                KeyType::Ed25519 => &[None],
                _ => &[Some("-sha256"), Some("-sha384"), Some("-sha512")],
            };
            for digest in digests {
                let csr = openssl_csr(&key, *digest);
                let row = format!("{name} {digest:?}");
                let got = check_csr_pem(csr.as_bytes()).map(|c| c.key_type);
                assert_eq!(got.map_err(|e| e.to_string()), Ok(key_type), "{row}");
                let got = check_csr_pem(broken_signature(&csr).as_bytes()).map(|c| c.key_type);
                let want = format!("the {key_type} signature does not match the CSR's contents");
                assert_eq!(signature_problem(got), Err(want), "{row} broken");
            }
        }
    }

    /// RSA-PSS (not made by cert-manager, but by `openssl req -sigopt rsa_padding_mode:pss`)
    /// with the salt as long as the digest, as TLS and most tools use it.
    #[test]
    fn rsa_pss_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("rsa.key");
        let key_arg = key.to_str().unwrap();
        openssl(&[
            "genpkey",
            "-out",
            key_arg,
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
        ]);
        for digest in ["-sha256", "-sha384", "-sha512"] {
            let csr = openssl(&[
                "req",
                "-new",
                "-key",
                key_arg,
                "-subj",
                "/CN=pss",
                digest,
                "-sigopt",
                "rsa_padding_mode:pss",
                "-sigopt",
                "rsa_pss_saltlen:digest",
            ]);
            let csr = String::from_utf8(csr).unwrap();
            let got = check_csr_pem(csr.as_bytes()).map(|c| c.key_type);
            assert_eq!(got.map_err(|e| e.to_string()), Ok(KeyType::Rsa), "{digest}");
            let got = check_csr_pem(broken_signature(&csr).as_bytes()).map(|c| c.key_type);
            let want = "the RSA signature does not match the CSR's contents".to_string();
            assert_eq!(signature_problem(got), Err(want), "{digest} broken");
        }
    }

    #[test]
    fn unsupported_keys_and_algorithms_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            // secp256k1: a curve cert-manager never uses and CFSSL does not sign.
            (
                vec!["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:secp256k1"],
                Some("-sha256"),
                "ECDSA with SHA-256 signatures are not supported for keys of type other (not RSA, \
                 ECDSA P-256/P-384/P-521 or Ed25519)",
            ),
            (
                vec!["-algorithm", "ED448"],
                None,
                "signature algorithm 1.3.101.113 is not supported",
            ),
        ];
        for (i, (genpkey, digest, want)) in cases.into_iter().enumerate() {
            let key = dir.path().join(format!("{i}.key"));
            let mut args = vec!["genpkey", "-out", key.to_str().unwrap()];
            args.extend(genpkey);
            openssl(&args);
            let got = check_csr_pem(openssl_csr(&key, digest).as_bytes());
            assert_eq!(signature_problem(got), Err(want.into()), "{want}");
        }
    }

    #[test]
    fn csr_over_64_kib_is_refused_before_parsing() {
        let (good, _) = csr_pem("svc.example.org");
        // Valid PEM padded with text outside the block: only the size is wrong.
        let padded = format!("{}{good}", "#".repeat(MAX_CSR_BYTES - good.len()));
        assert!(check_csr_pem(padded.as_bytes()).is_ok());
        let over = format!("#{padded}");
        let got = check_csr_pem(over.as_bytes());
        assert!(
            matches!(got, Err(CsrError::TooLarge { size }) if size == MAX_CSR_BYTES + 1),
            "{got:?}"
        );
        assert_eq!(
            CsrError::TooLarge { size: 70000 }.to_string(),
            "the CSR is 70000 bytes, over the 64 KiB limit"
        );
    }

    #[test]
    fn csr_sent_to_the_ca_has_lf_line_endings() {
        let (good, _) = csr_pem("svc.example.org");
        let crlf = good.replace('\n', "\r\n");
        let checked = check_csr_pem(crlf.as_bytes()).unwrap();
        assert!(!checked.pem.contains('\r'), "{:?}", checked.pem);
        assert!(checked.pem.starts_with("-----BEGIN CERTIFICATE REQUEST-----\n"));
    }

    #[test]
    fn public_key_is_the_csr_key() {
        let (good, key) = csr_pem("svc.example.org");
        let checked = check_csr_pem(good.as_bytes()).unwrap();
        assert_eq!(
            checked.public_key_der,
            rcgen::PublicKeyData::subject_public_key_info(&key)
        );
    }

    /// The key spec read back from a CSR is the one its key was made with, each algorithm and
    /// size cert-manager names.
    #[test]
    fn key_spec_table() {
        use crate::api::certmanager::CertificateSpec;
        use crate::pki::keys::KeySpec;
        let spec = CertificateSpec {
            dns_names: vec!["a.example".into()],
            ..CertificateSpec::default()
        };
        for want in [
            KeySpec::Rsa(2048),
            KeySpec::Rsa(3072),
            KeySpec::Ecdsa(256),
            KeySpec::Ecdsa(384),
            KeySpec::Ecdsa(521),
            KeySpec::Ed25519,
        ] {
            let key = crate::certificates::fixtures::key(want, false);
            let pem = crate::pki::request::build_csr(&spec, key).expect("csr");
            let checked = check_csr_pem(pem.as_bytes()).expect("checks");
            assert_eq!(checked.key_spec(), Some(want), "{want:?}");
        }
    }
}
