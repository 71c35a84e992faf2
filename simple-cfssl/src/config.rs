//! What the server serves: listen address, labels, profiles and their keys, TLS, bundles.
//!
//! [`Config`] is plain data (serde, YAML or JSON); [`Config::validate`] turns it into the
//! [`Policy`] the handlers use, so a bad expiry, usage or key fails at start, not per request.
//! `simple-cfssl --print-config` prints the test default; a smaller file:
//!
//! ```yaml
//! listen: 0.0.0.0:8888
//! labels: [intermediate1, {name: prod, cert: /ca/prod.pem, key: /ca/prod-key.pem}]
//! root: {cert: /ca/root.pem, key: /ca/root-key.pem}
//! profiles:
//!   - {name: default, expiry: 8760h, usages: [signing, key encipherment, server auth], auth_key: "00ff"}
//!   - {name: open, expiry: 1h, usages: [server auth]}   # no key: authsign answers 401
//! tls: true
//! tls_hosts: [api.simple-cfssl.svc.cluster.local, 127.0.0.1, localhost]
//! dir: /out
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use rcgen::{ExtendedKeyUsagePurpose, KeyUsagePurpose};
use serde::{Deserialize, Serialize};

use crate::auth::AuthKey;

/// The profile used when a request names none, as cfssl's `signing.default`.
pub const DEFAULT_PROFILE: &str = "default";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `host:port`; port 0 picks a free one.
    #[serde(default = "default_listen")]
    pub listen: String,
    /// One intermediate CA per label, each signed by the root.
    pub labels: Vec<Label>,
    /// Used when a request has an empty label (multirootca's `-l`); none by default.
    #[serde(default)]
    pub default_label: Option<String>,
    /// Signing profiles; one must be named `default`.
    pub profiles: Vec<Profile>,
    /// Load the root from PEM files instead of generating one.
    #[serde(default)]
    pub root: Option<RootFiles>,
    /// Serve HTTPS with a certificate from a separate, generated TLS CA.
    #[serde(default)]
    pub tls: bool,
    /// Names (DNS or IP) in the TLS server certificate.
    #[serde(default = "default_tls_hosts")]
    pub tls_hosts: Vec<String>,
    /// Answer `bundle: true` with the chain and root, as the wmf fork (cfssl PR #1218) does;
    /// `false` ignores the field, as stock multirootca does.
    #[serde(default = "yes")]
    pub bundle_support: bool,
    /// Where to write `root.pem`, `tls-ca.pem` and `labels/<label>.pem`.
    #[serde(default)]
    pub dir: Option<PathBuf>,
}

/// A signer label: an intermediate generated at start, or loaded from PEM files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "LabelSpec")]
pub struct Label {
    pub name: String,
    /// The label's CA certificate first, then any certificates between it and the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<PathBuf>,
    /// Its private key: PKCS#8, SEC1 (`EC PRIVATE KEY`, as cfssl writes) or PKCS#1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<PathBuf>,
}

/// A label is written either as its bare name or as a table with files.
#[derive(Deserialize)]
#[serde(untagged)]
enum LabelSpec {
    Name(String),
    Files {
        name: String,
        #[serde(default)]
        cert: Option<PathBuf>,
        #[serde(default)]
        key: Option<PathBuf>,
    },
}

impl From<LabelSpec> for Label {
    fn from(spec: LabelSpec) -> Label {
        match spec {
            LabelSpec::Name(name) => Label::generated(name),
            LabelSpec::Files { name, cert, key } => Label { name, cert, key },
        }
    }
}

impl Label {
    pub fn generated(name: impl Into<String>) -> Label {
        Label {
            name: name.into(),
            cert: None,
            key: None,
        }
    }
}

impl From<&str> for Label {
    fn from(name: &str) -> Label {
        Label::generated(name)
    }
}

/// A root CA from PEM files. The key is only needed to generate intermediates under it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RootFiles {
    pub cert: PathBuf,
    #[serde(default)]
    pub key: Option<PathBuf>,
}

