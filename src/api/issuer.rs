//! `Issuer` and `ClusterIssuer` (`cfssl-issuer.wikimedia.org/v1alpha1`): one spec, one status,
//! two scopes. Every manifest written for the Go cfssl-issuer must keep working, so the schema
//! only ever adds optional fields (`tests/api_crd_compat.rs` holds us to that).

use std::borrow::Cow;
use std::fmt;

use k8s_openapi::ByteString;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::object::{HasSpec, HasStatus};
use kube::core::{ClusterResourceScope, Resource};
use kube::{CustomResource, CustomResourceExt};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize, Serializer};

use super::certmanager::IssuerRef;
use super::condition::{Condition, READY, find_condition};
use super::crd::{optional_spec, root_schema, yaml_stream};

/// API group of our kinds.
pub const GROUP: &str = "cfssl-issuer.wikimedia.org";
/// The one served and stored version.
pub const VERSION: &str = "v1alpha1";

/// How to reach and authenticate to a CFSSL `multirootca`, and what to ask it for.
// Clippy reads the repeated `type_ = "string"` of the printer columns as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cfssl-issuer.wikimedia.org",
    version = "v1alpha1",
    kind = "Issuer",
    namespaced,
    status = "IssuerStatus",
    derive = "PartialEq",
    category = "cfssl-issuer",
    doc = "A CFSSL CA that signs cert-manager CertificateRequests of its own namespace.",
    schema = "manual",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].reason"#
    ),
    printcolumn(
        name = "Message",
        type_ = "string",
        priority = 1,
        json_path = r#".status.conditions[?(@.type=="Ready")].message"#
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
// `remote = "Self"` turns the derives into inherent functions, wrapped by `optional_spec!` so
// that a missing `spec` parses as an empty one.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", remote = "Self")]
pub struct IssuerSpec {
    /// One or more base URLs of the CFSSL API, comma-separated, tried in order until one
    /// answers; for example `https://ca1.example.org,https://ca2.example.org:8888/api`.
    pub url: String,
    /// Name of the Secret holding the hex HMAC key under `key` (and optional
    /// `additional_data`). An Issuer reads it from its own namespace, a ClusterIssuer from the
    /// controller's cluster resource namespace.
    pub auth_secret_name: String,
    /// The `multirootca` signer (label) that signs requests and answers health checks.
    pub label: String,
    /// Signing profile of that signer; the signer's default profile when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Return the CA's optimal bundle (certificate plus chain) rather than the bare certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<bool>,
    /// PEM CA certificates, base64-encoded, that are the only roots trusted for TLS to this
    /// issuer's CFSSL URLs: they replace the system roots. When omitted, the controller's
    /// default trust applies (the system roots, or `SSL_CERT_FILE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_bytes")]
    pub ca_bundle: Option<ByteString>,
}

// The Go CRD does not require `spec`, so an Issuer without one can exist. It must not break a
// watch of every issuer; it parses as an empty spec, which the reconciler reports as
// `InvalidConfig`.
optional_spec!(IssuerSpec);

/// `ByteString` has no `JsonSchema`; nullable like the other optional fields.
fn optional_bytes(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "string", "format": "byte", "nullable": true})
}

/// What the controller last observed about the issuer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IssuerStatus {
    /// Conditions of the issuer, one per type; the controller maintains `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

impl JsonSchema for Issuer {
    fn schema_name() -> Cow<'static, str> {
        "Issuer".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        root_schema::<IssuerSpec, IssuerStatus>(
            generator,
            "A CFSSL CA that signs cert-manager CertificateRequests of its own namespace.",
        )
    }
}

/// Cluster-scoped twin of [`Issuer`]: same spec and status, usable from every namespace.
///
/// Written by hand because `#[derive(CustomResource)]` ties one spec type to one kind; its
/// CRD is [`Issuer`]'s with the names and scope swapped, so the two cannot drift.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct ClusterIssuer {
    pub metadata: ObjectMeta,
    pub spec: IssuerSpec,
    #[serde(default)]
    pub status: Option<IssuerStatus>,
}

impl ClusterIssuer {
    pub fn new(name: &str, spec: IssuerSpec) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec,
            status: None,
        }
    }
}

impl Serialize for ClusterIssuer {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut obj = serializer.serialize_struct("ClusterIssuer", 5)?;
        obj.serialize_field("apiVersion", &Self::api_version(&()))?;
        obj.serialize_field("kind", &Self::kind(&()))?;
        obj.serialize_field("metadata", &self.metadata)?;
        obj.serialize_field("spec", &self.spec)?;
        if let Some(status) = &self.status {
            obj.serialize_field("status", status)?;
        }
        obj.end()
    }
}

