//! The harness's CertificateSigningRequest helpers (`e2e::harness::csr`) against the in-process
//! server: creating as an impersonated requester, `kubectl certificate approve|deny`, the RBAC
//! `allow_reference` grants and the wait helpers. The server's own CSR rules are tested in
//! kube-testserver.

use std::time::Duration;

use e2e::harness::{
    Cluster,
    csr::{self as kcsr, KubeCsr, Outcome},
};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use kube_testserver::Verb;
use serde_json::{Value, json};

const SIGNER: &str = "clusterissuers.cfssl-issuer.wikimedia.org/ca";

/// A self-signed certificate, PEM, for `status.certificate`.
fn certificate_pem(cn: &str) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec![cn.to_string()]).unwrap();
    params.self_signed(&key).unwrap().pem()
}

fn b64(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn review(user: &str, groups: &[&str], namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": { "user": user, "groups": groups, "resourceAttributes": {
            "group": kcsr::SIGNER_GROUP, "resource": "signers", "verb": "reference",
            "namespace": namespace, "name": name, "version": "*" } },
    })
}

/// POSTs a SubjectAccessReview; the answer or the error status.
async fn post_review(client: &kube::Client, body: &Value) -> Result<Value, kube::Error> {
    let req = http::Request::post("/apis/authorization.k8s.io/v1/subjectaccessreviews")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(body).unwrap())
        .unwrap();
    client.request::<Value>(req).await
}

/// strategy.go (PrepareForCreate) with client-go impersonation: the requester is the user the
/// `Impersonate-User`/`Impersonate-Group` headers name; the harness creates requests so.
#[tokio::test]
async fn create_as_an_impersonated_requester() {
    let cluster = Cluster::start().await.unwrap();
    let csr = KubeCsr::new(SIGNER).unwrap().requester("alice", &["team-a"]);
    let created = csr.create(&cluster).await.unwrap();
    assert_eq!(created.spec.username.as_deref(), Some("alice"));
    assert_eq!(
        created.spec.groups.as_deref(),
        Some(&["team-a".to_string(), "system:authenticated".to_string()][..])
    );
}

/// `kubectl certificate approve|deny` (PUT `/approval`) through the harness, and `kubectl get
/// csr`'s columns.
#[tokio::test]
async fn kubectl_approves_and_denies() {
    let cluster = Cluster::start().await.unwrap();
    let first = KubeCsr::new(SIGNER).unwrap().requester("alice", &[]);
    let second = KubeCsr::new(SIGNER).unwrap();
    first.create(&cluster).await.unwrap();
    second.create(&cluster).await.unwrap();
    kcsr::approve(&cluster, &first.name).await.unwrap();
    kcsr::deny(&cluster, &second.name).await.unwrap();
    let api = Api::<CertificateSigningRequest>::all(cluster.client.clone());
    let reasons = |csr: CertificateSigningRequest| -> Vec<(String, Option<String>)> {
        let conditions = csr.status.and_then(|s| s.conditions).unwrap_or_default();
        conditions.into_iter().map(|c| (c.type_, c.reason)).collect()
    };
    assert_eq!(
        reasons(api.get(&first.name).await.unwrap()),
        [("Approved".to_string(), Some("KubectlApprove".to_string()))]
    );
    assert_eq!(
        reasons(api.get(&second.name).await.unwrap()),
        [("Denied".to_string(), Some("KubectlDeny".to_string()))]
    );
    // kubectl sends Go's zero time for lastTransitionTime; the registry fills it in.
    let stored = api.get(&first.name).await.unwrap();
    let condition = &stored.status.unwrap().conditions.unwrap()[0];
    let transition = condition.last_transition_time.as_ref().expect("filled in").0;
    assert!(transition.as_second() > 1_700_000_000, "{transition}");
    let refused = kcsr::deny(&cluster, &first.name).await.unwrap_err();
    assert!(refused.to_string().contains("is already Approved"), "{refused:#}");
    let cache = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(e2e::harness::kubectl_bin())
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .arg("--cache-dir")
        .arg(cache.path())
        .args(["get", "csr", &first.name])
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("REQUESTOR") && text.contains("CONDITION"), "{text}");
    let row = text
        .lines()
        .find(|l| l.starts_with(&first.name))
        .unwrap_or_default();
    assert!(
        row.contains(SIGNER) && row.contains("alice") && row.ends_with("Approved"),
        "{text}"
    );
}

/// `allow_reference` on the in-process server: the user may reference that Issuer in that
/// namespace (by name), nothing else; with no issuer, every signer there (also `*`).
#[tokio::test]
async fn allow_reference_grants_the_named_signer() {
    let cluster = Cluster::start().await.unwrap();
    let server = cluster.server().expect("in-process");
    kcsr::allow_reference(&cluster, "team-a", Some("ca"), "alice")
        .await
        .unwrap();
    kcsr::allow_reference(&cluster, "team-b", None, "bob")
        .await
        .unwrap();
    let cases = [
        ("alice", "team-a", "ca", true),
        ("alice", "team-a", "*", false),
        ("alice", "team-b", "ca", false),
        ("bob", "team-b", "*", true),
        ("bob", "team-b", "anything", true),
        ("bob", "team-a", "ca", false),
    ];
    for (user, ns, name, want) in cases {
        let answer = post_review(&cluster.client, &review(user, &[], ns, name))
            .await
            .unwrap();
        assert_eq!(answer["status"]["allowed"], want, "{user} {ns} {name}");
    }
    assert_eq!(server.counts().get(Verb::Create, "subjectaccessreviews"), 6);
}

/// `wait_outcome` / `wait_issued` report the certificate a signer writes, and a Failed
/// condition.
#[tokio::test]
async fn wait_helpers_report_issued_and_failed() {
    let cluster = Cluster::start().await.unwrap();
    let api = Api::<CertificateSigningRequest>::all(cluster.client.clone());
    let (signed, failing) = (KubeCsr::new(SIGNER).unwrap(), KubeCsr::new(SIGNER).unwrap());
    signed.create(&cluster).await.unwrap();
    failing.create(&cluster).await.unwrap();
    let pem = certificate_pem("leaf");
    let pp = PatchParams::default();
    let status = |v: Value| Patch::Merge(json!({ "status": v }));
    api.patch_status(&signed.name, &pp, &status(json!({ "certificate": b64(&pem) })))
        .await
        .unwrap();
    let failed =
        json!({ "conditions": [{ "type": "Failed", "status": "True", "reason": "Boom", "message": "no" }] });
    api.patch_status(&failing.name, &pp, &status(failed))
        .await
        .unwrap();
    let timeout = Duration::from_secs(5);
    assert_eq!(
        kcsr::wait_issued(&cluster, &signed.name, timeout).await.unwrap(),
        pem
    );
    assert_eq!(
        kcsr::wait_outcome(&cluster, &failing.name, timeout)
            .await
            .unwrap(),
        Outcome::Failed {
            reason: "Boom".into(),
            message: "no".into()
        }
    );
    assert!(kcsr::wait_issued(&cluster, &failing.name, timeout).await.is_err());
}
