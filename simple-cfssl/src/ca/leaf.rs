//! Signing a CSR the way cfssl's local signer does:
//!
//! - the CSR's signature must verify, with an algorithm Go 1.7 knows (no Ed25519, no RSA-PSS);
//! - the subject is the CSR's, with any `subject` fields of the request taking precedence, written
//!   in Go's attribute order (C, ST, L, street, postal code, O, OU, CN, serial number);
//! - SANs are the CSR's (DNS, email, IP, URI), or the request's `hosts` when given;
//! - key usages, extended key usages and lifetime come from the profile; `notBefore` is the
//!   current minute, rounded, less the profile's backdate (five minutes unless it sets one), and
//!   `notAfter` is `notBefore` plus the expiry;
//! - the serial is 20 random bytes; no extension of the CSR is copied besides the SANs.

use std::net::IpAddr;

use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use rcgen::string::PrintableString;
use rcgen::{
    CertificateParams, DistinguishedName, DnType, DnValue, IsCa, SanType, SerialNumber, SubjectPublicKeyInfo,
};
use time::OffsetDateTime;
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::der_parser::asn1_rs::Tag;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::FromDer;
use x509_parser::x509::{AttributeTypeAndValue, X509Name};

use super::{Cert, Signer};
use crate::config::ProfilePolicy;
use crate::wire::request::Subject;

/// Why a CSR was not signed. Clients only ever see `bad request`, as from multirootca; the
/// reason goes to the log.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error("no PEM block in the certificate request")]
    NoPem,
    #[error("not a certificate request")]
    NotCsr,
    #[error("the certificate request's signature does not verify")]
    Signature,
    #[error("unsupported public key: {0}")]
    PublicKey(#[source] rcgen::Error),
    #[error("the profile allows no extensions, {0} requested")]
    Extensions(usize),
    #[error("SAN {0:?} cannot be encoded")]
    San(String),
    #[error("no randomness for the serial number")]
    Random,
    #[error("signing: {0}")]
    Sign(#[source] rcgen::Error),
}

/// What to sign, from the request.
pub struct LeafRequest<'a> {
    pub csr_pem: &'a str,
    pub hosts: Option<&'a [String]>,
    pub subject: Option<&'a Subject>,
    pub extensions: usize,
}

impl Signer {
    pub fn sign(
        &self,
        request: &LeafRequest<'_>,
        profile: &ProfilePolicy,
        now: OffsetDateTime,
    ) -> Result<Cert, SignError> {
        let der = first_pem_block(request.csr_pem)?;
        let (_, csr) = X509CertificationRequest::from_der(&der).map_err(|_| SignError::NotCsr)?;
        if !super::csr_signature::verifies(&csr) {
            return Err(SignError::Signature);
        }
        let info = &csr.certification_request_info;
        let public_key =
            SubjectPublicKeyInfo::from_der(info.subject_pki.raw).map_err(SignError::PublicKey)?;
        if request.extensions > 0 {
            return Err(SignError::Extensions(request.extensions));
        }

        let mut params = CertificateParams::default();
        params.distinguished_name = subject(&info.subject, request.subject);
        params.subject_alt_names = match request.hosts {
            Some(hosts) => sans_from_hosts(hosts)?,
            None => sans_from_csr(&csr)?,
        };
        params.not_before = round_to_minute(now) - profile.backdate;
        params.not_after = params.not_before + profile.expiry;
        params.serial_number = Some(random_serial()?);
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = profile.key_usages.clone();
        params.extended_key_usages = profile.extended_key_usages.clone();
        params.use_authority_key_identifier_extension = true;
        let cert = params
            .signed_by(&public_key, &self.issuer)
            .map_err(SignError::Sign)?;
        Ok(Cert::from_rcgen(&cert))
    }
}

/// Like Go's `pem.Decode`: the first block, whatever precedes it.
fn first_pem_block(text: &str) -> Result<Vec<u8>, SignError> {
    pem::parse(text)
        .map(pem::Pem::into_contents)
        .map_err(|_| SignError::NoPem)
}

