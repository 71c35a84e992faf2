//! CertificateSigningRequests and SubjectAccessReviews on the test server: each rule
//! kube-apiserver enforces, one test per rule. (The e2e harness's helpers built on them are
//! tested in e2e's `harness_csr`.)

mod support;

use std::{
    sync::atomic::{AtomicU32, Ordering},
    time::Duration,
};

use futures::TryStreamExt as _;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
    runtime::{WatchStreamExt as _, watcher},
};
use kube_testserver::{AccessRule, Auth, Options, Verb};
use serde_json::{Value, json};
use support::{Harness, start, start_with};

const SIGNER: &str = "clusterissuers.cfssl-issuer.wikimedia.org/ca";
/// The API group whose `signers` the reviews ask about (cfssl-issuer's).
const SIGNER_GROUP: &str = "cfssl-issuer.wikimedia.org";

fn csrs(h: &Harness) -> Api<CertificateSigningRequest> {
    Api::all(h.client.clone())
}

/// A PEM request for a fresh P-256 key, naming `dns` (CN and DNS SAN).
fn request_pem(dns: &str) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec![dns.to_string()]).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, dns);
    params.serialize_request(&key).unwrap().pem().unwrap()
}

/// A valid request for [`SIGNER`] (usages `digital signature`, `key encipherment`, `server
/// auth`), as JSON to adjust, and its name.
fn valid() -> (String, Value) {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    let name = format!("csr-{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let obj = json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": { "name": name },
        "spec": {
            "request": b64(&request_pem(&format!("{name}.example.com"))),
            "signerName": SIGNER,
            "usages": ["digital signature", "key encipherment", "server auth"],
        },
    });
    (name, obj)
}

fn typed(v: Value) -> CertificateSigningRequest {
    serde_json::from_value(v).unwrap()
}

async fn create(h: &Harness, v: Value) -> Result<CertificateSigningRequest, kube::Error> {
    csrs(h).create(&PostParams::default(), &typed(v)).await
}

async fn create_valid(h: &Harness) -> String {
    let (name, obj) = valid();
    create(h, obj).await.expect("a valid request is created");
    name
}

/// The `(field, reason)` of each cause of a 422 Invalid.
fn invalid(result: Result<CertificateSigningRequest, kube::Error>) -> Vec<(String, String)> {
    let status = match result {
        Err(kube::Error::Api(status)) => status,
        other => panic!("expected 422 Invalid, got {other:?}"),
    };
    assert_eq!(
        (status.code, status.reason.as_str()),
        (422, "Invalid"),
        "{status:?}"
    );
    status
        .details
        .map(|d| d.causes.into_iter().map(|c| (c.field, c.reason)).collect())
        .unwrap_or_default()
}

fn cause(field: &str, reason: &str) -> (String, String) {
    (field.into(), reason.into())
}

fn approved() -> Value {
    json!({ "type": "Approved", "status": "True", "reason": "Test", "message": "approved" })
}

fn condition_types(csr: &CertificateSigningRequest) -> Vec<String> {
    csr.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .map(|c| c.type_.clone())
        .collect()
}

async fn patch_sub(
    h: &Harness,
    sub: &str,
    name: &str,
    patch: Value,
) -> Result<CertificateSigningRequest, kube::Error> {
    let (pp, patch) = (PatchParams::default(), Patch::Merge(patch));
    match sub {
        "status" => csrs(h).patch_status(name, &pp, &patch).await,
        "approval" => csrs(h).patch_approval(name, &pp, &patch).await,
        _ => csrs(h).patch(name, &pp, &patch).await,
    }
}

async fn approve(h: &Harness, name: &str) {
    patch_sub(
        h,
        "approval",
        name,
        json!({ "status": { "conditions": [approved()] } }),
    )
    .await
    .expect("approved");
}

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

