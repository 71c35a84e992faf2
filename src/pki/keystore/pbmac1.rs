//! PBMAC1 (RFC 8018 section 7.1, for PKCS#12 by RFC 9579), the MAC of the `Modern2026` profile,
//! written as go-pkcs12's `Modern2026` encoder (what cert-manager uses) writes it: PBKDF2 with
//! HMAC-SHA256 over the password's UTF-8 bytes (not the BMP string of the older MACs), a
//! 16-byte salt, 2048 iterations, a 32-byte key, then HMAC-SHA256. Its parameters carry the
//! salt and count; the MacData's own `macSalt` is empty and `iterations` 0, as go-pkcs12
//! writes them (RFC 9579: both are ignored).
//!
//! A stored store's PBMAC1 is checked with PBKDF2-HMAC-SHA1/256/512 and HMAC-SHA1/256/512 (what
//! go-pkcs12 reads), its key length 20 to 64 bytes (RFC 9579 refuses shorter keys: a MAC that
//! short can be forged), its cost bounded like the other MACs'.

use aws_lc_rs::{hmac, pbkdf2};
use der::Decode;
use der::asn1::{Any, ObjectIdentifier, OctetString};
use pkcs12::cms::cert::x509::spki::AlgorithmIdentifierOwned;
use pkcs12::{DigestInfo, MacData};
use yasna::models::ObjectIdentifier as Oid;

use super::{KeystoreError, Unopened};
use super::{MAX_PKCS12_MAC_ITERATIONS, MAX_PKCS12_MAC_SALT};

pub(super) const PBMAC1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.5.14");
const PBKDF2: &[u64] = &[1, 2, 840, 113_549, 1, 5, 12];
const HMAC_SHA1: &[u64] = &[1, 2, 840, 113_549, 2, 7];
const HMAC_SHA256: &[u64] = &[1, 2, 840, 113_549, 2, 9];
const HMAC_SHA512: &[u64] = &[1, 2, 840, 113_549, 2, 11];

/// The key length written: HMAC-SHA256's output.
const KEY_LEN: usize = 32;

/// RFC 9579's shortest key accepted, and the longest (SHA-512's output, as go-pkcs12 caps it).
const KEY_LEN_RANGE: std::ops::RangeInclusive<u64> = 20..=64;

/// PBMAC1's parameters, as read from a store.
struct Params {
    salt: Vec<u8>,
    iterations: u64,
    key_len: u64,
    prf: Oid,
    mac: Oid,
}

/// The MacData of a `Modern2026` store over `data`.
pub(super) fn mac(
    data: &[u8],
    password: &str,
    salt: &[u8],
    iterations: u32,
) -> Result<MacData, KeystoreError> {
    let rounds = std::num::NonZeroU32::new(iterations).ok_or(KeystoreError::Crypto)?;
    let mut key = [0u8; KEY_LEN];
    pbkdf2::derive(
        pbkdf2::PBKDF2_HMAC_SHA256,
        rounds,
        salt,
        password.as_bytes(),
        &mut key,
    );
    let tag = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &key), data);
    let parameters = yasna::construct_der(|w| {
        w.write_sequence(|w| {
            w.next().write_sequence(|w| {
                w.next().write_oid(&Oid::from_slice(PBKDF2));
                w.next().write_sequence(|w| {
                    w.next().write_bytes(salt);
                    w.next().write_u32(iterations);
                    w.next().write_u64(KEY_LEN as u64);
                    w.next()
                        .write_sequence(|w| w.next().write_oid(&Oid::from_slice(HMAC_SHA256)));
                });
            });
            w.next()
                .write_sequence(|w| w.next().write_oid(&Oid::from_slice(HMAC_SHA256)));
        });
    });
    Ok(MacData {
        mac: DigestInfo {
            algorithm: AlgorithmIdentifierOwned {
                oid: PBMAC1,
                parameters: Some(Any::from_der(&parameters)?),
            },
            digest: OctetString::new(tag.as_ref())?,
        },
        mac_salt: OctetString::new(Vec::new())?,
        iterations: 0,
    })
}