/// Go's `Time.Round(time.Minute)`: halves round up.
fn round_to_minute(now: OffsetDateTime) -> OffsetDateTime {
    let floor = now
        - time::Duration::seconds(i64::from(now.second()))
        - time::Duration::nanoseconds(i64::from(now.nanosecond()));
    if now.second() >= 30 {
        floor + time::Duration::MINUTE
    } else {
        floor
    }
}

/// Like cfssl: 20 random bytes, the top bit cleared so the number is positive.
fn random_serial() -> Result<SerialNumber, SignError> {
    let mut bytes = [0u8; 20];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| SignError::Random)?;
    Ok(serial_from(bytes))
}

/// The number 20 random bytes make once the top bit is cleared, without leading zero bytes (as
/// Go's `big.Int` keeps it). rcgen writes it as a positive DER integer, adding the zero byte DER
/// needs when the first remaining byte has its top bit set.
fn serial_from(mut bytes: [u8; 20]) -> SerialNumber {
    bytes[0] &= 0x7f;
    let start = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len() - 1);
    SerialNumber::from_slice(&bytes[start..])
}

/// The subject attributes Go's `pkix.Name` keeps, in the order Go writes them.
#[derive(Default)]
struct GoName {
    country: Vec<String>,
    province: Vec<String>,
    locality: Vec<String>,
    street: Vec<String>,
    postal_code: Vec<String>,
    organization: Vec<String>,
    organizational_unit: Vec<String>,
    common_name: String,
    serial_number: String,
}

const STREET: [u64; 4] = [2, 5, 4, 9];
const POSTAL_CODE: [u64; 4] = [2, 5, 4, 17];
const SERIAL_NUMBER: [u64; 4] = [2, 5, 4, 5];

impl GoName {
    fn from_x509(name: &X509Name<'_>) -> GoName {
        let mut go = GoName::default();
        for attribute in name.iter_attributes() {
            let Some(text) = attribute_text(attribute) else {
                continue;
            };
            let Some(arcs) = attribute.attr_type().iter().map(Iterator::collect::<Vec<u64>>) else {
                continue;
            };
            match arcs.as_slice() {
                [2, 5, 4, 6] => go.country.push(text),
                [2, 5, 4, 8] => go.province.push(text),
                [2, 5, 4, 7] => go.locality.push(text),
                [2, 5, 4, 9] => go.street.push(text),
                [2, 5, 4, 17] => go.postal_code.push(text),
                [2, 5, 4, 10] => go.organization.push(text),
                [2, 5, 4, 11] => go.organizational_unit.push(text),
                [2, 5, 4, 3] => go.common_name = text,
                [2, 5, 4, 5] => go.serial_number = text,
                // Go keeps other attributes aside and does not write them back; neither does cfssl.
                _ => {}
            }
        }
        go
    }

    /// cfssl's rule: each attribute the request gives replaces the CSR's.
    fn overridden_by(mut self, subject: &Subject) -> GoName {
        let mut requested = GoName::default();
        for name in &subject.names {
            let add = |list: &mut Vec<String>, value: &String| {
                if !value.is_empty() {
                    list.push(value.clone());
                }
            };
            add(&mut requested.country, &name.country);
            add(&mut requested.province, &name.province);
            add(&mut requested.locality, &name.locality);
            add(&mut requested.organization, &name.organization);
            add(&mut requested.organizational_unit, &name.organizational_unit);
        }
        let replace = |mine: &mut Vec<String>, theirs: Vec<String>| {
            if !theirs.is_empty() {
                *mine = theirs;
            }
        };
        replace(&mut self.country, requested.country);
        replace(&mut self.province, requested.province);
        replace(&mut self.locality, requested.locality);
        replace(&mut self.organization, requested.organization);
        replace(&mut self.organizational_unit, requested.organizational_unit);
        if !subject.common_name.is_empty() {
            self.common_name = subject.common_name.clone();
        }
        if !subject.serial_number.is_empty() {
            self.serial_number = subject.serial_number.clone();
        }
        self
    }

