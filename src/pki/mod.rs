//! PKI helpers: CSR checks, certificate chains, private keys and their encodings, and the CSR
//! a Certificate spec asks for: its subject (`subject`, byte for byte as cert-manager's Go code
//! writes it) and the signed request with its extensions (`request`).

mod chain;
mod csr;
pub mod keys;
pub mod keystore;
pub(crate) mod memo;
pub mod request;
mod signature;
pub mod subject;

pub use chain::{Chain, ChainError, certificates_in, check_not_expired, complete_chain, leaf_not_after};
pub use csr::{CheckedCsr, CsrError, MAX_CSR_BYTES, check_csr_pem};
pub use signature::{KeyType, SignatureError};

/// PEM with `\n` line endings, as CFSSL and openssl write it (the `pem` crate defaults to CRLF).
pub(crate) fn pem_lf(block: &pem::Pem) -> String {
    pem::encode_config(
        block,
        pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
    )
}
