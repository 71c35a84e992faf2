//! The attribute reader: each value defaulted and checked, each problem kept, none stopping
//! the others.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::text::{csv, expand, list};
use super::{
    Attributes, DEFAULT_DURATION, Issuer, OWN_PREFIX, PREFIX, PodInfo, Problem, Subject, SubjectFields,
    annotations, duration, key, kind_problem, known_usage, literal_subject, own,
};
use crate::api::GROUP;
use crate::pki::keys::{Encoding, KeySpec};

mod files;

pub(super) struct Reader<'a> {
    context: &'a BTreeMap<String, String>,
    pod: &'a PodInfo,
    problems: Vec<Problem>,
}

impl<'a> Reader<'a> {
    pub(super) fn new(context: &'a BTreeMap<String, String>, pod: &'a PodInfo) -> Self {
        Self {
            context,
            pod,
            problems: Vec::new(),
        }
    }

    pub(super) fn into_problems(self) -> Vec<Problem> {
        self.problems
    }

    /// A value, empty counting as absent (csi-driver defaults an empty value too).
    fn value(&self, key: &str) -> Option<&'a str> {
        self.context
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    fn fail(&mut self, key: &str, message: impl Into<String>) {
        self.problems.push(Problem {
            key: key.to_string(),
            message: message.into(),
        });
    }

    fn take<T>(&mut self, key: &str, result: Result<T, String>) -> Option<T> {
        result.map_err(|message| self.fail(key, message)).ok()
    }

    /// The value expanded with the pod's variables, or `None` (absent, or a problem kept).
    fn expanded(&mut self, key: &str) -> Option<String> {
        let value = self.value(key)?;
        let result = expand(value, self.pod);
        self.take(key, result)
    }

    pub(super) fn unknown_keys(&mut self) {
        let mut unknown: Vec<&String> = self
            .context
            .keys()
            .filter(|k| {
                (k.starts_with(PREFIX) && !key::ALL.contains(&k.as_str()))
                    || (k.starts_with(OWN_PREFIX) && !own::ALL.contains(&k.as_str()))
            })
            .collect();
        unknown.sort();
        for k in unknown {
            self.fail(k, "not an attribute this driver knows (a typo?)");
        }
    }

    pub(super) fn attributes(&mut self) -> Attributes {
        let key_spec = self.key_spec();
        Attributes {
            issuer: self.issuer(),
            subject: self.subject(),
            dns_names: self.dns_names(),
            ip_addresses: self.ip_addresses(),
            uris: self.uris(),
            duration: self.duration(key::DURATION).unwrap_or(DEFAULT_DURATION),
            renew_before: self.duration(key::RENEW_BEFORE),
            is_ca: self.boolean(key::IS_CA),
            usages: self.usages(),
            encoding: self.encoding(key_spec),
            key: key_spec.unwrap_or(KeySpec::Rsa(2048)),
            reuse_private_key: self.boolean(key::REUSE_PRIVATE_KEY),
            files: self.files(),
            fs_group: self.fs_group(),
            annotations: annotations(self.context),
        }
    }

    fn issuer(&mut self) -> Issuer {
        let name = self.value(key::ISSUER_NAME).unwrap_or_default();
        if name.is_empty() {
            self.fail(key::ISSUER_NAME, "required");
        }
        let kind = self.value(key::ISSUER_KIND).unwrap_or("Issuer");
        let group = self.value(key::ISSUER_GROUP).unwrap_or(GROUP);
        if let Some(message) = kind_problem(group, kind) {
            self.fail(key::ISSUER_KIND, message);
        }
        Issuer {
            name: name.to_string(),
            kind: kind.to_string(),
            group: group.to_string(),
        }
    }

