//! The CertificateRequest a volume asks for, made from its attributes: pure, so its every
//! field is a table row.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::api::certmanager::{
    CertificateRequest, CertificateRequestSpec, CertificateSpec, IssuerRef, X509Subject,
};
use crate::certificates::go::format_go_duration;
use crate::csi::attributes::{Attributes, Subject};
use crate::csi::node::Publish;

/// csi-lib's labels: the request's node and volume, each hashed to fit a label value (a
/// node name may be 253 characters). Kept so tools written for csi-driver find our requests.
pub const NODE_ID_HASH: &str = "csi.cert-manager.io/node-id-hash";
pub const VOLUME_ID_HASH: &str = "csi.cert-manager.io/volume-id-hash";

/// The alphabet of apimachinery's `rand.SafeEncodeString`: no vowels (no words) and no
/// characters that look alike.
const SAFE: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";

/// csi-lib's `HashIdentifier`: the 32-bit FNV-1 (not 1a) of `text`, printed in decimal, each
/// digit then mapped through [`SAFE`] as apimachinery's `SafeEncodeString` does.
pub fn hash_identifier(text: &str) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in text.bytes() {
        hash = hash.wrapping_mul(0x0100_0193);
        hash ^= u32::from(byte);
    }
    hash.to_string()
        .bytes()
        .map(|digit| char::from(SAFE[usize::from(digit) % SAFE.len()]))
        .collect()
}

/// The label selector of the requests of volume `volume_id` on node `node_id`.
pub fn volume_selector(node_id: &str, volume_id: &str) -> String {
    format!(
        "{NODE_ID_HASH}={},{VOLUME_ID_HASH}={}",
        hash_identifier(node_id),
        hash_identifier(volume_id)
    )
}

/// A request's name from 16 random bytes, as a version 4 UUID (csi-lib names them so): a name
/// per issuance, never one a retried create could collide with.
pub fn request_name(random: [u8; 16]) -> String {
    let mut bytes = random;
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex = hex::encode(bytes);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The part of a Certificate spec the `pki` CSR builder reads, from the volume's attributes.
pub fn certificate_spec(attributes: &Attributes) -> CertificateSpec {
    let mut spec = CertificateSpec {
        dns_names: attributes.dns_names.clone(),
        ip_addresses: attributes.ip_addresses.iter().map(ToString::to_string).collect(),
        uris: attributes.uris.clone(),
        is_ca: attributes.is_ca,
        usages: attributes.usages.clone(),
        ..CertificateSpec::default()
    };
    match &attributes.subject {
        Subject::Literal(literal) => spec.literal_subject.clone_from(literal),
        Subject::Fields(fields) => {
            spec.common_name.clone_from(&fields.common_name);
            let subject = X509Subject {
                organizations: fields.organizations.clone(),
                countries: fields.countries.clone(),
                organizational_units: fields.organizational_units.clone(),
                localities: fields.localities.clone(),
                provinces: fields.provinces.clone(),
                street_addresses: fields.street_addresses.clone(),
                postal_codes: fields.postal_codes.clone(),
                serial_number: fields.serial_number.clone(),
                ..X509Subject::default()
            };
            spec.subject = (subject != X509Subject::default()).then_some(Box::new(subject));
        }
    }
    spec
}

/// The Pod as the request's owner: the garbage collector deletes the request with its pod.
/// Not a controller reference (csi-lib sets none): the kubelet, not a controller, made it.
pub fn pod_owner(publish: &Publish) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: publish.pod.name.clone(),
        uid: publish.pod.uid.clone(),
        ..OwnerReference::default()
    }
}

/// The request for `publish` on node `node_id`, named `name`, asking to sign `csr_pem`.
pub fn certificate_request(
    publish: &Publish,
    node_id: &str,
    name: &str,
    csr_pem: &str,
) -> CertificateRequest {
    let attributes = &publish.attributes;
    let labels = BTreeMap::from([
        (NODE_ID_HASH.to_string(), hash_identifier(node_id)),
        (VOLUME_ID_HASH.to_string(), hash_identifier(&publish.volume_id)),
    ]);
    let nanos = i64::try_from(attributes.duration.as_nanos()).unwrap_or(i64::MAX);
    let spec = CertificateRequestSpec {
        request: ByteString(csr_pem.as_bytes().to_vec()),
        issuer_ref: IssuerRef {
            name: attributes.issuer.name.clone(),
            kind: attributes.issuer.kind.clone(),
            group: attributes.issuer.group.clone(),
            ..IssuerRef::default()
        },
        duration: Some(format_go_duration(nanos)),
        is_ca: attributes.is_ca,
        usages: attributes.usages.clone(),
        ..CertificateRequestSpec::default()
    };
    let mut request = CertificateRequest::new(name, spec);
    request.metadata = ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(publish.pod.namespace.clone()),
        labels: Some(labels),
        annotations: (!attributes.annotations.is_empty()).then(|| attributes.annotations.clone()),
        owner_references: Some(vec![pod_owner(publish)]),
        ..ObjectMeta::default()
    };
    request
}
