//! What the server serves: labels, profiles, keys, address, TLS.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A signing profile, as in a cfssl `signing.profiles` entry.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Profile {
    pub name: String,
    /// Go duration as cfssl writes it (`8760h`, `600s`); echoed by `/info`.
    pub expiry: String,
    /// cfssl usage names: `signing`, `key encipherment`, `server auth`, `client auth`, ...
    pub usages: Vec<String>,
    /// Hex HMAC key; `None` means the profile has no auth key (authsign answers 401).
    #[serde(default)]
    pub auth_key: Option<String>,
}

impl Profile {
    pub fn expiry_duration(&self) -> Result<Duration, String> {
        parse_go_duration(&self.expiry)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Config {
    /// `host:port`; port 0 picks a free one.
    pub listen: String,
    /// One intermediate CA per label, all under one root.
    pub labels: Vec<String>,
    /// Used when a request has an empty label (multirootca's `-l`).
    #[serde(default)]
    pub default_label: Option<String>,
    pub profiles: Vec<Profile>,
    #[serde(default)]
    pub tls: bool,
    /// Answer `bundle: true` with the chain and root (cfssl PR #1218); stock multirootca ignores it.
    #[serde(default = "yes")]
    pub bundle_support: bool,
    /// Where to write `root.pem`, one `<label>.pem` per intermediate and `tls-ca.pem`.
    #[serde(default)]
    pub dir: Option<PathBuf>,
}

fn yes() -> bool {
    true
}

impl Config {
    /// The test CA used across the project: labels `intermediate1`/`intermediate2`, profiles
    /// `default`, `server`, `server-short`, `client` keyed with `key_hex`, and `noauth` without a key.
    pub fn test_default(key_hex: &str) -> Config {
        let key = Some(key_hex.to_string());
        let profile = |name: &str, expiry: &str, usages: &[&str], auth_key: Option<String>| Profile {
            name: name.into(),
            expiry: expiry.into(),
            usages: usages.iter().map(|u| u.to_string()).collect(),
            auth_key,
        };
        let server = ["signing", "key encipherment", "server auth"];
        Config {
            listen: "127.0.0.1:0".into(),
            labels: vec!["intermediate1".into(), "intermediate2".into()],
            default_label: None,
            profiles: vec![
                profile(
                    "default",
                    "8760h",
                    &["signing", "key encipherment", "server auth", "client auth"],
                    key.clone(),
                ),
                profile("server", "720h", &server, key.clone()),
                profile("server-short", "600s", &server, key.clone()),
                profile(
                    "client",
                    "720h",
                    &["signing", "key encipherment", "client auth"],
                    key,
                ),
                profile("noauth", "720h", &server, None),
            ],
            tls: false,
            bundle_support: true,
            dir: None,
        }
    }

    pub fn profile(&self, name: &str) -> Option<&Profile> {
        let name = if name.is_empty() { "default" } else { name };
        self.profiles.iter().find(|p| p.name == name)
    }
}

/// Parses the Go durations cfssl configs use: sequences of `<number><h|m|s>`.
pub fn parse_go_duration(text: &str) -> Result<Duration, String> {
    let mut total = 0u64;
    let mut digits = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(format!("bad duration {text:?}")),
        };
        let n: u64 = digits.parse().map_err(|_| format!("bad duration {text:?}"))?;
        total += n * unit;
        digits.clear();
    }
    if !digits.is_empty() || text.is_empty() {
        return Err(format!("bad duration {text:?}"));
    }
    Ok(Duration::from_secs(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        for (text, secs) in [
            ("8760h", 8760 * 3600),
            ("600s", 600),
            ("1h30m", 5400),
            ("2160h0m0s", 7_776_000),
        ] {
            assert_eq!(parse_go_duration(text), Ok(Duration::from_secs(secs)), "{text}");
        }
        for bad in ["", "10", "5d", "h"] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn empty_profile_means_default() {
        let c = Config::test_default("00");
        assert_eq!(c.profile("").unwrap().name, "default");
        assert!(c.profile("nope").is_none());
    }
}
