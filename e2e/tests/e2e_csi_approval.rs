//! Standalone mode approving the CSI plugin's requests: the manager binary with
//! `--certificate-controllers` on the in-process API server, simple-cfssl, and the plugin in
//! this process (fake mounts, as in `e2e_csi.rs`). Nobody but the manager approves here: a
//! real Pod's volume gets its files, and requests forged to look like the plugin's (its
//! labels, the Pod as owner) are left unapproved with one Event saying why.

mod csi;

use std::collections::BTreeMap;

use anyhow::Context as _;
use std::path::PathBuf;
use std::time::Duration;

use cfssl_issuer::api::certmanager::CertificateRequest;
use cfssl_issuer::csi::issue::shape::{NODE_ID_HASH, VOLUME_ID_HASH, hash_identifier};
use cfssl_issuer::csi::proto::NodePublishVolumeRequest;
use cfssl_issuer::csi::proto::node_client::NodeClient;
use e2e::harness::csi::{self as csi_harness, PodRef};
use e2e::harness::objects::{self, Kind};
use e2e::harness::rbac::{self, Grants};
use e2e::harness::{Ca, Cluster, Manager, ManagerOptions, eventually};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use sha2::{Digest, Sha256};
use tonic::transport::Channel;

use csi::{GROUP, Plugin};

const WAIT: Duration = Duration::from_secs(60);
const NODE: &str = "node-1";
const PLUGIN_USER: &str = "csi-node-1";
const MANAGER_USER: &str = "manager";
/// A finalizer of the forger's, keeping a request from the garbage collector.
const KEEP: &str = "example.com/keep";

