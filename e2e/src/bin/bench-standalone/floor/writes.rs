//! One issuance's API requests as the manager makes them (phase 1's counts: a Secret read,
//! a CertificateRequest created and two status writes to it, a key Secret created and deleted,
//! the target Secret applied, four Certificate status applies, six Events), in its order, with
//! bodies of the manager's sizes, and answers read only as far as the manager reads them.

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::core::Request;
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::IgnoredAny;
use serde_json::{Value, json};

use cfssl_issuer::api::certmanager::{Certificate, CertificateRequest};

const GROUP: &str = "cfssl-issuer.wikimedia.org";

/// What the bodies carry: a CSR, a certificate and a key of real sizes.
pub struct Material {
    csr: String,
    chain: String,
    ca: String,
    key: String,
}

impl Material {
    pub fn new() -> anyhow::Result<Material> {
        let key = rcgen::KeyPair::generate()?;
        let params = rcgen::CertificateParams::new(vec!["crt-00000.example.com".to_string()])?;
        let csr = params.serialize_request(&key)?.pem()?;
        let ca = params.self_signed(&key)?.pem();
        Ok(Material {
            csr: b64(&csr),
            chain: b64(&format!("{ca}{ca}")),
            ca: b64(&ca),
            key: b64(&key.serialize_pem()),
        })
    }
}

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// Whether the replay's last write to `crt` shows.
pub fn is_done(crt: &Certificate) -> bool {
    let conditions = crt.status.as_ref().map(|s| s.conditions.as_slice());
    conditions
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// What a create's answer is read for, as the manager reads it.
#[derive(serde::Deserialize)]
struct Answer {
    #[serde(default)]
    metadata: ObjectMeta,
}

/// The seventeen requests of one issuance of `crt`.
pub async fn issuance(client: &Client, crt: &Certificate, m: &Material) -> anyhow::Result<()> {
    let ns = crt.namespace().unwrap_or_default();
    let name = crt.name_any();
    let (target, key_name, request) = (format!("{name}-tls"), format!("{name}-key"), format!("{name}-1"));
    Api::<Secret>::namespaced(client.clone(), &ns)
        .get_opt(&target)
        .await?;
    status(
        client,
        crt,
        "readiness",
        conditions(&[("Ready", "False", "DoesNotExist")]),
    )
    .await?;
    status(
        client,
        crt,
        "trigger",
        conditions(&[("Issuing", "True", "DoesNotExist")]),
    )
    .await?;
    event(
        client,
        crt,
        "Issuing",
        "Issuing certificate as Secret does not exist",
    )
    .await?;
    let key_secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": key_name, "namespace": ns,
            "labels": {"cert-manager.io/next-private-key": "true", "controller.cert-manager.io/fao": "true"},
            "ownerReferences": [owner(crt)]},
        "data": {"tls.key": m.key},
    });
    let key_uid = create::<Secret>(client, &ns, &key_secret).await?;
    event(
        client,
        crt,
        "Generated",
        "Stored new private key in temporary Secret resource",
    )
    .await?;
    create::<CertificateRequest>(client, &ns, &request_body(crt, &request, m)).await?;
    event(
        client,
        crt,
        "Requested",
        &format!("Created new CertificateRequest resource {request:?}"),
    )
    .await?;
    let approved = conditions(&[("Approved", "True", "cert-manager.io")]);
    patch_status::<CertificateRequest>(client, &ns, &request, "approver", approved).await?;
    event(
        client,
        crt,
        "cert-manager.io",
        "Certificate request has been approved",
    )
    .await?;
    let mut signed = conditions(&[
        ("Approved", "True", "cert-manager.io"),
        ("Ready", "True", "Issued"),
    ]);
    signed["status"]["certificate"] = m.chain.clone().into();
    signed["status"]["ca"] = m.ca.clone().into();
    patch_status::<CertificateRequest>(client, &ns, &request, "certificaterequests", signed).await?;
    event(
        client,
        crt,
        "Issued",
        "Certificate fetched from issuer successfully",
    )
    .await?;
    apply::<Secret>(client, &ns, &target, &target_body(crt, &target, m)).await?;
    delete::<Secret>(client, &ns, &key_name, key_uid).await?;
    let mut issued = conditions(&[("Issuing", "False", "Issued")]);
    issued["status"]["revision"] = 1.into();
    issued["status"]["notAfter"] = "2027-02-26T00:00:00Z".into();
    status(client, crt, "issuing", issued).await?;
    event(
        client,
        crt,
        "Issuing",
        "The certificate has been successfully issued",
    )
    .await?;
    status(
        client,
        crt,
        "readiness",
        conditions(&[("Ready", "True", "Ready")]),
    )
    .await
}

fn owner(crt: &Certificate) -> Value {
    json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate", "name": crt.name_any(),
        "uid": crt.uid().unwrap_or_default(), "controller": true, "blockOwnerDeletion": true})
}

fn conditions(list: &[(&str, &str, &str)]) -> Value {
    let conditions: Vec<Value> = list
        .iter()
        .map(|(type_, status, reason)| {
            json!({"type": type_, "status": status, "reason": reason,
                "message": format!("{type_} is {status}: {reason}"),
                "lastTransitionTime": "2026-11-28T00:00:00Z"})
        })
        .collect();
    json!({"status": {"conditions": conditions}})
}

