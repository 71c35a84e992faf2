//! Private keys for Certificates: what a `privateKey` spec asks for, generating it with the one
//! crypto provider (aws-lc-rs), PEM in the encoding `privateKey.encoding` asks, and any PEM a
//! Secret may hold decoded back, so a stored key can be compared with the spec.
//!
//! cert-manager's rules: algorithm `RSA` (default), `ECDSA` or `Ed25519`; RSA 2048 (default) to
//! 8192 bits, ECDSA 256 (default), 384 or 521, Ed25519 without a size. `PKCS1` (default) writes
//! `RSA PRIVATE KEY` or SEC1 `EC PRIVATE KEY`; `PKCS8` writes `PRIVATE KEY`; Ed25519 is PKCS#8
//! either way. aws-lc-rs generates RSA keys of 2048, 3072, 4096 and 8192 bits; other sizes come
//! from the same provider's C API ([`provider`]), which makes multiples of 128 bits only: a size
//! that is not one is refused ([`KeySpec::can_generate`]).

mod provider;

use aws_lc_rs::encoding::{AsDer, EcPrivateKeyRfc5915Der, Pkcs8V1Der, PublicKeyX509Der};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::{self, KeySize};
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_ASN1_SIGNING, ECDSA_P384_SHA384_ASN1_SIGNING, ECDSA_P521_SHA256_ASN1_SIGNING,
    ECDSA_P521_SHA384_ASN1_SIGNING, ECDSA_P521_SHA512_ASN1_SIGNING, EcdsaKeyPair, EcdsaSigningAlgorithm,
    Ed25519KeyPair, KeyPair as _,
};

use crate::api::certmanager::PrivateKey;
use crate::pki::memo::Memo;

/// A key algorithm and its size in bits (curve size for ECDSA; 0 for Ed25519).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeySpec {
    Rsa(u32),
    Ecdsa(u32),
    Ed25519,
}