/// A signing profile, as a cfssl `signing.profiles` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// `default` is cfssl's `signing.default`: used when a request names no profile. As with
    /// multirootca, naming it explicitly is an `invalid profile`.
    pub name: String,
    /// A Go duration (`8760h`, `600s`, `1h30m`); `/info` echoes it as written.
    pub expiry: String,
    /// cfssl usage names: `signing`, `key encipherment`, `server auth`, `client auth`, ...
    pub usages: Vec<String>,
    /// Hex HMAC key; without one, authsign answers 401 `authorisation required`.
    #[serde(default)]
    pub auth_key: Option<String>,
    /// Bytes appended to the HMAC input (the issuer Secret's `additional_data`). Stock
    /// multirootca has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_data: Option<String>,
    /// cfssl's `backdate`: a Go duration subtracted from the rounded signing minute to give
    /// `notBefore`. Absent or zero means cfssl's default of five minutes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backdate: Option<String>,
}

fn default_listen() -> String {
    "127.0.0.1:0".into()
}

fn default_tls_hosts() -> Vec<String> {
    vec!["127.0.0.1".into(), "localhost".into()]
}

fn yes() -> bool {
    true
}

impl Profile {
    pub fn new(name: &str, expiry: &str, usages: &[&str], auth_key: Option<&str>) -> Profile {
        Profile {
            name: name.into(),
            expiry: expiry.into(),
            usages: usages.iter().map(|u| u.to_string()).collect(),
            auth_key: auth_key.map(str::to_string),
            additional_data: None,
            backdate: None,
        }
    }

    /// The same profile with cfssl's `backdate` set (a Go duration).
    pub fn with_backdate(mut self, backdate: &str) -> Profile {
        self.backdate = Some(backdate.into());
        self
    }
}

impl Config {
    /// The test CA used across the project, shaped like `scripts/multirootca-lab.sh`: labels
    /// `intermediate1` and `intermediate2`; profiles `default` (8760h), `server` (720h),
    /// `server-short` (600s) and `client` (720h, client auth) keyed with `key_hex`, and
    /// `noauth` without a key.
    pub fn test_default(key_hex: &str) -> Config {
        let key = Some(key_hex);
        let server = ["signing", "key encipherment", "server auth"];
        Config {
            listen: default_listen(),
            labels: vec!["intermediate1".into(), "intermediate2".into()],
            default_label: None,
            profiles: vec![
                Profile::new(
                    DEFAULT_PROFILE,
                    "8760h",
                    &["signing", "key encipherment", "server auth", "client auth"],
                    key,
                ),
                Profile::new("server", "720h", &server, key),
                Profile::new("server-short", "600s", &server, key),
                // Renews within about a minute: `notBefore` is the rounded minute less 31 s (so
                // in the past whatever the rounding, which moves it up to 30 s either way), and
                // two thirds of 105 s later comes the renewal, 9 to 69 s after signing.
                Profile::new("renewing", "105s", &server, key).with_backdate("31s"),
                // As `renewing`, with room for CFSSL's minute rounding: at least 89 s left at
                // signing, more than 6/5 of the 60 s floor between renewals, so every
                // certificate renews in its window (bench-csi's renewal phase).
                Profile::new("renewing-150s", "150s", &server, key).with_backdate("31s"),
                Profile::new(
                    "client",
                    "720h",
                    &["signing", "key encipherment", "client auth"],
                    key,
                ),
                Profile::new("noauth", "720h", &server, None),
            ],
            root: None,
            tls: false,
            tls_hosts: default_tls_hosts(),
            bundle_support: true,
            dir: None,
        }
    }

    /// Reads a config file: JSON when the name ends in `.json`, YAML otherwise.
    pub fn load(path: &Path) -> anyhow::Result<Config> {
        let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
        let parsed = match path.extension().and_then(|e| e.to_str()) {
            Some("json") => serde_json::from_str(&text).map_err(anyhow::Error::from),
            _ => serde_saphyr::from_str(&text).map_err(anyhow::Error::from),
        };
        parsed.with_context(|| format!("parse {}", path.display()))
    }

