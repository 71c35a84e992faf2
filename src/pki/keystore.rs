//! Keystores for a Certificate's Secret: PKCS#12 (`keystore.p12`, `truststore.p12`) and Java's
//! JKS (`keystore.jks`, `truststore.jks`), with the contents cert-manager writes:
//!
//! - a keystore holds the private key with the issued chain (leaf first) and the CA certificates:
//!   in PKCS#12 the CAs follow the chain as plain certificate bags; in JKS the key entry (alias
//!   `certificate` unless `jks.alias` says otherwise, protected with the store password) carries
//!   the chain and each CA is a trusted entry `ca`, `ca-1`, `ca-2`, ...;
//! - a truststore holds the CA certificates only, and is written only when the CA is known
//!   (`ca.crt` not empty): the truststore functions return `None` for an empty CA list.
//!
//! PKCS#12 profiles (`keystores.pkcs12.profile`): empty means `LegacyRC2`. `Modern2026` is
//! `Modern2023` with a PBMAC1 MAC (RFC 9579), which OpenSSL 3.4+ and Java 26+ read (OpenSSL 3.0
//! and Java 17 do not); see `pbmac1.rs`.
//!
//! Crypto: the project's one provider, aws-lc-rs, does the SHA-1 digests, HMACs, PBKDF2, AES and
//! the randomness. It offers neither RC2 nor 3DES, which `LegacyRC2` and `LegacyDES` need (they
//! exist for old Java and OpenSSL 1.x readers), nor the PKCS#12 key derivation of RFC 7292
//! appendix B, so those come from RustCrypto crates (`rc2`, `des`, `cbc`, `pkcs12`'s `kdf` over
//! `sha1`/`sha2`); the ASN.1 types are RustCrypto's `pkcs12`, `pkcs5` and `cms`. The
//! `p12-keystore` crate was not used: it encrypts certificates and key with one algorithm, so it
//! cannot write `LegacyRC2` (RC2-40 certificates, 3DES key), the default profile. No JKS crate was
//! used either: `jks` pulls old duplicates of crates already here (asn1-rs 0.5, nom 7, syn 1,
//! thiserror 1, sha1 0.10, rand 0.8) and the format written here is small; see `jks.rs`.

mod jks;
mod pbmac1;
mod pkcs12;

use k8s_openapi::jiff::Timestamp;

use super::keys::Key;

/// The encryption and MAC choices of a PKCS#12 store, as cert-manager names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pkcs12Profile {
    /// RC2-40 for certificates, 3DES for the key, SHA-1 MAC (1 iteration), 2048 encryption
    /// iterations, 8-byte salts. The default.
    LegacyRc2,
    /// 3DES for certificates and key; otherwise as `LegacyRc2`.
    LegacyDes,
    /// PBES2 (PBKDF2-HMAC-SHA256, AES-256-CBC) for certificates and key, HMAC-SHA256 MAC,
    /// 2048 iterations for both, 16-byte salts.
    Modern2023,
    /// `Modern2023`'s encryption with a PBMAC1 MAC (PBKDF2-HMAC-SHA256, 2048 iterations, 16-byte
    /// salt, 32-byte key; HMAC-SHA256).
    Modern2026,
}

impl Pkcs12Profile {
    /// The profile `keystores.pkcs12.profile` names; absent or empty means `LegacyRC2`.
    pub fn parse(name: Option<&str>) -> Result<Self, KeystoreError> {
        match name.unwrap_or_default() {
            "" | "LegacyRC2" => Ok(Self::LegacyRc2),
            "LegacyDES" => Ok(Self::LegacyDes),
            "Modern2023" => Ok(Self::Modern2023),
            "Modern2026" => Ok(Self::Modern2026),
            other => Err(KeystoreError::UnknownProfile(other.to_string())),
        }
    }

