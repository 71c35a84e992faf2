//! The certificate authority: one root, one intermediate per label (generated, or loaded from
//! PEM files), leaf signing from CSRs, and the bundle object of cfssl PR #1218.

pub mod bundle;
mod csr_signature;
pub mod keys;
pub mod leaf;

use std::collections::BTreeMap;
use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::CertificateDer;
use time::{Duration, OffsetDateTime};

use crate::config::{Config, Label, RootFiles};

/// multirootca backdates `notBefore` so that clocks running a little behind accept new certificates.
pub const BACKDATE: Duration = Duration::minutes(5);

/// A certificate as PEM (what clients receive) and DER (what gets parsed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cert {
    pub pem: String,
    pub der: Vec<u8>,
}

impl Cert {
    fn from_rcgen(cert: &rcgen::Certificate) -> Cert {
        Cert {
            pem: cert.pem(),
            der: cert.der().to_vec(),
        }
    }

    fn from_der(der: Vec<u8>) -> Cert {
        let pem = pem::encode_config(
            &pem::Pem::new("CERTIFICATE", der.clone()),
            pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
        );
        Cert { pem, der }
    }
}

/// A label's signing CA.
pub struct Signer {
    pub cert: Cert,
    /// Certificates between the signer and the root, for bundles (empty when generated).
    pub chain: Vec<Cert>,
    issuer: Issuer<'static, KeyPair>,
}

pub struct Ca {
    pub root: Cert,
    pub signers: BTreeMap<String, Signer>,
}

#[derive(Debug, thiserror::Error)]
pub enum CaError {
    #[error("generating {what}: {source}")]
    Generate {
        what: String,
        #[source]
        source: rcgen::Error,
    },
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: no CERTIFICATE block")]
    NoCertificate { path: String },
    #[error("{path}: not a CA certificate rcgen can sign with: {source}")]
    BadCertificate {
        path: String,
        #[source]
        source: rcgen::Error,
    },
    #[error("{path}: {source}")]
    Key {
        path: String,
        #[source]
        source: keys::KeyError,
    },
    #[error("label {0:?}: its key does not match its certificate")]
    KeyMismatch(String),
    #[error("label {0:?}: its certificate is not signed by the root")]
    NotUnderRoot(String),
    #[error("label {0:?} is to be generated, but the root has no key (config `root.key`)")]
    RootWithoutKey(String),
}

impl Ca {
    /// Generates or loads the root and every label's intermediate.
    pub fn build(config: &Config, now: OffsetDateTime) -> Result<Ca, CaError> {
        let (root, root_issuer) = match &config.root {
            Some(files) => load_root(files)?,
            None => {
                let (cert, issuer) = generate_root("simple-cfssl root CA", now)?;
                (cert, Some(issuer))
            }
        };
        let mut signers = BTreeMap::new();
        for label in &config.labels {
            let signer = match (&label.cert, &label.key) {
                (Some(cert), Some(key)) => load_signer(label, cert, key, &root)?,
                _ => {
                    let root_issuer = root_issuer
                        .as_ref()
                        .ok_or_else(|| CaError::RootWithoutKey(label.name.clone()))?;
                    generate_signer(&label.name, root_issuer, now)?
                }
            };
            signers.insert(label.name.clone(), signer);
        }
        Ok(Ca { root, signers })
    }
}

fn ca_params(common_name: &str, path_len: Option<u8>, now: OffsetDateTime, years: i64) -> CertificateParams {
    let mut params = CertificateParams::default();
    // rcgen's default subject has a placeholder common name.
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::OrganizationName, "simple-cfssl");
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(match path_len {
        Some(n) => BasicConstraints::Constrained(n),
        None => BasicConstraints::Unconstrained,
    });
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.not_before = now - BACKDATE;
    params.not_after = now + Duration::days(365 * years);
    params.use_authority_key_identifier_extension = path_len.is_some();
    params
}

/// A self-signed ECDSA P-256 root, as the lab's `cfssl gencert -initca`.
fn generate_root(
    common_name: &str,
    now: OffsetDateTime,
) -> Result<(Cert, Issuer<'static, KeyPair>), CaError> {
    let generate = |source| CaError::Generate {
        what: common_name.to_string(),
        source,
    };
    let key = KeyPair::generate().map_err(generate)?;
    let params = ca_params(common_name, None, now, 10);
    let cert = params.self_signed(&key).map_err(generate)?;
    Ok((Cert::from_rcgen(&cert), Issuer::new(params, key)))
}

