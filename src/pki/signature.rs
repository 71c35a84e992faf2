//! CSR self-signatures over every key and hash cert-manager produces (RSA 2048-8192, ECDSA
//! P-256/P-384/P-521, Ed25519; SHA-256/384/512), verified with aws-lc-rs. x509-parser's own
//! check knows neither P-521 nor ECDSA with SHA-512, so the algorithm is chosen here from the
//! CSR's `signatureAlgorithm` and the key's type.

use aws_lc_rs::signature::{self, UnparsedPublicKey, VerificationAlgorithm};
use x509_parser::oid_registry::{
    OID_EC_P256, OID_HASH_SHA1, OID_KEY_TYPE_EC_PUBLIC_KEY, OID_NIST_EC_P384, OID_NIST_EC_P521,
    OID_NIST_HASH_SHA256, OID_NIST_HASH_SHA384, OID_NIST_HASH_SHA512, OID_PKCS1_RSAENCRYPTION,
    OID_PKCS1_RSASSAPSS, OID_PKCS1_SHA1WITHRSA, OID_PKCS1_SHA256WITHRSA, OID_PKCS1_SHA384WITHRSA,
    OID_PKCS1_SHA512WITHRSA, OID_SIG_ECDSA_WITH_SHA256, OID_SIG_ECDSA_WITH_SHA384, OID_SIG_ECDSA_WITH_SHA512,
    OID_SIG_ED25519,
};
use x509_parser::prelude::{AlgorithmIdentifier, SubjectPublicKeyInfo};
use x509_parser::signature_algorithm::RsaSsaPssParams;

/// The type of a CSR's public key, as far as signing goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyType {
    Rsa,
    EcdsaP256,
    EcdsaP384,
    EcdsaP521,
    Ed25519,
    /// Anything else (another curve, DSA, Ed448): no signature of it is accepted.
    Other,
}

impl std::fmt::Display for KeyType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KeyType::Rsa => "RSA",
            KeyType::EcdsaP256 => "ECDSA P-256",
            KeyType::EcdsaP384 => "ECDSA P-384",
            KeyType::EcdsaP521 => "ECDSA P-521",
            KeyType::Ed25519 => "Ed25519",
            KeyType::Other => "other (not RSA, ECDSA P-256/P-384/P-521 or Ed25519)",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hash {
    /// Legacy RSA only; cert-manager never uses it, older tools do.
    Sha1,
    Sha256,
    Sha384,
    Sha512,
}

/// A signature scheme named by a `signatureAlgorithm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    RsaPkcs1(Hash),
    RsaPss(Hash),
    Ecdsa(Hash),
    Ed25519,
}

impl std::fmt::Display for Scheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hash = |h: &Hash| match h {
            Hash::Sha1 => "SHA-1",
            Hash::Sha256 => "SHA-256",
            Hash::Sha384 => "SHA-384",
            Hash::Sha512 => "SHA-512",
        };
        match self {
            Scheme::RsaPkcs1(h) => write!(f, "RSA PKCS#1 v1.5 with {}", hash(h)),
            Scheme::RsaPss(h) => write!(f, "RSA-PSS with {}", hash(h)),
            Scheme::Ecdsa(h) => write!(f, "ECDSA with {}", hash(h)),
            Scheme::Ed25519 => f.write_str("Ed25519"),
        }
    }
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum SignatureError {
    #[error("signature algorithm {0} is not supported")]
    UnknownAlgorithm(String),
    #[error("{scheme} signatures are not supported for keys of type {key}")]
    Unsupported { key: KeyType, scheme: Scheme },
    #[error("the {key} signature does not match the CSR's contents")]
    Mismatch { key: KeyType },
}

