//! The PKCS#10 request (CSR) for a Certificate spec, as cert-manager's `GenerateCSR` and Go's
//! `x509.CreateCertificateRequest` make it (the LiteralCertificateSubject, NameConstraints and
//! OtherNames features on):
//!
//! - subject: [`super::subject::subject_der`];
//! - extensions, in this order: subjectAltName (DNS, email, IP, URI, otherName; critical only
//!   when the subject is empty), keyUsage (critical; `digital signature` + `key encipherment`
//!   when `usages` is empty, `cert sign` added for a CA) and extKeyUsage (only when an EKU is
//!   asked for) unless `encodeUsagesInRequest` is false, nameConstraints (critical as asked);
//! - signed with `signatureAlgorithm`, or cert-manager's default for the key.
//!
//! `isCA` (beyond the cert sign bit) and `duration` are not in the CSR: they go in the
//! CertificateRequest's spec.

mod extensions;

pub use extensions::{
    DEFAULT_USAGES, Extension, Usages, ext_key_usage_oid, key_usage, key_usage_bit, key_usages,
};

use yasna::Tag;
use yasna::models::ObjectIdentifier;

use super::keys::{Key, KeyError, SignatureAlgorithm};
use super::subject::{self, SubjectError};
use crate::api::certmanager::CertificateSpec;

