//! PKCS#12 (RFC 7292) stores laid out as cert-manager's (SSLMate go-pkcs12) are: an
//! authenticated safe of an encrypted SafeContents with the certificate bags and, in a keystore,
//! a plain SafeContents with the shrouded key bag; a MAC over it all. The leaf's bag and the
//! key's bag share a `localKeyId`, the SHA-1 of the leaf; truststore bags carry a
//! `friendlyName` (the subject) and Java's trusted-usage attribute.

use cbc::cipher::{BlockModeEncrypt, KeyIvInit, block_padding::Pkcs7};
use der::asn1::{Any, BmpString, ObjectIdentifier, OctetString, SetOfVec};
use der::{Decode, Encode};
use pkcs12::cms::cert::x509::attr::{Attribute, Attributes};
use pkcs12::cms::cert::x509::spki::AlgorithmIdentifierOwned;
use pkcs12::cms::content_info::{CmsVersion, ContentInfo};
use pkcs12::cms::encrypted_data::EncryptedData;
use pkcs12::cms::enveloped_data::EncryptedContentInfo;
use pkcs12::kdf::{Pkcs12KeyType, derive_key_utf8};
use pkcs12::pbe_params::{EncryptedPrivateKeyInfo, Pkcs12PbeParams};
use pkcs12::pfx::{Pfx, Version};
use pkcs12::{CertBag, DigestInfo, MacData, SafeBag};

use super::{KeystoreError, MAX_PKCS12_MAC_ITERATIONS, MAX_PKCS12_MAC_SALT, Pkcs12Profile, Unopened};

const DATA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.7.1");
const ENCRYPTED_DATA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.7.6");
const CERT_BAG: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.12.10.1.3");
const SHROUDED_KEY_BAG: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.12.10.1.2");
const X509_CERTIFICATE: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.22.1");
const FRIENDLY_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.20");
const LOCAL_KEY_ID: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.21");
const JAVA_TRUSTED_USAGE: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.113894.746875.1.1");
const ANY_EXTENDED_KEY_USAGE: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.37.0");
const PBE_SHA1_RC2_40: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.12.1.6");
const PBE_SHA1_3DES: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.12.1.3");
const SHA1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.14.3.2.26");
const SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.1");

/// How certificate or key bags are encrypted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cipher {
    /// pbeWithSHAAnd40BitRC2-CBC (RFC 7292 appendix C).
    Rc2_40,
    /// pbeWithSHAAnd3-KeyTripleDES-CBC.
    TripleDes,
    /// PBES2: PBKDF2 with HMAC-SHA256, AES-256-CBC.
    Aes256,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MacDigest {
    Sha1,
    Sha256,
    /// PBMAC1 with PBKDF2-HMAC-SHA256 and HMAC-SHA256 (see `pbmac1.rs`).
    Pbmac1,
}

/// A profile's choices (go-pkcs12's LegacyRC2, LegacyDES, Modern2023 and Modern2026).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Params {
    certs: Cipher,
    key: Cipher,
    mac: MacDigest,
    mac_iterations: u32,
    iterations: u32,
    salt_len: usize,
}

fn params(profile: Pkcs12Profile) -> Params {
    let legacy = Params {
        certs: Cipher::Rc2_40,
        key: Cipher::TripleDes,
        mac: MacDigest::Sha1,
        mac_iterations: 1,
        iterations: 2048,
        salt_len: 8,
    };
    let modern = Params {
        certs: Cipher::Aes256,
        key: Cipher::Aes256,
        mac: MacDigest::Sha256,
        mac_iterations: 2048,
        iterations: 2048,
        salt_len: 16,
    };
    match profile {
        Pkcs12Profile::LegacyRc2 => legacy,
        Pkcs12Profile::LegacyDes => Params {
            certs: Cipher::TripleDes,
            ..legacy
        },
        Pkcs12Profile::Modern2023 => modern,
        Pkcs12Profile::Modern2026 => Params {
            mac: MacDigest::Pbmac1,
            ..modern
        },
    }
}

