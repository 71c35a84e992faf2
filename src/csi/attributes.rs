//! A volume's attributes (`volumeAttributes` of an inline CSI volume) read as csi-driver reads
//! them, so a user migrates by changing only `driver:`. Differences, each for a reason:
//! `issuer-group` defaults to our group; unknown keys under csi-driver's prefix or ours are
//! refused (csi-driver ignores them, so a typo yields a certificate without what it meant);
//! every problem is reported at once, sorted by key.

mod text;

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use jiff::SignedDuration;

use crate::api::certmanager::KEY_USAGES;
use crate::api::{GROUP, IssuerKind};
use crate::certificates::go::parse_go_duration;
use crate::pki::keys::{Encoding, KeySpec};
use crate::pki::keystore::Pkcs12Profile;
use crate::pki::subject::literal_rdns;

pub use text::VARIABLES;

/// csi-driver's attribute prefix, kept so its users' pod specs work unchanged.
pub const PREFIX: &str = "csi.cert-manager.io/";
/// Our own prefix, for what csi-driver does not have ([`own`]); other keys under it are refused.
pub const OWN_PREFIX: &str = "csi.cfssl-issuer.wikimedia.org/";
/// kubelet's keys (pod info, `ephemeral`, service-account tokens): never annotations.
pub const KUBELET_PREFIX: &str = "csi.storage.k8s.io/";

/// kubelet's pod info keys (`podInfoOnMount: true`) and its marker of an inline volume.
pub mod kubelet {
    pub const POD_NAME: &str = "csi.storage.k8s.io/pod.name";
    pub const POD_NAMESPACE: &str = "csi.storage.k8s.io/pod.namespace";
    pub const POD_UID: &str = "csi.storage.k8s.io/pod.uid";
    pub const SERVICE_ACCOUNT_NAME: &str = "csi.storage.k8s.io/serviceAccount.name";
    pub const EPHEMERAL: &str = "csi.storage.k8s.io/ephemeral";
}

/// csi-driver's keys, each with [`PREFIX`].
pub mod key {
    pub const ISSUER_NAME: &str = "csi.cert-manager.io/issuer-name";
    pub const ISSUER_KIND: &str = "csi.cert-manager.io/issuer-kind";
    pub const ISSUER_GROUP: &str = "csi.cert-manager.io/issuer-group";
    pub const LITERAL_SUBJECT: &str = "csi.cert-manager.io/literal-subject";
    pub const COMMON_NAME: &str = "csi.cert-manager.io/common-name";
    pub const ORGANIZATIONS: &str = "csi.cert-manager.io/organizations";
    pub const ORGANIZATIONAL_UNITS: &str = "csi.cert-manager.io/organizationalunits";
    pub const COUNTRIES: &str = "csi.cert-manager.io/countries";
    pub const PROVINCES: &str = "csi.cert-manager.io/provinces";
    pub const LOCALITIES: &str = "csi.cert-manager.io/localities";
    pub const STREET_ADDRESSES: &str = "csi.cert-manager.io/streetaddresses";
    pub const POSTAL_CODES: &str = "csi.cert-manager.io/postalcodes";
    pub const SERIAL_NUMBER: &str = "csi.cert-manager.io/serialnumber";
    pub const DNS_NAMES: &str = "csi.cert-manager.io/dns-names";
    pub const IP_SANS: &str = "csi.cert-manager.io/ip-sans";
    pub const URI_SANS: &str = "csi.cert-manager.io/uri-sans";
    pub const DURATION: &str = "csi.cert-manager.io/duration";
    pub const RENEW_BEFORE: &str = "csi.cert-manager.io/renew-before";
    pub const IS_CA: &str = "csi.cert-manager.io/is-ca";
    pub const KEY_USAGES: &str = "csi.cert-manager.io/key-usages";
    pub const KEY_ALGORITHM: &str = "csi.cert-manager.io/key-algorithm";
    pub const KEY_SIZE: &str = "csi.cert-manager.io/key-size";
    pub const KEY_ENCODING: &str = "csi.cert-manager.io/key-encoding";
    pub const REUSE_PRIVATE_KEY: &str = "csi.cert-manager.io/reuse-private-key";
    pub const CERTIFICATE_FILE: &str = "csi.cert-manager.io/certificate-file";
    pub const PRIVATE_KEY_FILE: &str = "csi.cert-manager.io/privatekey-file";
    pub const CA_FILE: &str = "csi.cert-manager.io/ca-file";
    pub const FS_GROUP: &str = "csi.cert-manager.io/fs-group";
    pub const PKCS12_ENABLE: &str = "csi.cert-manager.io/pkcs12-enable";
    pub const PKCS12_FILENAME: &str = "csi.cert-manager.io/pkcs12-filename";
    pub const PKCS12_PASSWORD: &str = "csi.cert-manager.io/pkcs12-password";

