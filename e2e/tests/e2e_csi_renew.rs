//! The CSI node plugin renewing a volume before its certificate expires, against the
//! in-process API server and a CA signing short certificates: simple-cfssl's `renewing`
//! profile (105 s, backdated 31 s) and Debian's real multirootca with `server-short` (600 s,
//! backdated 5 minutes: about 5 minutes left at issuance, so the volume asks
//! `renew-before: 3m`). The plugin runs in this process with its renewer; the test plays the
//! approver of every request.

mod csi;

use std::path::{Path, PathBuf};
use std::time::Duration;

use cfssl_issuer::api::certmanager::CertificateRequest;
use cfssl_issuer::csi::issue::shape::{VOLUME_ID_HASH, hash_identifier};
use cfssl_issuer::csi::proto::NodePublishVolumeRequest;
use cfssl_issuer::csi::proto::node_client::NodeClient;
use e2e::harness::csi::{self as csi_harness, PodRef};
use e2e::harness::objects::{self, Kind};
use e2e::harness::{Ca, Cluster, Manager, ManagerOptions, eventually, openssl_verify};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};

use csi::Plugin;

const WAIT: Duration = Duration::from_secs(60);
/// Longer than the latest renewal either CA's profile allows (multirootca's: 150 s after
/// issuance), with room for a slow machine.
const RENEWED_WITHIN: Duration = Duration::from_secs(240);
const NODE: &str = "node-1";

struct Env {
    cluster: Cluster,
    ca: Ca,
    _manager: Manager,
    ns: String,
    dir: tempfile::TempDir,
}

impl Env {
    /// `None` against a deployed cluster: the plugin is tested on the in-process server.
    async fn start(
        ca: impl AsyncFnOnce() -> anyhow::Result<Ca>,
        profile: &str,
    ) -> anyhow::Result<Option<Env>> {
        let cluster = Cluster::start().await?;
        if cluster.is_external() {
            return Ok(None);
        }
        let ca = ca().await?;
        let system = "cfssl-issuer-system";
        cluster.ensure_namespace(system).await?;
        let manager = Manager::start(ManagerOptions::new(cluster.manager_kubeconfig(), system)).await?;
        let ns = cluster.namespace("csi-renew").await?;
        cluster.put_key_secret(&ns, "team-ca", &ca.key_hex).await?;
        let spec = objects::issuer_spec(&ca, "team-ca", profile);
        objects::create_issuer(&cluster.client, Kind::Issuer, &ns, "team-ca", spec).await?;
        objects::wait_issuer_reason(&cluster.client, Kind::Issuer, &ns, "team-ca", "Checked", WAIT).await?;
        Ok(Some(Env {
            cluster,
            ca,
            _manager: manager,
            ns,
            dir: tempfile::tempdir()?,
        }))
    }

    fn requests(&self) -> Api<CertificateRequest> {
        Api::namespaced(self.cluster.client.clone(), &self.ns)
    }