/// How `tls.key` is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `RSA PRIVATE KEY` (PKCS#1) or `EC PRIVATE KEY` (SEC1); Ed25519 stays PKCS#8.
    Pkcs1,
    /// `PRIVATE KEY` (PKCS#8).
    Pkcs8,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("unsupported private key algorithm {0:?}: use RSA, ECDSA or Ed25519")]
    UnknownAlgorithm(String),
    #[error("RSA key size must be between 2048 and 8192, not {0}")]
    RsaSize(i64),
    #[error("ECDSA key size must be 256, 384 or 521, not {0}")]
    EcdsaSize(i64),
    #[error("unknown signature algorithm {0:?}")]
    UnknownSignatureAlgorithm(String),
    #[error("signature algorithm {0} does not fit a {1} key")]
    SignatureAlgorithmMismatch(String, &'static str),
    #[error("unsupported private key encoding {0:?}: use PKCS1 or PKCS8")]
    UnknownEncoding(String),
    #[error(
        "cannot generate an RSA key of {0} bits: this manager's crypto provider (AWS-LC) makes RSA \
         keys in multiples of 128 bits; use a size from 2048 to 8192 that is a multiple of 128 \
         (2048, 2176, 2304, ..., 3072, ..., 4096, ..., 8192)"
    )]
    CannotGenerate(u32),
    #[error("key generation failed")]
    Generation,
    #[error("the private key is not PEM")]
    NotPem,
    #[error("no private key in the PEM (found {0:?})")]
    NotAKey(String),
    #[error("the {0} private key cannot be read")]
    Unreadable(&'static str),
    #[error("cannot sign with {0} using a {1} key")]
    CannotSign(&'static str, String),
}

impl KeySpec {
    /// The spec a Certificate's `privateKey` asks for, with cert-manager's defaults.
    pub fn of(private_key: Option<&PrivateKey>) -> Result<Self, KeyError> {
        let (algorithm, size) = private_key.map_or(("", 0), |k| (k.algorithm.as_str(), k.size));
        match algorithm {
            "" | "RSA" => match size {
                0 => Ok(KeySpec::Rsa(2048)),
                2048..=8192 => Ok(KeySpec::Rsa(
                    u32::try_from(size).map_err(|_| KeyError::RsaSize(size))?,
                )),
                other => Err(KeyError::RsaSize(other)),
            },
            "ECDSA" => match size {
                0 | 256 => Ok(KeySpec::Ecdsa(256)),
                384 => Ok(KeySpec::Ecdsa(384)),
                521 => Ok(KeySpec::Ecdsa(521)),
                other => Err(KeyError::EcdsaSize(other)),
            },
            "Ed25519" => Ok(KeySpec::Ed25519),
            other => Err(KeyError::UnknownAlgorithm(other.to_string())),
        }
    }
}

impl Encoding {
    /// The encoding `privateKey.encoding` asks for; empty means PKCS1.
    pub fn of(private_key: Option<&PrivateKey>) -> Result<Self, KeyError> {
        match private_key.map_or("", |k| k.encoding.as_str()) {
            "" | "PKCS1" => Ok(Encoding::Pkcs1),
            "PKCS8" => Ok(Encoding::Pkcs8),
            other => Err(KeyError::UnknownEncoding(other.to_string())),
        }
    }
}

/// Private keys a memo of this module holds per generation ([`Memo`]): the working set of the
/// issuances in flight, not every Secret's key (those stay in the Secret cache alone).
const KEY_MEMO_MAX: usize = 1024;

/// The keys read from PEM, and the PEM rendered from keys ([`Key::from_pem`], [`Key::to_pem`]).
static PARSED: Memo<Key> = Memo::new(KEY_MEMO_MAX);

/// A private key: what it is, its PKCS#8 DER and its public half. The public half is taken
/// when the key is made or read, where the provider has it at hand: deriving it again later
/// (for a CSR, or to compare with a certificate) cost a scalar multiplication each time.
#[derive(Clone, PartialEq, Eq)]
pub struct Key {
    pub spec: KeySpec,
    pkcs8: Vec<u8>,
    spki: Vec<u8>,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key material.
        f.debug_struct("Key")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

fn curve(bits: u32) -> Option<&'static EcdsaSigningAlgorithm> {
    match bits {
        256 => Some(&ECDSA_P256_SHA256_ASN1_SIGNING),
        384 => Some(&ECDSA_P384_SHA384_ASN1_SIGNING),
        521 => Some(&ECDSA_P521_SHA512_ASN1_SIGNING),
        _ => None,
    }
}

impl Key {
    /// A new key as `spec` asks.
    pub fn generate(spec: KeySpec) -> Result<Self, KeyError> {
        match spec {
            KeySpec::Rsa(bits) => generate_rsa(bits),
            KeySpec::Ecdsa(bits) => {
                let curve = curve(bits).ok_or(KeyError::EcdsaSize(i64::from(bits)))?;
                let key = EcdsaKeyPair::generate(curve).map_err(|_| KeyError::Generation)?;
                let pkcs8 = key.to_pkcs8v1().map_err(|_| KeyError::Generation)?;
                Key::with_public(spec, pkcs8.as_ref().to_vec(), key.public_key())
            }
            KeySpec::Ed25519 => {
                let key = Ed25519KeyPair::generate().map_err(|_| KeyError::Generation)?;
                let pkcs8 = key.to_pkcs8v1().map_err(|_| KeyError::Generation)?;
                Key::with_public(spec, pkcs8.as_ref().to_vec(), key.public_key())
            }
        }
    }

    /// The key of `spec` in `pkcs8`, whose public half is `public`.
    fn with_public<P: AsDer<PublicKeyX509Der<'static>>>(
        spec: KeySpec,
        pkcs8: Vec<u8>,
        public: &P,
    ) -> Result<Self, KeyError> {
        let spki = public
            .as_der()
            .map_err(|_| KeyError::Unreadable(spec.algorithm()))?;
        Ok(Key {
            spec,
            pkcs8,
            spki: spki.as_ref().to_vec(),
        })
    }

    /// The PKCS#8 DER (the keystores hold it).
    pub fn pkcs8_der(&self) -> &[u8] {
        &self.pkcs8
    }

    /// PEM as `encoding` asks, remembered as this key ([`Key::from_pem`]): the controllers read
    /// the keys they write back from their Secrets, and parsing one checks it again (a scalar
    /// multiplication for ECDSA, more for RSA). Parsing what this renders gives back this very
    /// key, byte for byte (the test `every_key_in_every_encoding_round_trips_and_openssl_reads_it`).
    pub fn to_pem(&self, encoding: Encoding) -> Result<String, KeyError> {
        let (tag, der) = match (encoding, self.spec) {
            (Encoding::Pkcs8, _) | (_, KeySpec::Ed25519) => ("PRIVATE KEY", self.pkcs8.clone()),
            (Encoding::Pkcs1, KeySpec::Rsa(_)) => (
                "RSA PRIVATE KEY",
                inner_private_key(&self.pkcs8).ok_or(KeyError::Unreadable("RSA"))?,
            ),
            (Encoding::Pkcs1, KeySpec::Ecdsa(bits)) => {
                static MEMO: Memo<Vec<u8>> = Memo::new(KEY_MEMO_MAX);
                let sec1 = MEMO.get_or(&self.pkcs8, |pkcs8| sec1_of(bits, pkcs8))?;
                ("EC PRIVATE KEY", sec1)
            }
        };
        let pem = super::pem_lf(&pem::Pem::new(tag, der));
        PARSED.remember(pem.as_bytes(), self.clone());
        Ok(pem)
    }

    /// The key in `pem`: PKCS#1, SEC1 or PKCS#8, whichever the Secret holds. Remembered by
    /// the PEM's SHA-256 ([`KEY_MEMO_MAX`] keys a generation): parsing checks the key (a scalar
    /// multiplication for ECDSA), and each controller reads the same key Secret on every wake.
    pub fn from_pem(text: &[u8]) -> Result<Self, KeyError> {
        PARSED.get_or(text, Key::parse_pem)
    }

    fn parse_pem(text: &[u8]) -> Result<Self, KeyError> {
        let block = pem::parse(text).map_err(|_| KeyError::NotPem)?;
        match block.tag() {
            "RSA PRIVATE KEY" => {
                let key =
                    rsa::KeyPair::from_der(block.contents()).map_err(|_| KeyError::Unreadable("RSA"))?;
                rsa_key(&key)
            }
            "EC PRIVATE KEY" => {
                for bits in [256, 384, 521] {
                    let curve = curve(bits).ok_or(KeyError::Unreadable("ECDSA"))?;
                    if let Ok(key) = EcdsaKeyPair::from_private_key_der(curve, block.contents()) {
                        let pkcs8 = key.to_pkcs8v1().map_err(|_| KeyError::Unreadable("ECDSA"))?;
                        return Key::with_public(
                            KeySpec::Ecdsa(bits),
                            pkcs8.as_ref().to_vec(),
                            key.public_key(),
                        );
                    }
                }
                Err(KeyError::Unreadable("ECDSA"))
            }
            "PRIVATE KEY" => from_pkcs8(block.contents()),
            other => Err(KeyError::NotAKey(other.to_string())),
        }
    }

    /// Whether the key is what `spec` asks for (algorithm and size, as cert-manager compares).
    pub fn matches(&self, spec: KeySpec) -> bool {
        self.spec == spec
    }
}

