//! Status writes: server-side apply on `/status`, each controller under a field manager of its
//! own, and ([`schema`]) what the installed issuer CRDs let a status hold.
//!
//! Under server-side apply a manager owns every field it last sent and an apply removes the
//! fields it owned and no longer sends; two controllers sharing a manager would delete each
//! other's conditions. Hence one [`FieldManager`] per controller, `cfssl-issuer-<controller>`.

pub mod schema;

use kube::api::{Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::Value;

/// The field manager of one controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldManager(&'static str);

impl FieldManager {
    pub const ISSUER: FieldManager = FieldManager("cfssl-issuer-issuer");
    pub const CLUSTER_ISSUER: FieldManager = FieldManager("cfssl-issuer-clusterissuer");
    pub const CERTIFICATE_REQUEST: FieldManager = FieldManager("cfssl-issuer-certificaterequest");
    pub const CERTIFICATE_SIGNING_REQUEST: FieldManager =
        FieldManager("cfssl-issuer-certificatesigningrequest");
    /// The standalone Certificate controllers (see `controllers::certificate`).
    pub const TRIGGER: FieldManager = FieldManager("cfssl-issuer-trigger");
    pub const KEY_MANAGER: FieldManager = FieldManager("cfssl-issuer-keymanager");
    pub const REQUEST_MANAGER: FieldManager = FieldManager("cfssl-issuer-requestmanager");
    pub const ISSUING: FieldManager = FieldManager("cfssl-issuer-issuing");
    pub const READINESS: FieldManager = FieldManager("cfssl-issuer-readiness");
    pub const APPROVER: FieldManager = FieldManager("cfssl-issuer-approver");
    /// Writes no field (it only deletes requests); its plans run under a manager all the same.
    pub const REVISION_MANAGER: FieldManager = FieldManager("cfssl-issuer-revisionmanager");
    /// The prefix of each replica's own Lease field manager (`cfssl-issuer-<identity>`):
    /// kube-lease-manager locks by server-side apply, which refuses a second holder only when
    /// the two replicas apply under different managers.
    pub const LEADER_ELECTION: FieldManager = FieldManager("cfssl-issuer");

    pub fn as_str(self) -> &'static str {
        self.0
    }
}

/// Pure: the apply document for `status` on an object of kind `K`.
pub fn document<K: Resource<DynamicType = ()>>(status: Value) -> Value {
    serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    })
}

/// Applies `body` (from [`document`]) to `/status` of `obj` as `manager`, taking over any
/// field another manager holds (the fields sent are this controller's to decide). Returns the
/// resourceVersion the write produced.
pub async fn apply<K>(
    client: &kube::Client,
    obj: &K,
    manager: FieldManager,
    body: &Value,
) -> Result<Option<String>, kube::Error>
where
    K: Resource<DynamicType = ()>,
{
    let params = PatchParams::apply(manager.as_str()).force();
    let namespace = obj.namespace();
    let request = kube::core::Request::new(K::url_path(&(), namespace.as_deref()))
        .patch_subresource("status", &obj.name_any(), &params, &Patch::Apply(body))
        .map_err(kube::Error::BuildRequest)?;
    // Only the new resourceVersion is read from the answer: the rest of the object (its
    // managedFields, a certificate chain) is skipped, not built.
    let written: Written = client.request(request).await?;
    Ok(written.metadata.resource_version)
}

/// What a status write answers that the controllers use.
#[derive(serde::Deserialize)]
struct Written {
    #[serde(default)]
    metadata: WrittenMeta,
}

#[derive(serde::Deserialize, Default)]
struct WrittenMeta {
    #[serde(rename = "resourceVersion")]
    resource_version: Option<String>,
}