    /// Checks everything that can be checked without touching files.
    pub fn validate(&self) -> Result<Policy, ConfigError> {
        let mut labels = Vec::new();
        for label in &self.labels {
            check_label_name(&label.name)?;
            if labels.contains(&label.name) {
                return Err(ConfigError::DuplicateLabel(label.name.clone()));
            }
            if label.cert.is_some() != label.key.is_some() {
                return Err(ConfigError::LabelFiles(label.name.clone()));
            }
            if label.cert.is_some() && self.root.is_none() {
                return Err(ConfigError::LoadedLabelWithoutRoot(label.name.clone()));
            }
            labels.push(label.name.clone());
        }
        if labels.is_empty() {
            return Err(ConfigError::NoLabels);
        }
        if let Some(default) = &self.default_label
            && !labels.contains(default)
        {
            return Err(ConfigError::UnknownDefaultLabel(default.clone()));
        }
        let mut profiles = BTreeMap::new();
        for profile in &self.profiles {
            let checked = ProfilePolicy::new(profile)?;
            if profiles.insert(profile.name.clone(), checked).is_some() {
                return Err(ConfigError::DuplicateProfile(profile.name.clone()));
            }
        }
        if !profiles.contains_key(DEFAULT_PROFILE) {
            return Err(ConfigError::NoDefaultProfile);
        }
        Ok(Policy {
            default_label: self.default_label.clone().unwrap_or_default(),
            profiles,
            bundle_support: self.bundle_support,
        })
    }
}

/// Label names become file names under `labels/`.
fn check_label_name(name: &str) -> Result<(), ConfigError> {
    let ok = !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(ConfigError::BadLabelName(name.to_string()))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("no labels configured")]
    NoLabels,
    #[error("label {0:?}: use letters, digits, '.', '_' and '-' only")]
    BadLabelName(String),
    #[error("label {0:?} is configured twice")]
    DuplicateLabel(String),
    #[error("label {0:?}: give both cert and key, or neither")]
    LabelFiles(String),
    #[error("label {0:?} is loaded from files, so the root must be too (config `root`)")]
    LoadedLabelWithoutRoot(String),
    #[error("default label {0:?} is not a configured label")]
    UnknownDefaultLabel(String),
    #[error("profile {0:?} is configured twice")]
    DuplicateProfile(String),
    #[error("no profile named \"default\" (the one used when a request names none)")]
    NoDefaultProfile,
    #[error("profile {profile:?}: expiry {expiry:?} is not a positive Go duration")]
    Expiry { profile: String, expiry: String },
    #[error("profile {profile:?}: backdate {backdate:?} is not a Go duration")]
    Backdate { profile: String, backdate: String },
    #[error("profile {profile:?}: unknown usage {usage:?}")]
    Usage { profile: String, usage: String },
    /// The key itself is never echoed.
    #[error("profile {0:?}: auth_key is not hex")]
    AuthKey(String),
}

/// The checked configuration the handlers consult; what [`Config::validate`] returns.
#[derive(Debug)]
pub struct Policy {
    /// Empty when no default label is configured.
    pub(crate) default_label: String,
    pub(crate) profiles: BTreeMap<String, ProfilePolicy>,
    pub(crate) bundle_support: bool,
}

impl Policy {
    /// The profile for a sign request: empty means `default`; `default` by name is unknown,
    /// as with multirootca.
    pub(crate) fn sign_profile(&self, name: &str) -> Option<&ProfilePolicy> {
        match name {
            "" => self.profiles.get(DEFAULT_PROFILE),
            DEFAULT_PROFILE => None,
            name => self.profiles.get(name),
        }
    }

    /// The profile `/info` describes: an unknown name falls back to `default`, as multirootca does.
    pub(crate) fn info_profile(&self, name: &str) -> Option<&ProfilePolicy> {
        self.profiles
            .get(name)
            .or_else(|| self.profiles.get(DEFAULT_PROFILE))
    }

    /// An empty label means the default label.
    pub(crate) fn label<'a>(&'a self, requested: &'a str) -> &'a str {
        if requested.is_empty() {
            &self.default_label
        } else {
            requested
        }
    }
}