/// The key type an SPKI's algorithm identifier names.
pub fn key_type(algorithm: &AlgorithmIdentifier) -> KeyType {
    let oid = &algorithm.algorithm;
    if *oid == OID_PKCS1_RSAENCRYPTION {
        return KeyType::Rsa;
    }
    if *oid == OID_SIG_ED25519 {
        return KeyType::Ed25519;
    }
    if *oid != OID_KEY_TYPE_EC_PUBLIC_KEY {
        return KeyType::Other;
    }
    match algorithm.parameters.as_ref().and_then(|p| p.as_oid().ok()) {
        Some(curve) if curve == OID_EC_P256 => KeyType::EcdsaP256,
        Some(curve) if curve == OID_NIST_EC_P384 => KeyType::EcdsaP384,
        Some(curve) if curve == OID_NIST_EC_P521 => KeyType::EcdsaP521,
        _ => KeyType::Other,
    }
}

/// The scheme a `signatureAlgorithm` names; RSA-PSS takes its hash from the parameters.
pub fn scheme(algorithm: &AlgorithmIdentifier) -> Result<Scheme, SignatureError> {
    let oid = &algorithm.algorithm;
    let fixed = [
        (&OID_PKCS1_SHA1WITHRSA, Scheme::RsaPkcs1(Hash::Sha1)),
        (&OID_PKCS1_SHA256WITHRSA, Scheme::RsaPkcs1(Hash::Sha256)),
        (&OID_PKCS1_SHA384WITHRSA, Scheme::RsaPkcs1(Hash::Sha384)),
        (&OID_PKCS1_SHA512WITHRSA, Scheme::RsaPkcs1(Hash::Sha512)),
        (&OID_SIG_ECDSA_WITH_SHA256, Scheme::Ecdsa(Hash::Sha256)),
        (&OID_SIG_ECDSA_WITH_SHA384, Scheme::Ecdsa(Hash::Sha384)),
        (&OID_SIG_ECDSA_WITH_SHA512, Scheme::Ecdsa(Hash::Sha512)),
        (&OID_SIG_ED25519, Scheme::Ed25519),
    ];
    if let Some((_, found)) = fixed.iter().find(|(known, _)| *known == oid) {
        return Ok(*found);
    }
    let unknown = || SignatureError::UnknownAlgorithm(oid.to_id_string());
    if *oid != OID_PKCS1_RSASSAPSS {
        return Err(unknown());
    }
    let params = algorithm.parameters.as_ref().ok_or_else(unknown)?;
    let params = RsaSsaPssParams::try_from(params).map_err(|_| unknown())?;
    let hash = params.hash_algorithm_oid();
    match hash {
        h if *h == OID_NIST_HASH_SHA256 => Ok(Scheme::RsaPss(Hash::Sha256)),
        h if *h == OID_NIST_HASH_SHA384 => Ok(Scheme::RsaPss(Hash::Sha384)),
        h if *h == OID_NIST_HASH_SHA512 => Ok(Scheme::RsaPss(Hash::Sha512)),
        h if *h == OID_HASH_SHA1 => Err(SignatureError::UnknownAlgorithm("RSA-PSS with SHA-1".into())),
        _ => Err(unknown()),
    }
}