/// An AlgorithmIdentifier's OID; a NULL or absent parameter only.
// The closures are needed: yasna's readers carry lifetimes a method path does not satisfy.
#[allow(clippy::redundant_closure_for_method_calls)]
fn read_algorithm(r: yasna::BERReader<'_, '_>) -> yasna::ASN1Result<Oid> {
    r.read_sequence(|r| {
        let oid = r.next().read_oid()?;
        r.read_optional(|r| r.read_null())?;
        Ok(oid)
    })
}

#[allow(clippy::redundant_closure_for_method_calls)]
fn parse(der: &[u8]) -> Option<Params> {
    yasna::parse_der(der, |r| {
        r.read_sequence(|r| {
            let (salt, iterations, key_len, prf) = r.next().read_sequence(|r| {
                if r.next().read_oid()? != Oid::from_slice(PBKDF2) {
                    return Err(yasna::ASN1Error::new(yasna::ASN1ErrorKind::Invalid));
                }
                r.next().read_sequence(|r| {
                    let salt = r.next().read_bytes()?;
                    let iterations = r.next().read_u64()?;
                    let key_len = r.read_optional(|r| r.read_u64())?;
                    let prf = r.read_optional(read_algorithm)?;
                    Ok((salt, iterations, key_len, prf))
                })
            })?;
            let mac = read_algorithm(r.next())?;
            Ok(Params {
                salt,
                iterations,
                key_len: key_len.unwrap_or(0),
                prf: prf.unwrap_or_else(|| Oid::from_slice(HMAC_SHA1)),
                mac,
            })
        })
    })
    .ok()
}

/// Whether the PBMAC1 `mac_data` over `content` verifies with `password`; its cost bounded
/// before it is paid.
pub(super) fn verify(mac_data: &MacData, content: &[u8], password: &str) -> Result<(), Unopened> {
    let der = mac_data
        .mac
        .algorithm
        .parameters
        .as_ref()
        .and_then(|p| der::Encode::to_der(p).ok())
        .ok_or(Unopened::Unreadable)?;
    let params = parse(&der).ok_or(Unopened::Unreadable)?;
    if params.salt.len() > MAX_PKCS12_MAC_SALT {
        return Err(Unopened::MacSalt {
            len: params.salt.len(),
            max: MAX_PKCS12_MAC_SALT,
        });
    }
    let count = i32::try_from(params.iterations).unwrap_or(i32::MAX);
    if count > MAX_PKCS12_MAC_ITERATIONS {
        return Err(Unopened::MacIterations {
            count,
            max: MAX_PKCS12_MAC_ITERATIONS,
        });
    }
    let rounds = std::num::NonZeroU32::new(u32::try_from(count).unwrap_or(0)).ok_or(Unopened::Unreadable)?;
    if !KEY_LEN_RANGE.contains(&params.key_len) {
        return Err(Unopened::Unreadable);
    }
    let prf = match params.prf.components().as_slice() {
        HMAC_SHA1 => pbkdf2::PBKDF2_HMAC_SHA1,
        HMAC_SHA256 => pbkdf2::PBKDF2_HMAC_SHA256,
        HMAC_SHA512 => pbkdf2::PBKDF2_HMAC_SHA512,
        _ => return Err(Unopened::Unreadable),
    };
    let algorithm = match params.mac.components().as_slice() {
        HMAC_SHA1 => hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
        HMAC_SHA256 => hmac::HMAC_SHA256,
        HMAC_SHA512 => hmac::HMAC_SHA512,
        _ => return Err(Unopened::Unreadable),
    };
    let mut key = vec![0u8; usize::try_from(params.key_len).map_err(|_| Unopened::Unreadable)?];
    pbkdf2::derive(prf, rounds, &params.salt, password.as_bytes(), &mut key);
    hmac::verify(
        &hmac::Key::new(algorithm, &key),
        content,
        mac_data.mac.digest.as_bytes(),
    )
    .map_err(|_| Unopened::Password)
}