/// pkg/registry/certificates/certificates/strategy.go (PrepareForCreate): status is reset and
/// the requester is the caller (here the kubeconfig's own user), whatever the body says.
#[tokio::test]
async fn create_resets_status_and_records_the_caller() {
    let h = start().await;
    let (name, mut obj) = valid();
    obj["spec"]["username"] = "mallory".into();
    obj["spec"]["groups"] = json!(["system:masters"]);
    obj["status"] = json!({ "conditions": [approved()], "certificate": b64(&certificate_pem("x")) });
    let created = create(&h, obj).await.unwrap();
    let spec = &created.spec;
    assert_eq!(spec.username.as_deref(), Some("kubernetes-admin"));
    assert_eq!(
        spec.groups.as_deref(),
        Some(&["system:masters".to_string(), "system:authenticated".to_string()][..])
    );
    let stored = csrs(&h).get(&name).await.unwrap();
    assert!(condition_types(&stored).is_empty());
    assert!(stored.status.and_then(|s| s.certificate).is_none());
}

/// Without authentication the server has no caller to record, so what the body says stays
/// (a test server's choice: kube-apiserver always has a caller, if only system:anonymous).
#[tokio::test]
async fn create_without_authentication_keeps_the_written_requester() {
    let h = start_with(Options {
        auth: Auth::None,
        ..Options::default()
    })
    .await;
    let (_, mut obj) = valid();
    obj["spec"]["username"] = "system:node:worker-1".into();
    obj["spec"]["groups"] = json!(["system:nodes"]);
    let created = create(&h, obj).await.unwrap();
    assert_eq!(created.spec.username.as_deref(), Some("system:node:worker-1"));
    assert_eq!(created.spec.groups, Some(vec!["system:nodes".to_string()]));
}

/// pkg/apis/certificates/validation/validation.go (validateCSR via ParseCSR): `spec.request`
/// must be a PEM `CERTIFICATE REQUEST` block.
#[tokio::test]
async fn request_must_be_a_pem_certificate_request() {
    let h = start().await;
    for request in ["not pem at all".to_string(), certificate_pem("x")] {
        let (_, mut obj) = valid();
        obj["spec"]["request"] = b64(&request).into();
        assert_eq!(
            invalid(create(&h, obj).await),
            [cause("spec.request", "FieldValueInvalid")]
        );
    }
}

/// validation.go (validateCSR: `csr.CheckSignature()`): the request's signature must verify.
#[tokio::test]
async fn request_signature_must_verify() {
    let h = start().await;
    let (name, mut obj) = valid();
    let block = ::pem::parse(request_pem(&format!("{name}.example.com"))).unwrap();
    let mut der = block.contents().to_vec();
    let last = der.len() - 1;
    der[last] ^= 0x01;
    let tampered = ::pem::encode(&::pem::Pem::new("CERTIFICATE REQUEST", der));
    obj["spec"]["request"] = b64(&tampered).into();
    assert_eq!(
        invalid(create(&h, obj).await),
        [cause("spec.request", "FieldValueInvalid")]
    );
}

/// validation.go (validateCertificateSigningRequest): `usages` is required.
#[tokio::test]
async fn usages_are_required() {
    let h = start().await;
    let (_, mut obj) = valid();
    obj["spec"]["usages"] = json!([]);
    assert_eq!(
        invalid(create(&h, obj).await),
        [cause("spec.usages", "FieldValueRequired")]
    );
}

/// validation.go (allValidUsages): each usage is a Kubernetes KeyUsage.
#[tokio::test]
async fn usages_must_be_known() {
    let h = start().await;
    let (_, mut obj) = valid();
    obj["spec"]["usages"] = json!(["digital signature", "TLS Web Server Authentication"]);
    assert_eq!(
        invalid(create(&h, obj).await),
        [cause("spec.usages[1]", "FieldValueNotSupported")]
    );
}

/// validation.go (allowDuplicateUsages false in v1): usages are unique.
#[tokio::test]
async fn usages_must_be_unique() {
    let h = start().await;
    let (_, mut obj) = valid();
    obj["spec"]["usages"] = json!(["server auth", "digital signature", "server auth"]);
    assert_eq!(
        invalid(create(&h, obj).await),
        [cause("spec.usages[2]", "FieldValueDuplicate")]
    );
}