    /// rcgen holds one value per attribute type, so of several (Go writes them as one
    /// multi-valued RDN) only the first is kept.
    fn into_rcgen(self) -> DistinguishedName {
        let mut dn = DistinguishedName::new();
        let mut put = |ty: DnType, values: &[String]| {
            if let Some(value) = values.first().filter(|v| !v.is_empty()) {
                dn.push(ty, string_value(value));
            }
        };
        put(DnType::CountryName, &self.country);
        put(DnType::StateOrProvinceName, &self.province);
        put(DnType::LocalityName, &self.locality);
        put(DnType::CustomDnType(STREET.to_vec()), &self.street);
        put(DnType::CustomDnType(POSTAL_CODE.to_vec()), &self.postal_code);
        put(DnType::OrganizationName, &self.organization);
        put(DnType::OrganizationalUnitName, &self.organizational_unit);
        put(DnType::CommonName, &[self.common_name]);
        put(
            DnType::CustomDnType(SERIAL_NUMBER.to_vec()),
            &[self.serial_number],
        );
        dn
    }
}

fn subject(csr_subject: &X509Name<'_>, requested: Option<&Subject>) -> DistinguishedName {
    let name = GoName::from_x509(csr_subject);
    match requested {
        Some(subject) => name.overridden_by(subject),
        None => name,
    }
    .into_rcgen()
}

/// Go writes PrintableString when it can, UTF8String otherwise.
fn string_value(value: &str) -> DnValue {
    match PrintableString::try_from(value) {
        Ok(printable) => DnValue::PrintableString(printable),
        Err(_) => DnValue::Utf8String(value.to_string()),
    }
}

fn attribute_text(attribute: &AttributeTypeAndValue<'_>) -> Option<String> {
    if let Ok(text) = attribute.as_str() {
        return Some(text.to_string());
    }
    let data = attribute.attr_value().data;
    match attribute.attr_value().tag() {
        // T61String: read as Latin-1, as Go does.
        Tag::T61String => Some(data.iter().map(|b| char::from(*b)).collect()),
        Tag::BmpString => {
            let units: Vec<u16> = data
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        _ => None,
    }
}

/// Go's x509 groups SANs by type: DNS names, emails, IP addresses, URIs.
#[derive(Default)]
struct Sans {
    dns: Vec<String>,
    email: Vec<String>,
    ip: Vec<IpAddr>,
    uri: Vec<String>,
}

impl Sans {
    fn into_rcgen(self) -> Result<Vec<SanType>, SignError> {
        let ia5 = |s: String| s.clone().try_into().map_err(|_| SignError::San(s));
        let mut out = Vec::new();
        for name in self.dns {
            out.push(SanType::DnsName(ia5(name)?));
        }
        for name in self.email {
            out.push(SanType::Rfc822Name(ia5(name)?));
        }
        out.extend(self.ip.into_iter().map(SanType::IpAddress));
        for name in self.uri {
            out.push(SanType::URI(ia5(name)?));
        }
        Ok(out)
    }
}

fn sans_from_csr(csr: &X509CertificationRequest<'_>) -> Result<Vec<SanType>, SignError> {
    let mut sans = Sans::default();
    let names = csr
        .requested_extensions()
        .into_iter()
        .flatten()
        .filter_map(|ext| match ext {
            ParsedExtension::SubjectAlternativeName(san) => Some(&san.general_names),
            _ => None,
        })
        .flatten();
    for name in names {
        match name {
            GeneralName::DNSName(s) => sans.dns.push(s.to_string()),
            GeneralName::RFC822Name(s) => sans.email.push(s.to_string()),
            GeneralName::URI(s) => sans.uri.push(s.to_string()),
            GeneralName::IPAddress(octets) => {
                if let Some(ip) = ip_from_octets(octets) {
                    sans.ip.push(ip);
                }
            }
            // Go's parser keeps no other name types.
            _ => {}
        }
    }
    sans.into_rcgen()
}

fn ip_from_octets(octets: &[u8]) -> Option<IpAddr> {
    match octets.len() {
        4 => <[u8; 4]>::try_from(octets).ok().map(IpAddr::from),
        16 => <[u8; 16]>::try_from(octets).ok().map(IpAddr::from),
        _ => None,
    }
}

/// cfssl's `OverrideHosts`: IP address, else email, else URI (anything with a scheme), else DNS.
fn sans_from_hosts(hosts: &[String]) -> Result<Vec<SanType>, SignError> {
    let mut sans = Sans::default();
    for host in hosts {
        if let Ok(ip) = host.parse::<IpAddr>() {
            sans.ip.push(ip);
        } else if looks_like_email(host) {
            sans.email.push(host.clone());
        } else if has_scheme(host) {
            sans.uri.push(host.clone());
        } else {
            sans.dns.push(host.clone());
        }
    }
    sans.into_rcgen()
}

fn looks_like_email(host: &str) -> bool {
    match host.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.is_empty()
                && !host.contains(char::is_whitespace)
                && !domain.contains('@')
        }
        None => false,
    }
}

