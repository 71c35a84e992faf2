//! Whether what exists (a private key, a CertificateRequest, an issued certificate, a Secret's
//! annotations) still matches a Certificate's spec, as cert-manager decides (pkg/util/pki/match.go,
//! pkg/api/util/issuers.go). Each function returns the names of the spec fields that differ, in
//! cert-manager's order and spelling, so the messages built from them read as cert-manager's.
//!
//! What does not re-issue: `request_matches_spec` ignores `privateKey.encoding`,
//! `signatureAlgorithm`, `nameConstraints` and `encodeUsagesInRequest`, and compares `otherNames`
//! only when the spec lists some.

use std::collections::BTreeSet;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::Secret;
use x509_parser::certificate::X509Certificate;
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::der_parser::asn1_rs::{Any, Class, FromDer, Tag};
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::x509::{AttributeTypeAndValue, RelativeDistinguishedName, X509Name};

use super::decode::{self, DecodeError};
use super::keys::annotation;
use crate::api::certmanager::{
    CertificateRequest, CertificateSpec, IssuerRef, X509Subject, issuer_group_or_default,
    issuer_kind_or_default,
};
use crate::pki::keys::{Key, KeySpec};
use crate::pki::subject::{SubjectError, literal_subject_der};

/// Why a CertificateRequest could not be compared with a spec. cert-manager does not re-issue
/// for these: the certificate in the Secret may still be good.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatchError {
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("x509: cannot parse the subjectAltName extension: {0}")]
    San(String),
    #[error("otherName is not an utf8 value, got: {0}")]
    OtherNameNotUtf8(String),
    #[error(transparent)]
    LiteralSubject(#[from] SubjectError),
}

/// The spec fields the key does not satisfy: `spec.privateKey.algorithm` when it is of another
/// algorithm, else `spec.privateKey.size` when its size differs (defaults RSA 2048, ECDSA 256).
/// An algorithm the spec validation would refuse counts as an algorithm mismatch.
pub fn private_key_matches_spec(key: KeySpec, spec: &CertificateSpec) -> Vec<String> {
    let (algorithm, size) = spec
        .private_key
        .as_ref()
        .map_or(("", 0), |k| (k.algorithm.as_str(), k.size));
    let wanted = |default: i64| if size > 0 { size } else { default };
    let violation = match (algorithm, key) {
        ("" | "RSA", KeySpec::Rsa(bits)) => (i64::from(bits) != wanted(2048)).then_some("size"),
        ("ECDSA", KeySpec::Ecdsa(bits)) => (i64::from(bits) != wanted(256)).then_some("size"),
        ("Ed25519", KeySpec::Ed25519) => None,
        _ => Some("algorithm"),
    };
    violation
        .map(|field| vec![format!("spec.privateKey.{field}")])
        .unwrap_or_default()
}

/// The names in a subjectAltName extension, as Go's x509 package reads them.
#[derive(Debug, Default)]
struct AltNames {
    dns: Vec<String>,
    emails: Vec<String>,
    ips: Vec<Option<[u8; 16]>>,
    uris: Vec<String>,
    /// OID and the raw `[0] EXPLICIT` value, decoded only when compared.
    other: Vec<(String, Vec<u8>)>,
}

