//! Kubernetes API types: our Issuer/ClusterIssuer CRDs and cert-manager kinds.
//!
//! - [`Issuer`] / [`ClusterIssuer`] share [`IssuerSpec`] and [`IssuerStatus`]; [`AnyIssuer`]
//!   and [`IssuerKind`] let the controllers treat both through one code path.
//! - [`Condition`] (with its one transition rule) and [`ReadyReason`] keep `status.conditions` honest.
//! - [`certmanager`] holds the cert-manager kinds we read and whose status we write.
//! - [`crds_yaml`] prints our two CRDs (the `crd` subcommand); [`cert_manager_crds_yaml`] prints
//!   cert-manager's `Certificate` and `CertificateRequest` CRDs from our types (`crd --cert-manager`).

pub mod certmanager;
mod condition;
mod crd;
mod issuer;

pub use certmanager::{cert_manager_crds, cert_manager_crds_yaml};
pub use condition::{
    Condition, ConditionLike, ConditionStatus, MAX_MESSAGE, READY, ReadyReason, WritableCondition, bounded,
    cut_at_char, find_condition,
};
pub use issuer::{
    AnyIssuer, ClusterIssuer, GROUP, Issuer, IssuerKind, IssuerSpec, IssuerStatus, VERSION, crds, crds_yaml,
    ready_condition,
};
// `spec()` and `status()` on `AnyIssuer` come from these.
pub use kube::core::object::{HasSpec, HasStatus};