/// `spec.signatureAlgorithm`: how the CSR (and, CA permitting, the certificate) is signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureAlgorithm {
    Sha256WithRsa,
    Sha384WithRsa,
    Sha512WithRsa,
    EcdsaWithSha256,
    EcdsaWithSha384,
    EcdsaWithSha512,
    PureEd25519,
}

impl SignatureAlgorithm {
    const ALL: [(SignatureAlgorithm, &'static str); 7] = [
        (Self::Sha256WithRsa, "SHA256WithRSA"),
        (Self::Sha384WithRsa, "SHA384WithRSA"),
        (Self::Sha512WithRsa, "SHA512WithRSA"),
        (Self::EcdsaWithSha256, "ECDSAWithSHA256"),
        (Self::EcdsaWithSha384, "ECDSAWithSHA384"),
        (Self::EcdsaWithSha512, "ECDSAWithSHA512"),
        (Self::PureEd25519, "PureEd25519"),
    ];

    /// cert-manager's default for a key: SHA-512 for RSA from 4096 bits and P-521, SHA-384 for
    /// RSA from 3072 bits and P-384, else SHA-256; Ed25519 signs without a digest.
    pub fn default_for(spec: KeySpec) -> Self {
        match spec {
            KeySpec::Rsa(bits) if bits >= 4096 => Self::Sha512WithRsa,
            KeySpec::Rsa(bits) if bits >= 3072 => Self::Sha384WithRsa,
            KeySpec::Rsa(_) => Self::Sha256WithRsa,
            KeySpec::Ecdsa(521) => Self::EcdsaWithSha512,
            KeySpec::Ecdsa(384) => Self::EcdsaWithSha384,
            KeySpec::Ecdsa(_) => Self::EcdsaWithSha256,
            KeySpec::Ed25519 => Self::PureEd25519,
        }
    }

    /// The algorithm `signatureAlgorithm` names for a key of `spec` (its default when empty);
    /// it must fit the key's algorithm.
    pub fn of(name: &str, spec: KeySpec) -> Result<Self, KeyError> {
        if name.is_empty() {
            return Ok(Self::default_for(spec));
        }
        let algorithm = Self::ALL
            .into_iter()
            .find(|(_, n)| *n == name)
            .map(|(a, _)| a)
            .ok_or_else(|| KeyError::UnknownSignatureAlgorithm(name.to_string()))?;
        let fits = matches!(
            (algorithm, spec),
            (
                Self::Sha256WithRsa | Self::Sha384WithRsa | Self::Sha512WithRsa,
                KeySpec::Rsa(_)
            ) | (
                Self::EcdsaWithSha256 | Self::EcdsaWithSha384 | Self::EcdsaWithSha512,
                KeySpec::Ecdsa(_)
            ) | (Self::PureEd25519, KeySpec::Ed25519)
        );
        if fits {
            Ok(algorithm)
        } else {
            Err(KeyError::SignatureAlgorithmMismatch(
                name.to_string(),
                spec.algorithm(),
            ))
        }
    }
}

impl SignatureAlgorithm {
    /// The name `signatureAlgorithm` uses for it.
    pub fn name(self) -> &'static str {
        Self::ALL
            .into_iter()
            .find(|(a, _)| *a == self)
            .map_or("", |(_, n)| n)
    }
}

