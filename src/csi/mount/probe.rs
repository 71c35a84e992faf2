//! What a lookup of one path finds, from one `statx(2)`: `/proc/self/mountinfo` lists every
//! mount of the node, so reading it costs about 2 µs per mount (2 ms at 1,000 volumes),
//! which a re-Publish and an Unpublish must not pay.
//!
//! `st_dev` alone cannot tell a mount point (a bind inside one filesystem has its parent's
//! device); `STATX_ATTR_MOUNT_ROOT` (Linux 5.8) can. Older kernels leave it out of the
//! attribute mask, and the callers fall back to mountinfo.

use std::io;
use std::path::Path;

use rustix::fs::{AtFlags, CWD, StatxAttributes, StatxFlags};
use rustix::io::Errno;

/// The file a path leads to, and whether it is the root of a mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// Device and inode: a bind mount's root is the very directory it binds.
    file: (u32, u32, u64),
    /// `None` when the kernel cannot say (before Linux 5.8).
    pub mount_root: Option<bool>,
}

impl Seen {
    /// Whether both lookups found the same file (on the same filesystem).
    pub fn same_file(&self, other: &Seen) -> bool {
        self.file == other.file
    }
}

/// What `path` leads to, symlinks followed as a pod's lookup follows them; `None` when nothing
/// is there.
pub fn seen(path: &Path) -> io::Result<Option<Seen>> {
    let found = match rustix::fs::statx(CWD, path, AtFlags::empty(), StatxFlags::INO) {
        Ok(found) => found,
        Err(Errno::NOENT | Errno::NOTDIR) => return Ok(None),
        Err(errno) => return Err(errno.into()),
    };
    let known = found.stx_attributes_mask.contains(StatxAttributes::MOUNT_ROOT);
    Ok(Some(Seen {
        file: (found.stx_dev_major, found.stx_dev_minor, found.stx_ino),
        mount_root: known.then(|| found.stx_attributes.contains(StatxAttributes::MOUNT_ROOT)),
    }))
}