    async fn pod(&self, name: &str) -> anyhow::Result<String> {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name},
            "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]},
        }))?;
        let created = Api::<Pod>::namespaced(self.cluster.client.clone(), &self.ns)
            .create(&PostParams::default(), &pod)
            .await?;
        Ok(created.metadata.uid.unwrap_or_default())
    }

    /// Approves every request of the namespace as it appears, as an approver would.
    fn approve_all(&self) -> tokio::task::JoinHandle<()> {
        let (client, ns, requests) = (self.cluster.client.clone(), self.ns.clone(), self.requests());
        tokio::spawn(async move {
            loop {
                for request in requests
                    .list(&ListParams::default())
                    .await
                    .map(|l| l.items)
                    .unwrap_or_default()
                {
                    let decided = request
                        .status
                        .iter()
                        .flat_map(|s| &s.conditions)
                        .any(|c| c.type_ == "Approved" || c.type_ == "Denied");
                    if !decided && let Some(name) = &request.metadata.name {
                        let _ = objects::approve(&client, &ns, name).await;
                    }
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        })
    }

    /// kubelet's Publish of volume `volume` of pod `pod`, with `extra` attributes.
    fn publish(
        &self,
        pod: &str,
        uid: &str,
        volume: &str,
        extra: &[(&str, &str)],
    ) -> NodePublishVolumeRequest {
        let mut context = csi_harness::attributes(&csi_harness::TEAM_CA_ECDSA);
        context.extend(csi_harness::attributes(extra));
        let namespace = &self.ns;
        csi_harness::inline_publish(
            volume,
            PodRef {
                name: pod,
                namespace,
                uid,
            },
            context,
        )
    }

    /// The names of `volume`'s requests (by csi-lib's label).
    async fn requests_of(&self, volume: &str) -> anyhow::Result<Vec<String>> {
        let selector = format!("{VOLUME_ID_HASH}={}", hash_identifier(volume));
        let list = self
            .requests()
            .list(&ListParams::default().labels(&selector))
            .await?;
        Ok(list.items.into_iter().filter_map(|r| r.metadata.name).collect())
    }
}

/// `openssl <args> -in <file>` (the harness's, not our code).
fn openssl(args: &[&str], file: &Path) -> anyhow::Result<String> {
    csi_harness::openssl_in(args, file)
}

/// The certificate's serial and the key's public key, after checking the certificate is for
/// the key and verifies to the CA's root. Read from the one issuance `..data` points to now,
/// as a reader must across several files: through the top-level links, a renewal swapping
/// between two reads would pair one issuance's key with the next one's certificate.
fn volume_facts(data: &Path, ca: &Ca) -> anyhow::Result<(String, String)> {
    let issuance = std::fs::canonicalize(data.join("..data"))?;
    let key = openssl(&["pkey", "-pubout"], &issuance.join("tls.key"))?;
    let cert_key = openssl(&["x509", "-noout", "-pubkey"], &issuance.join("tls.crt"))?;
    let serial = openssl(&["x509", "-noout", "-serial"], &issuance.join("tls.crt"))?;
    assert_eq!(key, cert_key, "the certificate is not for the volume's key");
    if let Some(root) = &ca.root_pem {
        openssl_verify(&std::fs::read(issuance.join("tls.crt"))?, root)?;
    }
    Ok((serial, key))
}

/// Publishes a volume, waits for its renewal and checks it: a new serial, the same key with
/// `reuse-private-key` and a new one without, and only the new request left.
async fn renews(env: &Env, volume: &str, extra: &[(&str, &str)], reuse: bool) -> anyhow::Result<()> {
    let uid = env.pod(volume).await?;
    let plugin = Plugin {
        server: env.cluster.server().expect("in-process server"),
        dir: env.dir.path(),
        name: volume,
        user: volume,
        node: NODE,
    };
    let (channel, root): (_, PathBuf) = plugin.start(WAIT).await?;
    let approver = env.approve_all();
    let mut extra = extra.to_vec();
    let reused = if reuse { "true" } else { "false" };
    extra.push(("csi.cert-manager.io/reuse-private-key", reused));
    let publish = env.publish(volume, &uid, volume, &extra);
    NodeClient::new(channel).node_publish_volume(publish).await?;
    let data = root.join(volume).join("data");
    let (serial, key) = volume_facts(&data, &env.ca)?;
    let first = env.requests_of(volume).await?;
    assert_eq!(first.len(), 1, "{volume}: one request at Publish: {first:?}");

    let renewed = eventually(RENEWED_WITHIN, &format!("{volume} renewed"), || async {
        let facts = volume_facts(&data, &env.ca).ok()?;
        (facts.0 != serial).then_some(facts)
    })
    .await?;
    assert_eq!(
        renewed.1 == key,
        reuse,
        "{volume}: reuse-private-key {reuse}: the same key?"
    );
    let left = eventually(WAIT, "the old request deleted", || async {
        let names = env.requests_of(volume).await.ok()?;
        (!names.contains(&first[0])).then_some(names)
    })
    .await?;
    assert_eq!(
        left.len(),
        1,
        "{volume}: only the new request: {left:?} (first {first:?})"
    );
    approver.abort();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simple_cfssl_short_volumes_are_renewed_with_and_without_their_key() -> anyhow::Result<()> {
    let Some(env) = Env::start(async || Ca::simple(false).await, "renewing").await? else {
        return Ok(());
    };
    let (same, new) = tokio::join!(
        renews(&env, "csi-reuse", &[], true),
        renews(&env, "csi-rekey", &[], false)
    );
    same?;
    new?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_multirootca_short_volumes_are_renewed_with_and_without_their_key() -> anyhow::Result<()> {
    if std::env::var_os("E2E_KUBECONFIG").is_some() {
        eprintln!("skipped against a real cluster: multirootca runs on this machine only");
        return Ok(());
    }
    let Some(env) = Env::start(async || Ca::multirootca(), "server-short").await? else {
        return Ok(());
    };
    // cfssl backdates notBefore 5 minutes from the rounded minute and ends 600 s after it:
    // about 5 minutes left at issuance (4.5 to 5.5). Due 3 minutes before the end, less the
    // jitter (60 s at most): 30 to 150 s after issuance, never before it arrives.
    let before = [("csi.cert-manager.io/renew-before", "3m")];
    let (same, new) = tokio::join!(
        renews(&env, "csi-reuse", &before, true),
        renews(&env, "csi-rekey", &before, false)
    );
    same?;
    new?;
    Ok(())
}
