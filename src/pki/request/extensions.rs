//! The extensions cert-manager puts in a CSR, each as Go writes it: subjectAltName, keyUsage,
//! extKeyUsage and nameConstraints.

use std::net::IpAddr;

use yasna::Tag;
use yasna::models::ObjectIdentifier;

use super::RequestError;
use crate::api::certmanager::{CertificateSpec, NameConstraintItem, NameConstraints};

pub(super) const SUBJECT_ALT_NAME: &[u64] = &[2, 5, 29, 17];
pub(super) const KEY_USAGE: &[u64] = &[2, 5, 29, 15];
pub(super) const EXT_KEY_USAGE: &[u64] = &[2, 5, 29, 37];
pub(super) const NAME_CONSTRAINTS: &[u64] = &[2, 5, 29, 30];

/// An extension in the order it goes into the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extension {
    pub oid: &'static [u64],
    pub critical: bool,
    pub value: Vec<u8>,
}

/// Go's `x509.KeyUsage` bits (bit n is KeyUsage's named bit n).
pub mod key_usage {
    pub const DIGITAL_SIGNATURE: u16 = 1;
    pub const CONTENT_COMMITMENT: u16 = 1 << 1;
    pub const KEY_ENCIPHERMENT: u16 = 1 << 2;
    pub const DATA_ENCIPHERMENT: u16 = 1 << 3;
    pub const KEY_AGREEMENT: u16 = 1 << 4;
    pub const CERT_SIGN: u16 = 1 << 5;
    pub const CRL_SIGN: u16 = 1 << 6;
    pub const ENCIPHER_ONLY: u16 = 1 << 7;
    pub const DECIPHER_ONLY: u16 = 1 << 8;
}

/// cert-manager's usage names that are KeyUsage bits.
const KEY_USAGES: [(&str, u16); 10] = [
    ("signing", key_usage::DIGITAL_SIGNATURE),
    ("digital signature", key_usage::DIGITAL_SIGNATURE),
    ("content commitment", key_usage::CONTENT_COMMITMENT),
    ("key encipherment", key_usage::KEY_ENCIPHERMENT),
    ("key agreement", key_usage::KEY_AGREEMENT),
    ("data encipherment", key_usage::DATA_ENCIPHERMENT),
    ("cert sign", key_usage::CERT_SIGN),
    ("crl sign", key_usage::CRL_SIGN),
    ("encipher only", key_usage::ENCIPHER_ONLY),
    ("decipher only", key_usage::DECIPHER_ONLY),
];

/// cert-manager's usage names that are extended key usages, with their OIDs.
const EXT_KEY_USAGES: [(&str, &[u64]); 13] = [
    ("any", &[2, 5, 29, 37, 0]),
    ("server auth", &[1, 3, 6, 1, 5, 5, 7, 3, 1]),
    ("client auth", &[1, 3, 6, 1, 5, 5, 7, 3, 2]),
    ("code signing", &[1, 3, 6, 1, 5, 5, 7, 3, 3]),
    ("email protection", &[1, 3, 6, 1, 5, 5, 7, 3, 4]),
    ("s/mime", &[1, 3, 6, 1, 5, 5, 7, 3, 4]),
    ("ipsec end system", &[1, 3, 6, 1, 5, 5, 7, 3, 5]),
    ("ipsec tunnel", &[1, 3, 6, 1, 5, 5, 7, 3, 6]),
    ("ipsec user", &[1, 3, 6, 1, 5, 5, 7, 3, 7]),
    ("timestamping", &[1, 3, 6, 1, 5, 5, 7, 3, 8]),
    ("ocsp signing", &[1, 3, 6, 1, 5, 5, 7, 3, 9]),
    ("microsoft sgc", &[1, 3, 6, 1, 4, 1, 311, 10, 3, 3]),
    ("netscape sgc", &[2, 16, 840, 1, 113_730, 4, 1]),
];

/// The usages cert-manager means when `usages` is empty.
pub const DEFAULT_USAGES: [&str; 2] = ["digital signature", "key encipherment"];

/// The KeyUsage bit a usage name stands for, if it is a KeyUsage.
pub fn key_usage_bit(usage: &str) -> Option<u16> {
    KEY_USAGES.iter().find(|(n, _)| *n == usage).map(|(_, b)| *b)
}

/// The extended key usage OID a usage name stands for, if it is an EKU.
pub fn ext_key_usage_oid(usage: &str) -> Option<&'static [u64]> {
    EXT_KEY_USAGES
        .iter()
        .find(|(n, _)| *n == usage)
        .map(|(_, oid)| *oid)
}

/// Key usage bits and EKU OIDs (in the order named, repeats kept) for `usages`, as
/// cert-manager's `KeyUsagesForCertificateOrCertificateRequest` computes them: the defaults
/// when empty, `cert sign` added for a CA, whatever the key's algorithm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Usages {
    pub key_usage: u16,
    pub ext_key_usages: Vec<&'static [u64]>,
}

