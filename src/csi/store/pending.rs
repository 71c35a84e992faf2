//! A volume's issuance in flight: the CertificateRequest's name and the key its CSR was made
//! from, kept in the volume's private directory (beside `metadata.json`, never under `data/`,
//! which is what the pod sees) so a Publish that kubelet retries after a deadline resumes the
//! same request with the same key instead of asking for a second certificate.

use std::fmt;
use std::io::{self, Read};

use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use super::{Store, StoreError, atomic, io_error};

const PENDING: &str = "pending.json";
/// A key of the largest size we generate (RSA 8192) is under 7 KiB of PEM; the rest is a name.
const MAX_PENDING: u64 = 16 * 1024;

/// What a retried Publish needs to resume an issuance.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pending {
    /// The CertificateRequest's name, in the pod's namespace.
    pub request: String,
    /// The private key (PKCS#8 PEM) the request's CSR was signed with.
    pub private_key_pem: String,
    /// When the issuance began: a volume pending for too long is collected (`csi::collect`).
    pub since: jiff::Timestamp,
}

impl fmt::Debug for Pending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key never reaches a log line.
        f.debug_struct("Pending")
            .field("request", &self.request)
            .field("since", &self.since)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// The volume's issuance in flight, if any.
    pub fn pending(&self, id: &str) -> Result<Option<Pending>, StoreError> {
        let path = self.volume_dir(id)?.join(PENDING);
        let file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error("read", &path)(e)),
        };
        let mut bytes = Zeroizing::new(Vec::new());
        file.take(MAX_PENDING + 1)
            .read_to_end(&mut bytes)
            .map_err(io_error("read", &path))?;
        if bytes.len() as u64 > MAX_PENDING {
            return Err(io_error("read", &path)(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("larger than {MAX_PENDING} bytes"),
            )));
        }
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| StoreError::Metadata { path, source })
    }

    /// Records the volume's issuance in flight (0600: it holds a private key).
    pub fn put_pending(&self, id: &str, pending: &Pending) -> Result<(), StoreError> {
        let dir = self.volume_dir(id)?;
        let bytes = Zeroizing::new(
            serde_json::to_vec(pending).map_err(|source| StoreError::Metadata {
                path: dir.join(PENDING),
                source,
            })?,
        );
        atomic::replace_file(&dir, PENDING, &bytes, 0o600)
    }

    /// Forgets the volume's issuance in flight (issued, or given up); none is no error.
    pub fn clear_pending(&self, id: &str) -> Result<(), StoreError> {
        let path = self.volume_dir(id)?.join(PENDING);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_error("remove", &path)(e)),
        }
    }
}
