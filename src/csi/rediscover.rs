//! What a (re)started plugin finds in its store, before Probe answers ready: which volumes
//! it keeps, which it removes, and which pods look at a stale copy of their files.
//!
//! kubelet does not republish an inline volume after a plugin restart, so the volumes left
//! are the plugin's to sort: a volume whose target is no longer mounted was unpublished
//! while the plugin was down (its Unpublish then found nothing; cert-manager csi-lib#8); one
//! never issued and not pending has no Publish to resume. A target that holds something
//! other than its volume's bind of the current tmpfs cannot be repaired from here (unmounts
//! do not reach the pod's mount namespace, csi-lib#74): it is reported.

use std::path::{Path, PathBuf};

use jiff::Timestamp;
use k8s_openapi::api::events::v1::Event;

use super::attributes::PodInfo;
use super::issue::outcome::pod_event;
use super::mount::{Entry, Target, canonical, mountinfo};
use super::store::{Metadata, Store, StoreError, valid_volume_id};

/// What becomes of one stored volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Issued and mounted: its renewal resumes.
    Live,
    /// An issuance in flight: kubelet's retried Publish resumes it.
    Pending,
    /// Never issued, nothing in flight: removed.
    NeverIssued,
    /// Issued, its target unmounted (unpublished while the plugin was down): removed.
    Orphan,
    /// Issued, but its target shows something else: reported, kept for its Unpublish.
    Stale,
}

/// Pure: the fate of a volume from its metadata's and its target's state.
pub fn fate(issued: bool, pending: bool, target: Target) -> Fate {
    match (issued, pending, target) {
        (_, true, _) => Fate::Pending,
        (false, false, _) => Fate::NeverIssued,
        (true, false, Target::Ours) => Fate::Live,
        (true, false, Target::Unmounted) => Fate::Orphan,
        (true, false, Target::Foreign) => Fate::Stale,
    }
}

/// A target that does not show its volume's current files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stale {
    pub volume: String,
    pub target: PathBuf,
    /// From the volume's metadata, when the volume is still in the store.
    pub pod: Option<PodInfo>,
}

/// What rediscovery found.
#[derive(Debug, Default)]
pub struct Rediscovered {
    /// Issued volumes with a live mount, for a renewal to arm its timers.
    pub live: Vec<(String, Metadata)>,
    pub pending: Vec<String>,
    pub removed: Vec<(String, Fate)>,
    pub stale: Vec<Stale>,
    /// Directories that are not volumes of this store (no metadata), left untouched.
    pub foreign: Vec<String>,
}

/// The volume's data directory as a bind of the tmpfs shows it in mountinfo's `root`.
fn data_root(id: &str) -> PathBuf {
    Path::new("/").join(id).join("data")
}

/// Sorts the store's volumes against the mount table (`tmpfs` is the store's own) and
/// removes the orphans and the never-issued ones. A volume whose metadata cannot be read is
/// left as it is, like a foreign directory.
pub fn rediscover(store: &Store, table: &[Entry], tmpfs: &Entry) -> Result<Rediscovered, StoreError> {
    let mut found = Rediscovered::default();
    let mut claims = Vec::new();
    for id in store.volume_ids()? {
        let metadata = match store.metadata(&id) {
            Ok(Some(metadata)) => metadata,
            Ok(None) => {
                found.foreign.push(id);
                continue;
            }
            Err(error) => {
                tracing::warn!(volume = %id, %error, "cannot read a volume's metadata; left as it is");
                found.foreign.push(id);
                continue;
            }
        };
        let target = canonical(Path::new(&metadata.target_path));
        let state = mountinfo::target(table, tmpfs, &target, &data_root(&id));
        let pending = store.pending(&id)?.is_some();
        match fate(metadata.next_issuance_time.is_some(), pending, state) {
            Fate::Live => {
                claims.push((data_root(&id), target));
                found.live.push((id, metadata));
            }
            Fate::Pending => found.pending.push(id),
            Fate::Stale => found.stale.push(Stale {
                volume: id,
                target,
                pod: PodInfo::from_context(metadata.volume_context()),
            }),
            removed => {
                store.remove(&id)?;
                found.removed.push((id, removed));
            }
        }
    }
    found.stale.extend(unclaimed(table, tmpfs, &claims));
    Ok(found)
}

/// Pure: binds of the tmpfs's volumes that no live volume claims (its volume gone from the
/// store, or its metadata naming another target); a claim is a bind's root and target.
pub fn unclaimed(table: &[Entry], tmpfs: &Entry, claims: &[(PathBuf, PathBuf)]) -> Vec<Stale> {
    let claimed = |e: &Entry| {
        claims
            .iter()
            .any(|(root, target)| e.root == *root && e.mount_point == *target)
    };
    table
        .iter()
        .filter(|e| e.device == tmpfs.device && e.id != tmpfs.id && !claimed(e))
        .filter_map(|e| {
            Some(Stale {
                volume: volume_of(&e.root)?,
                target: e.mount_point.clone(),
                pod: None,
            })
        })
        .collect()
}

/// Pure: the volume ID of a bind's `root` (`/<id>/data`), for a valid ID.
pub fn volume_of(root: &Path) -> Option<String> {
    let id = root.parent()?.strip_prefix("/").ok()?.to_str()?;
    (root.file_name()? == "data" && valid_volume_id(id)).then(|| id.to_string())
}

/// Pure: the Warning Event on the pod whose volume's target is stale. Its owner sees it in
/// `kubectl describe pod`; restarting the pod is the one repair.
pub fn stale_event(stale: &Stale, pod: &PodInfo, node_id: &str, now: Timestamp) -> Event {
    let message = format!(
        "volume {}: {} does not show the volume's current files (a mount from before the CSI plugin restarted); renewals will not reach this pod until it is restarted",
        stale.volume,
        stale.target.display()
    );
    pod_event(pod, node_id, ("StaleVolumeMount", "Rediscovering"), &message, now)
}

#[cfg(test)]
mod tests;