pub fn key_usages(usages: &[String], is_ca: bool) -> Result<Usages, RequestError> {
    let mut result = Usages {
        key_usage: if is_ca { key_usage::CERT_SIGN } else { 0 },
        ext_key_usages: Vec::new(),
    };
    let defaults = DEFAULT_USAGES.map(String::from);
    let usages = if usages.is_empty() { &defaults[..] } else { usages };
    let mut unknown = Vec::new();
    for usage in usages {
        if let Some(bit) = key_usage_bit(usage) {
            result.key_usage |= bit;
        } else if let Some(oid) = ext_key_usage_oid(usage) {
            result.ext_key_usages.push(oid);
        } else {
            unknown.push(usage.as_str());
        }
    }
    if unknown.is_empty() {
        Ok(result)
    } else {
        Err(RequestError::UnknownUsages(unknown.join(" ")))
    }
}

/// The KeyUsage BIT STRING: bit n of the Go value is named bit n, trailing zero bits dropped.
fn key_usage_value(bits: u16) -> Vec<u8> {
    let [low, high] = bits.to_le_bytes();
    let mut bytes = vec![low.reverse_bits()];
    if high != 0 {
        bytes.push(high.reverse_bits());
    }
    let trailing = bytes.last().map_or(0, |b| b.trailing_zeros() as usize);
    let length = bytes.len() * 8 - trailing.min(8);
    yasna::construct_der(|w| w.write_bitvec_bytes(&bytes, length))
}

fn oid(arcs: &[u64]) -> ObjectIdentifier {
    ObjectIdentifier::from_slice(arcs)
}

fn ia5(value: &str) -> Result<&[u8], RequestError> {
    if value.is_ascii() {
        Ok(value.as_bytes())
    } else {
        Err(RequestError::NotIa5(value.to_string()))
    }
}

/// An IP address as the SAN holds it: 4 bytes for IPv4 (and IPv4-mapped IPv6), else 16.
fn ip_bytes(text: &str) -> Result<Vec<u8>, RequestError> {
    match text.parse::<IpAddr>() {
        Ok(IpAddr::V4(v4)) => Ok(v4.octets().to_vec()),
        Ok(IpAddr::V6(v6)) => Ok(v6
            .to_ipv4_mapped()
            .map_or_else(|| v6.octets().to_vec(), |v4| v4.octets().to_vec())),
        Err(_) => Err(RequestError::IpAddress(text.to_string())),
    }
}

/// An otherName's OID as cert-manager's `ParseObjectIdentifier` reads it.
fn other_name_oid(text: &str) -> Result<Vec<u64>, RequestError> {
    if text.is_empty() {
        return Err(RequestError::OtherName("zero length OBJECT IDENTIFIER".into()));
    }
    let arcs: Vec<u64> = text
        .split('.')
        .map(|part| {
            part.parse::<u64>().map_err(|_| {
                RequestError::OtherName(format!("strconv.Atoi: parsing {part:?}: invalid syntax"))
            })
        })
        .collect::<Result<_, _>>()?;
    let valid = arcs.len() >= 2 && arcs[0] <= 2 && (arcs[0] == 2 || arcs[1] < 40);
    if valid {
        Ok(arcs)
    } else {
        Err(RequestError::OtherName(
            "asn1: structure error: invalid object identifier".into(),
        ))
    }
}

/// The SAN entries in cert-manager's order: DNS, email, IP, URI, otherName.
pub(super) struct Sans {
    entries: Vec<(u64, Vec<u8>)>,
    other_names: Vec<(Vec<u64>, String)>,
}

impl Sans {
    pub(super) fn of(spec: &CertificateSpec) -> Result<Self, RequestError> {
        let ips = spec
            .ip_addresses
            .iter()
            .map(|ip| ip_bytes(ip))
            .collect::<Result<Vec<_>, _>>()?;
        let mut other_names = Vec::new();
        for other in &spec.other_names {
            let arcs = other_name_oid(&other.oid)?;
            if other.utf8_value.is_empty() {
                return Err(RequestError::OtherName(
                    "UniversalValue should have exactly one field set".into(),
                ));
            }
            other_names.push((arcs, other.utf8_value.clone()));
        }
        let mut entries = Vec::new();
        for (tag, values) in [(2, &spec.dns_names), (1, &spec.email_addresses)] {
            for value in values {
                entries.push((tag, ia5(value)?.to_vec()));
            }
        }
        entries.extend(ips.into_iter().map(|ip| (7, ip)));
        for uri in &spec.uris {
            entries.push((6, ia5(uri)?.to_vec()));
        }
        Ok(Sans { entries, other_names })
    }

    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.other_names.is_empty()
    }

    /// The extension; critical when the subject is empty (RFC 5280 4.2.1.6).
    pub(super) fn extension(&self, subject_is_empty: bool) -> Extension {
        let value = yasna::construct_der(|w| {
            w.write_sequence(|w| {
                for (tag, bytes) in &self.entries {
                    w.next()
                        .write_tagged_implicit(Tag::context(*tag), |w| w.write_bytes(bytes));
                }
                for (arcs, value) in &self.other_names {
                    w.next().write_tagged_implicit(Tag::context(0), |w| {
                        w.write_sequence(|w| {
                            w.next().write_oid(&oid(arcs));
                            w.next()
                                .write_tagged(Tag::context(0), |w| w.write_utf8_string(value));
                        });
                    });
                }
            });
        });
        Extension {
            oid: SUBJECT_ALT_NAME,
            critical: subject_is_empty,
            value,
        }
    }
}

