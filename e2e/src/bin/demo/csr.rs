//! The demo's Kubernetes CSR part: a `certificates.k8s.io/v1` CertificateSigningRequest for
//! the sample ClusterIssuer, approved as `kubectl certificate approve` does, signed by the
//! manager.

use anyhow::Context as _;
use k8s_openapi::api::certificates::v1::{CertificateSigningRequest, CertificateSigningRequestCondition};
use kube::api::{Api, Patch, PatchParams};

use e2e::harness::Cluster;
use e2e::harness::csr::{self, KubeCsr, Outcome};
use e2e::harness::parse_leaf;

use super::WAIT;

const SIGNER: &str = "clusterissuers.cfssl-issuer.wikimedia.org/clusterissuer-sample";

/// Creates, approves and waits for one CSR; returns whether it was signed.
pub async fn show(cluster: &Cluster) -> anyhow::Result<bool> {
    let request = KubeCsr::new(SIGNER)?;
    request.create(cluster).await?;
    println!(
        "\nKubernetes CertificateSigningRequest {} (signerName {SIGNER}), approved as \
         `kubectl certificate approve` does:",
        request.name
    );
    approve(&cluster.client, &request.name).await?;
    match csr::wait_outcome(cluster, &request.name, WAIT).await {
        Ok(Outcome::Issued(chain)) => {
            let leaf = parse_leaf(chain.as_bytes())?;
            let blocks = ::pem::parse_many(chain.as_bytes())?;
            let roots = blocks
                .iter()
                .filter_map(|b| x509_parser::parse_x509_certificate(b.contents()).ok())
                .filter(|(_, c)| c.subject() == c.issuer())
                .count();
            println!(
                "  Approved,Issued: status.certificate holds {} certificate(s), {roots} of them self-signed roots",
                blocks.len()
            );
            println!("      subject:  {}", leaf.subject);
            println!("      issuer:   {}", leaf.issuer);
            println!("      notAfter: {} (the CFSSL profile decides)", leaf.not_after);
            Ok(true)
        }
        Ok(Outcome::Failed { reason, message }) => {
            println!("  Failed ({reason}): {message}");
            Ok(false)
        }
        Err(err) => {
            println!("  not signed: {err:#}");
            Ok(false)
        }
    }
}

/// What `kubectl certificate approve` writes: an `Approved` condition through `/approval`.
async fn approve(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let condition = CertificateSigningRequestCondition {
        type_: "Approved".into(),
        status: "True".into(),
        reason: Some("KubectlApprove".into()),
        message: Some("This CSR was approved by the demo".into()),
        ..CertificateSigningRequestCondition::default()
    };
    let patch = serde_json::json!({"status": {"conditions": [condition]}});
    Api::<CertificateSigningRequest>::all(client.clone())
        .patch_approval(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .context("approve")?;
    Ok(())
}
