//! Private keys from PEM. rcgen (with ring) reads only PKCS#8, while cfssl writes ECDSA keys as
//! SEC1 `EC PRIVATE KEY` and openssl often writes RSA keys as PKCS#1, so those two are wrapped
//! into PKCS#8 first.

use rcgen::KeyPair;
use rustls::pki_types::PrivatePkcs8KeyDer;

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("no PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY block")]
    NoKey,
    #[error("EC PRIVATE KEY without its curve")]
    NoCurve,
    #[error("malformed {0}")]
    Malformed(&'static str),
    #[error("unusable key: {0}")]
    Unusable(#[source] rcgen::Error),
}

const RSA_ENCRYPTION: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
const EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const OCTET_STRING: u8 = 0x04;
const NULL: u8 = 0x05;
const OID: u8 = 0x06;
/// `[0] EXPLICIT`, which holds the curve in a SEC1 key.
const CONTEXT_0: u8 = 0xa0;

/// Reads the first private key block of `text`.
pub fn from_pem(text: &str) -> Result<KeyPair, KeyError> {
    let blocks = pem::parse_many(text).map_err(|_| KeyError::Malformed("PEM"))?;
    let block = blocks
        .iter()
        .find(|b| b.tag().ends_with("PRIVATE KEY"))
        .ok_or(KeyError::NoKey)?;
    let der = block.contents();
    let pkcs8 = match block.tag() {
        "PRIVATE KEY" => der.to_vec(),
        "EC PRIVATE KEY" => wrap_sec1(der)?,
        "RSA PRIVATE KEY" => wrap_pkcs8(&tlv(OID, RSA_ENCRYPTION), &tlv(NULL, &[]), der),
        _ => return Err(KeyError::NoKey),
    };
    KeyPair::try_from(&PrivatePkcs8KeyDer::from(pkcs8)).map_err(KeyError::Unusable)
}

fn wrap_sec1(sec1: &[u8]) -> Result<Vec<u8>, KeyError> {
    let malformed = || KeyError::Malformed("EC PRIVATE KEY");
    let (tag, body, _) = read_tlv(sec1).ok_or_else(malformed)?;
    if tag != SEQUENCE {
        return Err(malformed());
    }
    // ECPrivateKey ::= SEQUENCE { version, privateKey, [0] parameters OPTIONAL, [1] publicKey OPTIONAL }
    let mut rest = body;
    while !rest.is_empty() {
        let (tag, inner, after) = read_tlv(rest).ok_or_else(malformed)?;
        if tag == CONTEXT_0 {
            let (oid_tag, _, _) = read_tlv(inner).ok_or_else(malformed)?;
            if oid_tag != OID {
                return Err(malformed());
            }
            return Ok(wrap_pkcs8(&tlv(OID, EC_PUBLIC_KEY), inner, sec1));
        }
        rest = after;
    }
    Err(KeyError::NoCurve)
}

/// PrivateKeyInfo ::= SEQUENCE { version 0, AlgorithmIdentifier, OCTET STRING key }
fn wrap_pkcs8(algorithm: &[u8], parameters: &[u8], key: &[u8]) -> Vec<u8> {
    let identifier = tlv(SEQUENCE, &[algorithm, parameters].concat());
    let body = [&tlv(INTEGER, &[0])[..], &identifier, &tlv(OCTET_STRING, key)].concat();
    tlv(SEQUENCE, &body)
}

fn tlv(tag: u8, value: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = value.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(value);
    out
}

/// Splits one DER element off `input`: (tag, value, rest). Single-byte tags only.
fn read_tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > std::mem::size_of::<usize>() || rest.len() < count {
            return None;
        }
        let (len_bytes, after) = rest.split_at(count);
        rest = after;
        len_bytes.iter().fold(0usize, |n, b| (n << 8) | usize::from(*b))
    };
    if rest.len() < len {
        return None;
    }
    let (value, rest) = rest.split_at(len);
    Some((tag, value, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pkcs8() {
        let key = KeyPair::generate().unwrap();
        let back = from_pem(&key.serialize_pem()).unwrap();
        assert_eq!(back.public_key_raw(), key.public_key_raw());
    }

    #[test]
    fn lengths_round_trip() {
        for len in [0usize, 1, 127, 128, 255, 256, 70_000] {
            let value = vec![7u8; len];
            let encoded = tlv(OCTET_STRING, &value);
            let (tag, back, rest) = read_tlv(&encoded).unwrap();
            assert_eq!((tag, back.len(), rest.len()), (OCTET_STRING, len, 0));
        }
        assert!(read_tlv(&[0x04, 0x82, 0x01]).is_none());
        assert!(read_tlv(&[0x04, 0x05, 1, 2]).is_none());
    }

    #[test]
    fn refuses_non_keys() {
        assert!(matches!(
            from_pem("nothing"),
            Err(KeyError::NoKey | KeyError::Malformed(_))
        ));
        let cert = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(matches!(from_pem(cert), Err(KeyError::NoKey)));
    }
}