impl Key {
    /// The public key as a DER `SubjectPublicKeyInfo`.
    pub fn public_key_der(&self) -> &[u8] {
        &self.spki
    }

    /// A signature over `message` with `algorithm` (PKCS#1 v1.5 for RSA, DER for ECDSA). ECDSA
    /// signs with any of the three digests on any curve, as Go does: the pairs aws-lc-rs has
    /// (SHA-256 on P-256, SHA-384 on P-384, all three on P-521) through it, the others (P-256
    /// with SHA-384 or SHA-512, P-384 with SHA-256 or SHA-512) through the provider's C API.
    pub fn sign(&self, algorithm: SignatureAlgorithm, message: &[u8]) -> Result<Vec<u8>, KeyError> {
        use SignatureAlgorithm as A;
        let name = self.spec.algorithm();
        let refused = || KeyError::CannotSign(algorithm.name(), self.spec.describe());
        match (self.spec, algorithm) {
            (KeySpec::Rsa(_), A::Sha256WithRsa | A::Sha384WithRsa | A::Sha512WithRsa) => {
                let padding: &'static dyn aws_lc_rs::signature::RsaEncoding = match algorithm {
                    A::Sha256WithRsa => &aws_lc_rs::signature::RSA_PKCS1_SHA256,
                    A::Sha384WithRsa => &aws_lc_rs::signature::RSA_PKCS1_SHA384,
                    _ => &aws_lc_rs::signature::RSA_PKCS1_SHA512,
                };
                let key = rsa::KeyPair::from_pkcs8(&self.pkcs8).map_err(|_| KeyError::Unreadable(name))?;
                let mut signature = vec![0; key.public_modulus_len()];
                key.sign(padding, &SystemRandom::new(), message, &mut signature)
                    .map_err(|_| refused())?;
                Ok(signature)
            }
            (KeySpec::Ecdsa(bits), _) => {
                let signing = match (bits, algorithm) {
                    (256, A::EcdsaWithSha256) => &ECDSA_P256_SHA256_ASN1_SIGNING,
                    (384, A::EcdsaWithSha384) => &ECDSA_P384_SHA384_ASN1_SIGNING,
                    (521, A::EcdsaWithSha256) => &ECDSA_P521_SHA256_ASN1_SIGNING,
                    (521, A::EcdsaWithSha384) => &ECDSA_P521_SHA384_ASN1_SIGNING,
                    (521, A::EcdsaWithSha512) => &ECDSA_P521_SHA512_ASN1_SIGNING,
                    (256 | 384, A::EcdsaWithSha256 | A::EcdsaWithSha384 | A::EcdsaWithSha512) => {
                        return self.sign_ecdsa_digest(algorithm, message).ok_or_else(refused);
                    }
                    _ => return Err(refused()),
                };
                let key =
                    EcdsaKeyPair::from_pkcs8(signing, &self.pkcs8).map_err(|_| KeyError::Unreadable(name))?;
                let signature = key.sign(&SystemRandom::new(), message).map_err(|_| refused())?;
                Ok(signature.as_ref().to_vec())
            }
            (KeySpec::Ed25519, A::PureEd25519) => {
                let key = Ed25519KeyPair::from_pkcs8_maybe_unchecked(&self.pkcs8)
                    .map_err(|_| KeyError::Unreadable(name))?;
                Ok(key.sign(message).as_ref().to_vec())
            }
            _ => Err(refused()),
        }
    }
}