/// kubelet's inline volume ID, computed here apart from the code under test: `csi-` and the
/// hex SHA-256 of the pod's UID and the volume's name (`makeVolumeHandle`, kubernetes'
/// `pkg/volume/csi/csi_mounter.go`).
fn volume_handle(uid: &str, volume: &str) -> String {
    let digest = Sha256::digest(format!("{uid}{volume}").as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("csi-{hex}")
}

/// What the volume asks for.
fn attributes() -> BTreeMap<String, String> {
    csi_harness::attributes(&csi_harness::TEAM_CA_ECDSA)
}

struct Env {
    cluster: Cluster,
    /// simple-cfssl runs while this lives.
    _ca: Ca,
    manager: Manager,
    ns: String,
    dir: tempfile::TempDir,
}

impl Env {
    async fn start() -> anyhow::Result<Option<Env>> {
        let cluster = Cluster::start().await?;
        if cluster.server().is_none() {
            return Ok(None);
        }
        let ca = Ca::simple(false).await?;
        let system = "cfssl-issuer-system";
        cluster.ensure_namespace(system).await?;
        // A user of its own, so the audit shows the manager's requests apart.
        let dir = tempfile::tempdir()?;
        let kubeconfig = dir.path().join("manager.kubeconfig");
        cluster
            .server()
            .expect("in-process server")
            .add_user(MANAGER_USER, &kubeconfig)?;
        let options = ManagerOptions::new(&kubeconfig, system).arg("--certificate-controllers");
        let manager = Manager::start(options).await?;
        let ns = cluster.namespace("csi-approval").await?;
        cluster.put_key_secret(&ns, "team-ca", &ca.key_hex).await?;
        let spec = objects::issuer_spec(&ca, "team-ca", "server");
        objects::create_issuer(&cluster.client, Kind::Issuer, &ns, "team-ca", spec).await?;
        objects::wait_issuer_reason(&cluster.client, Kind::Issuer, &ns, "team-ca", "Checked", WAIT).await?;
        Ok(Some(Env {
            cluster,
            _ca: ca,
            manager,
            ns,
            dir,
        }))
    }

    fn client(&self) -> &kube::Client {
        &self.cluster.client
    }

    fn requests(&self) -> Api<CertificateRequest> {
        Api::namespaced(self.client().clone(), &self.ns)
    }

    /// A Pod scheduled to [`NODE`] with inline volume `tls` of our driver; its UID.
    async fn pod(&self, name: &str) -> anyhow::Result<String> {
        let pod = csi_harness::pod_with_volume(name, NODE, &attributes())?;
        let created = Api::<Pod>::namespaced(self.client().clone(), &self.ns)
            .create(&PostParams::default(), &pod)
            .await?;
        Ok(created.metadata.uid.unwrap_or_default())
    }

    async fn plugin(&self) -> anyhow::Result<(Channel, PathBuf)> {
        let plugin = Plugin {
            server: self.cluster.server().expect("in-process server"),
            dir: self.dir.path(),
            name: "plugin",
            user: PLUGIN_USER,
            node: NODE,
        };
        plugin.start(WAIT).await
    }

    /// kubelet's Publish of volume `tls` of pod `pod`: the attributes with its pod info.
    fn publish(&self, pod: &str, uid: &str) -> NodePublishVolumeRequest {
        let target = csi_harness::kubelet_target(uid, "tls");
        let pod = PodRef {
            name: pod,
            namespace: &self.ns,
            uid,
        };
        csi_harness::publish_request(&volume_handle(uid, "tls"), target, pod, attributes())
    }

    /// The Warning Events on request `name`, as (reason, note), once there is one.
    async fn warnings_on(&self, name: &str) -> anyhow::Result<Vec<(String, String)>> {
        let events = Api::<Event>::namespaced(self.client().clone(), &self.ns);
        eventually(WAIT, &format!("an Event on {name}"), || async {
            let found = warnings(&events, name).await;
            (!found.is_empty()).then_some(found)
        })
        .await
    }

    /// How many times the manager read Pod `pod`.
    fn pod_reads(&self, pod: &str) -> usize {
        let server = self.cluster.server().expect("in-process server");
        server
            .audit()
            .iter()
            .filter(|e| e.user == MANAGER_USER && e.resource == "pods" && e.name.as_deref() == Some(pod))
            .count()
    }

    /// Every request of the manager's that the RBAC of `config/` with the Certificate
    /// controllers' component does not grant.
    fn refused(&self) -> anyhow::Result<Vec<String>> {
        let docs = rbac::render(self.dir.path(), &["certificate-controllers"])?;
        let grants = Grants::of(&docs, rbac::MANAGER_NAMESPACE, rbac::MANAGER_SA);
        let server = self.cluster.server().expect("in-process server");
        Ok(server
            .audit()
            .iter()
            .filter(|e| e.user == MANAGER_USER)
            .filter(|e| {
                !grants.allows(
                    e.verb.as_str(),
                    &e.group,
                    &e.resource,
                    e.namespace.as_deref(),
                    e.name.as_deref(),
                )
            })
            .map(|e| {
                format!(
                    "{} {}/{} in {:?} named {:?}",
                    e.verb.as_str(),
                    e.group,
                    e.resource,
                    e.namespace,
                    e.name
                )
            })
            .collect())
    }
}

async fn warnings(events: &Api<Event>, name: &str) -> Vec<(String, String)> {
    let Ok(list) = events.list(&ListParams::default()).await else {
        return Vec::new();
    };
    list.items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

/// A copy of the plugin's `genuine` request under `name`, with `csr` and `owner_uid`.
fn forged(genuine: &CertificateRequest, name: &str, csr: &str, owner_uid: &str) -> CertificateRequest {
    let mut request = CertificateRequest::new(name, genuine.spec.clone());
    request.spec.request = ByteString(csr.as_bytes().to_vec());
    request.metadata.labels.clone_from(&genuine.metadata.labels);
    let mut owners = genuine.metadata.owner_references.clone().unwrap_or_default();
    for owner in &mut owners {
        owner.uid = owner_uid.to_string();
    }
    request.metadata.owner_references = Some(owners);
    request
}

/// A CSR like the plugin's (our own builder, an ECDSA P-256 key) for `dns_names`.
fn csr_for(dns_names: &[String]) -> anyhow::Result<String> {
    use cfssl_issuer::pki::keys::{Key, KeySpec};
    let spec = cfssl_issuer::api::certmanager::CertificateSpec {
        dns_names: dns_names.to_vec(),
        ..Default::default()
    };
    let key = Key::generate(KeySpec::Ecdsa(256))?;
    Ok(cfssl_issuer::pki::request::build_csr(&spec, &key)?)
}

fn decided(request: &CertificateRequest) -> Vec<String> {
    let conditions = request
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    conditions
        .into_iter()
        .filter(|c| c.type_ == "Approved" || c.type_ == "Denied")
        .map(|c| format!("{}={}", c.type_, c.status))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manager_approves_the_plugins_request_and_no_forged_one() -> anyhow::Result<()> {
    let Some(env) = Env::start().await? else {
        return Ok(());
    };
    let uid = env.pod("web-0").await?;
    let (channel, root) = env.plugin().await?;
    let publish = env.publish("web-0", &uid);
    let volume = publish.volume_id.clone();
    // Nobody else approves: a failed Publish shows what the manager logged.
    NodeClient::new(channel)
        .node_publish_volume(publish)
        .await
        .with_context(|| env.manager.log())?;

    for name in ["tls.crt", "tls.key", "ca.crt"] {
        let path = root.join(&volume).join("data").join(name);
        assert!(path.exists(), "{} is written", path.display());
    }
    let selector = format!("{VOLUME_ID_HASH}={}", hash_identifier(&volume));
    let list = env
        .requests()
        .list(&ListParams::default().labels(&selector))
        .await?;
    let [genuine] = list.items.as_slice() else {
        anyhow::bail!("one request of the volume, not {}", list.items.len());
    };
    assert_eq!(decided(genuine), ["Approved=True"]);
    let approved = genuine
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let approved = approved.iter().find(|c| c.type_ == "Approved").expect("approved");
    assert_eq!(approved.reason, GROUP, "approved by the manager, not by the test");
    assert_eq!(
        genuine.metadata.labels.as_ref().and_then(|l| l.get(NODE_ID_HASH)),
        Some(&hash_identifier(NODE))
    );

    // A forged request: the volume's labels and the Pod as owner, one more DNS name.
    let names = vec![format!("web-0.{}.svc", env.ns), format!("admin.{}.svc", env.ns)];
    let more_names = forged(genuine, "forged-dns", &csr_for(&names)?, &uid);
    // Another: the plugin's own CSR, owned by a Pod UID that does not exist. The garbage
    // collector deletes such a request, but a finalizer (anyone who may create it may set
    // one) keeps it there, deleting, for as long as its creator likes.
    let csr = String::from_utf8(genuine.spec.request.0.clone())?;
    let mut no_pod = forged(
        genuine,
        "forged-uid",
        &csr,
        "6a1f0c8e-0000-4000-8000-000000000000",
    );
    no_pod.metadata.finalizers = Some(vec![KEEP.into()]);
    let requests = env.requests();
    for request in [&more_names, &no_pod] {
        requests.create(&PostParams::default(), request).await?;
    }
    let why = [
        (
            "forged-dns",
            "it asks for other spec.dnsNames than volume \"tls\" does".to_string(),
        ),
        (
            "forged-uid",
            "its Pod \"web-0\" has another UID (the owner was deleted, or never existed)".to_string(),
        ),
    ];
    for (name, why) in &why {
        let note = format!(
            "Not a request of the CSI driver's for a volume of its Pod ({why}): not approved by cfssl-issuer"
        );
        assert_eq!(
            env.warnings_on(name).await?,
            [("NotApproved".to_string(), note)],
            "{name}"
        );
    }

    // A change brings each back to the approver, which reads the Pod again and tells nothing
    // more; neither is approved or denied.
    let reads = env.pod_reads("web-0");
    let touch = serde_json::json!({"metadata": {"labels": {"example.com/touched": "yes"}}});
    for (name, _) in &why {
        requests
            .patch(name, &PatchParams::default(), &Patch::Merge(&touch))
            .await?;
    }
    eventually(WAIT, "the approver's second reads", || async {
        (env.pod_reads("web-0") >= reads + 2).then_some(())
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let events = Api::<Event>::namespaced(env.client().clone(), &env.ns);
    for (name, _) in &why {
        assert_eq!(
            warnings(&events, name).await.len(),
            1,
            "{name}: one Event, not one per reconcile"
        );
        assert_eq!(
            decided(&requests.get(name).await?),
            Vec::<String>::new(),
            "{name}"
        );
    }
    assert!(
        env.pod_reads("web-0") >= 3,
        "the Pod is read for each request judged"
    );
    assert_eq!(
        env.refused()?,
        Vec::<String>::new(),
        "the manager's RBAC grants what it did"
    );
    let release = serde_json::json!({"metadata": {"finalizers": null}});
    requests
        .patch("forged-uid", &PatchParams::default(), &Patch::Merge(&release))
        .await?;
    Ok(())
}
