//! Test fixtures: keys (generated once), certificates and CSRs made with rcgen from a
//! Certificate spec, Secrets, CertificateRequests and Certificates. Fixed dates only.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::OnceLock;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use rcgen::{CertificateParams, DnType, DnValue, KeyPair, OtherNameValue, SanType, date_time_ymd};

use crate::api::certmanager::{
    Certificate, CertificateRequest, CertificateRequestSpec, CertificateSpec, IssuerRef,
};
use crate::pki::keys::{Encoding, Key, KeySpec};

/// A key of `spec`, generated once per test binary. `second` picks a different key.
pub fn key(spec: KeySpec, second: bool) -> &'static Key {
    static KEYS: OnceLock<std::sync::Mutex<BTreeMap<String, &'static Key>>> = OnceLock::new();
    let keys = KEYS.get_or_init(Default::default);
    let mut keys = keys.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let name = format!("{spec:?}/{second}");
    keys.entry(name)
        .or_insert_with(|| Box::leak(Box::new(Key::generate(spec).expect("key"))))
}

pub fn ec() -> &'static Key {
    key(KeySpec::Ecdsa(256), false)
}

pub fn key_pem(key: &Key) -> Vec<u8> {
    key.to_pem(Encoding::Pkcs1).expect("pem").into_bytes()
}

fn pair(key: &Key) -> KeyPair {
    KeyPair::try_from(key.pkcs8_der()).expect("rcgen key pair")
}

fn ia5(text: &str) -> rcgen::string::Ia5String {
    rcgen::string::Ia5String::try_from(text).expect("ia5")
}

fn oid(text: &str) -> Vec<u64> {
    text.split('.').map(|n| n.parse().expect("oid arc")).collect()
}

/// rcgen parameters for what `spec` names: subject and subjectAltNames.
pub fn params(spec: &CertificateSpec) -> CertificateParams {
    let mut params = CertificateParams::default();
    let dn = &mut params.distinguished_name;
    *dn = rcgen::DistinguishedName::new();
    if let Some(s) = &spec.subject {
        let mut push = |ty: DnType, values: &[String]| {
            for v in values {
                dn.push(ty.clone(), DnValue::Utf8String(v.clone()));
            }
        };
        push(DnType::CountryName, &s.countries);
        push(DnType::OrganizationName, &s.organizations);
        push(DnType::OrganizationalUnitName, &s.organizational_units);
        push(DnType::LocalityName, &s.localities);
        push(DnType::StateOrProvinceName, &s.provinces);
        push(DnType::CustomDnType(vec![2, 5, 4, 9]), &s.street_addresses);
        push(DnType::CustomDnType(vec![2, 5, 4, 17]), &s.postal_codes);
        if !s.serial_number.is_empty() {
            dn.push(
                DnType::CustomDnType(vec![2, 5, 4, 5]),
                DnValue::Utf8String(s.serial_number.clone()),
            );
        }
    }
    if !spec.common_name.is_empty() {
        dn.push(DnType::CommonName, DnValue::Utf8String(spec.common_name.clone()));
    }
    let sans = &mut params.subject_alt_names;
    sans.extend(spec.dns_names.iter().map(|n| SanType::DnsName(ia5(n))));
    sans.extend(spec.email_addresses.iter().map(|n| SanType::Rfc822Name(ia5(n))));
    sans.extend(
        spec.ip_addresses
            .iter()
            .map(|n| SanType::IpAddress(n.parse().expect("ip"))),
    );
    sans.extend(spec.uris.iter().map(|n| SanType::URI(ia5(n))));
    sans.extend(
        spec.other_names
            .iter()
            .map(|o| SanType::OtherName((oid(&o.oid), OtherNameValue::Utf8String(o.utf8_value.clone())))),
    );
    params
}

/// A self-signed certificate for `spec`'s names, valid between the two dates.
pub fn certificate_pem(
    spec: &CertificateSpec,
    key: &Key,
    not_before: (i32, u8, u8),
    not_after: (i32, u8, u8),
) -> Vec<u8> {
    let mut params = params(spec);
    params.not_before = date_time_ymd(not_before.0, not_before.1, not_before.2);
    params.not_after = date_time_ymd(not_after.0, not_after.1, not_after.2);
    params
        .self_signed(&pair(key))
        .expect("certificate")
        .pem()
        .into_bytes()
}

/// A CSR for `spec`'s names signed by `key`.
pub fn csr_pem(spec: &CertificateSpec, key: &Key) -> Vec<u8> {
    let csr = params(spec).serialize_request(&pair(key)).expect("csr");
    csr.pem().expect("csr pem").into_bytes()
}

/// The CertificateRequest cert-manager would make for `spec` with `key`.
pub fn request_for(spec: &CertificateSpec, key: &Key) -> CertificateRequest {
    CertificateRequest::new(
        "cert-1",
        CertificateRequestSpec {
            request: ByteString(csr_pem(spec, key)),
            issuer_ref: spec.issuer_ref.clone(),
            duration: spec.duration.clone(),
            is_ca: spec.is_ca,
            usages: spec.usages.clone(),
            ..Default::default()
        },
    )
}

pub fn secret(data: &[(&str, &[u8])], annotations: &[(&str, &str)]) -> Secret {
    let map = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect::<BTreeMap<_, _>>()
    };
    Secret {
        metadata: ObjectMeta {
            name: Some("tls".to_string()),
            annotations: (!annotations.is_empty()).then(|| map(annotations)),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_string(), ByteString(v.to_vec())))
                .collect(),
        ),
        ..Default::default()
    }
}

pub fn certificate(name: &str, spec: CertificateSpec) -> Certificate {
    Certificate::new(name, spec)
}

/// A spec naming `example.com`, issued by the Issuer `ca`, with an ECDSA key.
pub fn spec() -> CertificateSpec {
    CertificateSpec {
        secret_name: "tls".to_string(),
        issuer_ref: IssuerRef {
            name: "ca".to_string(),
            ..Default::default()
        },
        common_name: "example.com".to_string(),
        dns_names: vec!["example.com".to_string()],
        private_key: Some(crate::api::certmanager::PrivateKey {
            algorithm: "ECDSA".to_string(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn at(text: &str) -> Timestamp {
    text.parse().expect("timestamp")
}

/// A Certificate `cert` for [`spec`] whose Secret holds a matching EC key and a certificate
/// valid from 2026-01-01 to 2026-04-01 (renewal due 2026-03-02), issued from the current
/// CertificateRequest; the time is 2026-02-01.
pub fn input() -> crate::certificates::policy::checks::Input {
    use crate::certificates::keys::{annotation, data};
    let spec = spec();
    let key = ec();
    let cert = certificate_pem(&spec, key, (2026, 1, 1), (2026, 4, 1));
    let secret = secret(
        &[(data::TLS_KEY, &key_pem(key)), (data::TLS_CRT, &cert)],
        &[
            (annotation::ISSUER_NAME, "ca"),
            (annotation::CERTIFICATE_NAME, "cert"),
        ],
    );
    crate::certificates::policy::checks::Input {
        current_request: Some(Arc::new(request_for(&spec, key))),
        certificate: Arc::new(certificate("cert", spec)),
        secret: Some(Arc::new(secret)),
        next_request: None,
        now: at("2026-02-01T00:00:00Z"),
        renewal_jitter: crate::certificates::renewal::Jitter::OFF,
    }
}
