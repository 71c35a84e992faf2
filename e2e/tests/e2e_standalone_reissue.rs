//! Standalone mode: what makes a Certificate issue again and what only rewrites its Secret.
//! Re-issue (a new revision, one more signature at the CA): the Secret deleted, its data
//! corrupted, `dnsNames` changed, `privateKey.algorithm` changed, a manual trigger, the
//! Certificate deleted and made again under its name. No re-issue (same certificate, same
//! revision, no signature): `privateKey.encoding` changed (the key is re-encoded),
//! `secretTemplate` changed (the Secret's metadata follows).

mod standalone;

use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;
use standalone::{Env, data, public_key_of, public_key_of_leaf};

const WAIT: Duration = Duration::from_secs(30);

/// How long "nothing more happens" is watched for.
const QUIET: Duration = Duration::from_secs(2);

fn user() -> PatchParams {
    PatchParams {
        field_manager: Some("e2e-user".into()),
        ..PatchParams::default()
    }
}

async fn patch_spec(env: &Env, name: &str, spec: serde_json::Value) -> anyhow::Result<()> {
    env.certificates()
        .patch(name, &user(), &Patch::Merge(&json!({ "spec": spec })))
        .await?;
    Ok(())
}

/// The last Event of Certificate `name` with reason `Issuing` from the trigger (the ones
/// starting a re-issue; the issuing controller's say "successfully issued").
async fn last_trigger_event(env: &Env, name: &str) -> anyhow::Result<String> {
    let events = env.events_of(name).await?;
    Ok(events
        .into_iter()
        .filter(|(reason, note)| reason == "Issuing" && !note.contains("successfully issued"))
        .map(|(_, note)| note)
        .next_back()
        .unwrap_or_default())
}

/// The Secret deleted, then its certificate replaced with garbage: each time a new revision,
/// one more signature, and the trigger's Event says why. `kubectl get certificates` shows
/// the Certificate Ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reissues_when_the_secret_is_deleted_or_corrupted() -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    env.issuer("team-ca").await?;
    env.certificate("web", "web-tls", "team-ca", json!({})).await?;
    env.wait_revision("web", 1, WAIT).await?;
    let table = env.kubectl_get_certificates().await?;
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split_whitespace().collect();
    let ready = header.iter().position(|h| *h == "READY").expect("READY column");
    let row: Vec<&str> = lines
        .find(|l| l.starts_with("web "))
        .expect("web row")
        .split_whitespace()
        .collect();
    assert_eq!(row[ready], "True", "{table}");

    env.secrets().delete("web-tls", &DeleteParams::default()).await?;
    env.wait_revision("web", 2, WAIT).await?;
    assert_eq!(
        last_trigger_event(&env, "web").await?,
        "Issuing certificate as Secret does not exist"
    );
    env.verify_secret(&env.secret("web-tls").await?, &["web.example.com"])?;

    let garbage = base64::engine::general_purpose::STANDARD.encode("not a certificate");
    env.secrets()
        .patch(
            "web-tls",
            &user(),
            &Patch::Merge(&json!({ "data": { "tls.crt": garbage } })),
        )
        .await?;
    env.wait_revision("web", 3, WAIT).await?;
    assert_eq!(
        last_trigger_event(&env, "web").await?,
        "Issuing certificate as Secret contains an invalid certificate: error decoding certificate PEM block: no valid certificates found"
    );
    env.verify_secret(&env.secret("web-tls").await?, &["web.example.com"])?;
    assert_eq!(env.signed(), 3);
    env.assert_api_hygiene();
    Ok(())
}