#[derive(Debug)]
pub struct ProfilePolicy {
    /// As configured, for `/info`.
    pub(crate) expiry_text: String,
    pub(crate) expiry: Duration,
    /// How far `notBefore` lies before the rounded signing minute.
    pub(crate) backdate: Duration,
    pub(crate) usage_names: Vec<String>,
    pub(crate) key_usages: Vec<KeyUsagePurpose>,
    pub(crate) extended_key_usages: Vec<ExtendedKeyUsagePurpose>,
    pub(crate) auth: Option<AuthKey>,
}

impl ProfilePolicy {
    fn new(profile: &Profile) -> Result<ProfilePolicy, ConfigError> {
        let expiry = parse_go_duration(&profile.expiry)
            .filter(|d| !d.is_zero())
            .ok_or_else(|| ConfigError::Expiry {
                profile: profile.name.clone(),
                expiry: profile.expiry.clone(),
            })?;
        let backdate = backdate_of(profile)?;
        let mut key_usages = Vec::new();
        let mut extended_key_usages = Vec::new();
        for usage in &profile.usages {
            match usage_of(usage) {
                Some(Usage::Key(ku)) => key_usages.push(ku),
                Some(Usage::Extended(eku)) => extended_key_usages.push(eku),
                None => {
                    return Err(ConfigError::Usage {
                        profile: profile.name.clone(),
                        usage: usage.clone(),
                    });
                }
            }
        }
        let auth = match &profile.auth_key {
            None => None,
            Some(hex_key) => {
                let ad = profile.additional_data.clone().unwrap_or_default();
                let key = AuthKey::from_hex(hex_key, ad.into_bytes())
                    .map_err(|_| ConfigError::AuthKey(profile.name.clone()))?;
                Some(key)
            }
        };
        Ok(ProfilePolicy {
            expiry_text: profile.expiry.clone(),
            expiry,
            backdate,
            usage_names: profile.usages.clone(),
            key_usages,
            extended_key_usages,
            auth,
        })
    }
}

/// cfssl's default backdate, used when a profile sets none or zero.
pub const DEFAULT_BACKDATE: Duration = Duration::from_secs(5 * 60);

/// A profile's `backdate`, as cfssl reads it: absent or zero is the five-minute default.
fn backdate_of(profile: &Profile) -> Result<Duration, ConfigError> {
    let Some(text) = &profile.backdate else {
        return Ok(DEFAULT_BACKDATE);
    };
    let backdate = parse_go_duration(text).ok_or_else(|| ConfigError::Backdate {
        profile: profile.name.clone(),
        backdate: text.clone(),
    })?;
    Ok(if backdate.is_zero() {
        DEFAULT_BACKDATE
    } else {
        backdate
    })
}

enum Usage {
    Key(KeyUsagePurpose),
    Extended(ExtendedKeyUsagePurpose),
}

/// cfssl's usage vocabulary.
fn usage_of(name: &str) -> Option<Usage> {
    use ExtendedKeyUsagePurpose as E;
    use KeyUsagePurpose as K;
    let key = |k| Some(Usage::Key(k));
    let extended = |e| Some(Usage::Extended(e));
    match name {
        "signing" | "digital signature" => key(K::DigitalSignature),
        "content commitment" => key(K::ContentCommitment),
        "key encipherment" => key(K::KeyEncipherment),
        "key agreement" => key(K::KeyAgreement),
        "data encipherment" => key(K::DataEncipherment),
        "cert sign" => key(K::KeyCertSign),
        "crl sign" => key(K::CrlSign),
        "encipher only" => key(K::EncipherOnly),
        "decipher only" => key(K::DecipherOnly),
        "any" => extended(E::Any),
        "server auth" => extended(E::ServerAuth),
        "client auth" => extended(E::ClientAuth),
        "code signing" => extended(E::CodeSigning),
        "email protection" | "s/mime" => extended(E::EmailProtection),
        "ipsec end system" => extended(E::Other(vec![1, 3, 6, 1, 5, 5, 7, 3, 5])),
        "ipsec tunnel" => extended(E::Other(vec![1, 3, 6, 1, 5, 5, 7, 3, 6])),
        "ipsec user" => extended(E::Other(vec![1, 3, 6, 1, 5, 5, 7, 3, 7])),
        "timestamping" => extended(E::TimeStamping),
        "ocsp signing" => extended(E::OcspSigning),
        "microsoft sgc" => extended(E::Other(vec![1, 3, 6, 1, 4, 1, 311, 10, 3, 3])),
        "netscape sgc" => extended(E::Other(vec![2, 16, 840, 1, 113_730, 4, 1])),
        _ => None,
    }
}

