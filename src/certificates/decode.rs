//! Reading what a Secret or CertificateRequest holds (private key, certificates, CSR) with
//! cert-manager's size limits and error wording (pkg/util/pki/parse.go, internal/pem), and
//! comparing public keys as cert-manager's `PublicKeysEqual` does.

use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::FromDer;
use x509_parser::x509::SubjectPublicKeyInfo;

use crate::pki::keys::{Key, KeyError, KeySpec};
use crate::pki::memo::Memo;

/// The largest private key PEM cert-manager reads.
pub const MAX_PRIVATE_KEY_PEM: usize = 13_000;
/// The largest single certificate or CSR PEM cert-manager reads.
pub const MAX_CERTIFICATE_PEM: usize = 36_500;
/// The largest certificate bundle PEM cert-manager reads (150 CAs of about 2200 bytes).
pub const MAX_BUNDLE_PEM: usize = 330_000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PemError {
    #[error("no PEM data was found in given input")]
    NoData,
    #[error("provided PEM data was larger than the maximum {0}B")]
    TooLarge(usize),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("error decoding private key PEM block: {0}")]
    KeyPem(PemError),
    #[error("unknown private key type: {0}")]
    KeyType(String),
    /// A PEM block of a known type whose key cannot be read; `kind` as Go names it.
    #[error("error parsing {kind} private key: {source}")]
    Key {
        kind: &'static str,
        #[source]
        source: KeyError,
    },
    #[error(transparent)]
    BundlePem(PemError),
    #[error("error parsing X.509 certificate: {0}")]
    Certificate(String),
    #[error("error decoding certificate PEM block: no valid certificates found")]
    NoCertificate,
    #[error("error decoding certificate request PEM block: {0}")]
    CsrPem(PemError),
    #[error("x509: malformed certificate request: {0}")]
    Csr(String),
}

/// The first PEM block of `bytes`, if `bytes` is no longer than `max`.
fn first_block(bytes: &[u8], max: usize) -> Result<pem::Pem, PemError> {
    if bytes.len() > max {
        return Err(PemError::TooLarge(max));
    }
    pem::parse(bytes).map_err(|_| PemError::NoData)
}

/// The private key in a Secret's `tls.key`: PKCS#1, SEC1 or PKCS#8 PEM.
pub fn private_key(bytes: &[u8]) -> Result<Key, DecodeError> {
    let block = first_block(bytes, MAX_PRIVATE_KEY_PEM).map_err(DecodeError::KeyPem)?;
    let kind = match block.tag() {
        "PRIVATE KEY" => "pkcs#8",
        "EC PRIVATE KEY" => "ecdsa",
        "RSA PRIVATE KEY" => "rsa",
        other => return Err(DecodeError::KeyType(other.to_string())),
    };
    Key::from_pem(bytes).map_err(|source| DecodeError::Key { kind, source })
}

/// The DER of every certificate in a PEM bundle (`tls.crt`), leaf first. Every block must be
/// a certificate, and there must be one.
pub fn certificates(bytes: &[u8]) -> Result<Vec<Vec<u8>>, DecodeError> {
    if bytes.len() > MAX_BUNDLE_PEM {
        return Err(DecodeError::BundlePem(PemError::TooLarge(MAX_BUNDLE_PEM)));
    }
    let blocks = pem::parse_many(bytes).unwrap_or_default();
    let mut ders = Vec::with_capacity(blocks.len());
    for block in blocks {
        X509Certificate::from_der(block.contents()).map_err(|e| DecodeError::Certificate(e.to_string()))?;
        ders.push(block.into_contents());
    }
    if ders.is_empty() {
        return Err(DecodeError::NoCertificate);
    }
    Ok(ders)
}

/// The DER of the leaf certificate of a PEM bundle. That the whole bundle is certificates is
/// remembered by its SHA-256: the policy checks, readiness and the trigger each read the same
/// unchanged `tls.crt`, and decoding and checking every certificate of its chain cost most of
/// a Ready Certificate's reconcile. The leaf itself is decoded again from the first block
/// (microseconds): keeping its DER for every Secret looked at was most of the memo's memory.
pub fn leaf_certificate(bytes: &[u8]) -> Result<Vec<u8>, DecodeError> {
    static CHECKED: Memo<()> = Memo::new(MEMO_MAX);
    CHECKED.get_or(bytes, |bytes| certificates(bytes).map(drop))?;
    first_block(bytes, MAX_BUNDLE_PEM)
        .map(pem::Pem::into_contents)
        .map_err(DecodeError::BundlePem)
}

/// The entries of a generation of this module's memo ([`Memo`]).
const MEMO_MAX: usize = 8_192;

/// The DER of the CSR in a CertificateRequest's `spec.request`.
pub fn csr(bytes: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let block = first_block(bytes, MAX_CERTIFICATE_PEM).map_err(DecodeError::CsrPem)?;
    Ok(block.into_contents())
}

const RSA: &str = "1.2.840.113549.1.1.1";
const EC: &str = "1.2.840.10045.2.1";
const ED25519: &str = "1.3.101.112";
const DSA: &str = "1.2.840.10040.4.1";

/// What the policy checks compare of a private key: its type and size, and its public half
/// (an error when it has none to give).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyFacts {
    pub spec: KeySpec,
    pub public: Result<Vec<u8>, String>,
}

impl KeyFacts {
    /// The facts of `key`: its public half is the one the key carries (taken where it was made
    /// or read), so nothing here checks or multiplies again.
    pub fn of(key: &Key) -> KeyFacts {
        let public = SubjectPublicKeyInfo::from_der(key.public_key_der())
            .map(|(_, info)| info.subject_public_key.data.to_vec())
            .map_err(|e| e.to_string());
        KeyFacts {
            spec: key.spec,
            public,
        }
    }
}

/// [`private_key`]'s [`KeyFacts`]. The key itself comes from [`Key::from_pem`]'s memo, so an
/// unchanged Secret's key is neither decoded nor checked again, and its facts are not kept a
/// second time.
pub fn private_key_facts(bytes: &[u8]) -> Result<KeyFacts, DecodeError> {
    private_key(bytes).map(|key| KeyFacts::of(&key))
}

/// Whether the public key `public` (from a certificate or CSR) is the public half of `key`;
/// an error when `public` is of an algorithm cert-manager cannot compare.
pub fn public_keys_equal(public: &SubjectPublicKeyInfo<'_>, key: &Key) -> Result<bool, String> {
    public_key_is(public, &KeyFacts::of(key))
}

/// [`public_keys_equal`], for a key's [`KeyFacts`].
pub fn public_key_is(public: &SubjectPublicKeyInfo<'_>, key: &KeyFacts) -> Result<bool, String> {
    let algorithm = public.algorithm.algorithm.to_id_string();
    let expected = match key.spec {
        KeySpec::Rsa(_) => RSA,
        KeySpec::Ecdsa(_) => EC,
        KeySpec::Ed25519 => ED25519,
    };
    match algorithm.as_str() {
        RSA | EC | ED25519 => {}
        // As Go prints the type of the key it could not compare.
        DSA => return Err("unrecognised public key type: *dsa.PublicKey".to_string()),
        _ => return Err("unrecognised public key type: <nil>".to_string()),
    }
    if algorithm != expected {
        return Ok(false);
    }
    let raw = key.public.as_ref().map_err(Clone::clone)?;
    Ok(raw.as_slice() == public.subject_public_key.data.as_ref())
}

#[cfg(test)]
mod tests;
