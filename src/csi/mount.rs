//! The node's [`Mounter`], by syscalls (the image is distroless: no `mount` binary).
//!
//! The store's root (`<data-root>/volumes`) is one tmpfs, so keys never reach the node's disk
//! and its size bounds what volumes can take. Only the store's root, not the data root: the
//! data root is the hostPath kubelet sees, and anything else kept there stays on disk. Each
//! volume's `data` directory is bind-mounted read-only onto kubelet's target.

pub mod mountinfo;
pub mod probe;
pub mod size;

use std::io;
use std::path::{Path, PathBuf};

use rustix::mount::{MountFlags, UnmountFlags};

use super::store::Mounter;
pub use mountinfo::{Entry, Target};

/// Why a mount could not be made, undone or seen.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Parse(#[from] mountinfo::ParseError),
    #[error("cannot {action} {}: {source}", path.display())]
    Syscall {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("--mount-context {0:?} holds a quote, a control character or nothing but spaces")]
    Context(String),
    #[error("no tmpfs on {} after mounting one", .0.display())]
    NoTmpfs(PathBuf),
}

fn syscall(action: &'static str, path: &Path) -> impl FnOnce(rustix::io::Errno) -> MountError {
    let path = path.to_path_buf();
    move |errno| MountError::Syscall {
        action,
        path,
        source: errno.into(),
    }
}

fn stat(path: &Path) -> impl FnOnce(io::Error) -> MountError {
    let path = path.to_path_buf();
    move |source| MountError::Syscall {
        action: "stat",
        path,
        source,
    }
}

/// Pure: tmpfs's options. The SELinux context labels every file in the tmpfs so a pod's
/// confined process can read them through its bind mount; quoted, as it holds commas.
pub fn tmpfs_options(size: u64, context: &str) -> Result<String, MountError> {
    let mut options = format!("size={size},mode=0700");
    if !context.is_empty() {
        if context.trim().is_empty() || context.chars().any(|c| c == '"' || c.is_control()) {
            return Err(MountError::Context(context.to_string()));
        }
        options.push_str(&format!(",context=\"{context}\""));
    }
    Ok(options)
}

/// The tmpfs found or made on the store's root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tmpfs {
    pub entry: Entry,
    /// Found already mounted (a restarted plugin), not mounted by this run.
    pub reused: bool,
}

/// Mounts by syscalls, seen through a mountinfo file (`/proc/self/mountinfo`).
#[derive(Debug, Clone)]
pub struct Mounts {
    root: PathBuf,
    mountinfo: PathBuf,
}

impl Mounts {
    /// The mounts of the store whose root is `root` (which must exist).
    pub fn new(root: &Path) -> Result<Self, MountError> {
        let root = std::fs::canonicalize(root).map_err(|source| MountError::Read {
            path: root.to_path_buf(),
            source,
        })?;
        Ok(Self {
            root,
            mountinfo: PathBuf::from("/proc/self/mountinfo"),
        })
    }

    /// Every mount this process sees.
    pub fn table(&self) -> Result<Vec<Entry>, MountError> {
        let text = std::fs::read_to_string(&self.mountinfo).map_err(|source| MountError::Read {
            path: self.mountinfo.clone(),
            source,
        })?;
        Ok(mountinfo::parse(&text)?)
    }

    /// The tmpfs on the store's root, if one is mounted there.
    pub fn tmpfs(&self, table: &[Entry]) -> Option<Entry> {
        mountinfo::at(table, &self.root)
            .filter(|e| e.fs_type == "tmpfs")
            .cloned()
    }

    /// Mounts the store's tmpfs unless one is there already: a tmpfs is never replaced, as the
    /// running pods' bind mounts keep the old one and stop seeing renewals (cert-manager
    /// csi-lib#74).
    pub fn ensure_tmpfs(&self, size: u64, context: &str) -> Result<Tmpfs, MountError> {
        if let Some(entry) = self.tmpfs(&self.table()?) {
            return Ok(Tmpfs { entry, reused: true });
        }
        let options = tmpfs_options(size, context)?;
        let data = std::ffi::CString::new(options).map_err(|_| MountError::Context(context.to_string()))?;
        let flags = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
        rustix::mount::mount("tmpfs", &self.root, "tmpfs", flags, data.as_c_str())
            .map_err(syscall("mount a tmpfs on", &self.root))?;
        let entry = self
            .tmpfs(&self.table()?)
            .ok_or_else(|| MountError::NoTmpfs(self.root.clone()))?;
        Ok(Tmpfs { entry, reused: false })
    }

