//! CFSSL "standard" authentication: HMAC-SHA256 over the request bytes.

use aws_lc_rs::hmac;
use base64::{Engine, engine::general_purpose::STANDARD};

/// A hex key that could not be decoded. Never carries the key itself.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum KeyError {
    #[error("the key is empty")]
    Empty,
    /// Names the position of a bad digit, never the digit: it is part of the key. For the same
    /// reason the hex error is kept but not returned by `source()`: its message shows the digit.
    #[error("the key is not hex ({})", describe_hex_error(.0))]
    NotHex(hex::FromHexError),
}

fn describe_hex_error(err: &hex::FromHexError) -> String {
    match err {
        hex::FromHexError::InvalidHexCharacter { index, .. } => format!("invalid digit at position {index}"),
        hex::FromHexError::OddLength => "odd number of digits".into(),
        hex::FromHexError::InvalidStringLength => "wrong length".into(),
    }
}

/// The shared secret of a CFSSL auth key plus optional additional data.
///
/// `Debug` is written by hand so that a key never reaches a log line.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthKey {
    key: Vec<u8>,
    additional_data: Vec<u8>,
}

impl std::fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthKey")
            .field("key", &crate::redact::Redacted)
            .finish_non_exhaustive()
    }
}

impl AuthKey {
    /// Parses the hex key as stored in a Secret. Surrounding whitespace (a trailing newline from
    /// `echo`/`kubectl create secret --from-file`) is tolerated; CFSSL accepts either hex case.
    pub fn from_hex(hex_key: &str) -> Result<Self, KeyError> {
        let trimmed = hex_key.trim();
        if trimmed.is_empty() {
            return Err(KeyError::Empty);
        }
        let key = hex::decode(trimmed).map_err(KeyError::NotHex)?;
        Ok(Self {
            key,
            additional_data: Vec::new(),
        })
    }

    /// Bytes appended to the signed message. Stock multirootca never sets these, so any
    /// non-empty value only works against servers configured with the same data.
    pub fn with_additional_data(mut self, additional_data: impl Into<Vec<u8>>) -> Self {
        self.additional_data = additional_data.into();
        self
    }

    /// Whether additional data is mixed into every token.
    pub fn has_additional_data(&self) -> bool {
        !self.additional_data.is_empty()
    }

    /// The base64 token for `message`: HMAC-SHA256(key, message || additional_data).
    pub fn token(&self, message: &[u8]) -> String {
        let key = hmac::Key::new(hmac::HMAC_SHA256, &self.key);
        let mut mac = hmac::Context::with_key(&key);
        mac.update(message);
        mac.update(&self.additional_data);
        STANDARD.encode(mac.sign())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_matches_reference_vector() {
        let key = AuthKey::from_hex("0123456789abcdef0123456789abcdef").unwrap();
        assert_eq!(
            key.token(br#"{"label":"x"}"#),
            "rPX0BpqKVKJGpnjeN2OUIHmuclsXq4qSYdsa/w5mkRg="
        );
    }

    #[test]
    fn key_parsing_table() {
        let vector = AuthKey::from_hex("0123456789abcdef0123456789abcdef").unwrap();
        let cases: [(&str, Result<(), ()>); 6] = [
            ("0123456789abcdef0123456789abcdef", Ok(())),
            ("  0123456789abcdef0123456789abcdef\n", Ok(())),
            ("0123456789ABCDEF0123456789ABCDEF", Ok(())),
            ("", Err(())),
            ("\n", Err(())),
            ("xyz", Err(())),
        ];
        for (input, want) in cases {
            let got = AuthKey::from_hex(input);
            match want {
                Ok(()) => assert_eq!(got.as_ref(), Ok(&vector), "input {input:?}"),
                Err(()) => assert!(got.is_err(), "input {input:?} should fail"),
            }
        }
    }

    #[test]
    fn additional_data_changes_the_token() {
        let key = AuthKey::from_hex("00ff").unwrap();
        let with_ad = key.clone().with_additional_data(b"ad".to_vec());
        assert_ne!(key.token(b"m"), with_ad.token(b"m"));
        assert!(!key.has_additional_data() && with_ad.has_additional_data());
        // HMAC over m||ad equals HMAC over the concatenation.
        assert_eq!(with_ad.token(b"m"), key.token(b"mad"));
    }

    #[test]
    fn debug_never_shows_the_key() {
        let key = AuthKey::from_hex("deadbeef").unwrap();
        let shown = format!("{key:?}");
        assert!(shown.contains("redacted"), "{shown}");
        assert!(!shown.to_lowercase().contains("deadbeef"), "{shown}");
        assert!(!shown.contains("222"), "{shown}");
    }
}
