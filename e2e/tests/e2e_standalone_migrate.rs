//! Moving between cert-manager and standalone mode re-issues nothing, either way.
//!
//! From cert-manager: a Certificate, its request, its Secret and its status written as
//! cert-manager writes them (its field managers, annotations, labels, the `fao` label), this
//! manager having signed the request as cert-manager's external issuer; then standalone mode
//! starts, and adopts it as it is. Later edits behave: a label dropped from `secretTemplate`
//! leaves the Secret, and a failure cert-manager recorded clears on the next success.
//!
//! Back to cert-manager (`make e2e-real` only: it needs cert-manager's controller): standalone
//! mode issues, stops, cert-manager's Certificate controllers start, and keep what is there.
//!
//! A habit that comes along: `cert-manager.io/issue-temporary-certificate` puts a temporary
//! certificate for the key into the Secret while the first issuance waits on the CA.

mod standalone;

use std::collections::BTreeMap;
use std::time::Duration;

use cfssl_issuer::api::certmanager::CertificateRequest;
use cfssl_issuer::certificates::secret::certificate_details_annotations;
use cfssl_issuer::controllers::certificate::requestmanager;
use cfssl_issuer::pki::keys::{Encoding, Key, KeySpec};
use e2e::harness::real::{self, CertManager};
use e2e::harness::{Ca, Cluster, ManagerOptions, objects};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use standalone::{Env, data, public_key_of, public_key_of_leaf, serial_of};
use x509_parser::prelude::{FromDer, X509Certificate};

const WAIT: Duration = Duration::from_secs(60);
/// How long nothing may happen once the new owner runs.
const SETTLE: Duration = Duration::from_secs(8);
const SYSTEM: &str = "cfssl-issuer-system";

/// cert-manager's field managers: `cert-manager-` and the controller's name.
const CM_ISSUING: &str = "cert-manager-certificates-issuing";
const CM_READINESS: &str = "cert-manager-certificates-readiness";
const CM_REQUEST_MANAGER: &str = "cert-manager-certificates-request-manager";

/// Server-side apply under `manager`, with force, as cert-manager's controllers write.
fn applied_by(manager: &str) -> PatchParams {
    PatchParams::apply(manager).force()
}

/// How cert-manager writes a Certificate's status: by server-side apply (its
/// `ServerSideApply` feature gate) or by update (its default; a merge patch under the same
/// field manager gives the same ownership, an `Update` entry).
#[derive(Clone, Copy)]
enum StatusWrites {
    Apply,
    Update,
}

