//! The Identity service: the plugin's name and version, no plugin capabilities (no
//! controller service, no topology), and Probe: ready once the volume store is rediscovered.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tonic::{Request, Response, Status};

use super::proto::identity_server::Identity;
use super::proto::{
    GetPluginCapabilitiesRequest, GetPluginCapabilitiesResponse, GetPluginInfoRequest, GetPluginInfoResponse,
    ProbeRequest, ProbeResponse,
};

/// The driver name a CSIDriver object and a pod's `csi.driver` use.
pub const DRIVER_NAME: &str = "csi.cfssl-issuer.wikimedia.org";

/// Whether the plugin can serve volumes; set once the store's tmpfs is mounted (or found)
/// and its volumes rediscovered, so kubelet's liveness probe waits for it.
#[derive(Debug, Clone, Default)]
pub struct Ready(Arc<AtomicBool>);

impl Ready {
    pub fn set(&self) {
        self.0.store(true, Ordering::Release);
    }

    pub fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

pub struct IdentityService {
    name: String,
    ready: Ready,
}

impl IdentityService {
    pub fn new(name: &str, ready: Ready) -> Self {
        Self {
            name: name.to_string(),
            ready,
        }
    }
}

#[tonic::async_trait]
impl Identity for IdentityService {
    async fn get_plugin_info(
        &self,
        _: Request<GetPluginInfoRequest>,
    ) -> Result<Response<GetPluginInfoResponse>, Status> {
        Ok(Response::new(GetPluginInfoResponse {
            name: self.name.clone(),
            vendor_version: env!("CARGO_PKG_VERSION").to_string(),
            manifest: std::collections::HashMap::new(),
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _: Request<GetPluginCapabilitiesRequest>,
    ) -> Result<Response<GetPluginCapabilitiesResponse>, Status> {
        Ok(Response::new(GetPluginCapabilitiesResponse {
            capabilities: vec![],
        }))
    }

    async fn probe(&self, _: Request<ProbeRequest>) -> Result<Response<ProbeResponse>, Status> {
        Ok(Response::new(ProbeResponse {
            ready: Some(self.ready.get()),
        }))
    }
}
