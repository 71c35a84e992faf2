//! Nothing a tenant creates is signed unasked (standalone mode, through the binary): a request
//! that points its controller owner reference at someone else's Certificate, a request whose
//! spec is changed after approval, and an approval a tenant writes itself.

mod standalone;

use std::time::Duration;

use cfssl_issuer::api::GROUP;
use cfssl_issuer::api::certmanager::CertificateRequest;
use e2e::harness::Csr;
use e2e::harness::{eventually, objects};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use standalone::Env;

const WAIT: Duration = Duration::from_secs(30);
/// How long a request is watched for a signature that must not come: many reconciles.
const QUIET: Duration = Duration::from_secs(5);

/// After [`QUIET`], `name` is neither approved nor signed, and the CA signed nothing more.
async fn assert_unsigned(env: &Env, name: &str, signed_before: u64) -> anyhow::Result<CertificateRequest> {
    tokio::time::sleep(QUIET).await;
    let cr = objects::get_request(env.client(), &env.ns, name).await?;
    let status = cr.status.clone().unwrap_or_default();
    assert!(status.certificate.is_none(), "{name} was signed: {status:?}");
    assert_eq!(env.signed(), signed_before, "the CA signed something for {name}");
    Ok(cr)
}

/// A tenant reads a Certificate's UID and creates a request for the Certificate's next
/// revision, controlled by it, with a CSR for other names. The approver checks what it
/// approves, not who claims to own it: left unapproved (never denied), with a Warning saying
/// why, and never sent to the CA.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_claiming_another_certificate_is_not_approved() -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    env.issuer("team-ca").await?;
    env.certificate("victim", "victim-tls", "team-ca", json!({}))
        .await?;
    let victim = env.with_manager_log(env.wait_ready("victim", WAIT).await)?;
    let signed = env.signed();
    let csr = Csr::new("bank.example")?;
    let forged: CertificateRequest = serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "CertificateRequest",
        "metadata": {
            "name": "forged", "namespace": env.ns,
            "annotations": { "cert-manager.io/certificate-revision": "2" },
            "ownerReferences": [{
                "apiVersion": "cert-manager.io/v1", "kind": "Certificate", "name": "victim",
                "uid": victim.metadata.uid, "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "issuerRef": { "group": GROUP, "kind": "Issuer", "name": "team-ca" },
            "request": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &csr.pem),
            "usages": ["digital signature", "key encipherment"],
        },
    }))?;
    Api::<CertificateRequest>::namespaced(env.client().clone(), &env.ns)
        .create(&PostParams::default(), &forged)
        .await?;
    let warned = eventually(WAIT, "a NotApproved Warning on the forged request", || async {
        let events = env.events_regarding("CertificateRequest", "forged").await.ok()?;
        events.into_iter().find(|(reason, _)| reason == "NotApproved")
    })
    .await;
    let (_, note) = env.with_manager_log(warned)?;
    assert!(note.contains("Certificate \"victim\""), "{note}");
    assert!(note.contains("not approved by cfssl-issuer"), "{note}");
    let cr = assert_unsigned(&env, "forged", signed).await?;
    let decided: Vec<_> = cr
        .status
        .iter()
        .flat_map(|s| &s.conditions)
        .map(|c| c.type_.clone())
        .collect();
    assert!(
        !decided.iter().any(|t| t == "Approved" || t == "Denied"),
        "left undecided for other approvers: {decided:?}"
    );
    let victim_now = env.certificates().get("victim").await?;
    assert_eq!(
        victim_now.status.and_then(|s| s.revision),
        Some(1),
        "the Certificate itself is untouched"
    );
    Ok(())
}

/// A request approved while its issuer does not exist yet, then given another CSR. With our
/// CRDs the API server refuses the change (CEL); with cert-manager's (the real lane installs
/// those, which rely on cert-manager's webhook) the change lands and the signer refuses it:
/// Failed, never signed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_changed_after_approval_is_not_signed() -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    let (client, ns) = (env.client(), env.ns.as_str());
    let asked = Csr::new("asked.example")?;
    objects::create_request(client, ns, "edited", GROUP, "Issuer", "later-ca", &asked.pem).await?;
    objects::approve(client, ns, "edited").await?;
    let other = Csr::new("bank.example")?;
    let encoded = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &other.pem);
    let edit = Api::<CertificateRequest>::namespaced(client.clone(), ns)
        .patch(
            "edited",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "request": encoded } })),
        )
        .await;
    if let Err(kube::Error::Api(status)) = &edit {
        assert_eq!(status.code, 422, "{status:?}");
        assert!(status.message.contains("spec is immutable"), "{status:?}");
        return Ok(());
    }
    edit?;
    let signed = env.signed();
    env.issuer("later-ca").await?;
    let failed = objects::wait_request_reason(client, ns, "edited", "Failed", WAIT).await;
    let cr = env.with_manager_log(failed)?;
    let ready = cr.condition("Ready").expect("Ready");
    assert!(
        ready
            .message
            .contains("its spec changed after it was created (generation 2)"),
        "{}",
        ready.message
    );
    assert_unsigned(&env, "edited", signed).await?;
    Ok(())
}

