//! The subject (`Name`) a CSR carries for a Certificate spec, byte for byte as cert-manager's
//! Go code encodes it, so a request made here compares equal (raw DER) with one cert-manager made.
//!
//! - Without `literalSubject`: Go's `pkix.Name.ToRDNSequence` order, which is C, ST, L, STREET,
//!   POSTALCODE, O, OU, CN, SERIALNUMBER; the values of a list field (e.g. two organizations)
//!   share one multi-valued RDN; empty fields are left out.
//! - With `literalSubject`: RFC 4514 as go-ldap parses it, the RDNs reversed (the string writes the
//!   most significant last), attribute types `C O OU CN SERIALNUMBER L ST STREET DC UID` (exactly
//!   so spelled) or a dotted OID; anything else is refused with cert-manager's message.
//! - Strings are PrintableString when every byte is in Go's marshalling set (letters, digits,
//!   space and `'()+,-./:=?`), else UTF8String; `*`, `&`, `@`, `_` and non-ASCII force UTF8String.
//! - The attributes of one RDN are a DER SET: sorted by their encodings, as Go writes them.

mod dn;

use yasna::models::ObjectIdentifier;

use crate::api::certmanager::CertificateSpec;

const COUNTRY: &[u64] = &[2, 5, 4, 6];
const PROVINCE: &[u64] = &[2, 5, 4, 8];
const LOCALITY: &[u64] = &[2, 5, 4, 7];
const STREET_ADDRESS: &[u64] = &[2, 5, 4, 9];
const POSTAL_CODE: &[u64] = &[2, 5, 4, 17];
const ORGANIZATION: &[u64] = &[2, 5, 4, 10];
const ORGANIZATIONAL_UNIT: &[u64] = &[2, 5, 4, 11];
/// The commonName attribute type, 2.5.4.3.
pub const COMMON_NAME: &[u64] = &[2, 5, 4, 3];
const SERIAL_NUMBER: &[u64] = &[2, 5, 4, 5];
const DOMAIN_COMPONENT: &[u64] = &[0, 9, 2342, 19_200_300, 100, 1, 25];
const UNIQUE_IDENTIFIER: &[u64] = &[0, 9, 2342, 19_200_300, 100, 1, 1];

/// The attribute types a literal subject may name (cert-manager's table; case matters).
const LITERAL_TYPES: [(&str, &[u64]); 10] = [
    ("C", COUNTRY),
    ("O", ORGANIZATION),
    ("OU", ORGANIZATIONAL_UNIT),
    ("CN", COMMON_NAME),
    ("SERIALNUMBER", SERIAL_NUMBER),
    ("L", LOCALITY),
    ("ST", PROVINCE),
    ("STREET", STREET_ADDRESS),
    ("DC", DOMAIN_COMPONENT),
    ("UID", UNIQUE_IDENTIFIER),
];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubjectError {
    /// The literal subject is not RFC 4514 (go-ldap's message).
    #[error("{0}")]
    Invalid(String),
    /// An attribute type that is neither a known name nor an OID (cert-manager's webhook message).
    #[error("Literal subject contains unrecognized key with value [{0}]")]
    UnrecognizedKey(String),
    /// An OID type Go cannot encode (fewer than two arcs, a first arc over 2, ...).
    #[error("asn1: structure error: invalid object identifier")]
    InvalidObjectIdentifier,
    /// A value (after unescaping) that is not UTF-8.
    #[error("asn1: string not valid UTF-8")]
    NotUtf8,
}

/// One attribute of an RDN: its type and its value's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    pub oid: Vec<u64>,
    pub value: Vec<u8>,
}

/// A relative distinguished name: one attribute, or several (a multi-valued RDN).
pub type Rdn = Vec<Attribute>;

impl Attribute {
    fn new(oid: &[u64], value: &str) -> Self {
        Attribute {
            oid: oid.to_vec(),
            value: value.as_bytes().to_vec(),
        }
    }
}

/// The DER `Name` the CSR carries for `spec` (see the module docs for the rules).
pub fn subject_der(spec: &CertificateSpec) -> Result<Vec<u8>, SubjectError> {
    if spec.literal_subject.is_empty() {
        encode_name(&name_rdns(spec))
    } else {
        literal_subject_der(&spec.literal_subject)
    }
}

/// The CSR's common name: from the literal subject when there is one, else `commonName`.
pub fn common_name(spec: &CertificateSpec) -> Result<String, SubjectError> {
    if spec.literal_subject.is_empty() {
        Ok(spec.common_name.clone())
    } else {
        literal_subject_common_name(&spec.literal_subject)
    }
}

/// The RDNs of a spec without `literalSubject`, in Go's `ToRDNSequence` order.
pub fn name_rdns(spec: &CertificateSpec) -> Vec<Rdn> {
    let subject = spec.subject.clone().unwrap_or_default();
    let lists: [(&[u64], &[String]); 7] = [
        (COUNTRY, &subject.countries),
        (PROVINCE, &subject.provinces),
        (LOCALITY, &subject.localities),
        (STREET_ADDRESS, &subject.street_addresses),
        (POSTAL_CODE, &subject.postal_codes),
        (ORGANIZATION, &subject.organizations),
        (ORGANIZATIONAL_UNIT, &subject.organizational_units),
    ];
    let mut rdns: Vec<Rdn> = lists
        .into_iter()
        .filter(|(_, values)| !values.is_empty())
        .map(|(oid, values)| values.iter().map(|v| Attribute::new(oid, v)).collect())
        .collect();
    for (oid, value) in [
        (COMMON_NAME, &spec.common_name),
        (SERIAL_NUMBER, &subject.serial_number),
    ] {
        if !value.is_empty() {
            rdns.push(vec![Attribute::new(oid, value)]);
        }
    }
    rdns
}