    fn subject(&mut self) -> Subject {
        const FIELDS: [&str; 9] = [
            key::COMMON_NAME,
            key::ORGANIZATIONS,
            key::ORGANIZATIONAL_UNITS,
            key::COUNTRIES,
            key::PROVINCES,
            key::LOCALITIES,
            key::STREET_ADDRESSES,
            key::POSTAL_CODES,
            key::SERIAL_NUMBER,
        ];
        let Some(literal) = self.expanded(key::LITERAL_SUBJECT) else {
            return Subject::Fields(self.subject_fields());
        };
        let checked = literal_subject(&literal);
        self.take(key::LITERAL_SUBJECT, checked);
        // csi-driver ignores these beside a literal subject; a user who set one meant it.
        for field in FIELDS {
            if self.value(field).is_some() {
                self.fail(field, "cannot be set with literal-subject, which replaces it");
            }
        }
        Subject::Literal(literal)
    }

    fn subject_fields(&mut self) -> SubjectFields {
        SubjectFields {
            common_name: self.expanded(key::COMMON_NAME).unwrap_or_default(),
            organizations: self.csv(key::ORGANIZATIONS),
            organizational_units: self.csv(key::ORGANIZATIONAL_UNITS),
            countries: self.csv(key::COUNTRIES),
            provinces: self.csv(key::PROVINCES),
            localities: self.csv(key::LOCALITIES),
            street_addresses: self.csv(key::STREET_ADDRESSES),
            postal_codes: self.csv(key::POSTAL_CODES),
            serial_number: self.value(key::SERIAL_NUMBER).unwrap_or_default().to_string(),
        }
    }

    fn csv(&mut self, key: &str) -> Vec<String> {
        let Some(value) = self.expanded(key) else {
            return Vec::new();
        };
        self.take(key, csv(&value)).unwrap_or_default()
    }

    fn list(&mut self, key: &str, value: Option<String>) -> Vec<String> {
        let Some(value) = value else { return Vec::new() };
        self.take(key, list(&value)).unwrap_or_default()
    }

    fn dns_names(&mut self) -> Vec<String> {
        let value = self.expanded(key::DNS_NAMES);
        self.list(key::DNS_NAMES, value)
    }

    /// Not expanded, as in csi-driver: no pod variable is an IP address.
    fn ip_addresses(&mut self) -> Vec<IpAddr> {
        let value = self.value(key::IP_SANS).map(str::to_string);
        let items = self.list(key::IP_SANS, value);
        let (good, bad): (Vec<_>, Vec<_>) = items
            .iter()
            .map(|s| (s, s.parse::<IpAddr>()))
            .partition(|(_, p)| p.is_ok());
        if !bad.is_empty() {
            let names: Vec<String> = bad.iter().map(|(s, _)| format!("{s:?}")).collect();
            self.fail(key::IP_SANS, format!("not an IP address: {}", names.join(", ")));
        }
        good.into_iter().filter_map(|(_, p)| p.ok()).collect()
    }

    fn uris(&mut self) -> Vec<String> {
        let value = self.expanded(key::URI_SANS);
        let items = self.list(key::URI_SANS, value);
        let bad: Vec<String> = items
            .iter()
            .filter(|u| !is_uri(u))
            .map(|u| format!("{u:?}"))
            .collect();
        if !bad.is_empty() {
            self.fail(key::URI_SANS, format!("not an absolute URI: {}", bad.join(", ")));
        }
        items
    }

    fn duration(&mut self, key: &str) -> Option<jiff::SignedDuration> {
        let value = self.value(key)?;
        self.take(key, duration(value))
    }

