//! Local CSR checks, so that a bad CSR fails fast and permanently without a trip to the CA.

use x509_parser::prelude::{FromDer, X509CertificationRequest};

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum CsrError {
    #[error("the CSR is not PEM: {0}")]
    NotPem(String),
    #[error("PEM block type must be CERTIFICATE REQUEST, found {0:?}")]
    WrongType(String),
    #[error("the CSR does not parse: {0}")]
    Malformed(String),
    #[error("the CSR signature does not verify: {0}")]
    BadSignature(String),
}

/// A CSR that parsed and whose self-signature verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedCsr {
    /// The first PEM block, re-armoured: what is sent to the CA.
    pub pem: String,
    /// DER SubjectPublicKeyInfo, to check that the issued certificate carries the same key.
    pub public_key_der: Vec<u8>,
}

/// Checks PEM input the way CFSSL will read it (first block only) and verifies its signature.
pub fn check_csr_pem(input: &[u8]) -> Result<CheckedCsr, CsrError> {
    let block = pem::parse(input).map_err(|e| CsrError::NotPem(e.to_string()))?;
    // "NEW CERTIFICATE REQUEST" is what older tools (Netscape, some Java) write.
    if !matches!(block.tag(), "CERTIFICATE REQUEST" | "NEW CERTIFICATE REQUEST") {
        return Err(CsrError::WrongType(block.tag().to_string()));
    }
    let (rest, csr) = X509CertificationRequest::from_der(block.contents())
        .map_err(|e| CsrError::Malformed(e.to_string()))?;
    if !rest.is_empty() {
        return Err(CsrError::Malformed(format!("{} trailing bytes", rest.len())));
    }
    csr.verify_signature()
        .map_err(|e| CsrError::BadSignature(e.to_string()))?;
    let public_key_der = csr.certification_request_info.subject_pki.raw.to_vec();
    let pem = pem::encode(&pem::Pem::new("CERTIFICATE REQUEST", block.contents()));
    Ok(CheckedCsr { pem, public_key_der })
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

    #[test]
    fn public_key_is_the_csr_key() {
        let (good, key) = csr_pem("svc.example.org");
        let checked = check_csr_pem(good.as_bytes()).unwrap();
        assert_eq!(
            checked.public_key_der,
            rcgen::PublicKeyData::subject_public_key_info(&key)
        );
    }
}
