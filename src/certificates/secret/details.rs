//! The certificate details annotations cert-manager writes on a Certificate's Secret, read from
//! the leaf in `tls.crt` (internal/controller/certificates/secrets.go `AnnotationsForCertificate`).
//!
//! Common name, alt-names, IP SANs and URI SANs are always written (empty when the leaf has
//! none); the subject fields and email SANs only when the leaf has them. Lists are one line of
//! CSV, as Go's `encoding/csv` writes them.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use x509_parser::der_parser::Oid;
use x509_parser::extensions::GeneralName;
use x509_parser::oid_registry::{
    OID_X509_COMMON_NAME, OID_X509_COUNTRY_NAME, OID_X509_LOCALITY_NAME, OID_X509_ORGANIZATION_NAME,
    OID_X509_ORGANIZATIONAL_UNIT, OID_X509_POSTAL_CODE, OID_X509_SERIALNUMBER,
    OID_X509_STATE_OR_PROVINCE_NAME, OID_X509_STREET_ADDRESS,
};
use x509_parser::prelude::{FromDer, X509Certificate, X509Name};

use crate::certificates::decode::{self, DecodeError};
use crate::certificates::keys::annotation;

/// The certificate details annotations for the leaf (the first certificate) of the PEM chain
/// in `chain_pem`; empty for empty input, as cert-manager does when `tls.crt` is empty.
pub fn certificate_details_annotations(chain_pem: &[u8]) -> Result<BTreeMap<String, String>, DecodeError> {
    if chain_pem.is_empty() {
        return Ok(BTreeMap::new());
    }
    let der = decode::leaf_certificate(chain_pem)?;
    let (_, leaf) = X509Certificate::from_der(&der).map_err(|e| DecodeError::Certificate(e.to_string()))?;
    Ok(annotations_for_certificate(&leaf))
}

/// Go's `pkix.Name` view of a subject: the last value wins for single-valued attributes, the
/// others collect every value in order; values that are not strings are skipped.
fn subject_values(name: &X509Name<'_>, oid: &Oid<'_>) -> Vec<String> {
    name.iter_attributes()
        .filter(|attr| attr.attr_type() == oid)
        .filter_map(|attr| attr.as_str().ok().map(str::to_string))
        .collect()
}

fn last(values: Vec<String>) -> String {
    values.into_iter().last().unwrap_or_default()
}

/// The SANs of a leaf, grouped as Go's `x509.Certificate` keeps them.
#[derive(Default)]
struct Sans {
    dns: Vec<String>,
    emails: Vec<String>,
    ips: Vec<String>,
    uris: Vec<String>,
}

fn sans(cert: &X509Certificate<'_>) -> Sans {
    let mut sans = Sans::default();
    let Ok(Some(ext)) = cert.subject_alternative_name() else {
        return sans;
    };
    for name in &ext.value.general_names {
        match name {
            GeneralName::DNSName(dns) => sans.dns.push(dns.to_string()),
            GeneralName::RFC822Name(email) => sans.emails.push(email.to_string()),
            GeneralName::URI(uri) => sans.uris.push(uri.to_string()),
            GeneralName::IPAddress(bytes) => {
                if let Some(ip) = ip_string(bytes) {
                    sans.ips.push(ip);
                }
            }
            _ => {}
        }
    }
    sans
}

/// An IP SAN as Go's `net.IP.String` prints it (an IPv4-mapped IPv6 address prints as IPv4).
fn ip_string(bytes: &[u8]) -> Option<String> {
    let ip = match bytes.len() {
        4 => IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(bytes).ok()?)),
        16 => {
            let v6 = Ipv6Addr::from(<[u8; 16]>::try_from(bytes).ok()?);
            v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
        }
        _ => return None,
    };
    Some(ip.to_string())
}

/// The certificate details annotations for one parsed certificate.
pub fn annotations_for_certificate(cert: &X509Certificate<'_>) -> BTreeMap<String, String> {
    let subject = cert.subject();
    let sans = sans(cert);
    let mut out = BTreeMap::new();
    let mut put = |keep_empty: bool, key: &str, value: String| {
        if keep_empty || !value.is_empty() {
            out.insert(key.to_string(), value);
        }
    };
    put(
        true,
        annotation::COMMON_NAME,
        last(subject_values(subject, &OID_X509_COMMON_NAME)),
    );
    put(
        false,
        annotation::SUBJECT_SERIAL_NUMBER,
        last(subject_values(subject, &OID_X509_SERIALNUMBER)),
    );
    let lists = [
        (annotation::SUBJECT_ORGANIZATIONS, OID_X509_ORGANIZATION_NAME),
        (
            annotation::SUBJECT_ORGANIZATIONAL_UNITS,
            OID_X509_ORGANIZATIONAL_UNIT,
        ),
        (annotation::SUBJECT_COUNTRIES, OID_X509_COUNTRY_NAME),
        (annotation::SUBJECT_PROVINCES, OID_X509_STATE_OR_PROVINCE_NAME),
        (annotation::SUBJECT_LOCALITIES, OID_X509_LOCALITY_NAME),
        (annotation::SUBJECT_POSTAL_CODES, OID_X509_POSTAL_CODE),
        (annotation::SUBJECT_STREET_ADDRESSES, OID_X509_STREET_ADDRESS),
    ];
    for (key, oid) in lists {
        put(false, key, join_csv(&subject_values(subject, &oid)));
    }
    put(false, annotation::EMAIL_SANS, join_csv(&sans.emails));
    put(true, annotation::ALT_NAMES, join_csv(&sans.dns));
    put(true, annotation::IP_SANS, join_csv(&sans.ips));
    put(true, annotation::URI_SANS, join_csv(&sans.uris));
    out
}

/// One CSV record as Go's `csv.Writer` writes it, without the trailing newline: a field is
/// quoted (inner quotes doubled) when it holds a comma, a quote, CR or LF, when it is `\.`,
/// or when it starts with white space.
pub fn join_csv(values: &[String]) -> String {
    values
        .iter()
        .map(|field| {
            let quote = field == r"\."
                || field.contains([',', '"', '\r', '\n'])
                || field.chars().next().is_some_and(char::is_whitespace);
            if quote {
                format!("\"{}\"", field.replace('"', "\"\""))
            } else {
                field.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}