/// An attribute of a literal subject: its OID, `None` when the type is neither one of
/// cert-manager's names nor an OID (the webhook refuses those), and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiteralAttribute {
    pub oid: Option<Vec<u64>>,
    pub value: Vec<u8>,
}

/// The RDNs of an RFC 4514 literal subject, most significant first (the reverse of the string),
/// unknown types kept for the caller to report.
pub fn literal_attributes(literal: &str) -> Result<Vec<Vec<LiteralAttribute>>, SubjectError> {
    let parsed = dn::parse_dn(literal)?;
    let rdns = parsed.into_iter().rev().map(|rdn| {
        rdn.into_iter()
            .map(|atv| LiteralAttribute {
                oid: literal_type(&atv.attribute_type),
                value: atv.value,
            })
            .collect()
    });
    Ok(rdns.collect())
}

/// The RDNs of an RFC 4514 literal subject, most significant first; an unknown type is refused.
pub fn literal_rdns(literal: &str) -> Result<Vec<Rdn>, SubjectError> {
    let known = |a: LiteralAttribute| match a.oid {
        Some(oid) => Ok(Attribute { oid, value: a.value }),
        None => Err(SubjectError::UnrecognizedKey(
            String::from_utf8_lossy(&a.value).into_owned(),
        )),
    };
    literal_attributes(literal)?
        .into_iter()
        .map(|rdn| rdn.into_iter().map(known).collect())
        .collect()
}

/// The DER `Name` of an RFC 4514 literal subject.
pub fn literal_subject_der(literal: &str) -> Result<Vec<u8>, SubjectError> {
    encode_name(&literal_rdns(literal)?)
}

/// The first CN of a literal subject (empty when it has none).
pub fn literal_subject_common_name(literal: &str) -> Result<String, SubjectError> {
    let rdns = literal_rdns(literal)?;
    let first = rdns.iter().flatten().find(|a| a.oid == COMMON_NAME);
    match first {
        None => Ok(String::new()),
        Some(a) => String::from_utf8(a.value.clone()).map_err(|_| SubjectError::NotUtf8),
    }
}

/// A known type name, else a dotted OID as Go's `strconv.Atoi` reads each arc.
fn literal_type(attribute_type: &[u8]) -> Option<Vec<u64>> {
    if let Some((_, oid)) = LITERAL_TYPES
        .iter()
        .find(|(name, _)| name.as_bytes() == attribute_type)
    {
        return Some(oid.to_vec());
    }
    let text = std::str::from_utf8(attribute_type).ok()?;
    if text.is_empty() {
        return None;
    }
    text.split('.').map(go_atoi).collect()
}

/// Go's `strconv.Atoi`: an optional sign, then decimal digits. A negative arc is kept out by
/// returning `u64::MAX`, which the encoder then refuses as Go's marshaller does.
fn go_atoi(part: &str) -> Option<u64> {
    let (negative, digits) = match part.as_bytes().first() {
        Some(b'-') => (true, &part[1..]),
        Some(b'+') => (false, &part[1..]),
        _ => (false, part),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value: i64 = digits.parse().ok()?;
    if negative {
        return Some(if value == 0 { 0 } else { u64::MAX });
    }
    u64::try_from(value).ok()
}

/// Whether Go's `asn1.Marshal` writes `value` as a PrintableString (else UTF8String).
pub fn is_go_printable(value: &[u8]) -> bool {
    value.iter().all(|b| {
        b.is_ascii_alphanumeric()
            || (b'\''..=b')').contains(b)
            || (b'+'..=b'/').contains(b)
            || matches!(b, b' ' | b':' | b'=' | b'?')
    })
}

fn encodable_oid(oid: &[u64]) -> bool {
    oid.len() >= 2
        && oid[0] <= 2
        && (oid[0] == 2 || oid[1] < 40)
        && oid.iter().all(|arc| i64::try_from(*arc).is_ok())
}

/// DER of an RDN sequence, as Go's `asn1.Marshal(pkix.RDNSequence)` writes it.
pub fn encode_name(rdns: &[Rdn]) -> Result<Vec<u8>, SubjectError> {
    for attribute in rdns.iter().flatten() {
        if !encodable_oid(&attribute.oid) {
            return Err(SubjectError::InvalidObjectIdentifier);
        }
        if !is_go_printable(&attribute.value) && std::str::from_utf8(&attribute.value).is_err() {
            return Err(SubjectError::NotUtf8);
        }
    }
    Ok(yasna::construct_der(|w| {
        w.write_sequence(|w| {
            for rdn in rdns {
                w.next().write_set_of(|w| {
                    for attribute in rdn {
                        w.next().write_sequence(|w| write_attribute(w, attribute));
                    }
                });
            }
        });
    }))
}

fn write_attribute(w: &mut yasna::DERWriterSeq<'_>, attribute: &Attribute) {
    w.next().write_oid(&ObjectIdentifier::from_slice(&attribute.oid));
    if is_go_printable(&attribute.value) {
        w.next()
            .write_tagged_implicit(yasna::tags::TAG_PRINTABLESTRING, |w| {
                w.write_bytes(&attribute.value);
            });
    } else {
        // Checked to be UTF-8 by `encode_name`.
        w.next()
            .write_utf8_string(&String::from_utf8_lossy(&attribute.value));
    }
}

#[cfg(test)]
mod tests;