/// pkg/apis/core/validation (ValidateSignerName), called from validation.go: required, and a
/// DNS subdomain, a '/', and a path.
#[tokio::test]
async fn signer_name_must_be_a_qualified_name() {
    let h = start().await;
    let cases = [
        ("", "FieldValueRequired"),
        ("no-slash", "FieldValueInvalid"),
        ("Not_A_Domain/x", "FieldValueInvalid"),
        ("example.com/", "FieldValueInvalid"),
    ];
    for (signer, reason) in cases {
        let (_, mut obj) = valid();
        obj["spec"]["signerName"] = signer.into();
        assert_eq!(
            invalid(create(&h, obj).await),
            [cause("spec.signerName", reason)],
            "{signer:?}"
        );
    }
}

/// validation.go (allowLegacySignerName false in v1): `kubernetes.io/legacy-unknown` is refused.
#[tokio::test]
async fn legacy_signer_name_is_refused() {
    let h = start().await;
    let (_, mut obj) = valid();
    obj["spec"]["signerName"] = "kubernetes.io/legacy-unknown".into();
    assert_eq!(
        invalid(create(&h, obj).await),
        [cause("spec.signerName", "FieldValueInvalid")]
    );
}

/// validation.go: `expirationSeconds` may not be under 600.
#[tokio::test]
async fn expiration_seconds_must_be_at_least_600() {
    let h = start().await;
    let (_, mut obj) = valid();
    obj["spec"]["expirationSeconds"] = 599.into();
    assert_eq!(
        invalid(create(&h, obj).await),
        [cause("spec.expirationSeconds", "FieldValueInvalid")]
    );
    let (_, mut obj) = valid();
    obj["spec"]["expirationSeconds"] = 600.into();
    create(&h, obj).await.expect("600 seconds is allowed");
}

/// validation.go (validateConditions, trueConditionTypes): Approved, Denied and Failed must be
/// True.
#[tokio::test]
async fn approved_denied_and_failed_must_be_true() {
    let h = start().await;
    let name = create_valid(&h).await;
    for type_ in ["Approved", "Denied", "Failed"] {
        let condition = json!({ "type": type_, "status": "False", "reason": "R" });
        let result = patch_sub(
            &h,
            "approval",
            &name,
            json!({ "status": { "conditions": [condition] } }),
        )
        .await;
        assert_eq!(
            invalid(result),
            [cause("status.conditions[0].status", "FieldValueNotSupported")],
            "{type_}"
        );
    }
}

/// validation.go (validateConditions): Approved and Denied are mutually exclusive.
#[tokio::test]
async fn approved_and_denied_are_exclusive() {
    let h = start().await;
    let name = create_valid(&h).await;
    let denied = json!({ "type": "Denied", "status": "True" });
    let result = patch_sub(
        &h,
        "approval",
        &name,
        json!({ "status": { "conditions": [approved(), denied] } }),
    )
    .await;
    assert_eq!(invalid(result), [cause("status.conditions", "FieldValueInvalid")]);
}

/// validation.go (allowDuplicateConditionTypes false): condition types are unique.
#[tokio::test]
async fn condition_types_are_unique() {
    let h = start().await;
    let name = create_valid(&h).await;
    let result = patch_sub(
        &h,
        "approval",
        &name,
        json!({ "status": { "conditions": [approved(), approved()] } }),
    )
    .await;
    assert_eq!(
        invalid(result),
        [cause("status.conditions[1].type", "FieldValueDuplicate")]
    );
}

/// strategy.go (csrStrategy.PrepareForUpdate): an update of the main resource changes neither
/// spec nor status (metadata does change).
#[tokio::test]
async fn main_resource_update_keeps_spec_and_status() {
    let h = start().await;
    let name = create_valid(&h).await;
    let patch = json!({
        "metadata": { "labels": { "team": "a" } },
        "spec": { "usages": ["client auth"], "signerName": "example.com/other" },
        "status": { "conditions": [approved()] },
    });
    let updated = patch_sub(&h, "main", &name, patch).await.unwrap();
    assert_eq!(updated.spec.signer_name, SIGNER);
    assert_eq!(updated.spec.usages.as_ref().map(Vec::len), Some(3));
    assert!(condition_types(&updated).is_empty());
    assert_eq!(updated.metadata.labels.unwrap()["team"], "a");
}

