//! The keystores a Certificate asks for, encoded for its Secret: the password each uses
//! (`password` or `passwordSecretRef`, as cert-manager resolves them) and the PKCS#12 and JKS
//! stores (`crate::pki::keystore`) built from the issued key, chain and CA.
//!
//! Pure: the caller reads the password Secret (a missing one is `PasswordError::SecretNotFound`,
//! which cert-manager reports with a `KeystorePasswordSecretNotFound` Warning and retries) and
//! supplies the time JKS entries are stamped with.

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;

use super::{KeystoreData, SecretData, Store};
use crate::api::certmanager::{Certificate, SecretKeySelector};
use crate::pki::keys::{Key, KeyError};
use crate::pki::keystore::{
    KeystoreError, Pkcs12Profile, jks_keystore, jks_truststore, pkcs12_keystore, pkcs12_truststore,
};
use crate::pki::{ChainError, certificates_in};

/// The keystore kinds, as cert-manager names them in messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Pkcs12,
    Jks,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Pkcs12 => "PKCS12",
            Kind::Jks => "JKS",
        }
    }

    /// The spelling of the "must be set" message (`PKCS#12` there, `PKCS12` elsewhere).
    fn long_name(self) -> &'static str {
        match self {
            Kind::Pkcs12 => "PKCS#12",
            Kind::Jks => "JKS",
        }
    }
}

/// Why a keystore has no password (cert-manager's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PasswordError {
    /// The Warning Event's message; the caller emits it with reason
    /// `KeystorePasswordSecretNotFound` and retries.
    #[error("{} keystore password Secret {name:?} not found", kind.name())]
    SecretNotFound { kind: Kind, name: String },
    #[error("{} keystore password Secret contains no data for key {key:?}", kind.name())]
    NoData { kind: Kind, key: String },
    #[error("{} literal password cannot be empty", kind.name())]
    EmptyLiteral { kind: Kind },
    #[error("either passwordSecretRef or password must be set for {} keystore", kind.long_name())]
    NotSet { kind: Kind },
}

/// The Event reason for [`PasswordError::SecretNotFound`].
pub const REASON_PASSWORD_SECRET_NOT_FOUND: &str = "KeystorePasswordSecretNotFound";

/// The password Secret a keystore names, when it names one (`passwordSecretRef.name` set).
pub fn password_secret_name(secret_ref: Option<&SecretKeySelector>) -> Option<&str> {
    secret_ref.map(|r| r.name.as_str()).filter(|n| !n.is_empty())
}

/// A keystore's password: from the Secret `passwordSecretRef` names (`password_secret` is that
/// Secret as read, `None` when it does not exist) if a name is set, else the literal
/// `password`. Bytes that are not UTF-8 read as U+FFFD, as Go's string conversion does.
pub fn keystore_password(
    kind: Kind,
    literal: Option<&str>,
    secret_ref: Option<&SecretKeySelector>,
    password_secret: Option<&Secret>,
) -> Result<String, PasswordError> {
    if let (Some(name), Some(selector)) = (password_secret_name(secret_ref), secret_ref) {
        let secret = password_secret.ok_or_else(|| PasswordError::SecretNotFound {
            kind,
            name: name.to_string(),
        })?;
        let value = secret
            .data
            .as_ref()
            .and_then(|d| d.get(&selector.key))
            .filter(|v| !v.0.is_empty())
            .ok_or_else(|| PasswordError::NoData {
                kind,
                key: selector.key.clone(),
            })?;
        return Ok(String::from_utf8_lossy(&value.0).into_owned());
    }
    match literal {
        Some("") => Err(PasswordError::EmptyLiteral { kind }),
        Some(password) => Ok(password.to_string()),
        None => Err(PasswordError::NotSet { kind }),
    }
}