    /// The name cert-manager's API uses.
    pub fn name(self) -> &'static str {
        match self {
            Self::LegacyRc2 => "LegacyRC2",
            Self::LegacyDes => "LegacyDES",
            Self::Modern2023 => "Modern2023",
            Self::Modern2026 => "Modern2026",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KeystoreError {
    #[error(
        "unknown PKCS#12 profile {0:?}: use LegacyRC2 (the default), LegacyDES, Modern2023 or Modern2026"
    )]
    UnknownProfile(String),
    #[error("no certificate to put in the keystore")]
    NoCertificate,
    #[error("the keystore password has a character outside Unicode's Basic Multilingual Plane")]
    Password,
    #[error("a certificate cannot be read")]
    Certificate(#[source] x509_parser::nom::Err<x509_parser::error::X509Error>),
    #[error("the JKS alias must not be empty")]
    EmptyAlias,
    #[error("the JKS alias {0:?} is the name of a CA certificate entry (ca, ca-1, ...)")]
    AliasTaken(String),
    #[error("a keystore entry is too large for the JKS format")]
    TooLarge,
    #[error("encoding the keystore failed")]
    Encoding(#[source] der::Error),
    #[error("the crypto provider failed")]
    Crypto,
}

impl From<der::Error> for KeystoreError {
    fn from(error: der::Error) -> Self {
        Self::Encoding(error)
    }
}

impl From<aws_lc_rs::error::Unspecified> for KeystoreError {
    fn from(_: aws_lc_rs::error::Unspecified) -> Self {
        Self::Crypto
    }
}

/// `keystore.p12`: the key, the chain (`chain[0]` is the leaf; DER) then the CAs (DER).
pub fn pkcs12_keystore(
    key: &Key,
    chain: &[Vec<u8>],
    ca: &[Vec<u8>],
    password: &str,
    profile: Pkcs12Profile,
) -> Result<Vec<u8>, KeystoreError> {
    pkcs12::keystore(key.pkcs8_der(), chain, ca, password, profile)
}

/// `truststore.p12`: the CAs (DER) marked as Java trust anchors; `None` when there is no CA
/// (cert-manager then writes no truststore).
pub fn pkcs12_truststore(
    ca: &[Vec<u8>],
    password: &str,
    profile: Pkcs12Profile,
) -> Result<Option<Vec<u8>>, KeystoreError> {
    if ca.is_empty() {
        return Ok(None);
    }
    pkcs12::truststore(ca, password, profile).map(Some)
}

/// The JKS alias of the key entry: `jks.alias`, or `certificate` when unset.
pub const DEFAULT_JKS_ALIAS: &str = "certificate";

/// `keystore.jks`: the key entry `alias` (default `certificate`) with the chain (leaf first;
/// DER), the CAs as trusted entries `ca`, `ca-1`, ...; `created` is each entry's creation date.
pub fn jks_keystore(
    key: &Key,
    chain: &[Vec<u8>],
    ca: &[Vec<u8>],
    password: &str,
    alias: Option<&str>,
    created: Timestamp,
) -> Result<Vec<u8>, KeystoreError> {
    let alias = alias.unwrap_or(DEFAULT_JKS_ALIAS);
    jks::keystore(key.pkcs8_der(), chain, ca, password, alias, created)
}

/// `truststore.jks`: the CAs as trusted entries `ca`, `ca-1`, ...; `None` when there is no CA.
pub fn jks_truststore(
    ca: &[Vec<u8>],
    password: &str,
    created: Timestamp,
) -> Result<Option<Vec<u8>>, KeystoreError> {
    if ca.is_empty() {
        return Ok(None);
    }
    jks::truststore(ca, password, created).map(Some)
}

/// The largest stored keystore checked: the API server's limit on a whole Secret (1 MiB), so no
/// store a Secret can hold is refused for its size, while what a check hashes stays bounded
/// whoever wrote the Secret.
pub const MAX_STORE_BYTES: usize = 1 << 20;

/// The most MAC iterations a stored PFX may claim to be checked here. The writers the PKCS#12 code
/// follows (go-pkcs12, and `pkcs12.rs`) use 1 (the legacy profiles) or 2,048 (`Modern2023`), so
/// every store this manager or cert-manager wrote is under it; a store over it was written by
/// someone else and is written again anyway, so the check costs at most 2,048 hashes whatever
/// the Secret says (a count of 2^31-1 would take the check a minute of CPU).
pub const MAX_PKCS12_MAC_ITERATIONS: i32 = 2048;

/// The longest PKCS#12 MAC salt checked, in bytes: the writers followed use 8 or 16.
pub const MAX_PKCS12_MAC_SALT: usize = 64;

/// Why a stored keystore does not open here; the caller writes it again. Each message reads
/// after the store's name ("keystore.p12 claims ...").
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unopened {
    #[error("is not a keystore this manager reads")]
    Unreadable,
    #[error("does not open with the password")]
    Password,
    #[error("is {size} bytes, over the {max} this manager checks")]
    Size { size: usize, max: usize },
    #[error("claims {count} MAC iterations, over the {max} this manager checks")]
    MacIterations { count: i32, max: i32 },
    #[error("has a {len}-byte MAC salt, over the {max} this manager checks")]
    MacSalt { len: usize, max: usize },
}

impl Unopened {
    /// Whether the store was not checked because checking it would cost more than this
    /// manager pays (as against a store that was checked and did not open).
    pub fn over_limit(self) -> bool {
        matches!(
            self,
            Self::Size { .. } | Self::MacIterations { .. } | Self::MacSalt { .. }
        )
    }
}

fn within_size(der: &[u8]) -> Result<(), Unopened> {
    if der.len() > MAX_STORE_BYTES {
        return Err(Unopened::Size {
            size: der.len(),
            max: MAX_STORE_BYTES,
        });
    }
    Ok(())
}

/// Whether a PKCS#12 store opens with `password` (its MAC verifies), and if not why: a password
/// changed since the store was written reads [`Unopened::Password`]. A store whose check would
/// cost more than the caps allow is not checked.
pub fn pkcs12_check(der: &[u8], password: &str) -> Result<(), Unopened> {
    within_size(der)?;
    pkcs12::check(der, password)
}

/// Whether a JKS store opens with `password` (its integrity digest verifies), and if not why.
pub fn jks_check(der: &[u8], password: &str) -> Result<(), Unopened> {
    within_size(der)?;
    jks::check(der, password)
}

/// Whether a PKCS#12 store opens with `password` ([`pkcs12_check`] passes).
pub fn pkcs12_opens_with(der: &[u8], password: &str) -> bool {
    pkcs12_check(der, password).is_ok()
}

/// Whether a JKS store opens with `password` ([`jks_check`] passes).
pub fn jks_opens_with(der: &[u8], password: &str) -> bool {
    jks_check(der, password).is_ok()
}

/// Random bytes from the provider (salts, IVs).
fn random<const N: usize>() -> Result<[u8; N], KeystoreError> {
    let mut bytes = [0u8; N];
    aws_lc_rs::rand::fill(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests;
