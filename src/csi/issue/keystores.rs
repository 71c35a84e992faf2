//! The files a volume asks for beyond its PEMs: csi-driver's PKCS#12 keystore, and our JKS
//! keystore and key-and-chain bundle. CPU only (PBKDF2 and encryption), so it runs on the pool
//! with the rest of [`super::files::issued`].
//!
//! What each holds, and why:
//! - PKCS#12: the key with the chain as issued (leaf first) and no CA certificates, as csi-driver
//!   writes it, so a migrated reader finds the same entries;
//! - JKS: cert-manager's `keystore.jks` layout (the key entry `certificate` with the chain, each
//!   CA a trusted entry `ca`, `ca-1`, ...), since a Java reader of a volume has no other trust
//!   store in that format;
//! - the bundle: the private key then the chain, cert-manager's `CombinedPEM` order, in one file
//!   so a reader can never pair a renewed key with the previous certificate.

use jiff::Timestamp;

use crate::csi::attributes::Files;
use crate::csi::store::File;
use crate::pki::keys::Key;
use crate::pki::keystore::{KeystoreError, jks_keystore, pkcs12_keystore};
use crate::pki::{ChainError, certificates_in};

/// Why a keystore of the volume cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum KeystoreFileError {
    #[error("its certificate chain cannot be read: {0}")]
    Chain(#[source] ChainError),
    #[error("its CA certificates cannot be read: {0}")]
    Ca(#[source] ChainError),
    #[error("cannot write the PKCS#12 keystore: {0}")]
    Pkcs12(#[source] KeystoreError),
    #[error("cannot write the JKS keystore: {0}")]
    Jks(#[source] KeystoreError),
}

/// The keystore and bundle files `files` asks for; `key_pem` is the key as the volume's key file
/// holds it, `created` the JKS entries' date (the leaf's notBefore, so a rewrite is identical).
pub fn extra_files(
    key: &Key,
    key_pem: &str,
    certificate_pem: &str,
    ca_pem: &str,
    files: &Files,
    created: Timestamp,
) -> Result<Vec<File>, KeystoreFileError> {
    let mut out = Vec::new();
    if let Some(bundle) = &files.bundle {
        let mut contents = key_pem.to_string();
        if !contents.ends_with('\n') {
            contents.push('\n');
        }
        contents.push_str(certificate_pem);
        out.push(file(bundle, contents.into_bytes()));
    }
    if files.pkcs12.is_none() && files.jks.is_none() {
        return Ok(out);
    }
    let chain = certificates_in(certificate_pem).map_err(KeystoreFileError::Chain)?;
    if let Some(store) = &files.pkcs12 {
        let der = pkcs12_keystore(key, &chain, &[], &store.password, files.pkcs12_profile)
            .map_err(KeystoreFileError::Pkcs12)?;
        out.push(file(&store.file, der));
    }
    if let Some(store) = &files.jks {
        let ca = if ca_pem.trim().is_empty() {
            Vec::new()
        } else {
            certificates_in(ca_pem).map_err(KeystoreFileError::Ca)?
        };
        let der =
            jks_keystore(key, &chain, &ca, &store.password, None, created).map_err(KeystoreFileError::Jks)?;
        out.push(file(&store.file, der));
    }
    Ok(out)
}

fn file(name: &str, contents: Vec<u8>) -> File {
    File {
        name: name.to_string(),
        contents,
    }
}
