//! An issued request made into what the volume's files hold, once the certificate is known
//! to be for the volume's key: no I/O, CPU only (an RSA key's PEM), so it runs on the pool.

use jiff::Timestamp;
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::certificates::decode::{DecodeError, leaf_certificate, public_keys_equal};
use crate::csi::attributes::Attributes;
use crate::csi::node::Issued;
use crate::pki::keys::{Key, KeyError};

use super::keystores::{KeystoreFileError, extra_files};
use crate::certificates::renewal::spread_of;
use crate::csi::due::next_issuance;

/// Why an issued certificate cannot be written into the volume.
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    #[error("its certificate cannot be read: {0}")]
    Decode(#[source] DecodeError),
    #[error("its certificate cannot be parsed: {0}")]
    Parse(String),
    #[error("its certificate's validity is out of range")]
    Validity,
    #[error("its certificate is not for the volume's private key")]
    OtherKey,
    #[error("its certificate's public key cannot be compared with the volume's key: {0}")]
    Compare(String),
    #[error("cannot encode the volume's private key: {0}")]
    Key(#[source] KeyError),
    #[error(transparent)]
    Keystore(#[from] KeystoreFileError),
}

/// The volume's files from `certificate` (leaf first) and `ca`, after checking that the leaf
/// is for `key`; the key written in the attributes' encoding. `issued_at` and the volume's
/// ID place its next issuance ([`next_issuance`]).
pub fn issued(
    key: &Key,
    (certificate, ca): (String, String),
    attributes: &Attributes,
    (volume_id, issued_at): (&str, Timestamp),
) -> Result<Issued, CertificateError> {
    let der = leaf_certificate(certificate.as_bytes()).map_err(CertificateError::Decode)?;
    let (_, leaf) = X509Certificate::from_der(&der).map_err(|e| CertificateError::Parse(e.to_string()))?;
    if !public_keys_equal(leaf.public_key(), key).map_err(CertificateError::Compare)? {
        return Err(CertificateError::OtherKey);
    }
    let validity = leaf.validity();
    let at = |seconds: i64| Timestamp::from_second(seconds).map_err(|_| CertificateError::Validity);
    let not_before = at(validity.not_before.timestamp())?;
    let not_after = at(validity.not_after.timestamp())?;
    let private_key_pem = key.to_pem(attributes.encoding).map_err(CertificateError::Key)?;
    let keystores = extra_files(
        key,
        &private_key_pem,
        &certificate,
        &ca,
        &attributes.files,
        not_before,
    )?;
    Ok(Issued {
        private_key_pem,
        certificate_pem: certificate,
        ca_pem: ca,
        keystores,
        next_issuance_time: next_issuance(
            not_before,
            not_after,
            attributes.renew_before,
            issued_at,
            spread_of(volume_id),
        ),
        not_after,
    })
}
