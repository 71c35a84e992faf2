//! The Node service: Publish checks the request ([`decide`]), has the certificate issued,
//! writes the files into the store and mounts them onto kubelet's target; Unpublish undoes it.

pub mod decide;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use tonic::{Request, Response, Status};

use super::metrics::CsiMetrics;
use super::proto::node_server::Node;
use super::proto::node_service_capability::{Rpc, rpc::Type as RpcType};
use super::proto::{
    NodeGetCapabilitiesRequest, NodeGetCapabilitiesResponse, NodeGetInfoRequest, NodeGetInfoResponse,
    NodePublishVolumeRequest, NodePublishVolumeResponse, NodeServiceCapability, NodeUnpublishVolumeRequest,
    NodeUnpublishVolumeResponse, node_service_capability,
};
use super::store::{File, Mounter, Store, StoreError};
pub use decide::{Again, Publish};

/// An issued certificate, as the volume's files are made from it.
#[derive(Clone, PartialEq, Eq)]
pub struct Issued {
    pub private_key_pem: String,
    pub certificate_pem: String,
    pub ca_pem: String,
    /// The keystores and bundle the attributes ask for, named by them.
    pub keystores: Vec<File>,
    /// When to issue again ([`super::renew`] arms its timer at it).
    pub next_issuance_time: jiff::Timestamp,
    /// The leaf's notAfter.
    pub not_after: jiff::Timestamp,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued")
            .field("next_issuance_time", &self.next_issuance_time)
            .finish_non_exhaustive()
    }
}

/// What gets a volume its certificate: a CertificateRequest in the pod's namespace in the
/// plugin, a fake in tests. An error is the Publish's answer as it is; DEADLINE_EXCEEDED
/// says the issuance is still in flight and the retried Publish resumes it (see
/// [`decide::keep_after`]).
pub trait Issue: Send + Sync + 'static {
    fn issue(&self, publish: &Publish) -> impl Future<Output = Result<Issued, Status>> + Send;

    /// Tells the pod's owner why its Publish was refused before any issuance (a Warning Event
    /// in `kubectl describe pod`); a courtesy, so it returns nothing.
    fn refused(&self, _publish: &Publish, _reason: &str, _message: &str) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// The renewal timers an issued volume gets at Publish and loses at Unpublish
/// ([`super::renew::Renewer`]); a trait, so that the Node service does not depend on renewal,
/// which issues through the Node service's [`Issue`].
pub trait Timers: Send + Sync + 'static {
    fn arm(&self, volume_id: &str, due: jiff::Timestamp);
    fn disarm(&self, volume_id: &str);
}

/// `--max-volumes`' default: a node's default pod limit (110) with two volumes each, and room.
pub const DEFAULT_MAX_VOLUMES: usize = 256;

/// The volume's files from an issuance, named by its attributes.
pub fn files(publish: &Publish, issued: &Issued) -> Vec<File> {
    let names = &publish.attributes.files;
    let file = |name: &str, text: &str| File {
        name: name.to_string(),
        contents: text.as_bytes().to_vec(),
    };
    let mut files = vec![
        file(&names.private_key, &issued.private_key_pem),
        file(&names.certificate, &issued.certificate_pem),
        file(&names.ca, &issued.ca_pem),
    ];
    files.extend(issued.keystores.iter().cloned());
    files
}

/// The Node service of one node.
pub struct NodeService<I, M> {
    node_id: String,
    store: Store,
    mounter: Arc<M>,
    issuer: Arc<I>,
    max_volumes: usize,
    /// Held from counting the volumes to recording a new one, so that concurrent Publishes
    /// cannot all pass the limit.
    admission: std::sync::Mutex<()>,
    metrics: Option<Arc<CsiMetrics>>,
    /// Arms an issued volume's renewal and cancels it at Unpublish; none in tests of the
    /// Node calls alone.
    renewer: Option<Arc<dyn Timers>>,
}

impl<I: Issue, M: Mounter> NodeService<I, M> {
    pub fn new(node_id: &str, store: Store, mounter: Arc<M>, issuer: Arc<I>) -> Self {
        Self {
            node_id: node_id.to_string(),
            store,
            mounter,
            issuer,
            max_volumes: DEFAULT_MAX_VOLUMES,
            admission: std::sync::Mutex::new(()),
            metrics: None,
            renewer: None,
        }
    }

    /// Reports Publish and issuance latencies to `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<CsiMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// At most `max` volumes on this node (`--max-volumes`).
    pub fn with_max_volumes(mut self, max: usize) -> Self {
        self.max_volumes = max;
        self
    }

    /// Records a new volume, unless the node holds its maximum already.
    fn admit(&self, publish: &Publish) -> Result<(), Status> {
        let _held = self
            .admission
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let volumes = self.store.volume_ids().map_err(internal)?.len();
        decide::room(volumes, self.max_volumes, &self.node_id)?;
        self.store.put_metadata(&publish.metadata).map_err(internal)
    }

    /// Renews the volumes this service issues with `renewer`.
    #[must_use]
    pub fn with_renewer(mut self, renewer: impl Timers) -> Self {
        self.renewer = Some(Arc::new(renewer));
        self
    }

