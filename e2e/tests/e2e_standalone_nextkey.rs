//! Standalone mode and cert-manager's security fix #9224 (v1.21.3): whoever may write a
//! Certificate's status must not get another key signed by pointing
//! `status.nextPrivateKeySecretName` at it. Standalone mode never reads that field: the next
//! key is only ever the Secret of the name derived from the Certificate's UID, labelled as a
//! next private key and controlled by the Certificate. The Certificate is issued from a key of
//! its own and the Secret the status names is left alone.

mod standalone;

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use serde_json::json;
use standalone::{Env, data, public_key_of, public_key_of_leaf, revision_of};

const WAIT: Duration = Duration::from_secs(30);

/// The DER public key of a request's CSR.
fn csr_public_key(cr: &cfssl_issuer::api::certmanager::CertificateRequest) -> anyhow::Result<Vec<u8>> {
    let pem = standalone::openssl(&["req", "-pubkey", "-noout"], &cr.spec.request.0)?;
    standalone::openssl(&["pkey", "-pubin", "-outform", "DER"], &pem)
}

/// Certificate `name` was issued from a key of its own: its request's CSR and its Secret hold
/// the same public key, none of `foreign`.
async fn issued_from_own_key(
    env: &Env,
    name: &str,
    revision: i64,
    foreign: &[Vec<u8>],
) -> anyhow::Result<()> {
    let secret = env.secret(&format!("{name}-tls")).await?;
    let own = public_key_of(&data(&secret, "tls.key"))?;
    assert_eq!(own, public_key_of_leaf(&data(&secret, "tls.crt"))?);
    let requests = env.requests_of(name).await?;
    let request = requests
        .iter()
        .find(|cr| revision_of(cr) == Some(revision))
        .expect("the request of the revision");
    assert_eq!(
        csr_public_key(request)?,
        own,
        "{name}: the CSR's key is the Secret's"
    );
    for key in foreign {
        assert_ne!(&own, key, "{name} was issued from a foreign key");
    }
    Ok(())
}

/// Pointed, before the first issuance, at another Certificate's Secret and at a plain Secret
/// labelled as a next private key (no ownerRef); then, while re-issuing, at the other
/// Certificate's Secret again. Each time: issued from a key of its own, the other Secrets
/// untouched (same resourceVersion).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_next_key_name_pointing_at_a_foreign_secret_is_never_used() -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    env.issuer("team-ca").await?;
    env.certificate("victim", "victim-tls", "team-ca", json!({}))
        .await?;
    env.wait_revision("victim", 1, WAIT).await?;
    let victim = env.secret("victim-tls").await?;

    let planted_key = standalone::openssl(
        &[
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ],
        b"",
    )?;
    let planted: Secret = serde_json::from_value(json!({
        "metadata": { "name": "planted", "namespace": env.ns,
                      "labels": { "cert-manager.io/next-private-key": "true" } },
        "stringData": { "tls.key": String::from_utf8(planted_key.clone())? },
    }))?;
    let planted = env.secrets().create(&Default::default(), &planted).await?;
    let foreign = [
        public_key_of(&data(&victim, "tls.key"))?,
        public_key_of(&planted_key)?,
    ];

    for (thief, target) in [("thief-a", "victim-tls"), ("thief-b", "planted")] {
        env.certificate(thief, &format!("{thief}-tls"), "team-ca", json!({}))
            .await?;
        env.patch_status(
            thief,
            "e2e-intruder",
            json!({ "nextPrivateKeySecretName": target }),
        )
        .await?;
        env.wait_revision(thief, 1, WAIT).await?;
        issued_from_own_key(&env, thief, 1, &foreign).await?;
    }

    // While issuing: a manual trigger, then the name pointed at the victim's Secret.
    env.trigger_manually("thief-a").await?;
    env.patch_status(
        "thief-a",
        "e2e-intruder",
        json!({ "nextPrivateKeySecretName": "victim-tls" }),
    )
    .await?;
    env.wait_revision("thief-a", 2, WAIT).await?;
    issued_from_own_key(&env, "thief-a", 2, &foreign).await?;

    let victim_after = env.secret("victim-tls").await?;
    assert_eq!(
        victim_after.metadata.resource_version, victim.metadata.resource_version,
        "the victim's Secret is untouched"
    );
    let planted_after = env.secret("planted").await?;
    assert_eq!(
        planted_after.metadata.resource_version,
        planted.metadata.resource_version
    );
    let victim_crt = env.certificates().get("victim").await?;
    assert_eq!(victim_crt.status.and_then(|s| s.revision), Some(1));
    assert_eq!(env.signed(), 4);
    env.assert_api_hygiene();
    Ok(())
}

/// A `cert-manager.io/next-private-key` label in `spec.secretTemplate` (cert-manager's webhook
/// lets labels through) lands on the target Secret, which with owner references on is
/// controlled by the Certificate as a key Secret is. It is still never taken for one: the key
/// manager, deleting key Secrets once an issuance is done, leaves it, so it keeps its UID
/// across a re-issuance and the Certificate stays at the revision it reached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_secret_labelled_as_a_next_key_is_never_deleted() -> anyhow::Result<()> {
    let env = Env::start(&["--enable-certificate-owner-ref"]).await?;
    env.issuer("team-ca").await?;
    let template = json!({ "secretTemplate": { "labels": { "cert-manager.io/next-private-key": "true" } } });
    env.certificate("web", "web-tls", "team-ca", template).await?;
    env.wait_revision("web", 1, WAIT).await?;
    let first = env.secret("web-tls").await?;
    let labels = first.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("cert-manager.io/next-private-key").map(String::as_str),
        Some("true")
    );
    let owners = first.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(
        owners
            .iter()
            .map(|o| (o.kind.as_str(), o.controller))
            .collect::<Vec<_>>(),
        [("Certificate", Some(true))]
    );

    env.trigger_manually("web").await?;
    env.wait_revision("web", 2, WAIT).await?;
    // The key Secret goes once the issuance is done: give that delete its time.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let second = env.secret("web-tls").await?;
    assert_eq!(
        second.metadata.uid, first.metadata.uid,
        "the same Secret, never deleted"
    );
    issued_from_own_key(&env, "web", 2, &[]).await?;
    let crt = env.certificates().get("web").await?;
    assert_eq!(crt.status.and_then(|s| s.revision), Some(2));
    env.assert_api_hygiene();
    Ok(())
}