/// A Certificate deleted and at once made again under its name, with another DNS name: the
/// new one (a new UID, its status empty) issues for its own spec, once, and nothing of the
/// old one's keeps it waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_made_again_under_its_name_issues_for_its_own_spec() -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    env.issuer("team-ca").await?;
    env.certificate("again", "again-tls", "team-ca", json!({}))
        .await?;
    env.wait_revision("again", 1, WAIT).await?;
    let old = env.certificates().get("again").await?.metadata.uid;
    env.certificates()
        .delete("again", &DeleteParams::default())
        .await?;
    let spec = json!({ "dnsNames": ["other.example.com"] });
    env.certificate("again", "again-tls", "team-ca", spec).await?;
    let api = env.certificates();
    // Less than the 10 s a create is held back as a repeat: the new Certificate's first
    // request, under the name the old one's had, must not wait for that.
    let within = Duration::from_secs(6);
    let crt = e2e::harness::eventually(within, "the new again Ready at revision 1", || async {
        let crt = api.get("again").await.ok()?;
        let ready = crt.condition("Ready").is_some_and(|c| c.is_true());
        let revision = crt.status.as_ref().and_then(|s| s.revision);
        (crt.metadata.uid != old && ready && revision == Some(1)).then_some(crt)
    })
    .await;
    let crt = env.with_manager_log(crt)?;
    assert_ne!(crt.metadata.uid, old);
    env.verify_secret(&env.secret("again-tls").await?, &["other.example.com"])?;
    assert_eq!(env.signed(), 2);
    env.assert_api_hygiene();
    Ok(())
}

/// A name added, then the key algorithm changed: each time a new revision, the Secret
/// follows the spec, and the trigger's Event names the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reissues_when_dns_names_or_the_key_algorithm_change() -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    env.issuer("team-ca").await?;
    let spec = json!({ "privateKey": { "algorithm": "RSA", "size": 2048 } });
    env.certificate("app", "app-tls", "team-ca", spec).await?;
    env.wait_revision("app", 1, WAIT).await?;

    patch_spec(
        &env,
        "app",
        json!({ "dnsNames": ["app.example.com", "api.example.com"] }),
    )
    .await?;
    env.wait_revision("app", 2, WAIT).await?;
    assert_eq!(
        last_trigger_event(&env, "app").await?,
        "Fields on existing CertificateRequest resource not up to date: [spec.dnsNames]"
    );
    let secret = env.secret("app-tls").await?;
    env.verify_secret(&secret, &["app.example.com", "api.example.com"])?;
    assert!(String::from_utf8(data(&secret, "tls.key"))?.starts_with("-----BEGIN RSA PRIVATE KEY-----"));

    patch_spec(
        &env,
        "app",
        json!({ "privateKey": { "algorithm": "ECDSA", "size": 256 } }),
    )
    .await?;
    env.wait_revision("app", 3, WAIT).await?;
    assert_eq!(
        last_trigger_event(&env, "app").await?,
        "Existing private key is not up to date for spec: [spec.privateKey.algorithm]"
    );
    let secret = env.secret("app-tls").await?;
    env.verify_secret(&secret, &["app.example.com", "api.example.com"])?;
    assert!(String::from_utf8(data(&secret, "tls.key"))?.starts_with("-----BEGIN EC PRIVATE KEY-----"));
    assert_eq!(env.signed(), 3);
    env.assert_api_hygiene();
    Ok(())
}

/// `Issuing=True` with reason `ManuallyTriggered`, set by another field manager with a merge
/// patch on the status (as `cmctl renew` does), issues a new revision with a new key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reissues_when_triggered_manually() -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    env.issuer("team-ca").await?;
    env.certificate("manual", "manual-tls", "team-ca", json!({}))
        .await?;
    env.wait_revision("manual", 1, WAIT).await?;
    let before = env.secret("manual-tls").await?;
    env.trigger_manually("manual").await?;
    let crt = env.wait_revision("manual", 2, WAIT).await?;
    let after = env.secret("manual-tls").await?;
    env.verify_secret(&after, &["manual.example.com"])?;
    assert_ne!(
        public_key_of(&data(&before, "tls.key"))?,
        public_key_of(&data(&after, "tls.key"))?,
        "rotationPolicy defaults to Always"
    );
    let issuing = crt.condition("Issuing").map(|c| c.status.clone());
    assert_ne!(issuing.as_deref(), Some("True"));
    tokio::time::sleep(QUIET).await;
    assert_eq!(
        env.signed(),
        2,
        "{}\n{:?}",
        env.describe("manual").await,
        env.events_of("manual").await?
    );
    env.assert_api_hygiene();
    Ok(())
}

