//! cfssl-issuer: a cert-manager external issuer backed by a CFSSL `multirootca` CA.
//!
//! Modules are named for what they are: `cfssl` talks to the CA, `pki` handles CSRs, keys and
//! chains, `api` holds the Kubernetes types, `controllers` the reconcilers.

pub mod api;
pub mod certificates;
pub mod cfssl;
pub mod cli;
pub mod clock;
pub mod controllers;
pub mod crypto_pool;
pub mod csi;
pub mod manager;
pub mod pki;
pub mod redact;
pub mod renew;
pub mod telemetry;

/// Installs the one rustls crypto provider (aws-lc-rs) for kube, reqwest and everything else.
/// Safe to call more than once.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}