/// The keystore: key (PKCS#8 DER), leaf with `localKeyId`, the rest of the chain, the CAs.
pub(super) fn keystore(
    pkcs8: &[u8],
    chain: &[Vec<u8>],
    ca: &[Vec<u8>],
    password: &str,
    profile: Pkcs12Profile,
) -> Result<Vec<u8>, KeystoreError> {
    let params = params(profile);
    let (leaf, rest) = chain.split_first().ok_or(KeystoreError::NoCertificate)?;
    let local_key_id = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, leaf);
    let key_id = octet_attribute(LOCAL_KEY_ID, local_key_id.as_ref())?;

    let mut cert_bags = vec![cert_bag(leaf, Some(key_id.clone()))?];
    for cert in rest.iter().chain(ca) {
        cert_bags.push(cert_bag(cert, None)?);
    }
    let certs = encrypted_safe(&cert_bags, password, params.certs, &params)?;

    let (algorithm, encrypted) = encrypt(params.key, pkcs8, password, &params)?;
    let shrouded = EncryptedPrivateKeyInfo {
        encryption_algorithm: algorithm,
        encrypted_data: OctetString::new(encrypted)?,
    };
    let key_bag = SafeBag {
        bag_id: SHROUDED_KEY_BAG,
        bag_value: shrouded.to_der()?,
        bag_attributes: Some(attributes(vec![key_id])?),
    };
    let keys = plain_safe(&[key_bag])?;
    pfx(&[certs, keys], password, &params)
}

/// The truststore: each CA with its subject as `friendlyName` and Java's trusted-usage mark.
pub(super) fn truststore(
    ca: &[Vec<u8>],
    password: &str,
    profile: Pkcs12Profile,
) -> Result<Vec<u8>, KeystoreError> {
    let params = params(profile);
    let mut bags = Vec::with_capacity(ca.len());
    for cert in ca {
        let trusted = Attribute {
            oid: JAVA_TRUSTED_USAGE,
            values: SetOfVec::try_from(vec![Any::encode_from(&ANY_EXTENDED_KEY_USAGE)?])?,
        };
        let name = BmpString::from_utf8(&subject_string(cert)?)?;
        let friendly = Attribute {
            oid: FRIENDLY_NAME,
            values: SetOfVec::try_from(vec![Any::encode_from(&name)?])?,
        };
        bags.push(cert_bag(cert, None)?);
        if let Some(bag) = bags.last_mut() {
            bag.bag_attributes = Some(attributes(vec![trusted, friendly])?);
        }
    }
    let certs = encrypted_safe(&bags, password, params.certs, &params)?;
    pfx(&[certs], password, &params)
}

/// The subject as Go's `pkix.Name.String()` writes it (RFC 4514: last RDN first, `,` between).
fn subject_string(der: &[u8]) -> Result<String, KeystoreError> {
    use x509_parser::prelude::FromDer;
    let (_, cert) =
        x509_parser::certificate::X509Certificate::from_der(der).map_err(KeystoreError::Certificate)?;
    let registry = x509_parser::objects::oid_registry();
    let mut rdns = Vec::new();
    for rdn in cert.subject().iter() {
        let mut parts = Vec::new();
        for attribute in rdn.iter() {
            let oid = attribute.attr_type();
            let name = x509_parser::objects::oid2abbrev(oid, registry)
                .map_or_else(|_| oid.to_id_string(), str::to_string);
            let value = attribute.as_str().map_or_else(
                |_| format!("#{}", hex::encode(attribute.attr_value().data)),
                escape_rfc4514,
            );
            parts.push(format!("{name}={value}"));
        }
        rdns.push(parts.join("+"));
    }
    rdns.reverse();
    Ok(rdns.join(","))
}