    /// Every key above: anything else under the prefix is refused.
    pub const ALL: [&str; 31] = [
        ISSUER_NAME,
        ISSUER_KIND,
        ISSUER_GROUP,
        LITERAL_SUBJECT,
        COMMON_NAME,
        ORGANIZATIONS,
        ORGANIZATIONAL_UNITS,
        COUNTRIES,
        PROVINCES,
        LOCALITIES,
        STREET_ADDRESSES,
        POSTAL_CODES,
        SERIAL_NUMBER,
        DNS_NAMES,
        IP_SANS,
        URI_SANS,
        DURATION,
        RENEW_BEFORE,
        IS_CA,
        KEY_USAGES,
        KEY_ALGORITHM,
        KEY_SIZE,
        KEY_ENCODING,
        REUSE_PRIVATE_KEY,
        CERTIFICATE_FILE,
        PRIVATE_KEY_FILE,
        CA_FILE,
        FS_GROUP,
        PKCS12_ENABLE,
        PKCS12_FILENAME,
        PKCS12_PASSWORD,
    ];
}

/// Our keys, each with [`OWN_PREFIX`]: keystores csi-driver lacks.
pub mod own {
    /// A JKS keystore, read like csi-driver's `pkcs12-*` (csi-driver#130 asks for it).
    pub const JKS_ENABLE: &str = "csi.cfssl-issuer.wikimedia.org/jks-enable";
    pub const JKS_FILENAME: &str = "csi.cfssl-issuer.wikimedia.org/jks-filename";
    pub const JKS_PASSWORD: &str = "csi.cfssl-issuer.wikimedia.org/jks-password";
    /// cert-manager's PKCS#12 profiles; csi-driver always writes `LegacyRC2`, the default.
    pub const PKCS12_PROFILE: &str = "csi.cfssl-issuer.wikimedia.org/pkcs12-profile";
    /// One file with the private key then the chain (cert-manager's `CombinedPEM`), so a reader
    /// never pairs a renewed key with the previous certificate.
    pub const BUNDLE_FILE: &str = "csi.cfssl-issuer.wikimedia.org/bundle-file";

    pub const ALL: [&str; 5] = [
        JKS_ENABLE,
        JKS_FILENAME,
        JKS_PASSWORD,
        PKCS12_PROFILE,
        BUNDLE_FILE,
    ];
}

/// cert-manager's default certificate duration (90 days).
pub const DEFAULT_DURATION: SignedDuration = SignedDuration::from_hours(2160);

/// The pod a volume is for, from kubelet's pod info keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub service_account: String,
}

impl PodInfo {
    /// `None` unless kubelet sent the pod's name, namespace and UID (the CSIDriver has
    /// `podInfoOnMount: true`); the service account may be absent (then empty).
    pub fn from_context(context: &BTreeMap<String, String>) -> Option<Self> {
        let get = |k: &str| context.get(k).filter(|v| !v.is_empty()).cloned();
        Some(Self {
            name: get(kubelet::POD_NAME)?,
            namespace: get(kubelet::POD_NAMESPACE)?,
            uid: get(kubelet::POD_UID)?,
            service_account: get(kubelet::SERVICE_ACCOUNT_NAME).unwrap_or_default(),
        })
    }
}

/// The issuer a volume's request names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issuer {
    pub name: String,
    pub kind: String,
    pub group: String,
}