/// Why the keystores cannot be encoded (wrapped as cert-manager wraps them).
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    #[error("failed to add keystores to Secret: {0}")]
    Password(#[from] PasswordError),
    #[error("failed to add keystores to Secret: the private key cannot be read")]
    Key(#[source] KeyError),
    #[error("failed to add keystores to Secret: the certificate chain cannot be read")]
    Chain(#[source] ChainError),
    #[error("failed to add keystores to Secret: the CA certificates cannot be read")]
    Ca(#[source] ChainError),
    #[error("failed to add keystores to Secret: error encoding {kind} bundle")]
    Keystore {
        kind: &'static str,
        #[source]
        source: KeystoreError,
    },
    #[error("failed to add keystores to Secret: error encoding {kind} trust store bundle")]
    Truststore {
        kind: &'static str,
        #[source]
        source: KeystoreError,
    },
}

/// The passwords of the keystores the Certificate asks to create, resolved by the caller with
/// [`keystore_password`]; a store asked for without its password is refused.
#[derive(Clone, Default)]
pub struct Passwords {
    pub pkcs12: Option<String>,
    pub jks: Option<String>,
}

/// The material every store is built from: the key and the DER of the chain and the CAs.
struct Material {
    key: Key,
    chain: Vec<Vec<u8>>,
    ca: Vec<Vec<u8>>,
}

fn material(data: &SecretData<'_>) -> Result<Material, EncodeError> {
    let key = Key::from_pem(data.private_key).map_err(EncodeError::Key)?;
    let chain = certificates_in(&String::from_utf8_lossy(data.certificate)).map_err(EncodeError::Chain)?;
    let ca = if data.ca.is_empty() {
        Vec::new()
    } else {
        certificates_in(&String::from_utf8_lossy(data.ca)).map_err(EncodeError::Ca)?
    };
    Ok(Material { key, chain, ca })
}

fn keystore_error(kind: &'static str) -> impl Fn(KeystoreError) -> EncodeError {
    move |source| EncodeError::Keystore { kind, source }
}

fn truststore_error(kind: &'static str) -> impl Fn(KeystoreError) -> EncodeError {
    move |source| EncodeError::Truststore { kind, source }
}

/// The stores `crt` asks to create (`create: true`), ready for [`super::secret_body`]; a
/// truststore only when the CA is known. `now` stamps the JKS entries.
pub fn encode_keystores(
    crt: &Certificate,
    data: &SecretData<'_>,
    passwords: &Passwords,
    now: Timestamp,
) -> Result<KeystoreData, EncodeError> {
    let mut out = KeystoreData::default();
    let Some(asked) = crt.spec.keystores.as_ref() else {
        return Ok(out);
    };
    let pkcs12 = asked.pkcs12.as_ref().filter(|k| k.create);
    let jks = asked.jks.as_ref().filter(|k| k.create);
    if pkcs12.is_none() && jks.is_none() {
        return Ok(out);
    }
    let m = material(data)?;
    if let Some(spec) = pkcs12 {
        let password = passwords
            .pkcs12
            .as_deref()
            .ok_or(PasswordError::NotSet { kind: Kind::Pkcs12 })?;
        let profile = Pkcs12Profile::parse(Some(&spec.profile)).map_err(keystore_error("PKCS12"))?;
        out.pkcs12 = Some(Store {
            keystore: pkcs12_keystore(&m.key, &m.chain, &m.ca, password, profile)
                .map_err(keystore_error("PKCS12"))?,
            truststore: pkcs12_truststore(&m.ca, password, profile).map_err(truststore_error("PKCS12"))?,
        });
    }
    if let Some(spec) = jks {
        let password = passwords
            .jks
            .as_deref()
            .ok_or(PasswordError::NotSet { kind: Kind::Jks })?;
        out.jks = Some(Store {
            keystore: jks_keystore(&m.key, &m.chain, &m.ca, password, spec.alias.as_deref(), now)
                .map_err(keystore_error("JKS"))?,
            truststore: jks_truststore(&m.ca, password, now).map_err(truststore_error("JKS"))?,
        });
    }
    Ok(out)
}

impl std::fmt::Debug for Passwords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Passwords")
            .field("pkcs12", &crate::redact::option(&self.pkcs12))
            .field("jks", &crate::redact::option(&self.jks))
            .finish()
    }
}

impl Drop for Passwords {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.pkcs12);
        zeroize::Zeroize::zeroize(&mut self.jks);
    }
}

#[cfg(test)]
mod tests;
