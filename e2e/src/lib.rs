//! End-to-end test support for cfssl-issuer: the harness that runs the manager binary, a CA
//! and "a cluster" (the in-process `kube_testserver`, or a real one) for the scenarios, the
//! demo and the benches.

pub mod harness;
