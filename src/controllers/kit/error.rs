//! The one reconcile error of every controller.

/// What went wrong in a reconcile that the returned `Action` does not already cover: the API
/// server refused a write, a private key could not be made, or pooled crypto work failed. What the CA says, or what a
/// Secret holds, is a condition or an Event, never this.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("writing status of {object}: {source}")]
    WriteStatus {
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("{action} {object}: {source}")]
    Api {
        action: &'static str,
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("generating the private key of {object}: {source}")]
    Key {
        object: String,
        #[source]
        source: crate::pki::keys::KeyError,
    },
    #[error("computing for {object}: {source}")]
    Crypto {
        object: String,
        #[source]
        source: crate::crypto_pool::CryptoError,
    },
}

impl Error {
    /// The error of an API call `action` (e.g. "deleting") on `object`.
    pub fn api(action: &'static str, object: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let object = object.into();
        move |source| Error::Api {
            action,
            object,
            source,
        }
    }
}
