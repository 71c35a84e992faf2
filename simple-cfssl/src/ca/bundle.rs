//! The `result.bundle` object of cfssl PR #1218 (the wmf fork): cfssl's `bundler.Bundle` in its
//! "optimal" flavour. The issuer reads `bundle` (leaf first, then intermediates, no root) and
//! `root`; the other keys are there so the object has the shape clients of the fork expect.
//! Keys are in the order Go writes a map: sorted.

use serde::Serialize;
use x509_parser::certificate::X509Certificate;
use x509_parser::public_key::PublicKey;
use x509_parser::x509::X509Name;

use super::{Cert, Signer};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bundle {
    /// The chain as PEM, leaf first, without the root; no trailing newline.
    pub bundle: String,
    pub crl_support: bool,
    pub crt: String,
    /// The earliest `notAfter` in the chain (RFC 3339).
    pub expires: String,
    pub hostnames: Vec<String>,
    pub issuer: String,
    /// Always empty: the CA never holds the client's key.
    pub key: String,
    pub key_size: u32,
    pub key_type: String,
    pub leaf_expires: String,
    pub ocsp: Option<Vec<String>>,
    pub ocsp_support: bool,
    pub root: String,
    pub signature: String,
    pub status: Status,
    pub subject: String,
}

/// cfssl's `BundleStatus`; a freshly signed chain from a known root has nothing to report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Status {
    pub rebundled: bool,
    #[serde(rename = "expiring_SKIs")]
    pub expiring_skis: Vec<String>,
    pub untrusted_root_stores: Vec<String>,
    pub messages: Vec<String>,
    pub code: u32,
}

#[derive(Debug, thiserror::Error)]
#[error("a certificate of the chain does not parse")]
pub struct BundleError;

impl Bundle {
    pub fn new(leaf: &Cert, signer: &Signer, root: &Cert) -> Result<Bundle, BundleError> {
        let chain: Vec<&Cert> = [leaf, &signer.cert].into_iter().chain(&signer.chain).collect();
        let parsed: Vec<X509Certificate<'_>> = chain
            .iter()
            .map(|c| x509_parser::parse_x509_certificate(&c.der).map(|(_, p)| p))
            .collect::<Result<_, _>>()
            .map_err(|_| BundleError)?;
        let leaf_parsed = &parsed[0];
        let expires = parsed
            .iter()
            .map(|c| c.validity().not_after.to_datetime())
            .min()
            .ok_or(BundleError)?;
        let (key_type, key_size) = key_description(leaf_parsed);
        Ok(Bundle {
            bundle: chain
                .iter()
                .map(|c| c.pem.as_str())
                .collect::<String>()
                .trim()
                .to_string(),
            crl_support: false,
            crt: leaf.pem.trim().to_string(),
            expires: rfc3339(expires),
            hostnames: hostnames(leaf_parsed),
            issuer: names(leaf_parsed.issuer()),
            key: String::new(),
            key_size,
            key_type,
            leaf_expires: rfc3339(leaf_parsed.validity().not_after.to_datetime()),
            ocsp: None,
            ocsp_support: false,
            root: root.pem.trim().to_string(),
            signature: signature_name(leaf_parsed),
            status: Status {
                rebundled: false,
                expiring_skis: Vec::new(),
                untrusted_root_stores: Vec::new(),
                messages: Vec::new(),
                code: 0,
            },
            subject: names(leaf_parsed.subject()),
        })
    }
}

/// Go's `time.Time` in JSON, for whole seconds in UTC.
fn rfc3339(t: time::OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// cfssl writes names as `/Organization=x/CommonName=y`, attribute by attribute; types it has
/// no word for come out empty.
fn names(name: &X509Name<'_>) -> String {
    let mut out = String::new();
    for attribute in name.iter_attributes() {
        let arcs: Vec<u64> = attribute
            .attr_type()
            .iter()
            .map(Iterator::collect)
            .unwrap_or_default();
        let word = match arcs.as_slice() {
            [2, 5, 4, 3] => "CommonName",
            [2, 5, 4, 5] => "SerialNumber",
            [2, 5, 4, 6] => "Country",
            [2, 5, 4, 7] => "Locality",
            [2, 5, 4, 8] => "Province",
            [2, 5, 4, 9] => "StreetAddress",
            [2, 5, 4, 10] => "Organization",
            [2, 5, 4, 11] => "OrganizationalUnit",
            [2, 5, 4, 17] => "PostalCode",
            _ => "",
        };
        let value = attribute.as_str().unwrap_or_default();
        out.push_str(&format!("/{word}={value}"));
    }
    out
}

/// The common name, then the DNS SANs, without repeats.
fn hostnames(leaf: &X509Certificate<'_>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let common_name = leaf
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok());
    let dns = leaf
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|ext| ext.value.general_names.clone())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|name| match name {
            x509_parser::extensions::GeneralName::DNSName(d) => Some(d),
            _ => None,
        });
    for name in common_name.into_iter().chain(dns) {
        if !name.is_empty() && !out.iter().any(|h| h == name) {
            out.push(name.to_string());
        }
    }
    out
}

fn key_description(leaf: &X509Certificate<'_>) -> (String, u32) {
    match leaf.public_key().parsed() {
        Ok(PublicKey::EC(point)) => {
            let bits = point.key_size() as u32;
            (format!("{bits}-bit ECDSA"), bits)
        }
        Ok(PublicKey::RSA(rsa)) => {
            let bits = rsa.key_size() as u32;
            (format!("{bits}-bit RSA"), bits)
        }
        _ => ("Unknown".into(), 0),
    }
}

/// cfssl's names for signature algorithms.
fn signature_name(cert: &X509Certificate<'_>) -> String {
    let arcs: Vec<u64> = cert
        .signature_algorithm
        .algorithm
        .iter()
        .map(Iterator::collect)
        .unwrap_or_default();
    let name = match arcs.as_slice() {
        [1, 2, 840, 113_549, 1, 1, 5] => "SHA1WithRSA",
        [1, 2, 840, 113_549, 1, 1, 11] => "SHA256WithRSA",
        [1, 2, 840, 113_549, 1, 1, 12] => "SHA384WithRSA",
        [1, 2, 840, 113_549, 1, 1, 13] => "SHA512WithRSA",
        [1, 2, 840, 10045, 4, 3, 2] => "ECDSAWithSHA256",
        [1, 2, 840, 10045, 4, 3, 3] => "ECDSAWithSHA384",
        [1, 2, 840, 10045, 4, 3, 4] => "ECDSAWithSHA512",
        _ => "Unknown Signature",
    };
    name.to_string()
}
