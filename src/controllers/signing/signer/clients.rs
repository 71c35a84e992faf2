//! One CFSSL client per issuer, reused while neither the issuer's spec nor its Secret changes:
//! a client holds the connection pool, the TLS setup and the cached signer certificate.

use crate::clock::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::cfssl::{Client, ClientConfig, Error};

/// What a client was built from: the issuer's identity and generation, and the Secret version.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fingerprint {
    pub issuer_uid: String,
    pub generation: i64,
    pub secret_version: String,
}

#[derive(Debug, Default)]
pub struct Clients {
    by_issuer: Mutex<HashMap<String, (Fingerprint, Arc<Client>)>>,
}

impl Clients {
    /// The cached client for `issuer` if it was built from `fingerprint`, else a new one from
    /// `config()`, which replaces it.
    pub fn get_or_build(
        &self,
        issuer: &str,
        fingerprint: Fingerprint,
        config: impl FnOnce() -> ClientConfig,
    ) -> Result<Arc<Client>, Error> {
        if let Some(client) = self.get(issuer, &fingerprint) {
            return Ok(client);
        }
        let client = Arc::new(Client::new(config())?);
        lock(&self.by_issuer).insert(issuer.to_string(), (fingerprint, client.clone()));
        Ok(client)
    }

    /// The cached client for `issuer`, if it was built from `fingerprint`.
    pub fn get(&self, issuer: &str, fingerprint: &Fingerprint) -> Option<Arc<Client>> {
        lock(&self.by_issuer)
            .get(issuer)
            .filter(|(fp, _)| fp == fingerprint)
            .map(|(_, client)| client.clone())
    }

    /// Drops the client of a deleted issuer.
    pub fn forget(&self, issuer: &str) {
        lock(&self.by_issuer).remove(issuer);
    }

    /// Keeps only the clients of issuers `keep` accepts.
    pub fn retain(&self, mut keep: impl FnMut(&str) -> bool) {
        lock(&self.by_issuer).retain(|k, _| keep(k));
    }

    pub fn len(&self) -> usize {
        lock(&self.by_issuer).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfssl::AuthKey;

    fn fp(generation: i64, secret: &str) -> Fingerprint {
        Fingerprint {
            issuer_uid: "u1".into(),
            generation,
            secret_version: secret.into(),
        }
    }

    fn config() -> ClientConfig {
        ClientConfig::new("http://127.0.0.1:1", "l", AuthKey::from_hex("00").unwrap())
    }

    #[test]
    fn reuses_until_spec_or_secret_changes() {
        let clients = Clients::default();
        let a = clients.get_or_build("Issuer/ns/a", fp(1, "10"), config).unwrap();
        let again = clients.get_or_build("Issuer/ns/a", fp(1, "10"), config).unwrap();
        assert!(Arc::ptr_eq(&a, &again));
        assert!(Arc::ptr_eq(
            &a,
            &clients.get("Issuer/ns/a", &fp(1, "10")).unwrap()
        ));
        assert!(clients.get("Issuer/ns/a", &fp(1, "11")).is_none());
        assert!(clients.get("Issuer/ns/b", &fp(1, "10")).is_none());
        let new_secret = clients.get_or_build("Issuer/ns/a", fp(1, "11"), config).unwrap();
        assert!(!Arc::ptr_eq(&a, &new_secret));
        let new_spec = clients.get_or_build("Issuer/ns/a", fp(2, "11"), config).unwrap();
        assert!(!Arc::ptr_eq(&new_secret, &new_spec));
        assert_eq!(clients.len(), 1);
        clients.forget("Issuer/ns/a");
        assert!(clients.is_empty());
    }
}
