//! The volume store: one directory per volume under the store's root, holding its metadata
//! and the data directory that is mounted (read-only) onto kubelet's target.
//!
//! ```text
//! <root>/<volume id>/metadata.json          csi-lib's fields; never a service-account token
//! <root>/<volume id>/pending.json           an issuance in flight: request name and key (0600)
//! <root>/<volume id>/data/..2026_11_27_...   the files of one issuance (0440)
//! <root>/<volume id>/data/..data            -> the current one, swapped by rename
//! <root>/<volume id>/data/tls.crt           -> ..data/tls.crt
//! ```
//!
//! The data directory is written as kubelet's atomic writer writes a projected volume: a
//! reader that resolves `..data` once sees one issuance's files, never a mix.

mod atomic;
mod metadata;
mod pending;

use std::io;
use std::path::{Path, PathBuf};

pub use atomic::{DATA_LINK, File};
pub use metadata::{Metadata, TOKENS_KEY};
pub use pending::Pending;

/// How a volume's data directory reaches kubelet's target. The real one (tmpfs, read-only
/// bind mounts, `/proc/self/mountinfo`) is the node's; tests use a fake.
pub trait Mounter: Send + Sync + 'static {
    /// Makes `source` visible, read-only, at `target` (which kubelet's parent directory holds).
    fn mount(&self, source: &Path, target: &Path) -> io::Result<()>;
    /// Undoes [`Mounter::mount`], every mount on `target` and the directory itself (Unpublish
    /// is "unmount and remove the target"); a target not mounted, or gone, is not an error.
    fn unmount(&self, target: &Path) -> io::Result<()>;
    /// Whether `source` is what [`Mounter::mount`] made visible at `target`.
    fn is_mounted(&self, source: &Path, target: &Path) -> io::Result<bool>;
}

/// What the store cannot do.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("cannot read the metadata in {}: {source}", path.display())]
    Metadata {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{0:?} is not a volume ID this store can hold")]
    VolumeId(String),
}

pub(crate) fn io_error(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io { action, path, source }
}

/// A volume ID kubelet makes (`csi-` and 64 hex digits) fits; anything that could leave the
/// store's root, or take one of its names, does not.
pub fn valid_volume_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

const METADATA: &str = "metadata.json";
const DATA: &str = "data";

/// The volume directories under one root.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

impl Store {
    /// Opens (creating it, 0700) the store's root.
    pub fn open(root: &Path) -> Result<Self, StoreError> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(root)
            .map_err(io_error("create", root))?;
        Ok(Self {
            root: root.to_path_buf(),
        })
    }

    fn volume_dir(&self, id: &str) -> Result<PathBuf, StoreError> {
        if !valid_volume_id(id) {
            return Err(StoreError::VolumeId(id.to_string()));
        }
        Ok(self.root.join(id))
    }

    /// The directory mounted onto the volume's target.
    pub fn data_dir(&self, id: &str) -> Result<PathBuf, StoreError> {
        Ok(self.volume_dir(id)?.join(DATA))
    }

    /// The volume's metadata, or `None` for a volume the store does not hold.
    pub fn metadata(&self, id: &str) -> Result<Option<Metadata>, StoreError> {
        let path = self.volume_dir(id)?.join(METADATA);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|source| StoreError::Metadata { path, source }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error("read", &path)(e)),
        }
    }

    /// Writes the volume's metadata (creating its directories), replacing it by rename so a
    /// crash leaves the old file or the new one.
    pub fn put_metadata(&self, metadata: &Metadata) -> Result<(), StoreError> {
        let dir = self.volume_dir(&metadata.volume_id)?;
        let data = dir.join(DATA);
        std::fs::create_dir_all(&data).map_err(io_error("create", &data))?;
        let bytes = serde_json::to_vec_pretty(metadata).map_err(|source| StoreError::Metadata {
            path: dir.join(METADATA),
            source,
        })?;
        atomic::replace_file(&dir, METADATA, &bytes, 0o600)
    }

    /// Swaps the volume's files for `files` (see [`atomic::write`]).
    pub fn write_files(&self, id: &str, files: &[File], group: Option<u32>) -> Result<(), StoreError> {
        atomic::write(&self.data_dir(id)?, files, group)
    }

    /// Removes the volume and everything in it; `false` when there was nothing.
    pub fn remove(&self, id: &str) -> Result<bool, StoreError> {
        let dir = self.volume_dir(id)?;
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_error("remove", &dir)(e)),
        }
    }

    /// The volume IDs the store holds (directories with a valid name); for rediscovery.
    pub fn volume_ids(&self) -> Result<Vec<String>, StoreError> {
        let entries = std::fs::read_dir(&self.root).map_err(io_error("list", &self.root))?;
        let mut ids: Vec<String> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| valid_volume_id(name))
            .collect();
        ids.sort();
        Ok(ids)
    }
}

#[cfg(test)]
mod tests;
