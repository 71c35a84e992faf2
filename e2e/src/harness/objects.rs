//! Issuers and CertificateRequests as a user (and cert-manager's approver) would write them.

use std::time::Duration;

use base64::Engine as _;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use cfssl_issuer::api::certmanager::CertificateRequest;
use cfssl_issuer::api::{ClusterIssuer, GROUP, Issuer, READY};

use super::{Ca, eventually};

/// Which issuer a request names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Issuer,
    ClusterIssuer,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Issuer => "Issuer",
            Kind::ClusterIssuer => "ClusterIssuer",
        }
    }
}

/// An issuer's spec pointing at `ca` with label `intermediate1`.
pub fn issuer_spec(ca: &Ca, secret: &str, profile: &str) -> Value {
    let mut spec = json!({
        "url": ca.url,
        "label": "intermediate1",
        "profile": profile,
        "authSecretName": secret,
    });
    if let Some(pem) = &ca.tls_ca_pem {
        spec["caBundle"] = json!(base64::engine::general_purpose::STANDARD.encode(pem));
    }
    spec
}

/// Creates an Issuer (`namespace` = Some) or ClusterIssuer with `spec`.
pub async fn create_issuer(
    client: &Client,
    kind: Kind,
    namespace: &str,
    name: &str,
    spec: Value,
) -> anyhow::Result<()> {
    let pp = PostParams::default();
    match kind {
        Kind::Issuer => {
            let issuer: Issuer = serde_json::from_value(json!({
                "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Issuer",
                "metadata": {"name": name, "namespace": namespace}, "spec": spec,
            }))?;
            Api::<Issuer>::namespaced(client.clone(), namespace)
                .create(&pp, &issuer)
                .await?;
        }
        Kind::ClusterIssuer => {
            let issuer: ClusterIssuer = serde_json::from_value(json!({
                "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "ClusterIssuer",
                "metadata": {"name": name}, "spec": spec,
            }))?;
            Api::<ClusterIssuer>::all(client.clone())
                .create(&pp, &issuer)
                .await?;
        }
    }
    Ok(())
}

/// The Ready condition of an issuer: `(status, reason)`.
pub async fn issuer_ready(
    client: &Client,
    kind: Kind,
    namespace: &str,
    name: &str,
) -> Option<(String, String)> {
    let status = match kind {
        Kind::Issuer => {
            Api::<Issuer>::namespaced(client.clone(), namespace)
                .get(name)
                .await
                .ok()?
                .status
        }
        Kind::ClusterIssuer => {
            Api::<ClusterIssuer>::all(client.clone())
                .get(name)
                .await
                .ok()?
                .status
        }
    }?;
    let ready = status.conditions.iter().find(|c| c.type_ == READY)?;
    Some((ready.status.as_str().to_string(), ready.reason.clone()))
}

/// Waits until the issuer's Ready condition has `reason` (e.g. `Checked`).
pub async fn wait_issuer_reason(
    client: &Client,
    kind: Kind,
    namespace: &str,
    name: &str,
    reason: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let what = format!("{} {namespace}/{name} Ready reason {reason}", kind.as_str());
    eventually(timeout, &what, || async {
        issuer_ready(client, kind, namespace, name)
            .await
            .filter(|(_, r)| r == reason)
            .map(|_| ())
    })
    .await
}

/// Creates a CertificateRequest for `csr_pem` naming `group`/`kind`/`issuer`.
pub async fn create_request(
    client: &Client,
    namespace: &str,
    name: &str,
    group: &str,
    kind: &str,
    issuer: &str,
    csr_pem: &str,
) -> anyhow::Result<()> {
    let request: CertificateRequest = serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "CertificateRequest",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "issuerRef": {"group": group, "kind": kind, "name": issuer},
            "request": base64::engine::general_purpose::STANDARD.encode(csr_pem),
            "usages": ["digital signature", "key encipherment", "server auth"],
        },
    }))?;
    Api::<CertificateRequest>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &request)
        .await?;
    Ok(())
}

/// Sets `Approved` (or `Denied`) as cert-manager's approver does: its own field manager, so
/// the issuer's `Ready` is never touched.
pub async fn decide(client: &Client, namespace: &str, name: &str, approve: bool) -> anyhow::Result<()> {
    let (type_, reason) = if approve {
        ("Approved", "cert-manager.io")
    } else {
        ("Denied", "e2e.denied")
    };
    let body = json!({
        "apiVersion": "cert-manager.io/v1", "kind": "CertificateRequest",
        "metadata": {"name": name, "namespace": namespace},
        "status": {"conditions": [{
            "type": type_, "status": "True", "reason": reason,
            "message": format!("{type_} by the e2e suite"),
            "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().to_string(),
        }]},
    });
    Api::<CertificateRequest>::namespaced(client.clone(), namespace)
        .patch_status(
            name,
            &PatchParams::apply("cert-manager-certificaterequests-approver").force(),
            &Patch::Apply(&body),
        )
        .await?;
    Ok(())
}

pub async fn approve(client: &Client, namespace: &str, name: &str) -> anyhow::Result<()> {
    decide(client, namespace, name, true).await
}

pub async fn get_request(client: &Client, namespace: &str, name: &str) -> anyhow::Result<CertificateRequest> {
    Ok(Api::<CertificateRequest>::namespaced(client.clone(), namespace)
        .get(name)
        .await?)
}

/// The request's `Ready` condition as `(status, reason)`, if it has one.
pub fn ready_of(request: &CertificateRequest) -> Option<(String, String)> {
    request
        .condition(READY)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

/// Waits until the request's Ready condition has `reason` and returns the request.
pub async fn wait_request_reason(
    client: &Client,
    namespace: &str,
    name: &str,
    reason: &str,
    timeout: Duration,
) -> anyhow::Result<CertificateRequest> {
    let what = format!("CertificateRequest {namespace}/{name} Ready reason {reason}");
    let result = eventually(timeout, &what, || async {
        get_request(client, namespace, name)
            .await
            .ok()
            .filter(|r| ready_of(r).is_some_and(|(_, got)| got == reason))
    })
    .await;
    if result.is_err() {
        let last = get_request(client, namespace, name).await.ok();
        let conditions = last.and_then(|r| r.status).map(|s| s.conditions);
        anyhow::bail!("timed out after {timeout:?} waiting for {what}; conditions now: {conditions:?}");
    }
    result
}
