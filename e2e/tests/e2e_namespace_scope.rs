//! A namespace-scoped manager (`--namespace team-a`), run as users run it: it issues in the
//! served namespace, for an Issuer and a ClusterIssuer (and in standalone mode, a
//! Certificate), leaves an unserved namespace untouched, and makes no request the
//! namespace-scoped install (kustomize `namespace-scoped` components) does not grant.
//!
//! In-process, every request the manager made (the server's audit) is checked against the
//! rendered Roles and ClusterRoles. On a real kube-apiserver (`E2E_REAL_PEERS`) the manager
//! runs with that RBAC only, installed with RBAC authorization on: it must issue with it.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Context as _;
use kube::api::{Api, PostParams};

use cfssl_issuer::api::certmanager::Certificate;
use e2e::harness::objects::{self, Kind};
use e2e::harness::rbac::{self, Grants};
use e2e::harness::{Ca, Cluster, Csr, Manager, ManagerOptions, SYSTEM, real};

/// The namespace the `namespace-scoped` component's Roles are in.
const SERVED: &str = "team-a";
/// Served too in the two-namespace scenario, with a copy of `SERVED`'s Roles.
const ALSO_SERVED: &str = "team-c";
const UNSERVED: &str = "team-b";
const GROUP: &str = "cfssl-issuer.wikimedia.org";
const WAIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_scoped_manager_issues_with_only_what_its_roles_grant() -> anyhow::Result<()> {
    scoped(false, &[SERVED]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_scoped_standalone_manager_issues_with_only_what_its_roles_grant() -> anyhow::Result<()> {
    scoped(true, &[SERVED]).await
}

/// Two served namespaces: one watch per namespace for each kind, merged into each store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_serving_two_namespaces_issues_in_both_and_only_there() -> anyhow::Result<()> {
    if real::peers_dir().is_some() {
        eprintln!("skipped on a real kube-apiserver: the installed component serves one namespace");
        return Ok(());
    }
    scoped(true, &[SERVED, ALSO_SERVED]).await
}

/// The kustomize components of the namespace-scoped install.
fn components(standalone: bool) -> Vec<&'static str> {
    if standalone {
        vec![
            "certificate-controllers",
            "namespace-scoped",
            "namespace-scoped-certificate-controllers",
        ]
    } else {
        vec!["namespace-scoped"]
    }
}

async fn scoped(standalone: bool, served: &[&str]) -> anyhow::Result<()> {
    if std::env::var_os("E2E_KUBECONFIG").is_some() {
        eprintln!("skipped against a deployed cluster: this scenario runs its own manager");
        return Ok(());
    }
    let cluster = Cluster::start_with_rbac(&components(standalone)).await?;
    let ca = Ca::simple(false).await?;
    for ns in [SYSTEM, UNSERVED, "default"].iter().chain(served) {
        cluster.ensure_namespace(ns).await?;
    }
    let dir = tempfile::tempdir()?;
    let kubeconfig = match cluster.server() {
        Some(server) => {
            let path = dir.path().join("manager.kubeconfig");
            server.add_user("manager", &path)?;
            path
        }
        None => cluster.manager_kubeconfig().to_path_buf(),
    };
    issuers(&cluster, &ca, served).await?;
    let mut options = ManagerOptions::new(&kubeconfig, SYSTEM);
    for ns in served {
        options = options.arg(format!("--namespace={ns}"));
    }
    let options = options
        .arg("--enable-leader-election")
        .arg(format!("--leader-election-namespace={SYSTEM}"));
    let options = match standalone {
        true => options.arg("--certificate-controllers"),
        false => options,
    };
    let manager = Manager::start(options).await?;
    let issued = issue(&cluster, standalone, served).await;
    issued.with_context(|| manager.log())?;
    // What the manager does with the unserved namespace happens, if at all, by now.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_unserved_untouched(&cluster, standalone).await?;
    let docs = rbac::render(dir.path(), &components(standalone))?;
    let mut grants = Grants::of(&docs, rbac::MANAGER_NAMESPACE, rbac::MANAGER_SA);
    for ns in &served[1..] {
        // As the component says: one copy of the served namespace's Role and binding each.
        grants.copy_namespace(SERVED, ns);
    }
    assert!(!grants.cluster_wide("", "secrets"), "no Secrets cluster-wide");
    match cluster.server() {
        Some(server) => assert_all_granted(server, &grants, &manager.log()),
        None => {
            let log = manager.log();
            assert!(
                !log.to_lowercase().contains("forbidden"),
                "the manager was refused something:\n{log}"
            );
        }
    }
    Ok(())
}