impl Key {
    /// An ECDSA signature over `message` hashed with `algorithm`'s digest, whatever the curve.
    fn sign_ecdsa_digest(&self, algorithm: SignatureAlgorithm, message: &[u8]) -> Option<Vec<u8>> {
        use aws_lc_rs::digest;
        let hash = match algorithm {
            SignatureAlgorithm::EcdsaWithSha256 => &digest::SHA256,
            SignatureAlgorithm::EcdsaWithSha384 => &digest::SHA384,
            SignatureAlgorithm::EcdsaWithSha512 => &digest::SHA512,
            _ => return None,
        };
        provider::ecdsa_sign_digest(&self.pkcs8, digest::digest(hash, message).as_ref())
    }
}

impl KeySpec {
    /// Whether a key of this spec can be generated here: all but RSA sizes that are not a
    /// multiple of 128 bits (AWS-LC would round them down), refused before any work.
    pub fn can_generate(self) -> Result<(), KeyError> {
        match self {
            KeySpec::Rsa(bits) if bits % 128 != 0 => Err(KeyError::CannotGenerate(bits)),
            _ => Ok(()),
        }
    }

    /// `RSA 2048`, `ECDSA 256`, `Ed25519`: for messages.
    pub fn describe(self) -> String {
        match self {
            KeySpec::Rsa(bits) => format!("RSA {bits}"),
            KeySpec::Ecdsa(bits) => format!("ECDSA {bits}"),
            KeySpec::Ed25519 => "Ed25519".to_string(),
        }
    }

    /// The algorithm's name as `privateKey.algorithm` spells it.
    pub fn algorithm(self) -> &'static str {
        match self {
            KeySpec::Rsa(_) => "RSA",
            KeySpec::Ecdsa(_) => "ECDSA",
            KeySpec::Ed25519 => "Ed25519",
        }
    }
}

