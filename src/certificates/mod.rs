//! cert-manager's Certificate semantics as pure code, for the standalone lifecycle controllers
//! to come: what they decide with, with no Kubernetes I/O.

pub mod keys;
pub mod policy;
pub mod renewal;
pub mod secret;
