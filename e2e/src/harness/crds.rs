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

/// cert-manager's CRDs for a cluster: with `E2E_REAL_PEERS`, cert-manager's own, as the module
/// `scripts/real-peers.sh` built its controller from ships them (every `cert-manager.io` kind);
/// otherwise our definitions of Certificate and CertificateRequest.
pub fn cert_manager_crds() -> anyhow::Result<Vec<CustomResourceDefinition>> {
    use cfssl_issuer::api::certmanager::{Certificate, CertificateRequest};
    use kube::CustomResourceExt as _;
    let Some(dir) = super::real::peers_dir() else {
        return Ok(vec![CertificateRequest::crd(), Certificate::crd()]);
    };
    let path = dir.join("cert-manager-crds.yaml");
    let text = std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
    let all: Vec<CustomResourceDefinition> =
        serde_saphyr::from_multiple(&text).with_context(|| format!("parse {}", path.display()))?;
    Ok(all
        .into_iter()
        .filter(|crd| crd.spec.group == "cert-manager.io")
        .collect())
}
