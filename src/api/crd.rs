//! What the CRDs of both API groups share: the root schema of a kind, the optional `spec`, and
//! the YAML the `crd` subcommand prints.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

/// The root schema of a kind: kube's derive would require `spec`, which neither the Go CRD nor
/// cert-manager's does, so it is written here (with the implicit `apiVersion`/`kind`/`metadata`,
/// as controller-gen does).
pub(super) fn root_schema<Spec: JsonSchema, Status: JsonSchema>(
    generator: &mut SchemaGenerator,
    description: &str,
) -> Schema {
    json_schema!({
        "description": description,
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": generator.subschema_for::<Spec>(),
            "status": generator.subschema_for::<Status>(),
        },
    })
}

/// CRDs as one multi-document YAML stream, each document opened by `---`.
pub(super) fn yaml_stream(crds: &[CustomResourceDefinition]) -> Result<String, serde_saphyr::SerializeError> {
    crds.iter()
        .map(|crd| Ok(format!("---\n{}", serde_saphyr::to_string(crd)?)))
        .collect()
}

/// `Serialize`/`Deserialize` for a spec derived with `#[serde(remote = "Self")]`, reading an
/// absent or `null` spec as the default one. The CRDs (cert-manager's and ours) do not require
/// `spec`, and without cert-manager's webhook nothing else refuses such an object: it must not
/// break a watch of the whole kind. Validation then reports the empty spec.
macro_rules! optional_spec {
    ($spec:ident) => {
        impl serde::Serialize for $spec {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                $spec::serialize(self, serializer)
            }
        }

        impl<'de> serde::Deserialize<'de> for $spec {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                fn inherent<'de, D: serde::Deserializer<'de>>(d: D) -> Result<$spec, D::Error> {
                    $spec::deserialize(d)
                }
                #[derive(serde::Deserialize)]
                #[serde(transparent)]
                struct Present(#[serde(deserialize_with = "inherent")] $spec);
                let spec = Option::<Present>::deserialize(deserializer)?;
                Ok(spec.map(|p| p.0).unwrap_or_default())
            }
        }
    };
}
pub(super) use optional_spec;