/// The aws-lc-rs algorithm for a key type and scheme; `None` when they do not go together.
pub fn algorithm(key: KeyType, scheme: Scheme) -> Option<&'static dyn VerificationAlgorithm> {
    use Hash::{Sha1, Sha256, Sha384, Sha512};
    use KeyType::{EcdsaP256, EcdsaP384, EcdsaP521, Ed25519, Rsa};
    Some(match (key, scheme) {
        (Rsa, Scheme::RsaPkcs1(Sha1)) => &signature::RSA_PKCS1_1024_8192_SHA1_FOR_LEGACY_USE_ONLY,
        (Rsa, Scheme::RsaPkcs1(Sha256)) => &signature::RSA_PKCS1_2048_8192_SHA256,
        (Rsa, Scheme::RsaPkcs1(Sha384)) => &signature::RSA_PKCS1_2048_8192_SHA384,
        (Rsa, Scheme::RsaPkcs1(Sha512)) => &signature::RSA_PKCS1_2048_8192_SHA512,
        (Rsa, Scheme::RsaPss(Sha256)) => &signature::RSA_PSS_2048_8192_SHA256,
        (Rsa, Scheme::RsaPss(Sha384)) => &signature::RSA_PSS_2048_8192_SHA384,
        (Rsa, Scheme::RsaPss(Sha512)) => &signature::RSA_PSS_2048_8192_SHA512,
        (EcdsaP256, Scheme::Ecdsa(Sha256)) => &signature::ECDSA_P256_SHA256_ASN1,
        (EcdsaP256, Scheme::Ecdsa(Sha384)) => &signature::ECDSA_P256_SHA384_ASN1,
        (EcdsaP256, Scheme::Ecdsa(Sha512)) => &signature::ECDSA_P256_SHA512_ASN1,
        (EcdsaP384, Scheme::Ecdsa(Sha256)) => &signature::ECDSA_P384_SHA256_ASN1,
        (EcdsaP384, Scheme::Ecdsa(Sha384)) => &signature::ECDSA_P384_SHA384_ASN1,
        (EcdsaP384, Scheme::Ecdsa(Sha512)) => &signature::ECDSA_P384_SHA512_ASN1,
        (EcdsaP521, Scheme::Ecdsa(Sha256)) => &signature::ECDSA_P521_SHA256_ASN1,
        (EcdsaP521, Scheme::Ecdsa(Sha384)) => &signature::ECDSA_P521_SHA384_ASN1,
        (EcdsaP521, Scheme::Ecdsa(Sha512)) => &signature::ECDSA_P521_SHA512_ASN1,
        (Ed25519, Scheme::Ed25519) => &signature::ED25519,
        _ => return None,
    })
}

/// Verifies `signature` over `message` with the key in `spki`; returns the key's type.
pub fn verify(
    spki: &SubjectPublicKeyInfo,
    signature_algorithm: &AlgorithmIdentifier,
    signature: &[u8],
    message: &[u8],
) -> Result<KeyType, SignatureError> {
    let key = key_type(&spki.algorithm);
    let scheme = scheme(signature_algorithm)?;
    let alg = algorithm(key, scheme).ok_or(SignatureError::Unsupported { key, scheme })?;
    UnparsedPublicKey::new(alg, &spki.subject_public_key.data)
        .verify(message, signature)
        .map_err(|_| SignatureError::Mismatch { key })?;
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algorithm_table_pairs_only_matching_key_and_scheme() {
        use Hash::*;
        use KeyType::*;
        let keys = [Rsa, EcdsaP256, EcdsaP384, EcdsaP521, Ed25519, Other];
        let schemes = [
            Scheme::RsaPkcs1(Sha1),
            Scheme::RsaPkcs1(Sha256),
            Scheme::RsaPkcs1(Sha384),
            Scheme::RsaPkcs1(Sha512),
            Scheme::RsaPss(Sha256),
            Scheme::RsaPss(Sha384),
            Scheme::RsaPss(Sha512),
            Scheme::Ecdsa(Sha1),
            Scheme::Ecdsa(Sha256),
            Scheme::Ecdsa(Sha384),
            Scheme::Ecdsa(Sha512),
            Scheme::Ed25519,
        ];
        for key in keys {
            for scheme in schemes {
                let want = match (key, scheme) {
                    (Rsa, Scheme::RsaPkcs1(_) | Scheme::RsaPss(Sha256 | Sha384 | Sha512)) => true,
                    (EcdsaP256 | EcdsaP384 | EcdsaP521, Scheme::Ecdsa(h)) => h != Sha1,
                    (Ed25519, Scheme::Ed25519) => true,
                    _ => false,
                };
                assert_eq!(algorithm(key, scheme).is_some(), want, "{key} {scheme:?}");
            }
        }
    }
}