/// PKCS#9 extensionRequest, the attribute that carries the extensions.
const EXTENSION_REQUEST: &[u64] = &[1, 2, 840, 113_549, 1, 9, 14];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error(
        "at least one of commonName (from the commonName field or from a literalSubject), dnsNames, emailSANs, ipAddresses, otherNames, or uriSANs must be set"
    )]
    NoName,
    #[error(transparent)]
    Subject(#[from] SubjectError),
    /// Usages cert-manager does not know, space-separated as Go prints a slice.
    #[error("failed to build key usages: unknown key usages: [{0}]")]
    UnknownUsages(String),
    #[error("ParseAddr({0:?}): unable to parse IP")]
    IpAddress(String),
    #[error("invalid CIDR address: {0}")]
    Cidr(String),
    #[error("x509: {0:?} cannot be encoded as an IA5String")]
    NotIa5(String),
    /// An otherName whose OID or value cannot be encoded (Go's message).
    #[error("{0}")]
    OtherName(String),
    #[error(transparent)]
    Key(#[from] KeyError),
}

/// The CSR for `spec`, signed by `key`, as PEM `CERTIFICATE REQUEST`.
pub fn build_csr(spec: &CertificateSpec, key: &Key) -> Result<String, RequestError> {
    let der = build_csr_der(spec, key)?;
    Ok(super::pem_lf(&pem::Pem::new("CERTIFICATE REQUEST", der)))
}

/// The CSR for `spec`, signed by `key`, as DER.
pub fn build_csr_der(spec: &CertificateSpec, key: &Key) -> Result<Vec<u8>, RequestError> {
    let (rdns, common_name) = if spec.literal_subject.is_empty() {
        (subject::name_rdns(spec), spec.common_name.clone())
    } else {
        (
            subject::literal_rdns(&spec.literal_subject)?,
            subject::literal_subject_common_name(&spec.literal_subject)?,
        )
    };
    let sans = extensions::Sans::of(spec)?;
    if common_name.is_empty() && sans.is_empty() {
        return Err(RequestError::NoName);
    }
    let algorithm = SignatureAlgorithm::of(&spec.signature_algorithm, key.spec)?;
    let subject_der = subject::encode_name(&rdns)?;
    let exts = request_extensions(spec, &sans, &subject_der)?;
    let info = request_info(&subject_der, key.public_key_der(), &exts);
    let signature = key.sign(algorithm, &info)?;
    Ok(yasna::construct_der(|w| {
        w.write_sequence(|w| {
            w.next().write_der(&info);
            write_algorithm(w.next(), algorithm);
            w.next().write_bitvec_bytes(&signature, signature.len() * 8);
        });
    }))
}

/// The extensions of the request for `spec`, in the order they are written.
pub fn request_extensions_for(spec: &CertificateSpec) -> Result<Vec<Extension>, RequestError> {
    let rdns = if spec.literal_subject.is_empty() {
        subject::name_rdns(spec)
    } else {
        subject::literal_rdns(&spec.literal_subject)?
    };
    let sans = extensions::Sans::of(spec)?;
    request_extensions(spec, &sans, &subject::encode_name(&rdns)?)
}

fn request_extensions(
    spec: &CertificateSpec,
    sans: &extensions::Sans,
    subject_der: &[u8],
) -> Result<Vec<Extension>, RequestError> {
    let mut exts = Vec::new();
    if !sans.is_empty() {
        exts.push(sans.extension(subject_der == [0x30, 0x00]));
    }
    if spec.encode_usages_in_request != Some(false) {
        exts.extend(extensions::usage_extensions(spec)?);
    }
    exts.extend(extensions::name_constraints(spec.name_constraints.as_deref())?);
    Ok(exts)
}

/// `CertificationRequestInfo`: version 0, subject, public key, and the extensionRequest
/// attribute when there are extensions (else no attribute at all).
fn request_info(subject_der: &[u8], public_key_der: &[u8], exts: &[Extension]) -> Vec<u8> {
    yasna::construct_der(|w| {
        w.write_sequence(|w| {
            w.next().write_u8(0);
            w.next().write_der(subject_der);
            w.next().write_der(public_key_der);
            w.next().write_tagged_implicit(Tag::context(0), |w| {
                w.write_set(|w| {
                    if exts.is_empty() {
                        return;
                    }
                    w.next().write_sequence(|w| {
                        w.next()
                            .write_oid(&ObjectIdentifier::from_slice(EXTENSION_REQUEST));
                        w.next().write_set(|w| {
                            w.next().write_sequence(|w| {
                                for ext in exts {
                                    w.next().write_sequence(|w| write_extension(w, ext));
                                }
                            });
                        });
                    });
                });
            });
        });
    })
}

fn write_extension(w: &mut yasna::DERWriterSeq<'_>, ext: &Extension) {
    w.next().write_oid(&ObjectIdentifier::from_slice(ext.oid));
    if ext.critical {
        w.next().write_bool(true);
    }
    w.next().write_bytes(&ext.value);
}

/// The signature algorithm's OID; RSA's carry a NULL parameter, ECDSA's and Ed25519's none.
pub fn signature_algorithm_oid(algorithm: SignatureAlgorithm) -> &'static [u64] {
    match algorithm {
        SignatureAlgorithm::Sha256WithRsa => &[1, 2, 840, 113_549, 1, 1, 11],
        SignatureAlgorithm::Sha384WithRsa => &[1, 2, 840, 113_549, 1, 1, 12],
        SignatureAlgorithm::Sha512WithRsa => &[1, 2, 840, 113_549, 1, 1, 13],
        SignatureAlgorithm::EcdsaWithSha256 => &[1, 2, 840, 10_045, 4, 3, 2],
        SignatureAlgorithm::EcdsaWithSha384 => &[1, 2, 840, 10_045, 4, 3, 3],
        SignatureAlgorithm::EcdsaWithSha512 => &[1, 2, 840, 10_045, 4, 3, 4],
        SignatureAlgorithm::PureEd25519 => &[1, 3, 101, 112],
    }
}

fn write_algorithm(w: yasna::DERWriter<'_>, algorithm: SignatureAlgorithm) {
    w.write_sequence(|w| {
        w.next()
            .write_oid(&ObjectIdentifier::from_slice(signature_algorithm_oid(algorithm)));
        if matches!(
            algorithm,
            SignatureAlgorithm::Sha256WithRsa
                | SignatureAlgorithm::Sha384WithRsa
                | SignatureAlgorithm::Sha512WithRsa
        ) {
            w.next().write_null();
        }
    });
}

#[cfg(test)]
mod tests;
