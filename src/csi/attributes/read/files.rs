//! The file names written into the volume, its keystores (PKCS#12, JKS) and its bundle.

use super::Reader;
use crate::csi::attributes::{Files, Keystore, key, own};
use crate::pki::keystore::Pkcs12Profile;

/// Why `name` cannot be a file of the volume, if it cannot: one plain name, since each is a
/// symlink beside the `..data` the store swaps.
fn file_name_problem(name: &str) -> Option<&'static str> {
    if name.starts_with('/') {
        Some("must be a file name, not an absolute path")
    } else if name.contains('/') {
        Some("must be a file name without '/'")
    } else if name.starts_with("..") {
        Some("must not start with '..' (the store's own names)")
    } else if name.len() > 255 {
        Some("must be at most 255 bytes")
    } else if name.trim() != name {
        Some("must not start or end with spaces")
    } else {
        None
    }
}

/// The three keys of a keystore and its default file name.
struct KeystoreKeys {
    enable: &'static str,
    filename: &'static str,
    password: &'static str,
    default_file: &'static str,
}

const PKCS12: KeystoreKeys = KeystoreKeys {
    enable: key::PKCS12_ENABLE,
    filename: key::PKCS12_FILENAME,
    password: key::PKCS12_PASSWORD,
    default_file: "keystore.p12",
};

const JKS: KeystoreKeys = KeystoreKeys {
    enable: own::JKS_ENABLE,
    filename: own::JKS_FILENAME,
    password: own::JKS_PASSWORD,
    default_file: "keystore.jks",
};

type Named = (&'static str, String);

impl Reader<'_> {
    fn file(&mut self, key: &'static str, default: &str) -> Named {
        let name = self.value(key).unwrap_or(default);
        if let Some(problem) = file_name_problem(name) {
            self.fail(key, format!("{name:?} {problem}"));
        }
        (key, name.to_string())
    }

    pub(super) fn files(&mut self) -> Files {
        let certificate = self.file(key::CERTIFICATE_FILE, "tls.crt");
        let private_key = self.file(key::PRIVATE_KEY_FILE, "tls.key");
        let ca = self.file(key::CA_FILE, "ca.crt");
        let pkcs12 = self.keystore(&PKCS12);
        let pkcs12_profile = self.pkcs12_profile(pkcs12.is_some());
        let jks = self.keystore(&JKS);
        let bundle = self
            .value(own::BUNDLE_FILE)
            .map(|_| self.file(own::BUNDLE_FILE, ""));
        let mut named = vec![&certificate, &private_key, &ca];
        named.extend(pkcs12.as_ref().map(|(file, _)| file));
        named.extend(jks.as_ref().map(|(file, _)| file));
        named.extend(bundle.as_ref());
        for (i, (key, name)) in named.iter().enumerate() {
            if let Some((other, _)) = named[..i].iter().find(|(_, n)| n == name) {
                let message = format!("{name:?} is already the file of {other}");
                self.fail(key, message);
            }
        }
        let keystore =
            |k: Option<(Named, String)>| k.map(|((_, file), password)| Keystore { file, password });
        Files {
            certificate: certificate.1,
            private_key: private_key.1,
            ca: ca.1,
            pkcs12: keystore(pkcs12),
            pkcs12_profile,
            jks: keystore(jks),
            bundle: bundle.map(|(_, name)| name),
        }
    }

    /// A keystore read as csi-driver reads `pkcs12-enable`: `true` needs a password, the file
    /// name has a default; the other two keys without it are refused.
    fn keystore(&mut self, keys: &KeystoreKeys) -> Option<(Named, String)> {
        let password = self.value(keys.password);
        match self.value(keys.enable) {
            Some("true") => {}
            Some("false") => return None,
            Some(other) => {
                self.fail(
                    keys.enable,
                    format!("must be \"true\" or \"false\", not {other:?}"),
                );
                return None;
            }
            None => {
                for k in [keys.filename, keys.password] {
                    if self.value(k).is_some() {
                        let enable = keys.enable.rsplit('/').next().unwrap_or(keys.enable);
                        self.fail(k, format!("set without {enable}"));
                    }
                }
                return None;
            }
        }
        if password.is_none() {
            let enable = keys.enable.rsplit('/').next().unwrap_or(keys.enable);
            self.fail(keys.password, format!("required when {enable} is \"true\""));
        }
        let file = self.file(keys.filename, keys.default_file);
        Some((file, password.unwrap_or_default().to_string()))
    }

    fn pkcs12_profile(&mut self, enabled: bool) -> Pkcs12Profile {
        let Some(name) = self.value(own::PKCS12_PROFILE) else {
            return Pkcs12Profile::LegacyRc2;
        };
        if !enabled {
            self.fail(own::PKCS12_PROFILE, "set without pkcs12-enable");
        }
        let parsed = Pkcs12Profile::parse(Some(name)).map_err(|e| e.to_string());
        self.take(own::PKCS12_PROFILE, parsed)
            .unwrap_or(Pkcs12Profile::LegacyRc2)
    }
}