/// What cert-manager's request manager, its approver, this issuer and cert-manager's issuing
/// and readiness controllers leave behind for revision 1 of Certificate `name`, the manager
/// running as cert-manager's external issuer only. The status records a failed attempt
/// before (`lastFailureTime`, `failedIssuanceAttempts`), as after a renewal that failed once.
async fn issue_as_cert_manager(env: &Env, name: &str, writes: StatusWrites) -> anyhow::Result<()> {
    let crt = env.certificates().get(name).await?;
    let key = Key::generate(KeySpec::Rsa(2048))?;
    let key_secret = format!("{name}-x7k2p");
    let request = requestmanager::request(&crt, &key, 1, &key_secret, &[])?;
    let requests = Api::<CertificateRequest>::namespaced(env.client().clone(), &env.ns);
    let params = PostParams {
        field_manager: Some(CM_REQUEST_MANAGER.into()),
        ..PostParams::default()
    };
    let cr_name = requests
        .create(&params, &request)
        .await?
        .metadata
        .name
        .expect("name");
    objects::decide(env.client(), &env.ns, &cr_name, true).await?;
    let signed = objects::wait_request_reason(env.client(), &env.ns, &cr_name, "Issued", WAIT).await;
    let status = env.with_manager_log(signed)?.status.expect("status");
    let chain = status.certificate.expect("certificate").0;
    let ca = status.ca.map(|ca| ca.0).unwrap_or_default();

    let template = crt.spec.secret_template.clone().unwrap_or_default();
    let mut labels = template.labels.clone();
    labels.insert("controller.cert-manager.io/fao".into(), "true".into());
    let mut annotations = template.annotations.clone();
    annotations.extend(certificate_details_annotations(&chain)?);
    let issuer = &crt.spec.issuer_ref;
    annotations.extend(BTreeMap::from([
        ("cert-manager.io/certificate-name".to_string(), name.to_string()),
        ("cert-manager.io/issuer-name".to_string(), issuer.name.clone()),
        ("cert-manager.io/issuer-kind".to_string(), issuer.kind.clone()),
        ("cert-manager.io/issuer-group".to_string(), issuer.group.clone()),
    ]));
    let b64 = |bytes: &[u8]| base64_encode(bytes);
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": { "name": crt.spec.secret_name, "namespace": env.ns,
                      "labels": labels, "annotations": annotations },
        "type": "kubernetes.io/tls",
        "data": { "tls.crt": b64(&chain), "tls.key": b64(key.to_pem(Encoding::Pkcs1)?.as_bytes()),
                  "ca.crt": b64(&ca) },
    });
    env.secrets()
        .patch(
            &crt.spec.secret_name,
            &applied_by(CM_ISSUING),
            &Patch::Apply(&secret),
        )
        .await?;

    let (not_before, not_after) = validity(&chain)?;
    let renewal = not_after - SignedDuration::from_secs(not_before.duration_until(not_after).as_secs() / 3);
    let now = Timestamp::now();
    let failed_at = now - SignedDuration::from_secs(120);
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({ "type": type_, "status": status, "reason": reason, "message": message,
                "lastTransitionTime": go_time(now), "observedGeneration": 1 })
    };
    let issuing = json!({
        "revision": 1, "lastFailureTime": go_time(failed_at), "failedIssuanceAttempts": 1,
        "conditions": [condition("Issuing", "False", "Issued", "The certificate has been successfully issued")],
    });
    let readiness = json!({
        "notBefore": go_time(not_before), "notAfter": go_time(not_after),
        "renewalTime": go_time(renewal),
        "conditions": [condition("Ready", "True", "Ready", "Certificate is up to date and has not expired")],
    });
    for (manager, status) in [(CM_ISSUING, issuing), (CM_READINESS, readiness)] {
        let body = json!({ "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
                           "metadata": { "name": name, "namespace": env.ns }, "status": status });
        let (params, patch) = match writes {
            StatusWrites::Apply => (applied_by(manager), Patch::Apply(&body)),
            StatusWrites::Update => (
                PatchParams {
                    field_manager: Some(manager.into()),
                    ..PatchParams::default()
                },
                Patch::Merge(&body),
            ),
        };
        env.certificates().patch_status(name, &params, &patch).await?;
    }
    Ok(())
}

/// What must not change across a move: (requests, revision, serial, Ready).
async fn snapshot(env: &Env, name: &str, secret: &str) -> anyhow::Result<(usize, Option<i64>, String, bool)> {
    let crt = env.certificates().get(name).await?;
    let serial = serial_of(&data(&env.secret(secret).await?, "tls.crt"))?;
    Ok((
        env.requests_of(name).await?.len(),
        crt.status.as_ref().and_then(|s| s.revision),
        serial,
        crt.has_true("Ready"),
    ))
}