fn has_scheme(host: &str) -> bool {
    match host.split_once(':') {
        Some((scheme, _)) => {
            let mut chars = scheme.chars();
            chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::KeyPair;

    #[test]
    fn not_before_rounds_like_go() {
        let minute = OffsetDateTime::UNIX_EPOCH + time::Duration::minutes(29_000_000);
        let at = |secs: f64| round_to_minute(minute + time::Duration::seconds_f64(secs));
        assert_eq!(at(5.5), minute);
        assert_eq!(at(29.999), minute);
        assert_eq!(at(30.0), minute + time::Duration::MINUTE);
        assert_eq!(at(31.0), minute + time::Duration::MINUTE);
    }

    #[test]
    fn serials_are_random() {
        let a = random_serial().unwrap();
        let b = random_serial().unwrap();
        assert_ne!(a, b);
        let bytes = a.to_bytes();
        assert!(!bytes.is_empty() && bytes.len() <= 20 && bytes[0] != 0);
    }

    #[test]
    fn serials_clear_the_top_bit_and_drop_leading_zeros() {
        let with_head = |head: &[u8]| {
            let mut bytes = [0x11u8; 20];
            bytes[..head.len()].copy_from_slice(head);
            bytes
        };
        let cases: [(&[u8], Vec<u8>); 5] = [
            (&[0xff], [&[0x7f][..], &[0x11; 19]].concat()),
            (&[0x80, 0x00], vec![0x11; 18]),
            (&[0x80], vec![0x11; 19]),
            (&[0x00, 0x80], [&[0x80][..], &[0x11; 18]].concat()),
            (&[0x80, 0x00, 0x00, 0x05], [&[0x05][..], &[0x11; 16]].concat()),
        ];
        for (head, want) in cases {
            assert_eq!(serial_from(with_head(head)).to_bytes(), want, "head {head:02x?}");
        }
        assert_eq!(serial_from([0; 20]).to_bytes(), vec![0]);
    }

    /// The case that once failed: a first byte of zero and a second with its top bit set still
    /// makes a positive DER serial, because rcgen adds the zero byte back.
    #[test]
    fn a_serial_with_the_top_bit_set_after_the_zeros_is_written_positive() {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.serial_number = Some(serial_from(with_second_byte_high()));
        let der = params.self_signed(&key).unwrap().der().to_vec();
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        assert_eq!(cert.raw_serial()[0], 0x00);
        assert_eq!(cert.raw_serial()[1], 0x80);
        assert_eq!(cert.raw_serial().len(), 20);
    }

    fn with_second_byte_high() -> [u8; 20] {
        let mut bytes = [0x22u8; 20];
        bytes[0] = 0x80;
        bytes[1] = 0x80;
        bytes
    }

    #[test]
    fn hosts_are_sorted_into_san_types() {
        let hosts: Vec<String> = [
            "h1.example.org",
            "10.1.1.1",
            "x@y.org",
            "spiffe://a/b",
            "::1",
            "plain",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let sans = sans_from_hosts(&hosts).unwrap();
        let shown: Vec<String> = sans.iter().map(|s| format!("{s:?}")).collect();
        assert_eq!(sans.len(), 6);
        assert!(shown[0].contains("DnsName") && shown[0].contains("h1.example.org"));
        assert!(shown[1].contains("DnsName") && shown[1].contains("plain"));
        assert!(shown[2].contains("Rfc822Name"));
        assert!(shown[3].contains("10.1.1.1") && shown[4].contains("::1"));
        assert!(shown[5].contains("URI"));
        assert!(matches!(
            sans_from_hosts(&["bücher.example".to_string()]),
            Err(SignError::San(_))
        ));
    }
}
