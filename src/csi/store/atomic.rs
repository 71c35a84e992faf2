//! kubelet's atomic writer, as projected volumes use it: the files of one write in a new
//! hidden directory, a `..data` symlink swapped to it by `rename` (atomic on one filesystem),
//! and each user-visible name a symlink through `..data`. A reader that resolves `..data`
//! once reads one write's files; a pod sees a renewal through its existing mount.

use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt, chown, symlink};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{StoreError, io_error};

/// The symlink to the current write's directory.
pub const DATA_LINK: &str = "..data";
const NEW_LINK: &str = "..data_tmp";

/// One file of a volume.
#[derive(Clone, PartialEq, Eq)]
pub struct File {
    pub name: String,
    pub contents: Vec<u8>,
}

impl fmt::Debug for File {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One of them is a private key: its bytes never reach a log line.
        f.debug_struct("File")
            .field("name", &self.name)
            .field("len", &self.contents.len())
            .finish()
    }
}

/// Read-only for the owner (root) and the fs-group, nobody else.
const FILE_MODE: u32 = 0o440;
const DIR_MODE: u32 = 0o755;

/// A new write's directory: kubelet's timestamped name, made unique by a counter (two writes
/// in one second, or a name left by a crash, must not collide).
fn new_generation(data: &Path) -> Result<String, StoreError> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let stamp = jiff::Timestamp::now().strftime("%Y_%m_%d_%H_%M_%S");
    loop {
        let name = format!("..{stamp}.{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let path = data.join(&name);
        match fs::create_dir(&path) {
            Ok(()) => {
                fs::set_permissions(&path, fs::Permissions::from_mode(DIR_MODE))
                    .map_err(io_error("set the mode of", &path))?;
                return Ok(name);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_error("create", &path)(e)),
        }
    }
}

fn write_file(dir: &Path, name: &str, contents: &[u8], mode: u32) -> Result<(), StoreError> {
    let path = dir.join(name);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&path)
        .map_err(io_error("create", &path))?;
    file.write_all(contents).map_err(io_error("write", &path))?;
    // The umask may have taken bits `mode` asks for.
    fs::set_permissions(&path, fs::Permissions::from_mode(mode)).map_err(io_error("set the mode of", &path))
}

/// Writes `bytes` as `dir/name` through a temporary file and a rename.
pub(super) fn replace_file(dir: &Path, name: &str, bytes: &[u8], mode: u32) -> Result<(), StoreError> {
    let temporary = format!(".{name}.tmp");
    let _ = fs::remove_file(dir.join(&temporary));
    write_file(dir, &temporary, bytes, mode)?;
    let path = dir.join(name);
    fs::rename(dir.join(&temporary), &path).map_err(io_error("replace", &path))
}

fn fill(dir: &Path, files: &[File], group: Option<u32>) -> Result<(), StoreError> {
    for file in files {
        write_file(dir, &file.name, &file.contents, FILE_MODE)?;
    }
    // Before the swap: a pod must never see the files without its group.
    if let Some(gid) = group {
        chown(dir, None, Some(gid)).map_err(io_error("chgrp", dir))?;
        for file in files {
            let path = dir.join(&file.name);
            chown(&path, None, Some(gid)).map_err(io_error("chgrp", &path))?;
        }
    }
    Ok(())
}

/// Points `..data` at `generation` in one rename.
fn swap(data: &Path, generation: &str) -> Result<(), StoreError> {
    let new_link = data.join(NEW_LINK);
    let _ = fs::remove_file(&new_link);
    symlink(generation, &new_link).map_err(io_error("link", &new_link))?;
    let link = data.join(DATA_LINK);
    fs::rename(&new_link, &link).map_err(io_error("swap", &link))
}

/// The user-visible names: a symlink through `..data` for each file, none for a name the
/// last write had and this one has not.
fn link_names(data: &Path, files: &[File]) -> Result<(), StoreError> {
    for entry in fs::read_dir(data).map_err(io_error("list", data))?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("..") && !files.iter().any(|f| f.name == name) {
            fs::remove_file(entry.path()).map_err(io_error("remove", &entry.path()))?;
        }
    }
    for file in files {
        let path = data.join(&file.name);
        if fs::symlink_metadata(&path).is_err() {
            symlink(format!("{DATA_LINK}/{}", file.name), &path).map_err(io_error("link", &path))?;
        }
    }
    Ok(())
}

/// Replaces the files of `data` with `files`, every step in kubelet's order; the fs-group,
/// if any, applied before the swap; the previous write's directory removed after it.
pub fn write(data: &Path, files: &[File], group: Option<u32>) -> Result<(), StoreError> {
    if let Some(gid) = group {
        chown(data, None, Some(gid)).map_err(io_error("chgrp", data))?;
    }
    let previous = fs::read_link(data.join(DATA_LINK)).ok();
    let generation = new_generation(data)?;
    let dir = data.join(&generation);
    if let Err(e) = fill(&dir, files, group).and_then(|()| swap(data, &generation)) {
        let _ = fs::remove_dir_all(&dir);
        return Err(e);
    }
    link_names(data, files)?;
    if let Some(previous) = previous.filter(|p| p.as_os_str() != generation.as_str()) {
        let old = data.join(previous);
        fs::remove_dir_all(&old).map_err(io_error("remove", &old))?;
    }
    Ok(())
}