/// An RSA key of exactly `bits`: aws-lc-rs's fixed sizes, else the provider's C API.
fn generate_rsa(bits: u32) -> Result<Key, KeyError> {
    KeySpec::Rsa(bits).can_generate()?;
    let size = match bits {
        2048 => Some(KeySize::Rsa2048),
        3072 => Some(KeySize::Rsa3072),
        4096 => Some(KeySize::Rsa4096),
        8192 => Some(KeySize::Rsa8192),
        _ => None,
    };
    let key = match size {
        Some(size) => rsa::KeyPair::generate(size).map_err(|_| KeyError::Generation)?,
        None => {
            let pkcs1 = provider::rsa_pkcs1(bits).ok_or(KeyError::Generation)?;
            rsa::KeyPair::from_der(&pkcs1).map_err(|_| KeyError::Generation)?
        }
    };
    let key = rsa_key(&key)?;
    if key.spec != KeySpec::Rsa(bits) {
        return Err(KeyError::CannotGenerate(bits));
    }
    Ok(key)
}

/// The SEC1 DER of the ECDSA key in `pkcs8`.
fn sec1_of(bits: u32, pkcs8: &[u8]) -> Result<Vec<u8>, KeyError> {
    let curve = curve(bits).ok_or(KeyError::Unreadable("ECDSA"))?;
    let key = EcdsaKeyPair::from_pkcs8(curve, pkcs8).map_err(|_| KeyError::Unreadable("ECDSA"))?;
    let sec1: EcPrivateKeyRfc5915Der<'_> = key
        .private_key()
        .as_der()
        .map_err(|_| KeyError::Unreadable("ECDSA"))?;
    Ok(sec1.as_ref().to_vec())
}

fn pkcs8_of(key: &rsa::KeyPair) -> Result<Vec<u8>, KeyError> {
    let der: Pkcs8V1Der<'_> = key.as_der().map_err(|_| KeyError::Unreadable("RSA"))?;
    Ok(der.as_ref().to_vec())
}

/// The key with its size in bits: the modulus's bit length (a 2500-bit key is 313 bytes long),
/// as Go's `N.BitLen()` counts it.
fn rsa_key(key: &rsa::KeyPair) -> Result<Key, KeyError> {
    let pkcs8 = pkcs8_of(key)?;
    let bits = rsa::PrivateDecryptingKey::from_pkcs8(&pkcs8)
        .map_err(|_| KeyError::Unreadable("RSA"))?
        .key_size_bits();
    let bits = u32::try_from(bits).map_err(|_| KeyError::Unreadable("RSA"))?;
    Key::with_public(KeySpec::Rsa(bits), pkcs8, key.public_key())
}

/// A PKCS#8 key of any of the three algorithms.
fn from_pkcs8(der: &[u8]) -> Result<Key, KeyError> {
    if let Ok(key) = rsa::KeyPair::from_pkcs8(der) {
        return rsa_key(&key);
    }
    for bits in [256, 384, 521] {
        let curve = curve(bits).ok_or(KeyError::Unreadable("ECDSA"))?;
        if let Ok(key) = EcdsaKeyPair::from_pkcs8(curve, der) {
            return Key::with_public(KeySpec::Ecdsa(bits), der.to_vec(), key.public_key());
        }
    }
    if let Ok(key) = Ed25519KeyPair::from_pkcs8_maybe_unchecked(der) {
        return Key::with_public(KeySpec::Ed25519, der.to_vec(), key.public_key());
    }
    Err(KeyError::Unreadable("PKCS#8"))
}

/// The `privateKey` OCTET STRING of a PKCS#8 `PrivateKeyInfo`: for RSA, the PKCS#1 key.
fn inner_private_key(pkcs8: &[u8]) -> Option<Vec<u8>> {
    use x509_parser::der_parser::der::parse_der_sequence;
    let (_, info) = parse_der_sequence(pkcs8).ok()?;
    let fields = info.as_sequence().ok()?;
    fields.get(2)?.as_slice().ok().map(<[u8]>::to_vec)
}

#[cfg(test)]
mod tests;
