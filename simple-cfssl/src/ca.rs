//! The certificate authority: one root, one intermediate per label, leaf signing from CSRs.

use std::collections::BTreeMap;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DnType, ExtendedKeyUsagePurpose,
    IsCa, Issuer, KeyPair, KeyUsagePurpose, SerialNumber,
};
use time::OffsetDateTime;

use crate::config::Profile;

/// multirootca backdates `notBefore` so that clocks a little behind still accept the certificate.
pub const BACKDATE: Duration = Duration::from_secs(5 * 60);

pub struct Signer {
    pub cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

pub struct Ca {
    pub root_pem: String,
    pub signers: BTreeMap<String, Signer>,
}

#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error("CSR: {0}")]
    Csr(rcgen::Error),
    #[error("profile: {0}")]
    Profile(String),
    #[error("signing: {0}")]
    Sign(rcgen::Error),
}

fn ca_params(cn: &str, path_len: Option<u8>) -> CertificateParams {
    let mut p = CertificateParams::default();
    p.distinguished_name.push(DnType::CommonName, cn);
    p.distinguished_name
        .push(DnType::OrganizationName, "simple-cfssl");
    p.is_ca = IsCa::Ca(match path_len {
        Some(n) => BasicConstraints::Constrained(n),
        None => BasicConstraints::Unconstrained,
    });
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let now = OffsetDateTime::now_utc();
    p.not_before = now - BACKDATE;
    p.not_after = now + time::Duration::days(3650);
    p.use_authority_key_identifier_extension = path_len.is_some();
    p
}

impl Ca {
    /// A fresh root and one intermediate per label (ECDSA P-256, as the Go issuer's test CA).
    pub fn generate(labels: &[String]) -> anyhow::Result<Ca> {
        let root_key = KeyPair::generate()?;
        let root_params = ca_params("simple-cfssl root CA", None);
        let root_cert = root_params.self_signed(&root_key)?;
        let root = Issuer::new(root_params, root_key);
        let mut signers = BTreeMap::new();
        for label in labels {
            let key = KeyPair::generate()?;
            let params = ca_params(&format!("simple-cfssl {label}"), Some(0));
            let cert = params.signed_by(&key, &root)?;
            signers.insert(
                label.clone(),
                Signer {
                    cert_pem: cert.pem(),
                    issuer: Issuer::new(params, key),
                },
            );
        }
        Ok(Ca {
            root_pem: root_cert.pem(),
            signers,
        })
    }

    /// Signs `csr_pem` with `label`'s intermediate: subject and SANs from the CSR, usages and
    /// lifetime from the profile, `notBefore` backdated.
    pub fn sign(&self, label: &str, csr_pem: &str, profile: &Profile) -> Result<String, SignError> {
        let signer = self.signers.get(label).expect("label checked by the caller");
        let mut csr = CertificateSigningRequestParams::from_pem(csr_pem).map_err(SignError::Csr)?;
        let lifetime = profile.expiry_duration().map_err(SignError::Profile)?;
        let now = OffsetDateTime::now_utc();
        let p = &mut csr.params;
        p.not_before = now - BACKDATE;
        p.not_after = now + lifetime;
        p.is_ca = IsCa::ExplicitNoCa;
        p.serial_number = Some(SerialNumber::from_slice(&random_serial()));
        p.use_authority_key_identifier_extension = true;
        p.key_usages = profile.usages.iter().filter_map(|u| key_usage(u)).collect();
        p.extended_key_usages = profile
            .usages
            .iter()
            .filter_map(|u| extended_key_usage(u))
            .collect();
        let cert = csr.signed_by(&signer.issuer).map_err(SignError::Sign)?;
        Ok(cert.pem())
    }
}

fn random_serial() -> [u8; 16] {
    // A fresh key's bytes are as good a source of randomness as any here, without another dependency.
    let mut serial = [0u8; 16];
    let key = KeyPair::generate().map(|k| k.serialize_der()).unwrap_or_default();
    for (i, b) in key.iter().rev().take(16).enumerate() {
        serial[i] = *b;
    }
    serial[0] &= 0x7f; // positive
    serial[0] |= 0x01; // and never zero
    serial
}

fn key_usage(usage: &str) -> Option<KeyUsagePurpose> {
    Some(match usage {
        "signing" | "digital signature" => KeyUsagePurpose::DigitalSignature,
        "content commitment" => KeyUsagePurpose::ContentCommitment,
        "key encipherment" => KeyUsagePurpose::KeyEncipherment,
        "key agreement" => KeyUsagePurpose::KeyAgreement,
        "data encipherment" => KeyUsagePurpose::DataEncipherment,
        "cert sign" => KeyUsagePurpose::KeyCertSign,
        "crl sign" => KeyUsagePurpose::CrlSign,
        "encipher only" => KeyUsagePurpose::EncipherOnly,
        "decipher only" => KeyUsagePurpose::DecipherOnly,
        _ => return None,
    })
}

fn extended_key_usage(usage: &str) -> Option<ExtendedKeyUsagePurpose> {
    Some(match usage {
        "server auth" => ExtendedKeyUsagePurpose::ServerAuth,
        "client auth" => ExtendedKeyUsagePurpose::ClientAuth,
        "code signing" => ExtendedKeyUsagePurpose::CodeSigning,
        "email protection" => ExtendedKeyUsagePurpose::EmailProtection,
        "timestamping" => ExtendedKeyUsagePurpose::TimeStamping,
        "ocsp signing" => ExtendedKeyUsagePurpose::OcspSigning,
        "any" => ExtendedKeyUsagePurpose::Any,
        _ => return None,
    })
}

/// A CA and server certificate for TLS on 127.0.0.1/localhost, separate from the signing CA.
pub struct TlsMaterial {
    pub ca_pem: String,
    pub cert_der: Vec<u8>,
    pub key_der: Vec<u8>,
}

pub fn tls_material() -> anyhow::Result<TlsMaterial> {
    let ca_key = KeyPair::generate()?;
    let ca_params = ca_params("simple-cfssl TLS CA", None);
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let ca = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])?;
    params.distinguished_name.push(DnType::CommonName, "127.0.0.1");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &ca)?;
    Ok(TlsMaterial {
        ca_pem: ca_cert.pem(),
        cert_der: cert.der().to_vec(),
        key_der: key.serialize_der(),
    })
}
