//! The temporary certificate cert-manager stores while a Certificate annotated
//! `cert-manager.io/issue-temporary-certificate: "true"` waits for its first one
//! (`GenerateLocallySignedTemporaryCertificate`): for the next private key, signed by a
//! throwaway P-521 CA named `cert-manager.local` that is discarded at once, with the spec's
//! subject and names, the subject serial number `1234567890` and the spec's duration (90 days
//! by default) from now. Nobody trusts it; it lets a workload mounting the Secret start.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType, SubjectPublicKeyInfo,
};

use crate::api::certmanager::CertificateSpec;
use crate::certificates::go::parse_go_duration;
use crate::pki::keys::{Key, KeyError};

/// The subject serial number cert-manager gives every temporary certificate.
pub const SUBJECT_SERIAL_NUMBER: &str = "1234567890";
/// The throwaway CA's common name.
pub const CA_COMMON_NAME: &str = "cert-manager.local";
/// cert-manager's default duration, when the spec has none.
const DEFAULT_DURATION: SignedDuration = SignedDuration::from_hours(90 * 24);
/// The subject attribute `serialNumber` (2.5.4.5).
const SERIAL_NUMBER_OID: [u64; 4] = [2, 5, 4, 5];

/// Why no temporary certificate could be made.
#[derive(Debug, thiserror::Error)]
pub enum TemporaryError {
    #[error("reading the private key: {0}")]
    Key(#[from] KeyError),
    #[error("signing the temporary certificate: {0}")]
    Sign(#[from] rcgen::Error),
}

/// The temporary certificate (PEM) for `key` as `spec` describes it, valid from `now`.
pub fn temporary_certificate(
    spec: &CertificateSpec,
    key: &Key,
    now: Timestamp,
) -> Result<String, TemporaryError> {
    let ca_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P521_SHA512)?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name.push(DnType::CommonName, CA_COMMON_NAME);
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
        KeyUsagePurpose::KeyCertSign,
    ];
    let issuer = Issuer::new(ca, ca_key);
    let public = SubjectPublicKeyInfo::from_der(key.public_key_der())?;
    Ok(leaf(spec, now)?.signed_by(&public, &issuer)?.pem())
}

/// The leaf's fields from the spec: subject, names, validity, usages.
fn leaf(spec: &CertificateSpec, now: Timestamp) -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    let dn = &mut params.distinguished_name;
    if !spec.common_name.is_empty() {
        dn.push(DnType::CommonName, spec.common_name.as_str());
    }
    if let Some(subject) = &spec.subject {
        let fields = [
            (DnType::OrganizationName, &subject.organizations),
            (DnType::OrganizationalUnitName, &subject.organizational_units),
            (DnType::CountryName, &subject.countries),
            (DnType::LocalityName, &subject.localities),
            (DnType::StateOrProvinceName, &subject.provinces),
        ];
        for (kind, values) in fields {
            // One value per attribute: the first, as a reader shows it.
            if let Some(value) = values.first() {
                dn.push(kind, value.as_str());
            }
        }
    }
    dn.push(
        DnType::CustomDnType(SERIAL_NUMBER_OID.to_vec()),
        SUBJECT_SERIAL_NUMBER,
    );
    params.subject_alt_names = names(spec)?;
    let duration = spec
        .duration
        .as_deref()
        .and_then(|d| parse_go_duration(d).ok())
        .unwrap_or(DEFAULT_DURATION);
    let start = u64::try_from(now.as_second()).unwrap_or(0);
    let end = u64::try_from(now.as_second().saturating_add(duration.as_secs())).unwrap_or(start);
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    params.not_before = epoch + std::time::Duration::from_secs(start);
    params.not_after = epoch + std::time::Duration::from_secs(end);
    if spec.is_ca {
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    }
    (params.key_usages, params.extended_key_usages) = usages(&spec.usages, spec.is_ca);
    Ok(params)
}

fn names(spec: &CertificateSpec) -> Result<Vec<SanType>, rcgen::Error> {
    let mut out = Vec::new();
    for dns in &spec.dns_names {
        out.push(SanType::DnsName(dns.as_str().try_into()?));
    }
    out.extend(
        spec.ip_addresses
            .iter()
            .filter_map(|ip| ip.parse().ok())
            .map(SanType::IpAddress),
    );
    for uri in &spec.uris {
        out.push(SanType::URI(uri.as_str().try_into()?));
    }
    for email in &spec.email_addresses {
        out.push(SanType::Rfc822Name(email.as_str().try_into()?));
    }
    Ok(out)
}

/// cert-manager's key usages for `usages` (digital signature and key encipherment when none,
/// certificate signing added for a CA) and the extended ones.
fn usages(usages: &[String], is_ca: bool) -> (Vec<KeyUsagePurpose>, Vec<ExtendedKeyUsagePurpose>) {
    let mut key = Vec::new();
    let mut extended = Vec::new();
    for usage in usages {
        match usage.as_str() {
            "signing" | "digital signature" => key.push(KeyUsagePurpose::DigitalSignature),
            "content commitment" => key.push(KeyUsagePurpose::ContentCommitment),
            "key encipherment" => key.push(KeyUsagePurpose::KeyEncipherment),
            "key agreement" => key.push(KeyUsagePurpose::KeyAgreement),
            "data encipherment" => key.push(KeyUsagePurpose::DataEncipherment),
            "cert sign" => key.push(KeyUsagePurpose::KeyCertSign),
            "crl sign" => key.push(KeyUsagePurpose::CrlSign),
            "encipher only" => key.push(KeyUsagePurpose::EncipherOnly),
            "decipher only" => key.push(KeyUsagePurpose::DecipherOnly),
            "server auth" => extended.push(ExtendedKeyUsagePurpose::ServerAuth),
            "client auth" => extended.push(ExtendedKeyUsagePurpose::ClientAuth),
            "code signing" => extended.push(ExtendedKeyUsagePurpose::CodeSigning),
            "email protection" => extended.push(ExtendedKeyUsagePurpose::EmailProtection),
            "timestamping" => extended.push(ExtendedKeyUsagePurpose::TimeStamping),
            "ocsp signing" => extended.push(ExtendedKeyUsagePurpose::OcspSigning),
            _ => {}
        }
    }
    if usages.is_empty() {
        key = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
    }
    if is_ca && !key.contains(&KeyUsagePurpose::KeyCertSign) {
        key.push(KeyUsagePurpose::KeyCertSign);
    }
    (key, extended)
}

#[cfg(test)]
mod tests;