/// strategy.go (csrStatusStrategy.PrepareForUpdate): `/status` keeps spec and the Approved and
/// Denied conditions as they were: it can neither remove nor add them.
#[tokio::test]
async fn status_keeps_spec_and_approval_conditions() {
    let h = start().await;
    let name = create_valid(&h).await;
    approve(&h, &name).await;
    let failed = json!({ "type": "Failed", "status": "True", "reason": "R" });
    let denied = json!({ "type": "Denied", "status": "True" });
    let patch =
        json!({ "spec": { "signerName": "example.com/x" }, "status": { "conditions": [failed, denied] } });
    let updated = patch_sub(&h, "status", &name, patch).await.unwrap();
    assert_eq!(condition_types(&updated), ["Approved", "Failed"]);
    assert_eq!(updated.spec.signer_name, SIGNER);
}

/// strategy.go (populateConditionTimestamps): missing lastUpdateTime and lastTransitionTime are
/// filled in.
#[tokio::test]
async fn status_fills_condition_timestamps() {
    let h = start().await;
    let name = create_valid(&h).await;
    let failed = json!({ "type": "Failed", "status": "True", "reason": "R" });
    let updated = patch_sub(
        &h,
        "status",
        &name,
        json!({ "status": { "conditions": [failed] } }),
    )
    .await
    .unwrap();
    let c = &updated.status.unwrap().conditions.unwrap()[0];
    assert!(
        c.last_update_time.is_some() && c.last_transition_time.is_some(),
        "{c:?}"
    );
}

/// validation.go (validateCertificateSigningRequestUpdate): an update may not remove a Failed
/// (nor Approved, nor Denied) condition.
#[tokio::test]
async fn failed_cannot_be_removed() {
    let h = start().await;
    let name = create_valid(&h).await;
    let failed = json!({ "type": "Failed", "status": "True", "reason": "R" });
    patch_sub(
        &h,
        "status",
        &name,
        json!({ "status": { "conditions": [failed] } }),
    )
    .await
    .unwrap();
    let result = patch_sub(&h, "status", &name, json!({ "status": { "conditions": [] } })).await;
    assert_eq!(
        invalid(result),
        [cause("status.conditions", "FieldValueForbidden")]
    );
}

/// validation.go (validateCertificate): `status.certificate` is one or more PEM blocks, all
/// CERTIFICATE, without headers.
#[tokio::test]
async fn certificate_must_be_pem_certificate_blocks() {
    let h = start().await;
    let name = create_valid(&h).await;
    let key = rcgen::KeyPair::generate().unwrap().serialize_pem();
    let with_header = certificate_pem("x").replacen(
        "-----BEGIN CERTIFICATE-----\n",
        "-----BEGIN CERTIFICATE-----\nProc-Type: 4,ENCRYPTED\n\n",
        1,
    );
    for bad in ["no PEM here".to_string(), key, with_header] {
        let result = patch_sub(
            &h,
            "status",
            &name,
            json!({ "status": { "certificate": b64(&bad) } }),
        )
        .await;
        assert_eq!(
            invalid(result),
            [cause("status.certificate", "FieldValueInvalid")],
            "{bad}"
        );
    }
    let chain = certificate_pem("leaf") + &certificate_pem("intermediate");
    patch_sub(
        &h,
        "status",
        &name,
        json!({ "status": { "certificate": b64(&chain) } }),
    )
    .await
    .expect("a chain of CERTIFICATE blocks is accepted");
}

/// validation.go (allowResettingCertificate false): once set, the certificate cannot change.
#[tokio::test]
async fn certificate_is_immutable_once_set() {
    let h = start().await;
    let name = create_valid(&h).await;
    let first = b64(&certificate_pem("first"));
    patch_sub(&h, "status", &name, json!({ "status": { "certificate": first } }))
        .await
        .unwrap();
    patch_sub(&h, "status", &name, json!({ "status": { "certificate": first } }))
        .await
        .expect("the same certificate again is no change");
    let other = b64(&certificate_pem("second"));
    let result = patch_sub(&h, "status", &name, json!({ "status": { "certificate": other } })).await;
    assert_eq!(
        invalid(result),
        [cause("status.certificate", "FieldValueInvalid")]
    );
}

