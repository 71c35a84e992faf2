//! `/proc/self/mountinfo` read as a table (proc(5)): a mount point's check must come from
//! here, not from `st_dev`, since a bind mount inside one filesystem has its parent's device.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

/// One line: the fields the plugin uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub id: u32,
    pub parent: u32,
    /// `major:minor` of the filesystem: a tmpfs and every bind mount of it share it.
    pub device: String,
    /// The directory of the filesystem seen at the mount point (`/` for a whole tmpfs,
    /// `/<volume>/data` for a bind of one volume).
    pub root: PathBuf,
    pub mount_point: PathBuf,
    pub fs_type: String,
    pub source: String,
}

/// Why a line is not a mountinfo line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("mountinfo line {line}: {problem}")]
pub struct ParseError {
    pub line: usize,
    pub problem: &'static str,
}

/// The kernel escapes space, tab, newline and backslash as three octal digits (`\040`).
pub fn unescape(field: &str) -> OsString {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (bytes[i], octal) {
            (b'\\', Some(d)) => {
                let value = d.iter().fold(0u32, |v, b| v * 8 + u32::from(b - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    OsString::from_vec(out)
}

fn line(number: usize, text: &str) -> Result<Entry, ParseError> {
    let bad = |problem| ParseError {
        line: number,
        problem,
    };
    let fields: Vec<&str> = text.split(' ').collect();
    let separator = fields
        .iter()
        .position(|f| *f == "-")
        .ok_or_else(|| bad("no \"-\" separator"))?;
    if separator < 6 || fields.len() < separator + 3 {
        return Err(bad("too few fields"));
    }
    Ok(Entry {
        id: fields[0].parse().map_err(|_| bad("mount ID is not a number"))?,
        parent: fields[1].parse().map_err(|_| bad("parent ID is not a number"))?,
        device: fields[2].to_string(),
        root: unescape(fields[3]).into(),
        mount_point: unescape(fields[4]).into(),
        fs_type: fields[separator + 1].to_string(),
        source: unescape(fields[separator + 2]).to_string_lossy().into_owned(),
    })
}

/// Every mount, in the kernel's order (a mount stacked on another comes after it).
pub fn parse(text: &str) -> Result<Vec<Entry>, ParseError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.is_empty())
        .map(|(i, l)| line(i + 1, l))
        .collect()
}

/// The topmost mount on `path`, the one a lookup of `path` sees.
pub fn at<'a>(entries: &'a [Entry], path: &Path) -> Option<&'a Entry> {
    entries.iter().rev().find(|e| e.mount_point == path)
}

/// What is mounted on a volume's target, against the store's tmpfs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Nothing.
    Unmounted,
    /// The volume's own data directory from the tmpfs mounted now.
    Ours,
    /// Something else: another volume, another filesystem, or a tmpfs this run did not
    /// mount (a replaced tmpfs leaves it behind, cert-manager csi-lib#74).
    Foreign,
}

/// Pure: what `target` holds, given the tmpfs's entry and the volume's data directory
/// relative to the tmpfs's root (`/<volume>/data`).
pub fn target(entries: &[Entry], tmpfs: &Entry, target: &Path, data: &Path) -> Target {
    match at(entries, target) {
        None => Target::Unmounted,
        Some(e)
            if e.device == tmpfs.device
                && e.root == tmpfs.root.join(data.strip_prefix("/").unwrap_or(data)) =>
        {
            Target::Ours
        }
        Some(_) => Target::Foreign,
    }
}