    /// Issues and writes a volume recorded but not issued; on failure, nothing of it
    /// is left (kubelet never unpublishes a volume whose Publish failed), unless the issuance
    /// is still in flight and kubelet's retry resumes it.
    async fn issue_and_write(&self, publish: &Publish) -> Result<(), Status> {
        let id = &publish.volume_id;
        let written = async {
            let started = std::time::Instant::now();
            let issued = self.issuer.issue(publish).await;
            if let Some(metrics) = &self.metrics {
                let code = issued.as_ref().map_or_else(Status::code, |_| tonic::Code::Ok);
                metrics.issuance(code, started.elapsed().as_secs_f64());
            }
            let issued = issued?;
            self.store
                .write_files(id, &files(publish, &issued), publish.group)
                .map_err(internal)?;
            let mut metadata = publish.metadata.clone();
            metadata.next_issuance_time = Some(issued.next_issuance_time);
            metadata.not_after = Some(issued.not_after);
            self.store.put_metadata(&metadata).map_err(internal)?;
            Ok::<_, Status>(issued.next_issuance_time)
        };
        match written.await {
            Ok(due) => {
                if let Some(renewer) = &self.renewer {
                    renewer.arm(id, due);
                }
                Ok(())
            }
            Err(status) => {
                if !decide::keep_after(status.code()) {
                    let _ = self.store.remove(id);
                }
                Err(status)
            }
        }
    }

    async fn publish(&self, request: &NodePublishVolumeRequest) -> Result<(), Status> {
        let publish = decide::publish(request)?;
        let stored = self.store.metadata(&publish.volume_id).map_err(internal)?;
        let again = stored.map(|s| decide::again(&s, &publish)).transpose()?;
        if again.is_none()
            && let Err(refused) = self.admit(&publish)
        {
            if refused.code() == tonic::Code::ResourceExhausted {
                let message = refused.message();
                self.issuer.refused(&publish, "VolumeLimitReached", message).await;
            }
            return Err(refused);
        }
        if again != Some(Again::Issued) {
            self.issue_and_write(&publish).await?;
        }
        let target = Path::new(&publish.target_path);
        let source = self.store.data_dir(&publish.volume_id).map_err(internal)?;
        if self.mounter.is_mounted(&source, target).map_err(internal)? {
            return Ok(());
        }
        if let Err(e) = self.mounter.mount(&source, target) {
            if again.is_none() {
                let _ = self.store.remove(&publish.volume_id);
            }
            return Err(Status::internal(format!(
                "cannot mount volume {}: {e}",
                publish.volume_id
            )));
        }
        Ok(())
    }

    fn unpublish(&self, request: &NodeUnpublishVolumeRequest) -> Result<(), Status> {
        decide::unpublish(request)?;
        // Before the files go, so a renewal never writes them back.
        if let Some(renewer) = &self.renewer {
            renewer.disarm(&request.volume_id);
        }
        let target = Path::new(&request.target_path);
        // Unmounted and removed whatever is on it (a stale bind of an earlier tmpfs too); a
        // missing target or an unknown volume is done already (the spec wants idempotence).
        self.mounter.unmount(target).map_err(internal)?;
        match self.store.remove(&request.volume_id) {
            Ok(_) | Err(StoreError::VolumeId(_)) => Ok(()),
            Err(e) => Err(internal(e)),
        }
    }
}

fn internal(error: impl std::fmt::Display) -> Status {
    Status::internal(error.to_string())
}

/// The one capability: kubelet passes the pod's fsGroup (`volume_mount_group`) instead of
/// changing the files' group itself, which it could not through a read-only mount.
pub fn capabilities() -> NodeGetCapabilitiesResponse {
    let mount_group = NodeServiceCapability {
        r#type: Some(node_service_capability::Type::Rpc(Rpc {
            r#type: RpcType::VolumeMountGroup.into(),
        })),
    };
    NodeGetCapabilitiesResponse {
        capabilities: vec![mount_group],
    }
}

#[tonic::async_trait]
impl<I: Issue, M: Mounter> Node for NodeService<I, M> {
    async fn node_publish_volume(
        &self,
        request: Request<NodePublishVolumeRequest>,
    ) -> Result<Response<NodePublishVolumeResponse>, Status> {
        let started = std::time::Instant::now();
        let published = self.publish(request.get_ref()).await;
        if let Some(metrics) = &self.metrics {
            let code = published.as_ref().map_or_else(Status::code, |()| tonic::Code::Ok);
            metrics.publish(code, started.elapsed().as_secs_f64());
        }
        published?;
        Ok(Response::new(NodePublishVolumeResponse {}))
    }

    async fn node_unpublish_volume(
        &self,
        request: Request<NodeUnpublishVolumeRequest>,
    ) -> Result<Response<NodeUnpublishVolumeResponse>, Status> {
        self.unpublish(request.get_ref())?;
        Ok(Response::new(NodeUnpublishVolumeResponse {}))
    }

    async fn node_get_capabilities(
        &self,
        _: Request<NodeGetCapabilitiesRequest>,
    ) -> Result<Response<NodeGetCapabilitiesResponse>, Status> {
        Ok(Response::new(capabilities()))
    }

    async fn node_get_info(
        &self,
        _: Request<NodeGetInfoRequest>,
    ) -> Result<Response<NodeGetInfoResponse>, Status> {
        Ok(Response::new(NodeGetInfoResponse {
            node_id: self.node_id.clone(),
            // kubelet writes it into the CSINode object; the scheduler does not count inline
            // volumes against it, so Publish enforces it too (`admit`).
            max_volumes_per_node: i64::try_from(self.max_volumes).unwrap_or(i64::MAX),
            accessible_topology: None,
        }))
    }
}

#[cfg(test)]
mod tests;