/// An intermediate limited to signing leaves (path length 0), as the lab's `ca` profile.
fn generate_signer(label: &str, root: &Issuer<'_, KeyPair>, now: OffsetDateTime) -> Result<Signer, CaError> {
    let generate = |source| CaError::Generate {
        what: format!("label {label:?}"),
        source,
    };
    let key = KeyPair::generate().map_err(generate)?;
    let params = ca_params(&format!("simple-cfssl {label}"), Some(0), now, 5);
    let cert = params.signed_by(&key, root).map_err(generate)?;
    Ok(Signer {
        cert: Cert::from_rcgen(&cert),
        chain: Vec::new(),
        issuer: Issuer::new(params, key),
    })
}

fn read(path: &Path) -> Result<String, CaError> {
    std::fs::read_to_string(path).map_err(|source| CaError::Read {
        path: path.display().to_string(),
        source,
    })
}

fn read_certs(path: &Path) -> Result<Vec<Cert>, CaError> {
    let no_certificate = || CaError::NoCertificate {
        path: path.display().to_string(),
    };
    let blocks = pem::parse_many(read(path)?).map_err(|_| no_certificate())?;
    let certs: Vec<Cert> = blocks
        .into_iter()
        .filter(|b| b.tag() == "CERTIFICATE")
        .map(|b| Cert::from_der(b.into_contents()))
        .collect();
    if certs.is_empty() {
        return Err(no_certificate());
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<KeyPair, CaError> {
    keys::from_pem(&read(path)?).map_err(|source| CaError::Key {
        path: path.display().to_string(),
        source,
    })
}

fn issuer_from(cert: &Cert, key: KeyPair, path: &Path) -> Result<Issuer<'static, KeyPair>, CaError> {
    Issuer::from_ca_cert_der(&CertificateDer::from(cert.der.as_slice()), key).map_err(|source| {
        CaError::BadCertificate {
            path: path.display().to_string(),
            source,
        }
    })
}

fn load_root(files: &RootFiles) -> Result<(Cert, Option<Issuer<'static, KeyPair>>), CaError> {
    let root = read_certs(&files.cert)?.swap_remove(0);
    let issuer = match &files.key {
        Some(key_path) => Some(issuer_from(&root, read_key(key_path)?, &files.cert)?),
        None => None,
    };
    Ok((root, issuer))
}

fn load_signer(label: &Label, cert_path: &Path, key_path: &Path, root: &Cert) -> Result<Signer, CaError> {
    let mut certs = read_certs(cert_path)?;
    let key = read_key(key_path)?;
    let cert = certs.remove(0);
    let parsed = parse(&cert, cert_path)?;
    if parsed.public_key().subject_public_key.data.as_ref() != key.public_key_raw() {
        return Err(CaError::KeyMismatch(label.name.clone()));
    }
    // The last certificate of the file must be the one the root signed.
    let top = certs.last().unwrap_or(&cert);
    let root_parsed = parse(root, cert_path)?;
    let top_parsed = parse(top, cert_path)?;
    if top_parsed
        .verify_signature(Some(root_parsed.public_key()))
        .is_err()
    {
        return Err(CaError::NotUnderRoot(label.name.clone()));
    }
    let issuer = issuer_from(&cert, key, cert_path)?;
    Ok(Signer {
        cert,
        chain: certs,
        issuer,
    })
}

fn parse<'a>(cert: &'a Cert, path: &Path) -> Result<x509_parser::certificate::X509Certificate<'a>, CaError> {
    x509_parser::parse_x509_certificate(&cert.der)
        .map(|(_, parsed)| parsed)
        .map_err(|_| CaError::NoCertificate {
            path: path.display().to_string(),
        })
}

/// The CA and server certificate behind `tls: true`: a separate root, so that trusting the
/// signing root does not also trust the server.
pub struct TlsMaterial {
    pub ca: Cert,
    pub cert_der: Vec<u8>,
    pub key_der: Vec<u8>,
}

impl TlsMaterial {
    pub fn generate(hosts: &[String], now: OffsetDateTime) -> Result<TlsMaterial, CaError> {
        let generate = |source| CaError::Generate {
            what: "TLS server certificate".into(),
            source,
        };
        let (ca, ca_issuer) = generate_root("simple-cfssl TLS CA", now)?;
        let key = KeyPair::generate().map_err(generate)?;
        // rcgen files names that parse as IP addresses as IP SANs.
        let mut params = CertificateParams::new(hosts.to_vec()).map_err(generate)?;
        let common_name = hosts.first().map_or("simple-cfssl", String::as_str);
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.is_ca = IsCa::ExplicitNoCa;
        params.not_before = now - BACKDATE;
        params.not_after = now + Duration::days(365);
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&key, &ca_issuer).map_err(generate)?;
        Ok(TlsMaterial {
            ca,
            cert_der: cert.der().to_vec(),
            key_der: key.serialize_der(),
        })
    }
}