/// The subject: a literal one (RFC 4514, checked to parse) or cert-manager's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    Literal(String),
    Fields(SubjectFields),
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubjectFields {
    pub common_name: String,
    pub organizations: Vec<String>,
    pub organizational_units: Vec<String>,
    pub countries: Vec<String>,
    pub provinces: Vec<String>,
    pub localities: Vec<String>,
    pub street_addresses: Vec<String>,
    pub postal_codes: Vec<String>,
    pub serial_number: String,
}

/// The files written into the volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Files {
    pub certificate: String,
    pub private_key: String,
    pub ca: String,
    pub pkcs12: Option<Keystore>,
    /// The PKCS#12 profile (ours; csi-driver's is `LegacyRC2`).
    pub pkcs12_profile: Pkcs12Profile,
    pub jks: Option<Keystore>,
    /// The key-and-chain file, if asked for.
    pub bundle: Option<String>,
}

/// A keystore file (PKCS#12 or JKS) and its password.
#[derive(Clone, PartialEq, Eq)]
pub struct Keystore {
    pub file: String,
    pub password: String,
}

impl fmt::Debug for Keystore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The password never reaches a log line.
        f.debug_struct("Keystore")
            .field("file", &self.file)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// A volume's attributes, defaulted, expanded and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    pub issuer: Issuer,
    pub subject: Subject,
    pub dns_names: Vec<String>,
    pub ip_addresses: Vec<IpAddr>,
    pub uris: Vec<String>,
    pub duration: SignedDuration,
    /// `None`: renew at 2/3 of the issued lifetime.
    pub renew_before: Option<SignedDuration>,
    pub is_ca: bool,
    pub usages: Vec<String>,
    pub key: KeySpec,
    pub encoding: Encoding,
    pub reuse_private_key: bool,
    pub files: Files,
    pub fs_group: Option<u32>,
    /// Other keys with a `/` (not kubelet's): the request's annotations, as csi-driver does.
    pub annotations: BTreeMap<String, String>,
}

/// One invalid attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub key: String,
    pub message: String,
}

/// Every invalid attribute of a volume, sorted by key; `Display` is the one message a user sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid volume attributes: {}", join(.0))]
pub struct Invalid(pub Vec<Problem>);

fn join(problems: &[Problem]) -> String {
    let parts: Vec<String> = problems
        .iter()
        .map(|p| format!("{}: {}", p.key, p.message))
        .collect();
    parts.join("; ")
}

mod read;

/// Reads a volume's attributes for `pod`: csi-driver's defaults, then every rule.
pub fn parse(context: &BTreeMap<String, String>, pod: &PodInfo) -> Result<Attributes, Invalid> {
    let mut reader = read::Reader::new(context, pod);
    reader.unknown_keys();
    let attributes = reader.attributes();
    let mut problems = reader.into_problems();
    if problems.is_empty() {
        return Ok(attributes);
    }
    problems.sort_by(|a, b| a.key.cmp(&b.key));
    Err(Invalid(problems))
}

/// Keys with a `/` that are neither kubelet's nor under a prefix we read: the annotations.
fn annotations(context: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    context
        .iter()
        .filter(|(k, _)| {
            k.contains('/')
                && !k.starts_with(KUBELET_PREFIX)
                && !k.starts_with(PREFIX)
                && !k.starts_with(OWN_PREFIX)
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The key usages a value may name (cert-manager's).
fn known_usage(usage: &str) -> bool {
    KEY_USAGES.contains(&usage)
}

/// Whether `kind` is one of ours, when `group` is ours (another group's kinds are its own).
fn kind_problem(group: &str, kind: &str) -> Option<String> {
    match IssuerKind::for_ref(group, kind) {
        Some(Err(kind)) => Some(format!(
            "{kind:?} is not a kind of {GROUP}: use Issuer or ClusterIssuer"
        )),
        _ => None,
    }
}

fn duration(text: &str) -> Result<SignedDuration, String> {
    let parsed = parse_go_duration(text).map_err(|e| e.to_string())?;
    if parsed <= SignedDuration::ZERO {
        return Err(format!("{text:?} is not a positive duration"));
    }
    Ok(parsed)
}

fn literal_subject(text: &str) -> Result<(), String> {
    literal_rdns(text).map(|_| ()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