fn request_body(crt: &Certificate, name: &str, m: &Material) -> Value {
    json!({
        "apiVersion": "cert-manager.io/v1", "kind": "CertificateRequest",
        "metadata": {"name": name, "namespace": crt.namespace(), "ownerReferences": [owner(crt)],
            "annotations": {
                "cert-manager.io/certificate-name": crt.name_any(),
                "cert-manager.io/certificate-revision": "1",
                "cert-manager.io/private-key-secret-name": format!("{}-key", crt.name_any()),
            }},
        "spec": {"request": m.csr, "issuerRef": {"group": GROUP, "kind": "Issuer", "name": "bench-ca"},
            "usages": ["digital signature", "key encipherment"]},
    })
}

fn target_body(crt: &Certificate, name: &str, m: &Material) -> Value {
    let annotations = json!({
        "cert-manager.io/certificate-name": crt.name_any(),
        "cert-manager.io/issuer-name": "bench-ca", "cert-manager.io/issuer-kind": "Issuer",
        "cert-manager.io/issuer-group": GROUP, "cert-manager.io/common-name": "",
        "cert-manager.io/alt-names": format!("{}.example.com", crt.name_any()),
        "cert-manager.io/ip-sans": "", "cert-manager.io/uri-sans": "",
    });
    json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": crt.namespace(), "annotations": annotations,
            "labels": {"controller.cert-manager.io/fao": "true"}},
        "data": {"tls.crt": m.chain, "tls.key": m.key, "ca.crt": m.ca},
    })
}

fn request_for<K: Resource<DynamicType = ()>>(ns: &str) -> Request {
    Request::new(K::url_path(&(), Some(ns)))
}

fn manager(name: &str) -> String {
    format!("cfssl-issuer-{name}")
}

async fn status(client: &Client, crt: &Certificate, by: &str, mut body: Value) -> anyhow::Result<()> {
    body["apiVersion"] = "cert-manager.io/v1".into();
    body["kind"] = "Certificate".into();
    let ns = crt.namespace().unwrap_or_default();
    patch_status::<Certificate>(client, &ns, &crt.name_any(), by, body).await
}

async fn patch_status<K: Resource<DynamicType = ()>>(
    client: &Client,
    ns: &str,
    name: &str,
    by: &str,
    mut body: Value,
) -> anyhow::Result<()> {
    body["apiVersion"] = K::api_version(&()).as_ref().into();
    body["kind"] = K::kind(&()).as_ref().into();
    let params = PatchParams::apply(&manager(by)).force();
    let request = request_for::<K>(ns).patch_subresource("status", name, &params, &Patch::Apply(body))?;
    client.request::<IgnoredAny>(request).await?;
    Ok(())
}

async fn apply<K: Resource<DynamicType = ()>>(
    client: &Client,
    ns: &str,
    name: &str,
    body: &Value,
) -> anyhow::Result<()> {
    let params = PatchParams::apply(&manager("issuing")).force();
    let request = request_for::<K>(ns).patch(name, &params, &Patch::Apply(body))?;
    client.request::<IgnoredAny>(request).await?;
    Ok(())
}

/// Creates `body`; the new object's UID.
async fn create<K: Resource<DynamicType = ()>>(
    client: &Client,
    ns: &str,
    body: &Value,
) -> anyhow::Result<String> {
    let params = PostParams {
        field_manager: Some(manager("keymanager")),
        ..PostParams::default()
    };
    let request = request_for::<K>(ns).create(&params, serde_json::to_vec(body)?)?;
    let answer: Answer = client.request(request).await?;
    Ok(answer.metadata.uid.unwrap_or_default())
}

async fn delete<K: Resource<DynamicType = ()>>(
    client: &Client,
    ns: &str,
    name: &str,
    uid: String,
) -> anyhow::Result<()> {
    let params = DeleteParams::background().preconditions(Preconditions {
        uid: Some(uid),
        resource_version: None,
    });
    client
        .request::<IgnoredAny>(request_for::<K>(ns).delete(name, &params)?)
        .await?;
    Ok(())
}

/// An Event posted on its own, its answer read for its status only, as the manager posts them.
async fn event(client: &Client, crt: &Certificate, reason: &str, note: &str) -> anyhow::Result<()> {
    let ns = crt.namespace().unwrap_or_default();
    let now = k8s_openapi::jiff::Timestamp::now();
    let event = Event {
        action: Some(reason.to_string()),
        reason: Some(reason.to_string()),
        note: Some(note.to_string()),
        event_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(now)),
        regarding: Some(crt.object_ref(&())),
        metadata: ObjectMeta {
            namespace: Some(ns.clone()),
            name: Some(format!("{}.{:x}", crt.name_any(), now.as_nanosecond())),
            ..ObjectMeta::default()
        },
        reporting_controller: Some("cfssl-issuer".to_string()),
        reporting_instance: Some("cfssl-issuer".to_string()),
        type_: Some("Normal".to_string()),
        ..Event::default()
    };
    let request = request_for::<Event>(&ns).create(&PostParams::default(), serde_json::to_vec(&event)?)?;
    client.request_text(request).await?;
    Ok(())
}