/// A tenant who may write request status approves their own request: the API server refuses
/// (the standalone install's ValidatingAdmissionPolicy asks the authorizer, as cert-manager's
/// webhook does), and the request is never signed. A user allowed to approve still can. Only
/// where an API server enforces admission policies: the in-process one has none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_a_tenant_writes_is_refused() -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    let Some(real) = env.cluster.real() else {
        eprintln!("skipped: the in-process API server evaluates no admission policies");
        return Ok(());
    };
    env.issuer("team-ca").await?;
    let tenant = real.impersonating("e2e-tenant").await?;
    grant_request_writes(env.client(), &env.ns, "e2e-tenant").await?;
    let csr = Csr::new("self.example")?;
    objects::create_request(
        &tenant,
        &env.ns,
        "self-approved",
        GROUP,
        "Issuer",
        "team-ca",
        &csr.pem,
    )
    .await?;
    let signed = env.signed();
    // A new policy is enforced once the API server's informer has it: wait for a dry run
    // (which passes admission) to be refused before the approval that counts.
    let enforced = eventually(WAIT, "the approval policy enforced", || async {
        approve_as(&tenant, &env.ns, "self-approved", true).await.err()
    })
    .await;
    env.with_manager_log(enforced)?;
    let forged = approve_as(&tenant, &env.ns, "self-approved", false).await;
    let refused = format!("{forged:?}");
    assert!(
        refused.contains("only a user allowed to approve issuers.cfssl-issuer.wikimedia.org/"),
        "the API server refuses the tenant's approval: {refused}"
    );
    assert_unsigned(&env, "self-approved", signed).await?;
    objects::approve(env.client(), &env.ns, "self-approved").await?;
    let issued = objects::wait_request_reason(env.client(), &env.ns, "self-approved", "Issued", WAIT).await;
    env.with_manager_log(issued)?;
    Ok(())
}

/// Lets `user` create requests and write their status in `namespace`, as a namespace admin
/// granted cert-manager's edit role and status writes might.
async fn grant_request_writes(client: &kube::Client, namespace: &str, user: &str) -> anyhow::Result<()> {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let role: Role = serde_json::from_value(json!({
        "metadata": { "name": "request-writer", "namespace": namespace },
        "rules": [{
            "apiGroups": ["cert-manager.io"],
            "resources": ["certificaterequests", "certificaterequests/status"],
            "verbs": ["create", "get", "list", "watch", "update", "patch"],
        }],
    }))?;
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": { "name": "request-writer", "namespace": namespace },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "request-writer" },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }],
    }))?;
    let params = PostParams::default();
    Api::<Role>::namespaced(client.clone(), namespace)
        .create(&params, &role)
        .await?;
    Api::<RoleBinding>::namespaced(client.clone(), namespace)
        .create(&params, &binding)
        .await?;
    Ok(())
}

/// Sets `Approved` on `name` as `client`, as cert-manager's approver does (`dry_run`: admission
/// only, nothing stored).
async fn approve_as(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    dry_run: bool,
) -> Result<(), kube::Error> {
    let body = json!({
        "apiVersion": "cert-manager.io/v1", "kind": "CertificateRequest",
        "metadata": { "name": name, "namespace": namespace },
        "status": { "conditions": [{
            "type": "Approved", "status": "True", "reason": "e2e.tenant",
            "message": "approved by its own author",
            "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().to_string(),
        }]},
    });
    let mut params = PatchParams::apply("e2e-tenant").force();
    params.dry_run = dry_run;
    Api::<CertificateRequest>::namespaced(client.clone(), namespace)
        .patch_status(name, &params, &Patch::Apply(&body))
        .await
        .map(|_| ())
}

/// The CertificateRequest CRD standalone mode ships makes `spec` immutable (a CEL rule the real
/// API server compiles within its cost budget and enforces); the in-process server evaluates
/// no CEL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_request_crd_refuses_a_spec_change() -> anyhow::Result<()> {
    use cfssl_issuer::api::certmanager::CertificateRequest as Ours;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::CustomResourceExt as _;
    let cluster = e2e::harness::Cluster::start().await?;
    if cluster.real().is_none() {
        eprintln!("skipped: the in-process API server evaluates no CEL rules");
        return Ok(());
    }
    let client = cluster.client.clone();
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    let crd = Ours::crd();
    let name = crd.metadata.name.clone().unwrap_or_default();
    crds.patch(&name, &PatchParams::apply("e2e").force(), &Patch::Apply(&crd))
        .await?;
    let ns = cluster.namespace("crd").await?;
    let csr = Csr::new("asked.example")?;
    // The CRD's new schema is served once the API server has rebuilt its handler.
    let refused = eventually(WAIT, "a spec change refused", || async {
        let _ = objects::create_request(&client, &ns, "fixed", GROUP, "Issuer", "ca", &csr.pem).await;
        let other = json!({ "spec": { "duration": "1h0m0s" } });
        let api = Api::<CertificateRequest>::namespaced(client.clone(), &ns);
        match api
            .patch("fixed", &PatchParams::default(), &Patch::Merge(other))
            .await
        {
            Err(kube::Error::Api(status)) if status.code == 422 => Some(status),
            _ => {
                let _ = api.delete("fixed", &Default::default()).await;
                None
            }
        }
    })
    .await?;
    assert!(
        refused
            .message
            .contains("spec is immutable: create a new CertificateRequest"),
        "{refused:?}"
    );
    Ok(())
}