/// Waits out `SETTLE` after the writes of the new owner's first look stop (on the in-process
/// server, counted; elsewhere, a fixed wait).
async fn settle(env: &Env) {
    let Some(server) = env.cluster.server() else {
        tokio::time::sleep(SETTLE * 2).await;
        return;
    };
    let writes = || server.counts().verb_total(kube_testserver::Verb::Patch);
    let give_up = tokio::time::Instant::now() + WAIT;
    let mut before = writes();
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = writes();
        if now == before || tokio::time::Instant::now() > give_up {
            break;
        }
        before = now;
    }
    tokio::time::sleep(SETTLE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_mode_adopts_what_cert_manager_issued_without_reissuing() -> anyhow::Result<()> {
    // The manager runs as cert-manager's external issuer first, as before a move.
    let cluster = Cluster::start().await?;
    if cluster.is_external() {
        return Ok(()); // it starts and stops the manager
    }
    let ca = Ca::simple(false).await?;
    let mut env = Env::start_on(cluster, ca, &[]).await?;
    env.issuer("ca").await?;
    let template = json!({ "secretTemplate": { "labels": { "team": "a", "tier": "web" } } });
    env.certificate("web", "web-tls", "ca", template).await?;
    issue_as_cert_manager(&env, "web", StatusWrites::Apply).await?;
    env.certificate("old", "old-tls", "ca", json!({})).await?;
    issue_as_cert_manager(&env, "old", StatusWrites::Update).await?;
    let before = snapshot(&env, "web", "web-tls").await?;
    let old_before = snapshot(&env, "old", "old-tls").await?;
    assert_eq!(
        (before.0, before.1, before.3),
        (1, Some(1), true),
        "as cert-manager left it"
    );

    env.options =
        ManagerOptions::new(env.cluster.manager_kubeconfig(), SYSTEM).arg("--certificate-controllers");
    env.restart_manager().await?;
    settle(&env).await;
    let after = snapshot(&env, "web", "web-tls").await?;
    assert_eq!(
        after, before,
        "(requests, revision, serial, Ready) after adoption"
    );
    let old_after = snapshot(&env, "old", "old-tls").await?;
    assert_eq!(
        old_after, old_before,
        "the same, from cert-manager's default mode"
    );
    // The README's check: the Secret is this manager's alone.
    let managers: Vec<String> = env
        .secret("web-tls")
        .await?
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|e| e.manager)
        .collect();
    assert_eq!(managers, ["cfssl-issuer-issuing"], "the Secret's field managers");

    // A label dropped from the template leaves the Secret, though cert-manager applied it.
    let spec = json!({ "spec": { "secretTemplate": { "labels": { "tier": null } } } });
    env.certificates()
        .patch("web", &PatchParams::default(), &Patch::Merge(&spec))
        .await?;
    let dropped = e2e::harness::eventually(WAIT, "the Secret without label tier", || async {
        let secret = env.secret("web-tls").await.ok()?;
        let labels = secret.metadata.labels.unwrap_or_default();
        (!labels.contains_key("tier")).then_some(labels)
    })
    .await;
    let secret = env.secret("web-tls").await?;
    let dropped = dropped.map_err(|err| err.context(format!("{:#?}", secret.metadata)));
    let labels = env.with_manager_log(dropped)?;
    assert_eq!(labels.get("team").map(String::as_str), Some("a"));
    assert_eq!(
        snapshot(&env, "web", "web-tls").await?,
        before,
        "a label edit re-issues nothing"
    );

    // The failure cert-manager recorded clears on this manager's next success, whichever way
    // cert-manager wrote it.
    for name in ["web", "old"] {
        env.trigger_manually(name).await?;
        let renewed = env.wait_revision(name, 2, WAIT).await?;
        let status = renewed.status.expect("status");
        assert_eq!(
            (status.last_failure_time, status.failed_issuance_attempts),
            (None, None),
            "{name}: cert-manager's failure record after a success"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cert_manager_takes_back_what_standalone_mode_issued_without_reissuing() -> anyhow::Result<()> {
    let Some(peers) = real::peers_dir() else {
        eprintln!("skipped: needs E2E_REAL_PEERS (make e2e-real)");
        return Ok(());
    };
    let mut env = Env::start(&[]).await?;
    env.issuer("ca").await?;
    let template = json!({ "secretTemplate": { "labels": { "team": "a" } } });
    env.certificate("web", "web-tls", "ca", template).await?;
    env.wait_revision("web", 1, WAIT).await?;
    settle(&env).await;
    let before = snapshot(&env, "web", "web-tls").await?;

    // The manager goes back to being cert-manager's external issuer; cert-manager takes over.
    env.options = ManagerOptions::new(env.cluster.manager_kubeconfig(), SYSTEM);
    env.restart_manager().await?;
    let mut cert_manager = CertManager::start(&peers, &env.cluster.kubeconfig, &env.ns, "*")?;
    settle(&env).await;
    let after = snapshot(&env, "web", "web-tls").await;
    let after = after.map_err(|err| err.context(cert_manager.log()))?;
    assert_eq!(
        after,
        before,
        "(requests, revision, serial, Ready) under cert-manager; its log:\n{}",
        cert_manager.log()
    );

    // The README's step 4: release this manager's field manager, and a label dropped from the
    // template leaves the Secret under cert-manager too.
    release_with_kubectl(&env, "web-tls").await?;
    let spec = json!({ "spec": { "secretTemplate": { "labels": { "team": null } } } });
    env.certificates()
        .patch("web", &PatchParams::default(), &Patch::Merge(&spec))
        .await?;
    let dropped = e2e::harness::eventually(WAIT, "the Secret without label team", || async {
        let labels = env
            .secret("web-tls")
            .await
            .ok()?
            .metadata
            .labels
            .unwrap_or_default();
        (!labels.contains_key("team")).then_some(())
    })
    .await;
    dropped.map_err(|err| err.context(cert_manager.log()))?;
    assert_eq!(
        snapshot(&env, "web", "web-tls").await?,
        before,
        "a label edit re-issues nothing"
    );
    Ok(())
}

/// `printf ... | kubectl apply --server-side` releasing `cfssl-issuer-issuing` from Secret
/// `name`, as the README says.
async fn release_with_kubectl(env: &Env, name: &str) -> anyhow::Result<()> {
    use tokio::io::AsyncWriteExt;
    let manifest = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {}}}\n",
        env.ns
    );
    let mut child = tokio::process::Command::new(e2e::harness::kubectl_bin())
        .arg("--kubeconfig")
        .arg(&env.cluster.kubeconfig)
        .args([
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=cfssl-issuer-issuing",
            "-f",
            "-",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(manifest.as_bytes())
        .await?;
    let out = child.wait_with_output().await?;
    anyhow::ensure!(
        out.status.success(),
        "kubectl apply: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temporary_certificate_holds_the_place_while_the_ca_is_down() -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    if env.cluster.is_external() {
        eprintln!("skipped against a real cluster: takes the CA down");
        return Ok(());
    }
    env.issuer("ca").await?;
    objects::wait_issuer_reason(
        env.client(),
        objects::Kind::Issuer,
        &env.ns,
        "ca",
        "Checked",
        WAIT,
    )
    .await?;
    assert!(env.ca.set_available(false));
    let crt: cfssl_issuer::api::certmanager::Certificate = serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": { "name": "early", "namespace": env.ns,
                      "annotations": { "cert-manager.io/issue-temporary-certificate": "true" } },
        "spec": { "secretName": "early-tls", "dnsNames": ["early.example.com"],
                  "issuerRef": { "name": "ca", "kind": "Issuer", "group": standalone::GROUP } },
    }))?;
    env.certificates().create(&PostParams::default(), &crt).await?;
    let temporary = e2e::harness::eventually(WAIT, "a temporary certificate", || async {
        let secret = env.secrets().get_opt("early-tls").await.ok()??;
        (issuer_of(&data(&secret, "tls.crt")).ok()? == "CN=cert-manager.local").then_some(secret)
    })
    .await;
    let temporary = env.with_manager_log(temporary)?;
    let key = data(&temporary, "tls.key");
    assert_eq!(
        public_key_of_leaf(&data(&temporary, "tls.crt"))?,
        public_key_of(&key)?
    );
    assert_eq!(
        data(&temporary, "ca.crt"),
        Vec::<u8>::new(),
        "no CA for a temporary certificate"
    );
    let events = env.events_of("early").await?;
    assert!(
        events
            .iter()
            .any(|(reason, note)| reason == "Issuing" && note == "Issued temporary certificate"),
        "{events:?}"
    );

    // Written once: the Secret now holds a certificate for its key.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let later = env.secret("early-tls").await?;
    assert_eq!(
        data(&later, "tls.crt"),
        data(&temporary, "tls.crt"),
        "the temporary certificate stays"
    );

    assert!(env.ca.set_available(true));
    env.wait_revision("early", 1, WAIT).await?;
    let issued = env.secret("early-tls").await?;
    env.verify_secret(&issued, &["early.example.com"])?;
    assert_eq!(
        data(&issued, "tls.key"),
        key,
        "the key the temporary certificate was for"
    );
    Ok(())
}

/// The leaf's issuer, as x509-parser prints it.
fn issuer_of(chain_pem: &[u8]) -> anyhow::Result<String> {
    let der = pem::parse(chain_pem)?.into_contents();
    let (_, cert) = X509Certificate::from_der(&der)?;
    Ok(cert.issuer().to_string())
}

/// A `metav1.Time` as the API server stores it.
fn go_time(at: Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The leaf's notBefore and notAfter.
fn validity(chain_pem: &[u8]) -> anyhow::Result<(Timestamp, Timestamp)> {
    let der = pem::parse(chain_pem)?.into_contents();
    let (_, cert) = X509Certificate::from_der(&der)?;
    let validity = cert.validity();
    Ok((
        Timestamp::from_second(validity.not_before.timestamp())?,
        Timestamp::from_second(validity.not_after.timestamp())?,
    ))
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