impl Resource for ClusterIssuer {
    type DynamicType = ();
    type Scope = ClusterResourceScope;

    fn kind((): &()) -> Cow<'_, str> {
        "ClusterIssuer".into()
    }
    fn group((): &()) -> Cow<'_, str> {
        GROUP.into()
    }
    fn version((): &()) -> Cow<'_, str> {
        VERSION.into()
    }
    fn plural((): &()) -> Cow<'_, str> {
        "clusterissuers".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl HasSpec for ClusterIssuer {
    type Spec = IssuerSpec;
    fn spec(&self) -> &IssuerSpec {
        &self.spec
    }
    fn spec_mut(&mut self) -> &mut IssuerSpec {
        &mut self.spec
    }
}

impl HasStatus for ClusterIssuer {
    type Status = IssuerStatus;
    fn status(&self) -> Option<&IssuerStatus> {
        self.status.as_ref()
    }
    fn status_mut(&mut self) -> &mut Option<IssuerStatus> {
        &mut self.status
    }
}

impl JsonSchema for ClusterIssuer {
    fn schema_name() -> Cow<'static, str> {
        "ClusterIssuer".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        root_schema::<IssuerSpec, IssuerStatus>(generator, CLUSTER_ISSUER_DESCRIPTION)
    }
}

const CLUSTER_ISSUER_DESCRIPTION: &str =
    "A CFSSL CA that signs cert-manager CertificateRequests of any namespace.";

impl CustomResourceExt for ClusterIssuer {
    fn crd() -> CustomResourceDefinition {
        let mut crd = Issuer::crd();
        crd.metadata.name = Some(Self::crd_name().into());
        crd.spec.scope = "Cluster".into();
        let names = &mut crd.spec.names;
        names.kind = Self::kind(&()).into();
        names.plural = Self::plural(&()).into();
        names.singular = Some("clusterissuer".into());
        for version in &mut crd.spec.versions {
            let schema = version
                .schema
                .as_mut()
                .and_then(|s| s.open_api_v3_schema.as_mut());
            if let Some(schema) = schema {
                schema.title = Some(Self::kind(&()).into());
                schema.description = Some(CLUSTER_ISSUER_DESCRIPTION.into());
            }
        }
        crd
    }

    fn crd_name() -> &'static str {
        "clusterissuers.cfssl-issuer.wikimedia.org"
    }

    fn api_resource() -> kube::core::ApiResource {
        kube::core::ApiResource::erase::<Self>(&())
    }

    fn shortnames() -> &'static [&'static str] {
        &[]
    }
}

/// Which of our two kinds an object is, or an `issuerRef` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IssuerKind {
    Issuer,
    ClusterIssuer,
}

impl IssuerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Issuer => "Issuer",
            Self::ClusterIssuer => "ClusterIssuer",
        }
    }

    /// Reads a cert-manager `issuerRef`'s `group` and `kind`: `None` when the group is not
    /// ours (another issuer's request, never to be touched), `Some(Err(kind))` for our group
    /// with a kind we do not have. An empty kind means `Issuer`, as in cert-manager.
    pub fn for_ref(group: &str, kind: &str) -> Option<Result<Self, String>> {
        if group != GROUP {
            return None;
        }
        Some(match kind {
            "" | "Issuer" => Ok(Self::Issuer),
            "ClusterIssuer" => Ok(Self::ClusterIssuer),
            other => Err(other.to_string()),
        })
    }

    /// [`Self::for_ref`] on a request's or certificate's `issuerRef`.
    pub fn for_issuer_ref(issuer_ref: &IssuerRef) -> Option<Result<Self, String>> {
        Self::for_ref(&issuer_ref.group, &issuer_ref.kind)
    }
}

impl fmt::Display for IssuerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Either kind, so the controllers have one code path. `spec()` and `status()` come from
/// kube's [`HasSpec`] and [`HasStatus`].
pub trait AnyIssuer:
    Resource<DynamicType = ()>
    + HasSpec<Spec = IssuerSpec>
    + HasStatus<Status = IssuerStatus>
    + Clone
    + fmt::Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    const KIND: IssuerKind;

    /// Where the `authSecretName` Secret lives: the issuer's namespace, or for a
    /// ClusterIssuer the namespace the controller was configured with.
    fn secret_namespace<'a>(&'a self, cluster_resource_namespace: &'a str) -> Option<&'a str>;

    /// `status.conditions`, empty when there is no status yet.
    fn conditions(&self) -> &[Condition] {
        self.status().map_or(&[], |s| s.conditions.as_slice())
    }
}

