//! The CSR signature check of multirootca's Go (1.7, Debian's 2016 build): RSA PKCS#1 v1.5 and
//! ECDSA on P-256/P-384/P-521, each with SHA-1/256/384/512. Ed25519 and RSA-PSS are unknown to
//! it, so such CSRs are refused (`bad request`), as multirootca does.

use aws_lc_rs::signature::{self, UnparsedPublicKey, VerificationAlgorithm};
use x509_parser::certification_request::X509CertificationRequest;

const P256: &str = "1.2.840.10045.3.1.7";
const P384: &str = "1.3.132.0.34";
const P521: &str = "1.3.132.0.35";

/// The verifier for a signature algorithm OID on a key of `curve` (`None` for RSA).
fn algorithm(signature_oid: &str, curve: Option<&str>) -> Option<&'static dyn VerificationAlgorithm> {
    use signature::*;
    Some(match (signature_oid, curve) {
        ("1.2.840.113549.1.1.5", None) => &RSA_PKCS1_1024_8192_SHA1_FOR_LEGACY_USE_ONLY,
        ("1.2.840.113549.1.1.11", None) => &RSA_PKCS1_2048_8192_SHA256,
        ("1.2.840.113549.1.1.12", None) => &RSA_PKCS1_2048_8192_SHA384,
        ("1.2.840.113549.1.1.13", None) => &RSA_PKCS1_2048_8192_SHA512,
        ("1.2.840.10045.4.3.2", Some(P256)) => &ECDSA_P256_SHA256_ASN1,
        ("1.2.840.10045.4.3.3", Some(P256)) => &ECDSA_P256_SHA384_ASN1,
        ("1.2.840.10045.4.3.4", Some(P256)) => &ECDSA_P256_SHA512_ASN1,
        ("1.2.840.10045.4.3.2", Some(P384)) => &ECDSA_P384_SHA256_ASN1,
        ("1.2.840.10045.4.3.3", Some(P384)) => &ECDSA_P384_SHA384_ASN1,
        ("1.2.840.10045.4.3.4", Some(P384)) => &ECDSA_P384_SHA512_ASN1,
        ("1.2.840.10045.4.3.2", Some(P521)) => &ECDSA_P521_SHA256_ASN1,
        ("1.2.840.10045.4.3.3", Some(P521)) => &ECDSA_P521_SHA384_ASN1,
        ("1.2.840.10045.4.3.4", Some(P521)) => &ECDSA_P521_SHA512_ASN1,
        _ => return None,
    })
}

/// Whether the CSR's self-signature verifies with an algorithm multirootca knows.
pub fn verifies(csr: &X509CertificationRequest<'_>) -> bool {
    let spki = &csr.certification_request_info.subject_pki;
    let curve = match spki.algorithm.algorithm.to_id_string().as_str() {
        "1.2.840.113549.1.1.1" => None,
        "1.2.840.10045.2.1" => match spki.algorithm.parameters.as_ref().and_then(|p| p.as_oid().ok()) {
            Some(oid) => Some(oid.to_id_string()),
            None => return false,
        },
        _ => return false,
    };
    let signature_oid = csr.signature_algorithm.algorithm.to_id_string();
    let Some(alg) = algorithm(&signature_oid, curve.as_deref()) else {
        return false;
    };
    UnparsedPublicKey::new(alg, &spki.subject_public_key.data)
        .verify(csr.certification_request_info.raw, &csr.signature_value.data)
        .is_ok()
}
