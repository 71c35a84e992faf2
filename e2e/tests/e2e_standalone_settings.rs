//! Settings cert-manager accepts and issues, issued here too (issue 31, section 1): the PKCS#12
//! profile `Modern2026`, RSA sizes outside aws-lc-rs's fixed four, ECDSA curve/digest pairs
//! other than the curve's own; and the one thing the crypto provider truly cannot do, an RSA
//! size that is not a multiple of 128 bits, refused at once with a condition and an Event.

mod standalone;

use std::time::Duration;

use cfssl_issuer::pki::keys::{Key, KeySpec};
use k8s_openapi::api::core::v1::Secret;
use serde_json::json;
use standalone::{Env, data};

const WAIT: Duration = Duration::from_secs(60);

/// The Secret of a Certificate of `spec`, once Ready; its key matches its certificate.
async fn issued(env: &Env, name: &str, spec: serde_json::Value) -> anyhow::Result<Secret> {
    env.certificate(name, &format!("{name}-tls"), "team-ca", spec)
        .await?;
    env.with_manager_log(env.wait_ready(name, WAIT).await)?;
    let secret = env.secret(&format!("{name}-tls")).await?;
    let (chain, key) = (data(&secret, "tls.crt"), data(&secret, "tls.key"));
    anyhow::ensure!(
        e2e::harness::pem_key_matches(&chain, &key)?,
        "{name}: tls.key does not match tls.crt"
    );
    Ok(secret)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern2026_keystore_is_written_and_kept() -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    env.issuer("team-ca").await?;
    let password = "s3cret-store";
    let from = env.keystore_password(password).await?;
    let spec = json!({ "commonName": "m26", "keystores": {
        "pkcs12": { "create": true, "passwordSecretRef": from, "profile": "Modern2026" },
    } });
    let secret = issued(&env, "m26", spec).await?;
    let store = data(&secret, "keystore.p12");
    assert_eq!(
        cfssl_issuer::pki::keystore::pkcs12_check(&store, password),
        Ok(())
    );
    let pfx = <::pkcs12::pfx::Pfx as der::Decode>::from_der(&store)?;
    let mac = pfx.mac_data.expect("a MAC");
    assert_eq!(
        mac.mac.algorithm.oid.to_string(),
        "1.2.840.113549.1.5.14",
        "PBMAC1"
    );
    // Written once: a store that did not check would be written again (random salt).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let later = env.secret("m26-tls").await?;
    assert_eq!(later.metadata.resource_version, secret.metadata.resource_version);
    let warnings: Vec<_> = env
        .events_of("m26")
        .await?
        .into_iter()
        .filter(|(reason, _)| reason == "KeystoreEncodeFailed")
        .collect();
    assert_eq!(warnings, vec![]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rsa_sizes_and_ecdsa_pairs_cert_manager_issues_are_issued() -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    env.issuer("team-ca").await?;
    // (name, privateKey, signatureAlgorithm, the key Secret holds)
    let rows = [
        (
            "rsa2560",
            json!({"algorithm": "RSA", "size": 2560}),
            "",
            KeySpec::Rsa(2560),
        ),
        (
            "p256-sha384",
            json!({"algorithm": "ECDSA", "size": 256}),
            "ECDSAWithSHA384",
            KeySpec::Ecdsa(256),
        ),
        (
            "p256-sha512",
            json!({"algorithm": "ECDSA", "size": 256}),
            "ECDSAWithSHA512",
            KeySpec::Ecdsa(256),
        ),
        (
            "p384-sha256",
            json!({"algorithm": "ECDSA", "size": 384}),
            "ECDSAWithSHA256",
            KeySpec::Ecdsa(384),
        ),
        (
            "p384-sha512",
            json!({"algorithm": "ECDSA", "size": 384}),
            "ECDSAWithSHA512",
            KeySpec::Ecdsa(384),
        ),
    ];
    for (name, private_key, algorithm, want) in rows {
        let spec = json!({ "commonName": name, "privateKey": private_key, "signatureAlgorithm": algorithm });
        let secret = issued(&env, name, spec).await?;
        let key = Key::from_pem(&data(&secret, "tls.key"))?;
        assert_eq!(key.spec, want, "{name}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rsa_size_not_a_multiple_of_128_is_refused_at_once_saying_what_works() -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    env.issuer("team-ca").await?;
    let spec = json!({ "commonName": "odd", "privateKey": {"algorithm": "RSA", "size": 2500} });
    env.certificate("odd", "odd-tls", "team-ca", spec).await?;
    let crt = env.with_manager_log(
        env.wait_condition("odd", "Issuing", "False", Some("Failed"), WAIT)
            .await,
    )?;
    let want = "The certificate request has failed to complete and will be retried: cannot generate \
                an RSA key of 2500 bits: this manager's crypto provider (AWS-LC) makes RSA keys in \
                multiples of 128 bits; use a size from 2048 to 8192 that is a multiple of 128 \
                (2048, 2176, 2304, ..., 3072, ..., 4096, ..., 8192)";
    assert_eq!(
        crt.condition("Issuing").map(|c| c.message.clone()),
        Some(want.to_string())
    );
    assert_eq!(
        crt.status.as_ref().and_then(|s| s.failed_issuance_attempts),
        Some(1)
    );
    // The Event is posted after the status apply that the wait above saw.
    let failed = ("Failed".to_string(), want.to_string());
    e2e::harness::eventually(WAIT, "the Failed Event", || async {
        let events = env.events_of("odd").await.ok()?;
        events.contains(&failed).then_some(())
    })
    .await?;
    assert_eq!(env.next_key_secrets("odd").await?.len(), 0, "no key made");
    assert_eq!(env.requests_of("odd").await?.len(), 0, "no request made");
    Ok(())
}