fn escape_rfc4514(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let edge = (i == 0 && (c == ' ' || c == '#')) || (i == last && c == ' ');
        if edge || matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn attributes(list: Vec<Attribute>) -> Result<Attributes, KeystoreError> {
    Ok(SetOfVec::try_from(list)?)
}

fn octet_attribute(oid: ObjectIdentifier, value: &[u8]) -> Result<Attribute, KeystoreError> {
    let value = Any::encode_from(&OctetString::new(value)?)?;
    Ok(Attribute {
        oid,
        values: SetOfVec::try_from(vec![value])?,
    })
}

fn cert_bag(der: &[u8], local_key_id: Option<Attribute>) -> Result<SafeBag, KeystoreError> {
    let bag = CertBag {
        cert_id: X509_CERTIFICATE,
        cert_value: OctetString::new(der)?,
    };
    Ok(SafeBag {
        bag_id: CERT_BAG,
        bag_value: bag.to_der()?,
        bag_attributes: local_key_id.map(|a| attributes(vec![a])).transpose()?,
    })
}

/// A SafeContents as `data` (its bags protect themselves: the shrouded key).
fn plain_safe(bags: &[SafeBag]) -> Result<ContentInfo, KeystoreError> {
    let contents = OctetString::new(bags.to_vec().to_der()?)?;
    Ok(ContentInfo {
        content_type: DATA,
        content: Any::encode_from(&contents)?,
    })
}

/// A SafeContents as password-encrypted `encryptedData`.
fn encrypted_safe(
    bags: &[SafeBag],
    password: &str,
    cipher: Cipher,
    params: &Params,
) -> Result<ContentInfo, KeystoreError> {
    let (algorithm, encrypted) = encrypt(cipher, &bags.to_vec().to_der()?, password, params)?;
    let data = EncryptedData {
        version: CmsVersion::V0,
        enc_content_info: EncryptedContentInfo {
            content_type: DATA,
            content_enc_alg: algorithm,
            encrypted_content: Some(OctetString::new(encrypted)?),
        },
        unprotected_attrs: None,
    };
    Ok(ContentInfo {
        content_type: ENCRYPTED_DATA,
        content: Any::encode_from(&data)?,
    })
}

/// The PFX: the authenticated safe as `data`, with its MAC.
fn pfx(safes: &[ContentInfo], password: &str, params: &Params) -> Result<Vec<u8>, KeystoreError> {
    let auth_safe = safes.to_vec().to_der()?;
    let mac_data = mac(&auth_safe, password, params)?;
    let pfx = Pfx {
        version: Version::V3,
        auth_safe: ContentInfo {
            content_type: DATA,
            content: Any::encode_from(&OctetString::new(auth_safe)?)?,
        },
        mac_data: Some(mac_data),
    };
    Ok(pfx.to_der()?)
}

fn salt(params: &Params) -> Result<Vec<u8>, KeystoreError> {
    let mut salt = vec![0u8; params.salt_len];
    aws_lc_rs::rand::fill(&mut salt)?;
    Ok(salt)
}

fn iterations(count: u32) -> Result<i32, KeystoreError> {
    i32::try_from(count).map_err(|_| KeystoreError::Crypto)
}

/// The MAC of RFC 7292 appendix B: an HMAC keyed by the PKCS#12 KDF (its "MAC" purpose).
fn mac(data: &[u8], password: &str, params: &Params) -> Result<MacData, KeystoreError> {
    use aws_lc_rs::hmac;
    let salt = salt(params)?;
    let rounds = iterations(params.mac_iterations)?;
    let (oid, algorithm, key) = match params.mac {
        MacDigest::Pbmac1 => return super::pbmac1::mac(data, password, &salt, params.mac_iterations),
        MacDigest::Sha1 => (
            SHA1,
            hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
            derive_key_utf8::<sha1::Sha1>(password, &salt, Pkcs12KeyType::Mac, rounds, 20),
        ),
        MacDigest::Sha256 => (
            SHA256,
            hmac::HMAC_SHA256,
            derive_key_utf8::<sha2::Sha256>(password, &salt, Pkcs12KeyType::Mac, rounds, 32),
        ),
    };
    let key = key.map_err(|_| KeystoreError::Password)?;
    let tag = hmac::sign(&hmac::Key::new(algorithm, &key), data);
    Ok(MacData {
        mac: DigestInfo {
            algorithm: AlgorithmIdentifierOwned {
                oid,
                parameters: None,
            },
            digest: OctetString::new(tag.as_ref())?,
        },
        mac_salt: OctetString::new(salt)?,
        iterations: rounds,
    })
}

/// Encrypts `data` with `cipher`: the algorithm identifier (with its parameters) and the bytes.
fn encrypt(
    cipher: Cipher,
    data: &[u8],
    password: &str,
    params: &Params,
) -> Result<(AlgorithmIdentifierOwned, Vec<u8>), KeystoreError> {
    let salt = salt(params)?;
    match cipher {
        Cipher::Rc2_40 | Cipher::TripleDes => {
            let rounds = iterations(params.iterations)?;
            let derive = |purpose, len| {
                derive_key_utf8::<sha1::Sha1>(password, &salt, purpose, rounds, len)
                    .map_err(|_| KeystoreError::Password)
            };
            let iv = derive(Pkcs12KeyType::Iv, 8)?;
            let (oid, encrypted) = if cipher == Cipher::Rc2_40 {
                let key = derive(Pkcs12KeyType::EncryptionKey, 5)?;
                let encryptor = cbc::Encryptor::<rc2::Rc2>::new_from_slices(&key, &iv)
                    .map_err(|_| KeystoreError::Crypto)?;
                (PBE_SHA1_RC2_40, encryptor.encrypt_padded_vec::<Pkcs7>(data))
            } else {
                let key = derive(Pkcs12KeyType::EncryptionKey, 24)?;
                let encryptor = cbc::Encryptor::<des::TdesEde3>::new_from_slices(&key, &iv)
                    .map_err(|_| KeystoreError::Crypto)?;
                (PBE_SHA1_3DES, encryptor.encrypt_padded_vec::<Pkcs7>(data))
            };
            let parameters = Pkcs12PbeParams {
                salt: OctetString::new(salt)?,
                iterations: rounds,
            };
            let algorithm = AlgorithmIdentifierOwned {
                oid,
                parameters: Some(Any::encode_from(&parameters)?),
            };
            Ok((algorithm, encrypted))
        }
        Cipher::Aes256 => pbes2_aes256(data, password, &salt, params.iterations),
    }
}

/// PBES2 (RFC 8018): PBKDF2-HMAC-SHA256 then AES-256-CBC, the password as UTF-8 bytes (as
/// OpenSSL and go-pkcs12 do), all with aws-lc-rs.
fn pbes2_aes256(
    data: &[u8],
    password: &str,
    salt: &[u8],
    rounds: u32,
) -> Result<(AlgorithmIdentifierOwned, Vec<u8>), KeystoreError> {
    use aws_lc_rs::cipher::{AES_256, EncryptionContext, PaddedBlockEncryptingKey, UnboundCipherKey};
    let count = std::num::NonZeroU32::new(rounds).ok_or(KeystoreError::Crypto)?;
    let mut key = [0u8; 32];
    aws_lc_rs::pbkdf2::derive(
        aws_lc_rs::pbkdf2::PBKDF2_HMAC_SHA256,
        count,
        salt,
        password.as_bytes(),
        &mut key,
    );
    let iv = super::random::<16>()?;
    let encryptor = PaddedBlockEncryptingKey::cbc_pkcs7(UnboundCipherKey::new(&AES_256, &key)?)?;
    let mut encrypted = data.to_vec();
    encryptor.less_safe_encrypt(&mut encrypted, EncryptionContext::Iv128(iv.into()))?;
    let parameters = pkcs5::pbes2::Parameters::generate_pbkdf2_sha256_aes256cbc(rounds, salt, iv)
        .map_err(|_| KeystoreError::Crypto)?;
    let algorithm = AlgorithmIdentifierOwned {
        oid: pkcs5::pbes2::PBES2_OID,
        parameters: Some(Any::from_der(&parameters.to_der()?)?),
    };
    Ok((algorithm, encrypted))
}

/// Whether `der` is a PFX whose MAC verifies with `password` (SHA-1 or SHA-256 MACs, or PBMAC1:
/// those this module writes), and if not why: the caller writes the store again. What the check
/// costs is bounded before it is paid: the size by the caller, the salt and the iteration count
/// here.
pub(super) fn check(der: &[u8], password: &str) -> Result<(), Unopened> {
    let pfx = Pfx::from_der(der).map_err(|_| Unopened::Unreadable)?;
    let (Some(mac_data), Ok(content)) = (pfx.mac_data, pfx.auth_safe.content.decode_as::<OctetString>())
    else {
        return Err(Unopened::Unreadable);
    };
    if mac_data.mac.algorithm.oid == super::pbmac1::PBMAC1 {
        return super::pbmac1::verify(&mac_data, content.as_bytes(), password);
    }
    let salt = mac_data.mac_salt.as_bytes();
    if salt.len() > MAX_PKCS12_MAC_SALT {
        return Err(Unopened::MacSalt {
            len: salt.len(),
            max: MAX_PKCS12_MAC_SALT,
        });
    }
    let rounds = mac_data.iterations;
    if rounds > MAX_PKCS12_MAC_ITERATIONS {
        return Err(Unopened::MacIterations {
            count: rounds,
            max: MAX_PKCS12_MAC_ITERATIONS,
        });
    }
    if rounds < 1 {
        return Err(Unopened::Unreadable);
    }
    verify_mac(&mac_data, content.as_bytes(), password)
}

/// The MAC check proper, its cost bounded by the caller.
fn verify_mac(mac_data: &MacData, content: &[u8], password: &str) -> Result<(), Unopened> {
    use aws_lc_rs::hmac;
    let (salt, rounds) = (mac_data.mac_salt.as_bytes(), mac_data.iterations);
    let (algorithm, key) = match mac_data.mac.algorithm.oid {
        SHA1 => (
            hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
            derive_key_utf8::<sha1::Sha1>(password, salt, Pkcs12KeyType::Mac, rounds, 20),
        ),
        SHA256 => (
            hmac::HMAC_SHA256,
            derive_key_utf8::<sha2::Sha256>(password, salt, Pkcs12KeyType::Mac, rounds, 32),
        ),
        _ => return Err(Unopened::Unreadable),
    };
    let key = key.map_err(|_| Unopened::Password)?;
    hmac::verify(
        &hmac::Key::new(algorithm, &key),
        content,
        mac_data.mac.digest.as_bytes(),
    )
    .map_err(|_| Unopened::Password)
}