impl AltNames {
    fn of(names: &[GeneralName<'_>]) -> Self {
        let mut alt = AltNames::default();
        for name in names {
            match name {
                GeneralName::DNSName(n) => alt.dns.push((*n).to_string()),
                GeneralName::RFC822Name(n) => alt.emails.push((*n).to_string()),
                GeneralName::URI(n) => alt.uris.push((*n).to_string()),
                GeneralName::IPAddress(bytes) => alt.ips.push(ip_bytes(bytes)),
                GeneralName::OtherName(oid, value) => {
                    alt.other.push((oid.to_id_string(), value.to_vec()));
                }
                _ => {}
            }
        }
        alt
    }
}

/// An address as 16 bytes (IPv4 mapped), as Go's `net.IP.To16` compares them.
fn ip_bytes(bytes: &[u8]) -> Option<[u8; 16]> {
    match bytes.len() {
        4 => <[u8; 4]>::try_from(bytes)
            .ok()
            .map(|v4| std::net::Ipv4Addr::from(v4).to_ipv6_mapped().octets()),
        16 => <[u8; 16]>::try_from(bytes).ok(),
        _ => None,
    }
}

/// A spec address; one Go's `net.ParseIP` refuses compares as nil.
fn spec_ip(text: &str) -> Option<[u8; 16]> {
    match text.parse::<IpAddr>().ok()? {
        IpAddr::V4(v4) => Some(v4.to_ipv6_mapped().octets()),
        IpAddr::V6(v6) => Some(v6.octets()),
    }
}

/// Equal as multisets (cert-manager's `EqualUnsorted`).
fn equal_unsorted<T: Ord + Clone>(a: &[T], b: &[T]) -> bool {
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    a.sort();
    b.sort();
    a == b
}

fn ips_match(parsed: &[Option<[u8; 16]>], spec: &[String]) -> bool {
    let spec: Vec<_> = spec.iter().map(|s| spec_ip(s)).collect();
    equal_unsorted(parsed, &spec)
}

/// The subject attributes cert-manager compares, as Go's `pkix.Name` fills them: single values
/// (CN, serial number) take the last occurrence, the others collect in order.
#[derive(Debug, Default)]
struct Subject {
    common_name: String,
    serial_number: String,
    countries: Vec<String>,
    organizations: Vec<String>,
    organizational_units: Vec<String>,
    localities: Vec<String>,
    provinces: Vec<String>,
    street_addresses: Vec<String>,
    postal_codes: Vec<String>,
}

impl Subject {
    fn of(name: &X509Name<'_>) -> Self {
        let mut s = Subject::default();
        for attribute in name.iter_rdn().flat_map(RelativeDistinguishedName::iter) {
            let Some(value) = attribute_text(attribute) else {
                continue;
            };
            match attribute.attr_type().to_id_string().as_str() {
                "2.5.4.3" => s.common_name = value,
                "2.5.4.5" => s.serial_number = value,
                "2.5.4.6" => s.countries.push(value),
                "2.5.4.7" => s.localities.push(value),
                "2.5.4.8" => s.provinces.push(value),
                "2.5.4.9" => s.street_addresses.push(value),
                "2.5.4.10" => s.organizations.push(value),
                "2.5.4.11" => s.organizational_units.push(value),
                "2.5.4.17" => s.postal_codes.push(value),
                _ => {}
            }
        }
        s
    }
}

/// An attribute's value when it is one of the string types Go reads (Printable, IA5, UTF8,
/// Numeric, T61 as raw bytes, BMP as UTF-16); `None` for anything else, which Go skips.
fn attribute_text(attribute: &AttributeTypeAndValue<'_>) -> Option<String> {
    let value = attribute.attr_value();
    match value.tag() {
        Tag::BmpString => {
            let units: Vec<u16> = value
                .data
                .chunks_exact(2)
                .map(|pair| u16::from_be_bytes([pair[0], pair[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        Tag::T61String => Some(String::from_utf8_lossy(value.data).into_owned()),
        _ => attribute.as_str().ok().map(str::to_string),
    }
}

/// The spec fields a CertificateRequest no longer matches, in cert-manager's order; an error
/// when its CSR cannot be read.
pub fn request_matches_spec(
    request: &CertificateRequest,
    spec: &CertificateSpec,
) -> Result<Vec<String>, MatchError> {
    let der = decode::csr(&request.spec.request.0)?;
    let (_, csr) = X509CertificationRequest::from_der(&der).map_err(|e| DecodeError::Csr(e.to_string()))?;
    let san = csr_alt_names(&csr)?;
    let none = AltNames::default();
    let alt = san.as_ref().unwrap_or(&none);
    let mut violations = Vec::new();
    let mut check = |ok: bool, field: &str| {
        if !ok {
            violations.push(field.to_string());
        }
    };
    address_violations(alt, spec, &mut check);
    check(equal_unsorted(&alt.dns, &spec.dns_names), "spec.dnsNames");
    if !spec.other_names.is_empty() {
        check(other_names_match(san.as_ref(), spec)?, "spec.otherNames");
    }
    let subject = &csr.certification_request_info.subject;
    if spec.literal_subject.is_empty() {
        subject_violations(&Subject::of(subject), spec, &mut check);
    } else {
        check(
            literal_subject_matches(subject, &spec.literal_subject)?,
            "spec.literalSubject",
        );
    }
    check(request.spec.is_ca == spec.is_ca, "spec.isCA");
    check(equal_unsorted(&request.spec.usages, &spec.usages), "spec.usages");
    if let (Some(asked), Some(wanted)) = (&request.spec.duration, &spec.duration) {
        check(durations_equal(asked, wanted), "spec.duration");
    }
    check(
        issuer_refs_equal(&request.spec.issuer_ref, &spec.issuer_ref),
        "spec.issuerRef",
    );
    Ok(violations)
}

/// The IP, URI and email alternative names that differ from the spec's.
fn address_violations(alt: &AltNames, spec: &CertificateSpec, check: &mut impl FnMut(bool, &str)) {
    check(ips_match(&alt.ips, &spec.ip_addresses), "spec.ipAddresses");
    check(equal_unsorted(&alt.uris, &spec.uris), "spec.uris");
    check(
        equal_unsorted(&alt.emails, &spec.email_addresses),
        "spec.emailAddresses",
    );
}

fn subject_violations(s: &Subject, spec: &CertificateSpec, check: &mut impl FnMut(bool, &str)) {
    let default = X509Subject::default();
    let want = spec.subject.as_deref().unwrap_or(&default);
    check(s.common_name == spec.common_name, "spec.commonName");
    check(s.serial_number == want.serial_number, "spec.subject.serialNumber");
    // cert-manager's spelling: postCodes, not postalCodes.
    let lists: [(&[String], &[String], &str); 7] = [
        (
            &s.organizations,
            &want.organizations,
            "spec.subject.organizations",
        ),
        (&s.countries, &want.countries, "spec.subject.countries"),
        (&s.localities, &want.localities, "spec.subject.localities"),
        (
            &s.organizational_units,
            &want.organizational_units,
            "spec.subject.organizationalUnits",
        ),
        (&s.postal_codes, &want.postal_codes, "spec.subject.postCodes"),
        (&s.provinces, &want.provinces, "spec.subject.provinces"),
        (
            &s.street_addresses,
            &want.street_addresses,
            "spec.subject.streetAddresses",
        ),
    ];
    for (have, wanted, field) in lists {
        check(equal_unsorted(have, wanted), field);
    }
}

/// The CSR's requested subjectAltName (`None` when it has none); an error when it cannot be
/// read, as Go's CSR parser fails then.
fn csr_alt_names(csr: &X509CertificationRequest<'_>) -> Result<Option<AltNames>, MatchError> {
    let mut found = None;
    for extension in csr.requested_extensions().into_iter().flatten() {
        match extension {
            ParsedExtension::SubjectAlternativeName(san) => {
                let names = AltNames::of(&san.general_names);
                if names.ips.iter().any(Option::is_none) {
                    return Err(MatchError::San("an IP address of bad length".to_string()));
                }
                found = Some(names);
            }
            ParsedExtension::ParseError { error } => return Err(MatchError::San(error.to_string())),
            _ => {}
        }
    }
    Ok(found)
}

/// cert-manager compares otherNames only when the spec has some; a CSR without a
/// subjectAltName then mismatches, and a non-UTF8String value is an error.
fn other_names_match(san: Option<&AltNames>, spec: &CertificateSpec) -> Result<bool, MatchError> {
    let Some(AltNames { other, .. }) = san else {
        return Ok(false);
    };
    let mut found = Vec::with_capacity(other.len());
    for (oid, value) in other {
        found.push((oid.clone(), other_name_utf8(value)?));
    }
    let wanted: Vec<_> = spec
        .other_names
        .iter()
        .map(|o| (o.oid.clone(), o.utf8_value.clone()))
        .collect();
    Ok(equal_unsorted(&found, &wanted))
}

/// The UTF8String inside an otherName's `[0] EXPLICIT` value.
fn other_name_utf8(value: &[u8]) -> Result<String, MatchError> {
    let bad = |e: &dyn std::fmt::Display| MatchError::San(e.to_string());
    let (_, wrapper) = Any::from_der(value).map_err(|e| bad(&e))?;
    if wrapper.class() != Class::ContextSpecific || wrapper.tag() != Tag(0) {
        return Err(MatchError::San("otherName value is not tagged [0]".to_string()));
    }
    let (_, inner) = Any::from_der(wrapper.data).map_err(|e| bad(&e))?;
    if inner.tag() != Tag::Utf8String {
        return Err(MatchError::OtherNameNotUtf8(format!("{}", inner.tag())));
    }
    std::str::from_utf8(inner.data)
        .map(str::to_string)
        .map_err(|e| bad(&e))
}

/// `literalSubject` is compared by the raw DER of the subject, so the string types count.
fn literal_subject_matches(subject: &X509Name<'_>, literal: &str) -> Result<bool, MatchError> {
    let der = literal_subject_der(literal)?;
    Ok(subject.as_raw() == der.as_slice())
}

/// Two Go durations are equal when they parse to the same length (`2160h` = `2160h0m0s`).
fn durations_equal(a: &str, b: &str) -> bool {
    use crate::certificates::go::parse_go_duration;
    match (parse_go_duration(a), parse_go_duration(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Whether `request`'s CSR carries `key`'s public half (false when it cannot be read).
pub fn request_has_key(request: &CertificateRequest, key: &Key) -> bool {
    let Ok(der) = decode::csr(&request.spec.request.0) else {
        return false;
    };
    let Ok((_, csr)) = X509CertificationRequest::from_der(&der) else {
        return false;
    };
    decode::public_keys_equal(&csr.certification_request_info.subject_pki, key).unwrap_or(false)
}

/// Empty kind means `Issuer` (cert-manager #8158).
pub fn issuer_kinds_equal(a: &str, b: &str) -> bool {
    issuer_kind_or_default(a) == issuer_kind_or_default(b)
}

/// Empty group means `cert-manager.io` (cert-manager #8158).
pub fn issuer_groups_equal(a: &str, b: &str) -> bool {
    issuer_group_or_default(a) == issuer_group_or_default(b)
}

/// Same name, and kind and group equal up to their defaults.
pub fn issuer_refs_equal(a: &IssuerRef, b: &IssuerRef) -> bool {
    a.name == b.name && issuer_kinds_equal(&a.kind, &b.kind) && issuer_groups_equal(&a.group, &b.group)
}

/// Whether the issuer a Secret's annotations name is `issuer_ref`. A Secret with none of the
/// three annotations matches any reference of the default kind and group.
pub fn secret_issuer_annotations_match(secret: &Secret, issuer_ref: &IssuerRef) -> bool {
    let annotations = secret.metadata.annotations.as_ref();
    let get = |key: &str| annotations.and_then(|a| a.get(key)).map(String::as_str);
    let name = get(annotation::ISSUER_NAME);
    let kind = get(annotation::ISSUER_KIND);
    let group = get(annotation::ISSUER_GROUP);
    let any = name.is_some() || kind.is_some() || group.is_some();
    if any && name.unwrap_or_default() != issuer_ref.name {
        return false;
    }
    issuer_kinds_equal(kind.unwrap_or_default(), &issuer_ref.kind)
        && issuer_groups_equal(group.unwrap_or_default(), &issuer_ref.group)
}

/// The spec fields the certificate in a Secret's `tls.crt` no longer matches, as
/// [`fuzzy_x509_alt_names_match_spec`] compares them; an error when there is no readable
/// certificate.
pub fn secret_matches_spec(secret: &Secret, spec: &CertificateSpec) -> Result<Vec<String>, DecodeError> {
    let pem = secret
        .data
        .as_ref()
        .and_then(|data| data.get(super::keys::data::TLS_CRT))
        .map_or(&[][..], |bytes| bytes.0.as_slice());
    let der = decode::leaf_certificate(pem)?;
    let (_, cert) = X509Certificate::from_der(&der).map_err(|e| DecodeError::Certificate(e.to_string()))?;
    Ok(fuzzy_x509_alt_names_match_spec(&cert, spec))
}

/// The spec fields an issued certificate no longer matches, comparing only names and loosely:
/// a name may move between the common name and the DNS names, as some CAs move them. For a
/// Secret whose CertificateRequest is gone.
pub fn fuzzy_x509_alt_names_match_spec(cert: &X509Certificate<'_>, spec: &CertificateSpec) -> Vec<String> {
    let alt = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| AltNames::of(&san.value.general_names))
        .unwrap_or_default();
    let common_name = Subject::of(cert.subject()).common_name;
    let mut violations = Vec::new();
    let expected: BTreeSet<&str> = spec
        .dns_names
        .iter()
        .map(String::as_str)
        .chain(Some(spec.common_name.as_str()).filter(|cn| !cn.is_empty()))
        .collect();
    let actual: BTreeSet<&str> = alt
        .dns
        .iter()
        .map(String::as_str)
        .chain(Some(common_name.as_str()).filter(|cn| !cn.is_empty()))
        .collect();
    if actual != expected {
        let cn_moved = (!spec.common_name.is_empty() && !actual.contains(spec.common_name.as_str()))
            || (!common_name.is_empty() && !expected.contains(common_name.as_str()));
        if cn_moved {
            violations.push("spec.commonName".to_string());
        }
        let dns_moved = !spec.dns_names.iter().all(|n| actual.contains(n.as_str()))
            || !alt.dns.iter().all(|n| expected.contains(n.as_str()));
        if dns_moved {
            violations.push("spec.dnsNames".to_string());
        }
    }
    let mut check = |ok: bool, field: &str| {
        if !ok {
            violations.push(field.to_string());
        }
    };
    address_violations(&alt, spec, &mut check);
    violations
}

#[cfg(test)]
mod tests;
