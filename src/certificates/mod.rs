//! cert-manager's Certificate semantics as pure code, for the standalone lifecycle controllers
//! (`controllers::certificate`): what they decide with, with no Kubernetes I/O.

pub mod decode;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod go;
pub mod keys;
pub mod matching;
pub mod next_key;
pub mod policy;
pub mod renewal;
pub mod rotation;
pub mod secret;
pub mod temporary;
pub mod validation;
