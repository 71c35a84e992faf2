//! The CFSSL CA a scenario signs with.

use std::path::{Path, PathBuf};

use super::KEY_HEX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Our simple-cfssl, in this process (so a scenario can take it down and up).
    SimpleCfssl,
    /// The real multirootca from Debian's golang-cfssl, started by scripts/multirootca-lab.sh.
    Multirootca,
    /// Whatever `E2E_CFSSL_URL` names, as the manager in the cluster reaches it.
    External,
}

/// A running CA with labels `intermediate1`/`intermediate2` and profiles `default`, `server`,
/// `server-short` and `client` keyed with [`KEY_HEX`] (simple-cfssl also has `renewing`: 105 s
/// from the rounded minute less 31 s, for renewals within about a minute, and `renewing-150s`).
pub struct Ca {
    pub backend: Backend,
    /// The URL as the manager reaches it.
    pub url: String,
    pub key_hex: String,
    /// The root the issued chains verify to, when known.
    pub root_pem: Option<String>,
    /// PEM the issuer must trust for TLS to the CA (`spec.caBundle`), if any.
    pub tls_ca_pem: Option<String>,
    guard: Guard,
}

enum Guard {
    Simple(simple_cfssl::Running),
    /// Held for its Drop, which stops the process.
    #[allow(dead_code)]
    Multirootca(simple_cfssl::multirootca::Multirootca),
    None,
}

impl Ca {
    /// simple-cfssl over TLS with its own TLS CA; or, against a real cluster, the external CA.
    pub async fn simple(external: bool) -> anyhow::Result<Ca> {
        if external {
            return Ok(Ca::external());
        }
        let mut config = simple_cfssl::Config::test_default(KEY_HEX);
        config.tls = true;
        let running = simple_cfssl::spawn(config).await?;
        Ok(Ca {
            backend: Backend::SimpleCfssl,
            url: running.url.clone(),
            key_hex: KEY_HEX.into(),
            root_pem: Some(running.root_pem.clone()),
            tls_ca_pem: running.tls_ca_pem.clone(),
            guard: Guard::Simple(running),
        })
    }

    /// A real multirootca on 127.0.0.1 (plain HTTP).
    pub fn multirootca() -> anyhow::Result<Ca> {
        let lab = simple_cfssl::multirootca::Multirootca::start(false)?;
        Ok(Ca {
            backend: Backend::Multirootca,
            url: lab.url.clone(),
            key_hex: KEY_HEX.into(),
            root_pem: Some(lab.root_pem.clone()),
            tls_ca_pem: None,
            guard: Guard::Multirootca(lab),
        })
    }

    fn external() -> Ca {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let read = |name: &str| var(name).and_then(|path| std::fs::read_to_string(path).ok());
        Ca {
            backend: Backend::External,
            url: var("E2E_CFSSL_URL").unwrap_or_else(|| "https://simple-cfssl.simple-cfssl.svc:8888".into()),
            key_hex: var("E2E_CFSSL_KEY").unwrap_or_else(|| KEY_HEX.into()),
            root_pem: read("E2E_CFSSL_ROOT"),
            tls_ca_pem: read("E2E_CFSSL_TLS_CA"),
            guard: Guard::None,
        }
    }

    /// Takes the CA down (every request gets a 503 from "a proxy") or brings it back.
    /// Only simple-cfssl in this process can; returns false elsewhere.
    pub fn set_available(&self, up: bool) -> bool {
        match &self.guard {
            Guard::Simple(running) => {
                running.set_available(up);
                true
            }
            _ => false,
        }
    }

    /// Makes every sign take `delay` longer (simple-cfssl only; returns false elsewhere).
    pub fn set_sign_delay(&self, delay: std::time::Duration) -> bool {
        match &self.guard {
            Guard::Simple(running) => {
                running.set_sign_delay(delay);
                true
            }
            _ => false,
        }
    }

    /// Certificates signed so far for the public key of `csr` (simple-cfssl only): each
    /// request has a key of its own, so this is how often that request was signed.
    pub fn signatures_for(&self, csr: &super::Csr) -> Option<u32> {
        use rcgen::PublicKeyData as _;
        match &self.guard {
            Guard::Simple(running) => Some(running.signatures_for(&csr.key.subject_public_key_info())),
            _ => None,
        }
    }

    /// Every signature so far, in order: when, and the SHA-256 of the SubjectPublicKeyInfo
    /// signed (see [`spki_digest`]) (simple-cfssl only).
    pub fn sign_log(&self) -> Option<Vec<(std::time::Instant, [u8; 32])>> {
        match &self.guard {
            Guard::Simple(running) => Some(running.sign_log()),
            _ => None,
        }
    }

    /// Certificates signed so far (simple-cfssl only).
    pub fn issued_count(&self) -> Option<u64> {
        match &self.guard {
            Guard::Simple(running) => Some(running.issued_count()),
            _ => None,
        }
    }

    /// The PEM a TLS client must trust to reach this CA, written to a file (for SSL_CERT_FILE).
    pub fn tls_ca_file(&self, dir: &Path) -> anyhow::Result<Option<PathBuf>> {
        let Some(pem) = &self.tls_ca_pem else {
            return Ok(None);
        };
        let path = dir.join("cfssl-tls-ca.pem");
        std::fs::write(&path, pem)?;
        Ok(Some(path))
    }
}

/// The SHA-256 of the SubjectPublicKeyInfo of `csr`'s key: how [`Ca::sign_log`] names it.
pub fn spki_digest(csr: &super::Csr) -> [u8; 32] {
    use rcgen::PublicKeyData as _;
    use sha2::Digest as _;
    sha2::Sha256::digest(csr.key.subject_public_key_info()).into()
}