/// An Issuer `ca` (with its key Secret) in the served and the unserved namespace, and the
/// ClusterIssuer `scoped-ca` with its Secret in the cluster resource namespace.
async fn issuers(cluster: &Cluster, ca: &Ca, served: &[&str]) -> anyhow::Result<()> {
    let client = &cluster.client;
    for ns in served.iter().chain([&UNSERVED]) {
        cluster.put_key_secret(ns, "ca", &ca.key_hex).await?;
        let spec = objects::issuer_spec(ca, "ca", "server");
        objects::create_issuer(client, Kind::Issuer, ns, "ca", spec).await?;
    }
    cluster.put_key_secret(SYSTEM, "scoped-ca", &ca.key_hex).await?;
    cluster.track_cluster_issuer("scoped-ca");
    let spec = objects::issuer_spec(ca, "scoped-ca", "server");
    objects::create_issuer(client, Kind::ClusterIssuer, "", "scoped-ca", spec).await
}

/// Requests (approved) in both namespaces, a Certificate in each in standalone mode; waits
/// for what the served namespace's are to become.
async fn issue(cluster: &Cluster, standalone: bool, served: &[&str]) -> anyhow::Result<()> {
    let client = &cluster.client;
    let mut rows = vec![(UNSERVED, "unserved", "Issuer", "ca")];
    for ns in served {
        rows.push((ns, "by-issuer", "Issuer", "ca"));
        rows.push((ns, "by-cluster-issuer", "ClusterIssuer", "scoped-ca"));
    }
    for (ns, name, kind, issuer) in rows {
        let csr = Csr::new(&format!("{name}.example.com"))?;
        objects::create_request(client, ns, name, GROUP, kind, issuer, &csr.pem).await?;
        objects::approve(client, ns, name).await?;
    }
    if standalone {
        for ns in served.iter().chain([&UNSERVED]) {
            certificate(client, ns).await?;
        }
    }
    for ns in served {
        for name in ["by-issuer", "by-cluster-issuer"] {
            objects::wait_request_reason(client, ns, name, "Issued", WAIT).await?;
        }
        if standalone {
            let secrets = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), ns);
            e2e::harness::eventually(WAIT, &format!("the Certificate's Secret in {ns}"), || async {
                secrets.get_opt("web-tls").await.ok().flatten()
            })
            .await?;
        }
    }
    Ok(())
}

/// The Certificate `web` into Secret `web-tls`, from Issuer `ca` of `ns`.
async fn certificate(client: &kube::Client, ns: &str) -> anyhow::Result<()> {
    let crt: Certificate = serde_json::from_value(serde_json::json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": { "name": "web", "namespace": ns },
        "spec": {
            "secretName": "web-tls",
            "dnsNames": ["web.example.com"],
            "issuerRef": { "name": "ca", "kind": "Issuer", "group": GROUP },
        },
    }))?;
    Api::<Certificate>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &crt)
        .await?;
    Ok(())
}

/// Nothing in the unserved namespace was answered: its request has no Ready, its Issuer no
/// status, its Certificate (standalone) no Secret and no request.
async fn assert_unserved_untouched(cluster: &Cluster, standalone: bool) -> anyhow::Result<()> {
    let client = &cluster.client;
    let request = objects::get_request(client, UNSERVED, "unserved").await?;
    assert_eq!(objects::ready_of(&request), None, "the unserved request");
    let issuer = objects::issuer_ready(client, Kind::Issuer, UNSERVED, "ca").await;
    assert_eq!(issuer, None, "the unserved Issuer");
    if standalone {
        let secrets = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), UNSERVED);
        assert!(secrets.get_opt("web-tls").await?.is_none(), "the unserved Secret");
        let requests =
            Api::<cfssl_issuer::api::certmanager::CertificateRequest>::namespaced(client.clone(), UNSERVED);
        let names: Vec<String> = requests
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .filter_map(|r| r.metadata.name)
            .collect();
        assert_eq!(
            names,
            ["unserved"],
            "no request made for the unserved Certificate"
        );
    }
    Ok(())
}

/// Every request of the added user `manager` is one the rendered RBAC grants, and none went
/// to the unserved namespace.
fn assert_all_granted(server: &kube_testserver::TestServer, grants: &Grants, log: &str) {
    let audit = server.audit();
    let mine: Vec<_> = audit.iter().filter(|e| e.user == "manager").collect();
    assert!(mine.len() > 10, "the audit saw the manager: {}", mine.len());
    let describe = |e: &kube_testserver::AuditEntry| {
        format!(
            "{} {}/{} in {:?} named {:?}",
            e.verb.as_str(),
            e.group,
            e.resource,
            e.namespace,
            e.name
        )
    };
    let unserved: BTreeSet<String> = mine
        .iter()
        .filter(|e| e.namespace.as_deref() == Some(UNSERVED))
        .map(|e| describe(e))
        .collect();
    assert!(unserved.is_empty(), "requests in {UNSERVED}: {unserved:#?}");
    let denied: BTreeSet<String> = mine
        .iter()
        .filter(|e| {
            !grants.allows(
                e.verb.as_str(),
                &e.group,
                &e.resource,
                e.namespace.as_deref(),
                e.name.as_deref(),
            )
        })
        .map(|e| describe(e))
        .collect();
    assert!(
        denied.is_empty(),
        "requests the namespace-scoped install does not grant: {denied:#?}\n--- manager log\n{log}"
    );
}