/// strategy.go (csrApprovalStrategy.PrepareForUpdate): `/approval` changes the conditions only,
/// never spec or the certificate.
#[tokio::test]
async fn approval_changes_only_conditions() {
    let h = start().await;
    let name = create_valid(&h).await;
    let patch = json!({
        "spec": { "signerName": "example.com/x" },
        "status": { "conditions": [approved()], "certificate": b64(&certificate_pem("x")) },
    });
    let updated = patch_sub(&h, "approval", &name, patch).await.unwrap();
    assert_eq!(condition_types(&updated), ["Approved"]);
    assert_eq!(updated.spec.signer_name, SIGNER);
    assert!(updated.status.unwrap().certificate.is_none());
}

/// `PUT /approval` with a JSON body (client-go's `UpdateApproval`, kube-rs'
/// `replace_subresource("approval", ..)`) approves, checked against the resourceVersion sent.
#[tokio::test]
async fn approval_accepts_put() {
    let h = start().await;
    let name = create_valid(&h).await;
    let mut current = serde_json::to_value(csrs(&h).get(&name).await.unwrap()).unwrap();
    current["status"] = json!({ "conditions": [approved()] });
    let body: CertificateSigningRequest = serde_json::from_value(current).unwrap();
    let pp = PostParams::default();
    let updated = csrs(&h)
        .replace_subresource("approval", &name, &pp, &body)
        .await
        .unwrap();
    assert_eq!(condition_types(&updated), ["Approved"]);
    let stale = csrs(&h).replace_subresource("approval", &name, &pp, &body).await;
    assert!(matches!(stale, Err(kube::Error::Api(s)) if s.code == 409));
}

/// Server-side apply on `/status` merges `status.conditions` by `type` (the Go type's
/// `+listMapKey=type`): a signer's Failed condition leaves the approver's Approved in place,
/// and managedFields record the signer's apply to the status subresource.
#[tokio::test]
async fn status_apply_merges_conditions_by_type() {
    let h = start().await;
    let name = create_valid(&h).await;
    approve(&h, &name).await;
    let apply = json!({
        "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": { "name": name },
        "status": { "conditions": [{ "type": "Failed", "status": "True", "reason": "Boom", "message": "m" }] },
    });
    let pp = PatchParams::apply("cfssl-issuer-certificatesigningrequest").force();
    let updated = csrs(&h)
        .patch_status(&name, &pp, &Patch::Apply(&apply))
        .await
        .unwrap();
    assert_eq!(condition_types(&updated), ["Approved", "Failed"]);
    let entries = updated.metadata.managed_fields.unwrap();
    let mine = entries
        .iter()
        .find(|e| e.manager.as_deref() == Some("cfssl-issuer-certificatesigningrequest"))
        .expect("an entry for the signer");
    assert_eq!(
        (mine.operation.as_deref(), mine.subresource.as_deref()),
        (Some("Apply"), Some("status"))
    );
}

/// Discovery lists the kind, its `status` and `approval` subresources, and
/// SubjectAccessReviews (create only), as kube-apiserver's does.
#[tokio::test]
async fn discovery_lists_csrs_and_access_reviews() {
    let h = start().await;
    let get = |path: &'static str| {
        let client = h.client.clone();
        async move {
            let req = http::Request::get(path).body(Vec::new()).unwrap();
            client.request::<Value>(req).await.unwrap()
        }
    };
    let list = get("/apis/certificates.k8s.io/v1").await;
    let entry = |list: &Value, name: &str| {
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} not in {list}"))
    };
    let csr = entry(&list, "certificatesigningrequests");
    assert_eq!(
        (csr["namespaced"].clone(), csr["shortNames"].clone()),
        (json!(false), json!(["csr"]))
    );
    for sub in ["status", "approval"] {
        let e = entry(&list, &format!("certificatesigningrequests/{sub}"));
        assert_eq!(e["verbs"], json!(["get", "patch", "update"]));
    }
    let authz = get("/apis/authorization.k8s.io/v1").await;
    assert_eq!(entry(&authz, "subjectaccessreviews")["verbs"], json!(["create"]));
}

