//! Java's JKS store format, as `sun.security.provider.JavaKeyStore` writes it:
//!
//! ```text
//! 0xFEEDFEED, version 2, entry count                        (u32 big-endian each)
//! entry: tag (1 = private key, 2 = trusted certificate), alias (Java modified UTF-8 with a u16
//!        length), creation date (i64 milliseconds since the epoch), then
//!        tag 1: protected key (u32 length + bytes), chain count, each "X.509" + u32 length + DER
//!        tag 2: "X.509" + u32 length + DER
//! SHA-1(password as UTF-16BE || "Mighty Aphrodite" || everything above)
//! ```
//!
//! The key is protected with Sun's `KeyProtector` (OID 1.3.6.1.4.1.42.2.17.1.1): a 20-byte random
//! salt, the PKCS#8 key XORed with the stream SHA-1(password || salt), SHA-1(password || previous
//! block), ..., then SHA-1(password || key) as the integrity check; stored as an
//! `EncryptedPrivateKeyInfo` of salt || XORed key || check. Java (and keytool) lower-case aliases
//! of JKS stores, and so does this encoder. The password is Java's: its UTF-16BE code units
//! (cert-manager's Go library widens each UTF-8 byte instead, which only agrees for ASCII).

use aws_lc_rs::digest::{Context, SHA1_FOR_LEGACY_USE_ONLY};
use der::Encode;
use der::asn1::{Null, ObjectIdentifier, OctetString};
use k8s_openapi::jiff::Timestamp;
use pkcs12::cms::cert::x509::spki::AlgorithmIdentifierOwned;
use pkcs12::pbe_params::EncryptedPrivateKeyInfo;

use super::{KeystoreError, Unopened};

const MAGIC: u32 = 0xFEED_FEED;
const VERSION: u32 = 2;
const PRIVATE_KEY_ENTRY: u32 = 1;
const TRUSTED_CERT_ENTRY: u32 = 2;
const CERT_TYPE: &str = "X.509";
const KEY_PROTECTOR: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.42.2.17.1.1");
const SHA1_LEN: usize = 20;

/// The keystore: the key entry `alias` with the chain, then the CAs as `ca`, `ca-1`, ...
pub(super) fn keystore(
    pkcs8: &[u8],
    chain: &[Vec<u8>],
    ca: &[Vec<u8>],
    password: &str,
    alias: &str,
    created: Timestamp,
) -> Result<Vec<u8>, KeystoreError> {
    if chain.is_empty() {
        return Err(KeystoreError::NoCertificate);
    }
    if alias.is_empty() {
        return Err(KeystoreError::EmptyAlias);
    }
    // Java keeps one entry per alias; cert-manager's library would let a CA replace the key.
    let alias = alias.to_lowercase();
    if (0..ca.len()).any(|index| ca_alias(index) == alias) {
        return Err(KeystoreError::AliasTaken(alias));
    }
    let password = utf16be(password);
    let mut out = Writer::header(1 + ca.len())?;
    out.u32(PRIVATE_KEY_ENTRY);
    out.utf(&alias)?;
    out.time(created);
    out.bytes(&protect(pkcs8, &password)?)?;
    out.u32(u32::try_from(chain.len()).map_err(|_| KeystoreError::TooLarge)?);
    for cert in chain {
        out.certificate(cert)?;
    }
    trusted_entries(&mut out, ca, created)?;
    out.finish(&password)
}

/// The truststore: the CAs as trusted entries `ca`, `ca-1`, ...
pub(super) fn truststore(
    ca: &[Vec<u8>],
    password: &str,
    created: Timestamp,
) -> Result<Vec<u8>, KeystoreError> {
    let password = utf16be(password);
    let mut out = Writer::header(ca.len())?;
    trusted_entries(&mut out, ca, created)?;
    out.finish(&password)
}

/// cert-manager's aliases for CA certificates: `ca`, then `ca-1`, `ca-2`, ...
pub(super) fn ca_alias(index: usize) -> String {
    if index == 0 {
        "ca".to_string()
    } else {
        format!("ca-{index}")
    }
}

fn trusted_entries(out: &mut Writer, ca: &[Vec<u8>], created: Timestamp) -> Result<(), KeystoreError> {
    for (index, cert) in ca.iter().enumerate() {
        out.u32(TRUSTED_CERT_ENTRY);
        out.utf(&ca_alias(index))?;
        out.time(created);
        out.certificate(cert)?;
    }
    Ok(())
}

/// The password as Java hands it to the store: UTF-16BE code units.
fn utf16be(password: &str) -> Vec<u8> {
    password.encode_utf16().flat_map(u16::to_be_bytes).collect()
}