impl AnyIssuer for Issuer {
    const KIND: IssuerKind = IssuerKind::Issuer;

    fn secret_namespace<'a>(&'a self, _: &'a str) -> Option<&'a str> {
        self.metadata.namespace.as_deref()
    }
}

impl AnyIssuer for ClusterIssuer {
    const KIND: IssuerKind = IssuerKind::ClusterIssuer;

    fn secret_namespace<'a>(&'a self, cluster_resource_namespace: &'a str) -> Option<&'a str> {
        Some(cluster_resource_namespace)
    }
}

/// The `Ready` condition of an issuer status.
pub fn ready_condition(status: Option<&IssuerStatus>) -> Option<&Condition> {
    status.and_then(|s| find_condition(&s.conditions, READY))
}

/// Our two CRDs, Issuer first.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![Issuer::crd(), ClusterIssuer::crd()]
}

/// Both CRDs as one multi-document YAML stream, each document opened by `---`.
pub fn crds_yaml() -> Result<String, serde_saphyr::SerializeError> {
    yaml_stream(&crds())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::api::ConditionStatus;

    #[test]
    fn issuer_ref_table() {
        type Want = Option<Result<IssuerKind, &'static str>>;
        let cases: &[(&str, &str, Want)] = &[
            (GROUP, "", Some(Ok(IssuerKind::Issuer))),
            (GROUP, "Issuer", Some(Ok(IssuerKind::Issuer))),
            (GROUP, "ClusterIssuer", Some(Ok(IssuerKind::ClusterIssuer))),
            (GROUP, "issuer", Some(Err("issuer"))),
            (GROUP, "SampleIssuer", Some(Err("SampleIssuer"))),
            ("", "Issuer", None),
            ("cert-manager.io", "ClusterIssuer", None),
            ("CFSSL-issuer.wikimedia.org", "Issuer", None),
            ("sample-issuer.example.com", "", None),
        ];
        for (group, kind, want) in cases {
            let want = want.map(|r| r.map_err(String::from));
            assert_eq!(IssuerKind::for_ref(group, kind), want, "{group:?} {kind:?}");
        }
    }

    #[test]
    fn ready_condition_ignores_other_types() {
        let other = Condition::new(
            "Other",
            ConditionStatus::True,
            "",
            "",
            Timestamp::UNIX_EPOCH,
            None,
        );
        let status = IssuerStatus {
            conditions: vec![other],
        };
        assert!(ready_condition(Some(&status)).is_none());
        assert!(ready_condition(None).is_none());
    }

    #[test]
    fn both_kinds_through_one_path() {
        fn describe<K: AnyIssuer>(issuer: &K) -> (IssuerKind, String, Option<String>, usize) {
            let namespace = issuer.secret_namespace("cert-manager").map(String::from);
            (
                K::KIND,
                issuer.spec().label.clone(),
                namespace,
                issuer.conditions().len(),
            )
        }
        let spec = IssuerSpec {
            label: "intermediate1".into(),
            ..IssuerSpec::default()
        };
        let mut namespaced = Issuer::new("a", spec.clone());
        namespaced.metadata.namespace = Some("team".into());
        let cluster = ClusterIssuer::new("b", spec);
        assert_eq!(
            describe(&namespaced),
            (IssuerKind::Issuer, "intermediate1".into(), Some("team".into()), 0)
        );
        assert_eq!(
            describe(&cluster),
            (
                IssuerKind::ClusterIssuer,
                "intermediate1".into(),
                Some("cert-manager".into()),
                0
            )
        );
        assert_eq!(
            ClusterIssuer::api_version(&()),
            "cfssl-issuer.wikimedia.org/v1alpha1"
        );
        assert_eq!(
            ClusterIssuer::crd_name(),
            format!("{}.{GROUP}", ClusterIssuer::plural(&()))
        );
    }

    #[test]
    fn serialized_objects_carry_api_version_and_kind() {
        let cluster = serde_json::to_value(ClusterIssuer::new("b", IssuerSpec::default())).unwrap();
        assert_eq!(cluster["apiVersion"], "cfssl-issuer.wikimedia.org/v1alpha1");
        assert_eq!(cluster["kind"], "ClusterIssuer");
        assert!(cluster.get("status").is_none());
        let issuer = serde_json::to_value(Issuer::new("a", IssuerSpec::default())).unwrap();
        assert_eq!(issuer["kind"], "Issuer");
        // Required fields are always written, optional ones only when set.
        assert_eq!(
            issuer["spec"],
            serde_json::json!({"url": "", "authSecretName": "", "label": ""})
        );
    }
}
