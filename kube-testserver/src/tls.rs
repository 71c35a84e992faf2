//! A throwaway CA and serving certificate, and the kubeconfig that trusts them.

use std::{path::Path, sync::Arc};

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::json;
use tokio_rustls::TlsAcceptor;

use super::Error;

/// The CA (PEM, for clients) and the serving certificate chain and key (for the listener).
pub struct ServingCert {
    pub ca_pem: String,
    chain: Vec<CertificateDer<'static>>,
    key: PrivatePkcs8KeyDer<'static>,
}

impl ServingCert {
    /// A new CA and a certificate for `localhost` and `127.0.0.1` that it signs.
    pub fn generate() -> Result<Self, Error> {
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "kube-testserver-ca");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca_params, ca_key);

        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])?;
        params
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &issuer)?;
        Ok(ServingCert {
            ca_pem: ca_cert.pem(),
            chain: vec![cert.der().clone(), ca_cert.der().clone()],
            key: PrivatePkcs8KeyDer::from(key.serialize_der()),
        })
    }

    /// A TLS acceptor offering HTTP/2 and HTTP/1.1 (kubectl picks h2, kube-rs HTTP/1.1).
    pub fn acceptor(&self) -> Result<TlsAcceptor, Error> {
        let mut config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(self.chain.clone(), PrivateKeyDer::Pkcs8(self.key.clone_key()))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

/// Writes a kubeconfig with one cluster, user and context, all named `kube-testserver`.
pub fn write_kubeconfig(
    path: &Path,
    url: &str,
    ca_pem: Option<&str>,
    token: Option<&str>,
    namespace: &str,
) -> Result<(), Error> {
    let mut cluster = json!({ "server": url });
    if let Some(ca) = ca_pem {
        cluster["certificate-authority-data"] = base64::engine::general_purpose::STANDARD.encode(ca).into();
    }
    let user = match token {
        Some(token) => json!({ "token": token }),
        None => json!({}),
    };
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "kube-testserver", "cluster": cluster }],
        "users": [{ "name": "kube-testserver", "user": user }],
        "contexts": [{ "name": "kube-testserver", "context": {
            "cluster": "kube-testserver", "user": "kube-testserver", "namespace": namespace } }],
        "current-context": "kube-testserver",
        "preferences": {},
    });
    let yaml = serde_saphyr::to_string(&config).map_err(|e| Error::Kubeconfig(e.to_string()))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, yaml)?;
    Ok(())
}