/// Watches see a request created, then approved.
#[tokio::test]
async fn watch_sees_creation_and_approval() {
    let h = start().await;
    let stream = watcher(csrs(&h), watcher::Config::default()).applied_objects();
    let mut stream = Box::pin(stream);
    let name = create_valid(&h).await;
    let within = Duration::from_secs(5);
    let added = tokio::time::timeout(within, stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(added.metadata.name.as_deref(), Some(name.as_str()));
    approve(&h, &name).await;
    let modified = tokio::time::timeout(within, stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(modified.metadata.name.as_deref(), Some(name.as_str()));
    assert_eq!(condition_types(&modified), ["Approved"]);
}

fn review(user: &str, groups: &[&str], namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": { "user": user, "groups": groups, "resourceAttributes": {
            "group": SIGNER_GROUP, "resource": "signers", "verb": "reference",
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

/// SubjectAccessReviews are answered from the allow-list: the review echoed with
/// `status.allowed` (and a reason when allowed); what no rule grants is denied. Each is counted.
#[tokio::test]
async fn access_reviews_answer_from_the_allow_list() {
    let h = start().await;
    h.server.allow_access(
        AccessRule::new("reference", SIGNER_GROUP, "signers")
            .user("alice")
            .namespace("team-a")
            .name("ca"),
    );
    let answer = post_review(&h.client, &review("alice", &[], "team-a", "ca"))
        .await
        .unwrap();
    assert_eq!(answer["status"]["allowed"], true);
    assert!(answer["status"]["reason"].as_str().is_some_and(|r| !r.is_empty()));
    assert_eq!(answer["spec"]["user"], "alice");
    for (user, ns, name) in [
        ("alice", "team-a", "*"),
        ("alice", "team-b", "ca"),
        ("bob", "team-a", "ca"),
    ] {
        let answer = post_review(&h.client, &review(user, &[], ns, name))
            .await
            .unwrap();
        assert_eq!(
            answer["status"],
            json!({ "allowed": false }),
            "{user} {ns} {name}"
        );
    }
    assert_eq!(h.server.counts().get(Verb::Create, "subjectaccessreviews"), 4);
    let answered: Vec<(Value, Value)> = h
        .server
        .access_reviews()
        .into_iter()
        .map(|r| {
            (
                r["spec"]["resourceAttributes"]["name"].clone(),
                r["status"]["allowed"].clone(),
            )
        })
        .collect();
    assert_eq!(
        answered,
        [("ca", true), ("*", false), ("ca", false), ("ca", false)].map(|(n, a)| (json!(n), json!(a)))
    );
}

/// pkg/apis/authorization/validation (ValidateSubjectAccessReviewSpec): exactly one of
/// resourceAttributes and nonResourceAttributes, and a user or groups.
#[tokio::test]
async fn access_reviews_are_validated() {
    let h = start().await;
    let mut both = review("alice", &[], "ns", "x");
    both["spec"]["nonResourceAttributes"] = json!({ "path": "/healthz", "verb": "get" });
    let mut neither = review("alice", &[], "ns", "x");
    neither["spec"]
        .as_object_mut()
        .unwrap()
        .remove("resourceAttributes");
    let nobody = review("", &[], "ns", "x");
    let cases = [
        (both, "spec.nonResourceAttributes"),
        (neither, "spec.resourceAttributes"),
        (nobody, "spec.user"),
    ];
    for (body, field) in cases {
        match post_review(&h.client, &body).await {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 422, "{status:?}");
                let causes = status.details.unwrap().causes;
                assert_eq!(causes[0].field, field);
            }
            other => panic!("expected 422 for {field}, got {other:?}"),
        }
    }
}
