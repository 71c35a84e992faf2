//! End-to-end test support for cfssl-issuer.
//!
//! [`apiserver`] is an in-process Kubernetes API server, so the suite can run the manager
//! against "a cluster" on machines without one.

pub mod apiserver;
pub mod harness;
