//! Which Issuer and ClusterIssuer CRDs a cluster gets: ours, or the Go cfssl-issuer's
//! (`tests/data/crds`), whose conditions have no `observedGeneration`. Users who upgrade the
//! manager but keep the Go CRDs run on the latter.

use anyhow::Context as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// The Issuer and ClusterIssuer CRDs a scenario installs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IssuerCrds {
    /// `cfssl_issuer::api::crds()`.
    #[default]
    Ours,
    /// The Go issuer's, byte for byte as it ships them.
    Go,
}

const GO_ISSUERS: &str = include_str!("../../../tests/data/crds/cfssl-issuer.wikimedia.org_issuers.yaml");
const GO_CLUSTER_ISSUERS: &str =
    include_str!("../../../tests/data/crds/cfssl-issuer.wikimedia.org_clusterissuers.yaml");

impl IssuerCrds {
    pub fn crds(self) -> anyhow::Result<Vec<CustomResourceDefinition>> {
        match self {
            IssuerCrds::Ours => Ok(cfssl_issuer::api::crds()),
            IssuerCrds::Go => go_issuer_crds(),
        }
    }
}

/// The Go issuer's Issuer and ClusterIssuer CRDs, Issuer first.
pub fn go_issuer_crds() -> anyhow::Result<Vec<CustomResourceDefinition>> {
    [GO_ISSUERS, GO_CLUSTER_ISSUERS]
        .into_iter()
        .map(|text| serde_saphyr::from_str(text).context("parse a Go issuer CRD"))
        .collect()
}
