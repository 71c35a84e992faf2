//! Standalone mode through the real manager binary: Certificates become Secrets, with no
//! cert-manager, against the in-process API server and simple-cfssl.

mod standalone;

use std::time::Duration;

use standalone::Env;

const WAIT: Duration = Duration::from_secs(60);

/// A Certificate becomes a Secret whose chain verifies to the root, whose key matches the
/// certificate, with the annotations and labels cert-manager writes; the Certificate is Ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_becomes_a_ready_secret() -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    env.issuer("team-ca").await?;
    env.certificate("web", "web-tls", "team-ca", serde_json::json!({}))
        .await?;
    let crt = env.with_manager_log(env.wait_ready("web", WAIT).await)?;
    let secret = env.secret("web-tls").await?;
    env.verify_secret(&secret, &["web.example.com"])?;
    let annotations = secret.metadata.annotations.clone().unwrap_or_default();
    let want = [
        ("cert-manager.io/certificate-name", "web"),
        ("cert-manager.io/issuer-name", "team-ca"),
        ("cert-manager.io/issuer-kind", "Issuer"),
        ("cert-manager.io/issuer-group", "cfssl-issuer.wikimedia.org"),
        ("cert-manager.io/common-name", ""),
        ("cert-manager.io/alt-names", "web.example.com"),
    ];
    for (key, value) in want {
        assert_eq!(annotations.get(key).map(String::as_str), Some(value), "{key}");
    }
    let labels = secret.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("controller.cert-manager.io/fao").map(String::as_str),
        Some("true")
    );
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    // cert-manager with server-side apply on keeps Issuing=False/Issued after success.
    let issuing = crt.condition("Issuing").expect("Issuing kept after success");
    assert_eq!(
        (issuing.status.as_str(), issuing.reason.as_str()),
        ("False", "Issued")
    );
    let status = crt.status.expect("status");
    assert_eq!(status.revision, Some(1));
    assert!(status.not_after.is_some() && status.renewal_time.is_some());
    // The request's Events: its approval and its issuance, and nothing about it once finished
    // (the cache keeps it as a summary, which no controller may mistake for a new request).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let reasons: Vec<String> = env
        .events_regarding("CertificateRequest", "web-1")
        .await?
        .into_iter()
        .map(|(reason, _)| reason)
        .collect();
    assert_eq!(reasons, ["cfssl-issuer.wikimedia.org", "Issued"]);
    env.assert_api_hygiene();
    Ok(())
}
