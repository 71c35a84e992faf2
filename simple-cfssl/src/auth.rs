//! cfssl's "standard" authentication: the token is HMAC-SHA256 over the exact inner request
//! bytes (then any additional data), keyed with the hex-decoded profile key.

use std::fmt;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// A profile's HMAC key. Debug output never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthKey {
    key: Vec<u8>,
    additional_data: Vec<u8>,
}

impl fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AuthKey(..)")
    }
}

impl AuthKey {
    /// Either hex case is accepted, as Go's decoder does.
    pub fn from_hex(hex_key: &str, additional_data: Vec<u8>) -> Result<AuthKey, hex::FromHexError> {
        Ok(AuthKey {
            key: hex::decode(hex_key)?,
            additional_data,
        })
    }

    fn mac(&self, request: &[u8]) -> Hmac<Sha256> {
        // HMAC takes keys of any length, so this cannot fail.
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
        mac.update(request);
        mac.update(&self.additional_data);
        mac
    }

    /// The token a client sends for `request`.
    #[cfg(test)]
    pub fn token(&self, request: &[u8]) -> Vec<u8> {
        self.mac(request).finalize().into_bytes().to_vec()
    }

    /// Checks `token` in constant time; it must be exactly 32 bytes.
    pub fn verify(&self, request: &[u8], token: &[u8]) -> bool {
        token.len() == 32 && self.mac(request).verify_slice(token).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference vector, checked with openssl.
    #[test]
    fn known_vector() {
        let key = AuthKey::from_hex("0123456789abcdef0123456789abcdef", vec![]).unwrap();
        let token = key.token(br#"{"label":"x"}"#);
        assert_eq!(
            hex::encode(&token),
            "acf5f4069a8a54a246a678de3763942079ae725b17ab8a9261db1aff0e669118"
        );
        assert!(key.verify(br#"{"label":"x"}"#, &token));
        assert!(!key.verify(br#"{"label":"y"}"#, &token));
        assert!(!key.verify(br#"{"label":"x"}"#, &token[..31]));
    }

    #[test]
    fn upper_case_hex_and_additional_data() {
        let lower = AuthKey::from_hex("00ff", b"ad".to_vec()).unwrap();
        let upper = AuthKey::from_hex("00FF", b"ad".to_vec()).unwrap();
        assert_eq!(lower, upper);
        let plain = AuthKey::from_hex("00ff", vec![]).unwrap();
        assert_ne!(lower.token(b"r"), plain.token(b"r"));
        assert_eq!(lower.token(b"r"), plain.token(b"rad"));
        assert_eq!(format!("{lower:?}"), "AuthKey(..)");
    }
}