/// Sun's KeyProtector over a PKCS#8 key, wrapped as an `EncryptedPrivateKeyInfo`.
fn protect(pkcs8: &[u8], password: &[u8]) -> Result<Vec<u8>, KeystoreError> {
    let salt = super::random::<SHA1_LEN>()?;
    let mut protected = Vec::with_capacity(2 * SHA1_LEN + pkcs8.len());
    protected.extend_from_slice(&salt);
    let mut block = salt.to_vec();
    for chunk in pkcs8.chunks(SHA1_LEN) {
        block = sha1(&[password, &block]);
        protected.extend(chunk.iter().zip(&block).map(|(k, x)| k ^ x));
    }
    protected.extend_from_slice(&sha1(&[password, pkcs8]));
    let info = EncryptedPrivateKeyInfo {
        encryption_algorithm: AlgorithmIdentifierOwned {
            oid: KEY_PROTECTOR,
            parameters: Some(der::Any::encode_from(&Null)?),
        },
        encrypted_data: OctetString::new(protected)?,
    };
    Ok(info.to_der()?)
}

fn sha1(parts: &[&[u8]]) -> Vec<u8> {
    let mut context = Context::new(&SHA1_FOR_LEGACY_USE_ONLY);
    for part in parts {
        context.update(part);
    }
    context.finish().as_ref().to_vec()
}

/// Java's `DataOutputStream` for the few types a JKS store uses.
struct Writer(Vec<u8>);

impl Writer {
    fn header(entries: usize) -> Result<Self, KeystoreError> {
        let mut out = Writer(Vec::new());
        out.u32(MAGIC);
        out.u32(VERSION);
        out.u32(u32::try_from(entries).map_err(|_| KeystoreError::TooLarge)?);
        Ok(out)
    }

    fn u32(&mut self, value: u32) {
        self.0.extend_from_slice(&value.to_be_bytes());
    }

    fn time(&mut self, at: Timestamp) {
        self.0.extend_from_slice(&at.as_millisecond().to_be_bytes());
    }

    fn bytes(&mut self, data: &[u8]) -> Result<(), KeystoreError> {
        self.u32(u32::try_from(data.len()).map_err(|_| KeystoreError::TooLarge)?);
        self.0.extend_from_slice(data);
        Ok(())
    }

    fn certificate(&mut self, der: &[u8]) -> Result<(), KeystoreError> {
        self.utf(CERT_TYPE)?;
        self.bytes(der)
    }

    /// `writeUTF`: modified UTF-8 (NUL as two bytes, supplementary characters as two
    /// three-byte surrogates) after its u16 length.
    fn utf(&mut self, text: &str) -> Result<(), KeystoreError> {
        let mut encoded = Vec::with_capacity(text.len());
        for unit in text.encode_utf16() {
            match unit {
                0x0001..=0x007F => encoded.push(unit.to_be_bytes()[1]),
                0x0000 | 0x0080..=0x07FF => {
                    let [high, low] = (0xC080 | ((unit << 2) & 0x1F00) | (unit & 0x3F)).to_be_bytes();
                    encoded.extend_from_slice(&[high, low]);
                }
                _ => {
                    let [a, b] = unit.to_be_bytes();
                    encoded.extend_from_slice(&[
                        0xE0 | (a >> 4),
                        0x80 | ((a & 0x0F) << 2) | (b >> 6),
                        0x80 | (b & 0x3F),
                    ]);
                }
            }
        }
        let len = u16::try_from(encoded.len()).map_err(|_| KeystoreError::TooLarge)?;
        self.0.extend_from_slice(&len.to_be_bytes());
        self.0.extend_from_slice(&encoded);
        Ok(())
    }

    /// Appends the store's SHA-1 integrity digest and returns the bytes.
    fn finish(mut self, password: &[u8]) -> Result<Vec<u8>, KeystoreError> {
        let digest = sha1(&[password, b"Mighty Aphrodite", &self.0]);
        self.0.extend_from_slice(&digest);
        Ok(self.0)
    }
}

/// Whether `der` is a JKS store whose integrity digest verifies with `password`, and if not
/// why. The check is one SHA-1 over the store, its cost bounded by the caller's size cap.
pub(super) fn check(der: &[u8], password: &str) -> Result<(), Unopened> {
    let Some(split) = der.len().checked_sub(20) else {
        return Err(Unopened::Unreadable);
    };
    let (body, digest) = der.split_at(split);
    if !body.starts_with(&MAGIC.to_be_bytes()) {
        return Err(Unopened::Unreadable);
    }
    if sha1(&[&utf16be(password), b"Mighty Aphrodite", body]) == digest {
        Ok(())
    } else {
        Err(Unopened::Password)
    }
}
