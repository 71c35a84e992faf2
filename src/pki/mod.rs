//! PKI helpers: CSR checks, certificate chains and their encodings.

mod chain;
mod csr;

pub use chain::{Chain, ChainError, certificates_in, complete_chain};
pub use csr::{CheckedCsr, CsrError, check_csr_pem};