    /// Only `true` and `false`, as csi-driver: `yes` or `True` are typos, not a choice.
    fn boolean(&mut self, key: &str) -> bool {
        match self.value(key) {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                self.fail(key, format!("must be \"true\" or \"false\", not {other:?}"));
                false
            }
        }
    }

    fn usages(&mut self) -> Vec<String> {
        let value = self
            .value(key::KEY_USAGES)
            .unwrap_or("digital signature,key encipherment");
        let usages = self.list(key::KEY_USAGES, Some(value.to_string()));
        let unknown: Vec<String> = usages
            .iter()
            .filter(|u| !known_usage(u))
            .map(|u| format!("{u:?}"))
            .collect();
        if !unknown.is_empty() {
            self.fail(
                key::KEY_USAGES,
                format!("not a key usage: {}", unknown.join(", ")),
            );
        }
        usages
    }

    fn key_spec(&mut self) -> Option<KeySpec> {
        let algorithm = self.value(key::KEY_ALGORITHM).unwrap_or("RSA");
        let size = self.value(key::KEY_SIZE);
        let spec = match algorithm.to_ascii_lowercase().as_str() {
            "rsa" => key_size(size, 2048).and_then(rsa),
            "ecdsa" => key_size(size, 256).and_then(ecdsa),
            "ed25519" => match size {
                None => Ok(KeySpec::Ed25519),
                Some(_) => Err("must be empty for an Ed25519 key".to_string()),
            },
            _ => {
                let message = format!("{algorithm:?} is not RSA, ECDSA or Ed25519");
                self.fail(key::KEY_ALGORITHM, message);
                return None;
            }
        };
        self.take(key::KEY_SIZE, spec)
    }

    /// PKCS1 by default for RSA, PKCS8 otherwise, as csi-driver; case-insensitive.
    fn encoding(&mut self, spec: Option<KeySpec>) -> Encoding {
        let rsa = matches!(spec, Some(KeySpec::Rsa(_)));
        let value = self.value(key::KEY_ENCODING);
        let encoding = match value.map(str::to_ascii_lowercase).as_deref() {
            None => return if rsa { Encoding::Pkcs1 } else { Encoding::Pkcs8 },
            Some("pkcs1") => Encoding::Pkcs1,
            Some("pkcs8") => return Encoding::Pkcs8,
            Some(_) => {
                let other = value.unwrap_or_default();
                self.fail(key::KEY_ENCODING, format!("{other:?} is not PKCS1 or PKCS8"));
                return Encoding::Pkcs8;
            }
        };
        if let Some(spec) = spec.filter(|_| !rsa) {
            let message = format!("PKCS1 is for RSA keys; a {} key is PKCS8", spec.algorithm());
            self.fail(key::KEY_ENCODING, message);
        }
        encoding
    }

    fn fs_group(&mut self) -> Option<u32> {
        let value = self.value(key::FS_GROUP)?;
        let parsed = match value.parse::<u32>() {
            Ok(gid) if gid > 0 => Ok(gid),
            _ => Err(format!("{value:?} is not a group ID from 1 to 4294967295")),
        };
        self.take(key::FS_GROUP, parsed)
    }
}

/// An absolute URI: a scheme (a letter, then letters, digits, `+`, `-`, `.`), a colon and
/// no whitespace; what Go's `url.ParseRequestURI` accepts of a SAN, bar relative paths.
fn is_uri(text: &str) -> bool {
    let Some((scheme, rest)) = text.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        && !rest.is_empty()
        && !text.chars().any(char::is_whitespace)
}

fn key_size(size: Option<&str>, default: u32) -> Result<u32, String> {
    match size {
        None => Ok(default),
        Some(text) => text
            .parse()
            .map_err(|_| format!("{text:?} is not a number of bits")),
    }
}

fn rsa(bits: u32) -> Result<KeySpec, String> {
    if !(2048..=8192).contains(&bits) {
        return Err(format!("an RSA key is 2048 to 8192 bits, not {bits}"));
    }
    let spec = KeySpec::Rsa(bits);
    spec.can_generate().map_err(|e| e.to_string())?;
    Ok(spec)
}

fn ecdsa(bits: u32) -> Result<KeySpec, String> {
    match bits {
        256 | 384 | 521 => Ok(KeySpec::Ecdsa(bits)),
        _ => Err(format!("an ECDSA key is 256, 384 or 521 bits, not {bits}")),
    }
}