    /// Whether `source`, a volume's data directory in the store, is what a lookup of `target`
    /// finds as a mount's root: by statx, or by mountinfo where the kernel cannot say.
    pub fn bound(&self, source: &Path, target: &Path) -> Result<bool, MountError> {
        match self.bound_by_statx(source, target)? {
            Some(bound) => Ok(bound),
            None => self.bound_by_mountinfo(source, target),
        }
    }

    /// [`Mounts::bound`] from two statx calls; `None` when the kernel cannot tell a mount's
    /// root (before Linux 5.8).
    pub fn bound_by_statx(&self, source: &Path, target: &Path) -> Result<Option<bool>, MountError> {
        let Some(found) = probe::seen(target).map_err(stat(target))? else {
            return Ok(Some(false));
        };
        let Some(root) = found.mount_root else {
            return Ok(None);
        };
        let bound = root
            && probe::seen(source)
                .map_err(stat(source))?
                .is_some_and(|s| s.same_file(&found));
        Ok(Some(bound))
    }

    /// [`Mounts::bound`] from mountinfo: the topmost mount on `target` shows `source`'s
    /// directory of the tmpfs mounted now.
    pub fn bound_by_mountinfo(&self, source: &Path, target: &Path) -> Result<bool, MountError> {
        let table = self.table()?;
        let Some(tmpfs) = self.tmpfs(&table) else {
            return Ok(false);
        };
        let Ok(data) = canonical(source)
            .strip_prefix(&self.root)
            .map(|d| Path::new("/").join(d))
        else {
            return Ok(false);
        };
        Ok(mountinfo::target(&table, &tmpfs, &canonical(target), &data) == Target::Ours)
    }

    /// Whether anything is mounted on `target`.
    fn mount_point(&self, target: &Path) -> Result<bool, MountError> {
        match probe::seen(target).map_err(stat(target))? {
            None => Ok(false),
            Some(found) => match found.mount_root {
                Some(root) => Ok(root),
                None => Ok(mountinfo::at(&self.table()?, target).is_some()),
            },
        }
    }

    /// Unmounts everything stacked on `target`, then removes the (empty) directory.
    fn unmount_and_remove(&self, target: &Path) -> Result<(), MountError> {
        let target = canonical(target);
        // Bounded: a mount that comes back at each pass is not ours to fight.
        for _ in 0..16 {
            if !self.mount_point(&target)? {
                break;
            }
            rustix::mount::unmount(&target, UnmountFlags::NOFOLLOW).map_err(syscall("unmount", &target))?;
        }
        match std::fs::remove_dir(&target) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(MountError::Syscall {
                action: "remove",
                path: target,
                source,
            }),
        }
    }
}

/// Binds `source` onto `target` read-only; a bind ignores `MS_RDONLY`, so it takes a
/// second call (a remount of the bind), as mount-utils does.
fn bind_read_only(source: &Path, target: &Path) -> Result<(), MountError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o750)
        .create(target)
        .map_err(|source| MountError::Syscall {
            action: "create",
            path: target.to_path_buf(),
            source,
        })?;
    rustix::mount::mount_bind(source, target).map_err(syscall("bind-mount onto", target))?;
    let flags =
        MountFlags::BIND | MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
    if let Err(errno) = rustix::mount::mount_remount(target, flags, "") {
        // A writable bind must not stay.
        let _ = rustix::mount::unmount(target, UnmountFlags::DETACH);
        return Err(syscall("remount read-only", target)(errno));
    }
    Ok(())
}

/// The path as mountinfo spells it (symlinks resolved, as when the kubelet's root is a
/// symlink) when it exists.
pub fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

impl Mounter for Mounts {
    fn mount(&self, source: &Path, target: &Path) -> io::Result<()> {
        bind_read_only(source, target).map_err(io::Error::other)
    }

    /// Unpublish wants the target unmounted and removed.
    fn unmount(&self, target: &Path) -> io::Result<()> {
        self.unmount_and_remove(target).map_err(io::Error::other)
    }

    /// Something else on `target` (a bind of an earlier run's tmpfs, another volume) is
    /// covered by the Publish's own bind.
    fn is_mounted(&self, source: &Path, target: &Path) -> io::Result<bool> {
        self.bound(source, target).map_err(io::Error::other)
    }
}

#[cfg(test)]
mod tests;
