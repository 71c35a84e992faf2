//! The file names written into the volume, and the PKCS#12 keystore.

use super::Reader;
use crate::csi::attributes::{Files, Pkcs12, key};

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

impl Reader<'_> {
    fn file(&mut self, key: &'static str, default: &str) -> (&'static str, String) {
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
        let pkcs12 = self.pkcs12();
        let mut named = vec![&certificate, &private_key, &ca];
        named.extend(pkcs12.as_ref().map(|(file, _)| file));
        for (i, (key, name)) in named.iter().enumerate() {
            if let Some((other, _)) = named[..i].iter().find(|(_, n)| n == name) {
                let message = format!("{name:?} is already the file of {other}");
                self.fail(key, message);
            }
        }
        Files {
            certificate: certificate.1,
            private_key: private_key.1,
            ca: ca.1,
            pkcs12: pkcs12.map(|((_, file), password)| Pkcs12 { file, password }),
        }
    }

    /// `pkcs12-enable` as csi-driver reads it: `true` needs a password, the file name defaults
    /// to `keystore.p12`; the other two keys without it are refused.
    fn pkcs12(&mut self) -> Option<((&'static str, String), String)> {
        let password = self.value(key::PKCS12_PASSWORD);
        match self.value(key::PKCS12_ENABLE) {
            Some("true") => {}
            Some("false") => return None,
            Some(other) => {
                self.fail(
                    key::PKCS12_ENABLE,
                    format!("must be \"true\" or \"false\", not {other:?}"),
                );
                return None;
            }
            None => {
                for k in [key::PKCS12_FILENAME, key::PKCS12_PASSWORD] {
                    if self.value(k).is_some() {
                        self.fail(k, "set without pkcs12-enable");
                    }
                }
                return None;
            }
        }
        if password.is_none() {
            self.fail(key::PKCS12_PASSWORD, "required when pkcs12-enable is \"true\"");
        }
        let file = self.file(key::PKCS12_FILENAME, "keystore.p12");
        Some((file, password.unwrap_or_default().to_string()))
    }
}
