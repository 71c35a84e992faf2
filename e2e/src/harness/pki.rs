//! CSRs to send and independent checks of what comes back.

use std::process::Command;

use anyhow::Context as _;
use x509_parser::prelude::*;

/// A fresh P-256 key and a PEM CSR naming `dns` (CN and SAN).
pub struct Csr {
    pub pem: String,
    pub key: rcgen::KeyPair,
}

impl Csr {
    pub fn new(dns: &str) -> anyhow::Result<Csr> {
        Csr::with_key(dns, rcgen::KeyPair::generate()?)
    }

    /// A CSR for `key`, signed with the key's own algorithm (cert-manager's choice of hash:
    /// P-384 with SHA-384, P-521 with SHA-512, RSA as given).
    pub fn with_key(dns: &str, key: rcgen::KeyPair) -> anyhow::Result<Csr> {
        let mut params = rcgen::CertificateParams::new(vec![dns.to_string()])?;
        params.distinguished_name.push(rcgen::DnType::CommonName, dns);
        let pem = params.serialize_request(&key)?.pem()?;
        Ok(Csr { pem, key })
    }
}

/// What a person wants to know about an issued leaf.
#[derive(Debug, Clone)]
pub struct LeafInfo {
    pub subject: String,
    pub issuer: String,
    pub dns_names: Vec<String>,
    pub not_after: String,
    /// DER SubjectPublicKeyInfo.
    pub spki: Vec<u8>,
    /// The serial number, as bytes.
    pub serial: Vec<u8>,
}

/// The first certificate of a PEM chain.
pub fn parse_leaf(chain_pem: &[u8]) -> anyhow::Result<LeafInfo> {
    let blocks = ::pem::parse_many(chain_pem)?;
    let first = blocks.first().context("no PEM block in the chain")?;
    anyhow::ensure!(first.tag() == "CERTIFICATE", "first block is {}", first.tag());
    let (_, cert) = X509Certificate::from_der(first.contents()).context("leaf does not parse")?;
    let dns_names = cert
        .subject_alternative_name()?
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|name| match name {
                    GeneralName::DNSName(dns) => Some(dns.to_string()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(LeafInfo {
        subject: cert.subject().to_string(),
        issuer: cert.issuer().to_string(),
        dns_names,
        not_after: cert.validity().not_after.to_string(),
        spki: cert.public_key().raw.to_vec(),
        serial: cert.raw_serial().to_vec(),
    })
}

/// Whether the chain's leaf carries the public half of `key`.
pub fn cert_matches_key(chain_pem: &[u8], key: &rcgen::KeyPair) -> anyhow::Result<bool> {
    Ok(parse_leaf(chain_pem)?.spki == rcgen::PublicKeyData::subject_public_key_info(key))
}

/// Verifies a chain (leaf first) to `root_pem` with the openssl CLI, independent of our code.
pub fn openssl_verify(chain_pem: &[u8], root_pem: &str) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let blocks = ::pem::parse_many(chain_pem)?;
    anyhow::ensure!(!blocks.is_empty(), "empty chain");
    let write = |name: &str, blocks: &[::pem::Pem]| -> anyhow::Result<std::path::PathBuf> {
        let path = dir.path().join(name);
        std::fs::write(&path, blocks.iter().map(::pem::encode).collect::<String>())?;
        Ok(path)
    };
    let leaf = write("leaf.pem", &blocks[..1])?;
    let untrusted = write("untrusted.pem", &blocks[1..])?;
    let root = dir.path().join("root.pem");
    std::fs::write(&root, root_pem)?;
    let mut cmd = Command::new("openssl");
    cmd.arg("verify").arg("-CAfile").arg(&root);
    if blocks.len() > 1 {
        cmd.arg("-untrusted").arg(&untrusted);
    }
    let out = cmd.arg(&leaf).output().context("run openssl")?;
    anyhow::ensure!(
        out.status.success(),
        "openssl verify: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// Whether the leaf of `chain_pem` is for the private key `key_pem` (any PEM encoding), as the
/// openssl CLI sees them: the public key of each, compared.
pub fn pem_key_matches(chain_pem: &[u8], key_pem: &[u8]) -> anyhow::Result<bool> {
    let dir = tempfile::tempdir()?;
    let blocks = ::pem::parse_many(chain_pem)?;
    anyhow::ensure!(!blocks.is_empty(), "empty chain");
    let leaf = dir.path().join("leaf.pem");
    std::fs::write(&leaf, ::pem::encode(&blocks[0]))?;
    let key = dir.path().join("key.pem");
    std::fs::write(&key, key_pem)?;
    let run = |args: &[&std::ffi::OsStr]| -> anyhow::Result<Vec<u8>> {
        let out = Command::new("openssl")
            .args(args)
            .output()
            .context("run openssl")?;
        anyhow::ensure!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(out.stdout)
    };
    let from_cert = run(&[
        "x509".as_ref(),
        "-in".as_ref(),
        leaf.as_os_str(),
        "-pubkey".as_ref(),
        "-noout".as_ref(),
    ])?;
    let from_key = run(&[
        "pkey".as_ref(),
        "-in".as_ref(),
        key.as_os_str(),
        "-pubout".as_ref(),
    ])?;
    Ok(from_cert == from_key)
}