/// Parses a Go duration (`time.ParseDuration`): signed sequences of decimal numbers with units
/// `ns`, `us`, `µs`, `ms`, `s`, `m`, `h`. Negative durations are `None`.
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    let rest = text.strip_prefix('+').unwrap_or(text);
    if rest.starts_with('-') {
        return None;
    }
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = rest;
    let mut nanos: u128 = 0;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let whole_end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let (whole, after) = rest.split_at(whole_end);
        let (fraction, after) = match after.strip_prefix('.') {
            Some(after) => {
                let end = after.find(|c: char| !c.is_ascii_digit()).unwrap_or(after.len());
                after.split_at(end)
            }
            None => ("", after),
        };
        if whole.is_empty() && fraction.is_empty() {
            return None;
        }
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_end);
        let scale: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        let whole: u128 = if whole.is_empty() { 0 } else { whole.parse().ok()? };
        nanos = nanos.checked_add(whole.checked_mul(scale)?)?;
        if !fraction.is_empty() {
            let digits = fraction.len().min(30) as u32;
            let numerator: u128 = fraction[..digits as usize].parse().ok()?;
            nanos = nanos.checked_add(numerator.checked_mul(scale)? / 10u128.pow(digits))?;
        }
        rest = after;
    }
    let secs = u64::try_from(nanos / 1_000_000_000).ok()?;
    Some(Duration::new(secs, (nanos % 1_000_000_000) as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        for (text, want) in [
            ("8760h", Duration::from_secs(8760 * 3600)),
            ("600s", Duration::from_secs(600)),
            ("1h30m", Duration::from_secs(5400)),
            ("2160h0m0s", Duration::from_secs(7_776_000)),
            ("1.5h", Duration::from_secs(5400)),
            ("+10m", Duration::from_secs(600)),
            ("250ms", Duration::from_millis(250)),
            ("3µs", Duration::from_micros(3)),
            ("0", Duration::ZERO),
        ] {
            assert_eq!(parse_go_duration(text), Some(want), "{text}");
        }
        for bad in ["", "10", "5d", "h", "-1h", ".h", "1h-5m", "1.2.3s"] {
            assert_eq!(parse_go_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn test_default_is_valid() {
        let policy = Config::test_default("00ff").validate().unwrap();
        assert_eq!(
            policy.profiles.keys().collect::<Vec<_>>(),
            [
                "client",
                "default",
                "noauth",
                "renewing",
                "renewing-150s",
                "server",
                "server-short"
            ]
        );
        assert_eq!(policy.profiles["renewing"].expiry, Duration::from_secs(105));
        assert_eq!(policy.profiles["renewing"].backdate, Duration::from_secs(31));
        assert_eq!(policy.profiles["renewing-150s"].expiry, Duration::from_secs(150));
        assert_eq!(policy.profiles["renewing-150s"].backdate, Duration::from_secs(31));
        assert_eq!(policy.profiles["server"].backdate, DEFAULT_BACKDATE);
        assert!(policy.profiles["noauth"].auth.is_none());
        assert_eq!(policy.profiles["server-short"].expiry, Duration::from_secs(600));
        assert_eq!(
            policy.profiles["default"].extended_key_usages,
            [
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth
            ]
        );
    }

    #[test]
    fn profile_lookup_follows_multirootca() {
        let policy = Config::test_default("00").validate().unwrap();
        let expiry = |p: Option<&ProfilePolicy>| p.map(|p| p.expiry_text.clone());
        assert_eq!(expiry(policy.sign_profile("")), Some("8760h".into()));
        assert_eq!(expiry(policy.sign_profile("server")), Some("720h".into()));
        assert_eq!(expiry(policy.sign_profile("default")), None);
        assert_eq!(expiry(policy.sign_profile("nope")), None);
        assert_eq!(expiry(policy.info_profile("nope")), Some("8760h".into()));
        assert_eq!(expiry(policy.info_profile("server")), Some("720h".into()));
    }

    #[test]
    fn bad_configs_are_refused_at_start() {
        let base = || Config::test_default("00");
        let refuse = |change: &dyn Fn(&mut Config)| {
            let mut c = base();
            change(&mut c);
            c.validate().unwrap_err()
        };
        assert_eq!(refuse(&|c| c.labels.clear()), ConfigError::NoLabels);
        assert_eq!(
            refuse(&|c| c.labels.push("../x".into())),
            ConfigError::BadLabelName("../x".into())
        );
        assert_eq!(
            refuse(&|c| c.labels.push("intermediate1".into())),
            ConfigError::DuplicateLabel("intermediate1".into())
        );
        assert_eq!(
            refuse(&|c| c.default_label = Some("nope".into())),
            ConfigError::UnknownDefaultLabel("nope".into())
        );
        assert_eq!(
            refuse(&|c| drop(c.profiles.remove(0))),
            ConfigError::NoDefaultProfile
        );
        assert!(matches!(
            refuse(&|c| c.profiles[1].expiry = "5d".into()),
            ConfigError::Expiry { .. }
        ));
        assert!(matches!(
            refuse(&|c| c.profiles[1].usages.push("flying".into())),
            ConfigError::Usage { .. }
        ));
        assert_eq!(
            refuse(&|c| c.profiles[1].backdate = Some("-1s".into())),
            ConfigError::Backdate {
                profile: "server".into(),
                backdate: "-1s".into()
            }
        );
        let err = refuse(&|c| c.profiles[1].auth_key = Some("secretzz".into()));
        assert_eq!(err, ConfigError::AuthKey("server".into()));
        assert!(!err.to_string().contains("secretzz"));
        assert!(matches!(
            refuse(&|c| c.labels.push(Label {
                name: "x".into(),
                cert: Some("a".into()),
                key: Some("b".into())
            })),
            ConfigError::LoadedLabelWithoutRoot(_)
        ));
    }

    #[test]
    fn backdate_reads_as_cfssl_does() {
        let table = [
            (None, Ok(DEFAULT_BACKDATE)),
            (Some("0"), Ok(DEFAULT_BACKDATE)),
            (Some("0s"), Ok(DEFAULT_BACKDATE)),
            (Some("1s"), Ok(Duration::from_secs(1))),
            (Some("1m30s"), Ok(Duration::from_secs(90))),
            (Some("500ms"), Ok(Duration::from_millis(500))),
            (Some("5d"), Err(())),
            (Some("-1s"), Err(())),
        ];
        for (backdate, want) in table {
            let mut profile = Profile::new("p", "1h", &["signing"], None);
            profile.backdate = backdate.map(str::to_string);
            let got = backdate_of(&profile).map_err(|e| {
                assert!(matches!(e, ConfigError::Backdate { .. }), "{e}");
            });
            assert_eq!(got, want, "{backdate:?}");
        }
    }

    #[test]
    fn reads_yaml_and_json() {
        let yaml = r#"
listen: 0.0.0.0:8888
labels: [a, {name: b, cert: /b.pem, key: /b-key.pem}]
root: {cert: /root.pem}
profiles:
  - {name: default, expiry: 8760h, usages: [signing, server auth], auth_key: "00ff"}
tls: true
"#;
        let config: Config = serde_saphyr::from_str(yaml).unwrap();
        assert_eq!(config.labels[0], Label::generated("a"));
        assert_eq!(
            config.labels[1].key.as_deref(),
            Some(std::path::Path::new("/b-key.pem"))
        );
        assert!(config.bundle_support && config.tls);
        assert_eq!(config.tls_hosts, ["127.0.0.1", "localhost"]);
        config.validate().unwrap();
        let json = serde_json::to_string(&Config::test_default("00")).unwrap();
        let back: Config = serde_json::from_str(&json).unwrap();
        assert_eq!(back, Config::test_default("00"));
    }
}