/// keyUsage (critical, when any bit is set) and extKeyUsage (when any EKU is asked for).
pub(super) fn usage_extensions(spec: &CertificateSpec) -> Result<Vec<Extension>, RequestError> {
    let usages = key_usages(&spec.usages, spec.is_ca)?;
    let mut extensions = Vec::new();
    if usages.key_usage != 0 {
        extensions.push(Extension {
            oid: KEY_USAGE,
            critical: true,
            value: key_usage_value(usages.key_usage),
        });
    }
    if !usages.ext_key_usages.is_empty() {
        let value = yasna::construct_der(|w| {
            w.write_sequence(|w| {
                for arcs in &usages.ext_key_usages {
                    w.next().write_oid(&oid(arcs));
                }
            });
        });
        extensions.push(Extension {
            oid: EXT_KEY_USAGE,
            critical: false,
            value,
        });
    }
    Ok(extensions)
}

/// A CIDR as Go's `net.ParseCIDR` reads it: the masked address then the mask, 4+4 or 16+16 bytes.
fn ip_and_mask(cidr: &str) -> Result<Vec<u8>, RequestError> {
    let invalid = || RequestError::Cidr(cidr.to_string());
    let (address, prefix) = cidr.split_once('/').ok_or_else(invalid)?;
    let address: Vec<u8> = match address.parse::<IpAddr>().map_err(|_| invalid())? {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    };
    if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    let prefix: usize = prefix.parse().map_err(|_| invalid())?;
    if prefix > address.len() * 8 {
        return Err(invalid());
    }
    let mask: Vec<u8> = (0..address.len())
        .map(|i| {
            let ones = prefix.saturating_sub(i * 8).min(8);
            u8::try_from(0xff_u16 << (8 - ones) & 0xff).unwrap_or(0)
        })
        .collect();
    let mut out: Vec<u8> = address.iter().zip(&mask).map(|(a, m)| a & m).collect();
    out.extend_from_slice(&mask);
    Ok(out)
}

/// The GeneralSubtrees of one side: DNS, IP ranges, emails, URI domains.
fn subtrees(item: Option<&NameConstraintItem>) -> Result<Vec<(u64, Vec<u8>)>, RequestError> {
    let Some(item) = item else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for name in &item.dns_domains {
        out.push((2, ia5(name)?.to_vec()));
    }
    for cidr in &item.ip_ranges {
        out.push((7, ip_and_mask(cidr)?));
    }
    for (tag, values) in [(1, &item.email_addresses), (6, &item.uri_domains)] {
        for value in values {
            out.push((tag, ia5(value)?.to_vec()));
        }
    }
    Ok(out)
}

/// nameConstraints, critical as asked; none when both sides are empty.
pub(super) fn name_constraints(
    constraints: Option<&NameConstraints>,
) -> Result<Option<Extension>, RequestError> {
    let Some(constraints) = constraints else {
        return Ok(None);
    };
    let permitted = subtrees(constraints.permitted.as_ref())?;
    let excluded = subtrees(constraints.excluded.as_ref())?;
    if permitted.is_empty() && excluded.is_empty() {
        return Ok(None);
    }
    let value = yasna::construct_der(|w| {
        w.write_sequence(|w| {
            for (tag, side) in [(0, &permitted), (1, &excluded)] {
                if side.is_empty() {
                    continue;
                }
                w.next().write_tagged_implicit(Tag::context(tag), |w| {
                    w.write_sequence(|w| {
                        for (kind, bytes) in side {
                            w.next().write_sequence(|w| {
                                w.next().write_tagged_implicit(Tag::context(*kind), |w| {
                                    w.write_bytes(bytes);
                                });
                            });
                        }
                    });
                });
            }
        });
    });
    Ok(Some(Extension {
        oid: NAME_CONSTRAINTS,
        critical: constraints.critical,
        value,
    }))
}
