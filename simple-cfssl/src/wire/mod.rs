//! The CFSSL wire format as multirootca (a Go program) reads and writes it. Clients see Go's own
//! error texts for malformed bodies, so those are reproduced here rather than serde's.

pub mod base64;
pub mod json;
pub mod request;
pub mod response;