/// `privateKey.encoding` PKCS1 -> PKCS8 re-encodes `tls.key` (same key, same certificate);
/// `secretTemplate` changes only the Secret's labels and annotations (and a label removed
/// from the template leaves the Secret). Neither makes a new revision or a signature.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encoding_and_secret_template_changes_rewrite_the_secret_without_reissuing() -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    env.issuer("team-ca").await?;
    let spec = json!({ "privateKey": { "algorithm": "RSA", "size": 2048, "encoding": "PKCS1" } });
    env.certificate("enc", "enc-tls", "team-ca", spec).await?;
    env.wait_revision("enc", 1, WAIT).await?;
    let first = env.secret("enc-tls").await?;
    assert!(String::from_utf8(data(&first, "tls.key"))?.starts_with("-----BEGIN RSA PRIVATE KEY-----"));

    patch_spec(&env, "enc", json!({ "privateKey": { "encoding": "PKCS8" } })).await?;
    let reencoded = wait_secret(&env, "enc-tls", |s| {
        String::from_utf8_lossy(&data(s, "tls.key")).starts_with("-----BEGIN PRIVATE KEY-----")
    })
    .await?;
    assert_eq!(
        public_key_of(&data(&first, "tls.key"))?,
        public_key_of(&data(&reencoded, "tls.key"))?
    );
    assert_eq!(data(&first, "tls.crt"), data(&reencoded, "tls.crt"));

    let template = |labels: serde_json::Value, annotations: serde_json::Value| json!({ "secretTemplate": { "labels": labels, "annotations": annotations } });
    patch_spec(
        &env,
        "enc",
        template(json!({"team": "a", "tier": "web"}), json!({"owner": "ops"})),
    )
    .await?;
    let labelled = wait_secret(&env, "enc-tls", |s| {
        label(s, "team") == Some("a") && annotation(s, "owner") == Some("ops")
    })
    .await?;
    assert_eq!(label(&labelled, "tier"), Some("web"));
    assert_eq!(data(&labelled, "tls.crt"), data(&first, "tls.crt"));

    // A merge patch replaces the maps: `tier` and `owner` leave the template.
    env.certificates()
        .patch(
            "enc",
            &user(),
            &Patch::Merge(&json!({ "spec": { "secretTemplate": {
                "labels": { "team": "b", "tier": null }, "annotations": { "owner": null } } } })),
        )
        .await?;
    let relabelled = wait_secret(&env, "enc-tls", |s| label(s, "team") == Some("b")).await?;
    assert_eq!(label(&relabelled, "tier"), None);
    assert_eq!(annotation(&relabelled, "owner"), None);
    assert_eq!(data(&relabelled, "tls.crt"), data(&first, "tls.crt"));
    assert_eq!(data(&relabelled, "tls.key"), data(&reencoded, "tls.key"));

    tokio::time::sleep(QUIET).await;
    let crt = env.certificates().get("enc").await?;
    assert_eq!(crt.status.as_ref().and_then(|s| s.revision), Some(1));
    assert!(crt.has_true("Ready"));
    assert_eq!(env.signed(), 1, "no new signature");
    let revisions: Vec<_> = env
        .requests_of("enc")
        .await?
        .iter()
        .map(standalone::revision_of)
        .collect();
    assert_eq!(revisions, [Some(1)]);
    env.assert_api_hygiene();
    Ok(())
}

/// PKCS#12 and JKS keystores with their password from a Secret: `keystore.p12` opens with
/// `openssl pkcs12 -legacy` (cert-manager's default profile, LegacyRC2, which OpenSSL 3
/// refuses without `-legacy`) and holds the Secret's key and certificate; `keystore.jks`
/// lists with `keytool` under the alias `certificate` with the certificate's fingerprint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keystores_open_with_openssl_and_keytool() -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    env.issuer("team-ca").await?;
    let password = "s3cret-store";
    let from = env.keystore_password(password).await?;
    let spec = json!({ "keystores": {
        "pkcs12": { "create": true, "passwordSecretRef": from },
        "jks": { "create": true, "passwordSecretRef": from },
    } });
    env.certificate("ks", "ks-tls", "team-ca", spec).await?;
    env.wait_revision("ks", 1, WAIT).await?;
    let secret = env.secret("ks-tls").await?;
    // Written once: PKCS#12 encodes with a random salt, so a needless re-apply would show.
    tokio::time::sleep(QUIET).await;
    let later = env.secret("ks-tls").await?;
    assert_eq!(
        later.metadata.resource_version,
        secret.metadata.resource_version,
        "the Secret was written again; its managedFields: {}; Events: {:?}",
        serde_json::to_string(&later.metadata.managed_fields)?,
        env.events_of("ks").await?
    );
    let keys: Vec<&String> = secret.data.as_ref().expect("data").keys().collect();
    // The issuer asks for no bundle, so the request carries no CA: no `ca.crt`, and (as in
    // cert-manager) no truststores.
    assert_eq!(keys, ["keystore.jks", "keystore.p12", "tls.crt", "tls.key"]);
    let dir = tempfile::tempdir()?;
    let p12 = dir.path().join("keystore.p12");
    std::fs::write(&p12, data(&secret, "keystore.p12"))?;
    let pass = format!("pass:{password}");
    let p12_path = p12.to_str().expect("path");
    let pkcs12 = |extra: &[&str]| {
        let mut args = vec!["pkcs12", "-in", p12_path, "-passin", pass.as_str()];
        args.extend_from_slice(extra);
        standalone::openssl(&args, b"")
    };
    let without_legacy = pkcs12(&["-nokeys"]);
    assert!(without_legacy.is_err(), "RC2 needs -legacy in OpenSSL 3");
    let certs = pkcs12(&["-legacy", "-nokeys", "-clcerts"])?;
    assert_eq!(
        public_key_of_leaf(&certs)?,
        public_key_of_leaf(&data(&secret, "tls.crt"))?
    );
    assert_eq!(fingerprint(&certs)?, fingerprint(&data(&secret, "tls.crt"))?);
    let key = pkcs12(&["-legacy", "-nocerts", "-nodes"])?;
    assert_eq!(public_key_of(&key)?, public_key_of(&data(&secret, "tls.key"))?);

    let jks = dir.path().join("keystore.jks");
    std::fs::write(&jks, data(&secret, "keystore.jks"))?;
    let listed = std::process::Command::new("keytool")
        .args([
            "-list",
            "-v",
            "-storetype",
            "JKS",
            "-storepass",
            password,
            "-keystore",
        ])
        .arg(&jks)
        .output()?;
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.status.success(),
        "keytool: {text}{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    assert!(text.contains("Alias name: certificate"), "{text}");
    assert!(text.contains("Entry type: PrivateKeyEntry"), "{text}");
    let sha256 = fingerprint(&data(&secret, "tls.crt"))?;
    assert!(text.contains(&format!("SHA256: {sha256}")), "{sha256} in {text}");
    env.assert_api_hygiene();
    Ok(())
}

/// The leaf's SHA-256 fingerprint as `AB:CD:...`, through openssl.
fn fingerprint(pem: &[u8]) -> anyhow::Result<String> {
    let out = standalone::openssl(&["x509", "-noout", "-fingerprint", "-sha256"], pem)?;
    let text = String::from_utf8(out)?;
    Ok(text
        .trim()
        .split_once('=')
        .map(|(_, f)| f.to_string())
        .unwrap_or_default())
}

fn label<'a>(secret: &'a Secret, key: &str) -> Option<&'a str> {
    secret.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn annotation<'a>(secret: &'a Secret, key: &str) -> Option<&'a str> {
    secret.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

/// Waits until Secret `name` satisfies `check`; returns it.
async fn wait_secret(env: &Env, name: &str, check: impl Fn(&Secret) -> bool) -> anyhow::Result<Secret> {
    let api = env.secrets();
    let found = e2e::harness::eventually(WAIT, &format!("Secret {name} rewritten"), || async {
        api.get(name).await.ok().filter(|s| check(s))
    })
    .await;
    env.with_manager_log(found)
}
