//! The plugin's real mounts (tmpfs, read-only binds, unmounts), each scenario in a private
//! mount namespace so nothing reaches the host's: the outer test runs this binary again
//! under `unshare -m --propagation private`, selecting one `#[ignore]`d inner test. Mounting
//! needs root (CAP_SYS_ADMIN); elsewhere the outer tests say they skipped.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

use std::collections::{BTreeMap, HashMap};
use std::io::{ErrorKind, Write as _};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use cfssl_issuer::csi::mount::{Mounts, mountinfo};
use cfssl_issuer::csi::node::{Issue, Issued, NodeService, Publish};
use cfssl_issuer::csi::proto::node_server::Node;
use cfssl_issuer::csi::proto::volume_capability::{AccessType, MountVolume};
use cfssl_issuer::csi::proto::{NodePublishVolumeRequest, NodeUnpublishVolumeRequest, VolumeCapability};
use cfssl_issuer::csi::rediscover::{Fate, rediscover};
use cfssl_issuer::csi::store::{File, Metadata, Mounter, Pending, Store};

/// Set in the child: the inner tests mount only inside the namespace the outer test made.
const MARKER: &str = "CFSSL_ISSUER_IN_MOUNT_NAMESPACE";
const MIB: u64 = 1 << 20;
const ENOSPC: i32 = 28;
const EROFS: i32 = 30;

/// Runs inner test `name` in a private mount namespace; `false` when it cannot (not root).
fn in_namespace(name: &str) -> bool {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIPPED {name}: real mounts need root (CAP_SYS_ADMIN) in a private mount namespace");
        return false;
    }
    let exe = std::env::current_exe().unwrap();
    let output = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "--"])
        .arg(&exe)
        .args([name, "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(MARKER, "1")
        .output()
        .expect("unshare");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // A name that matches nothing passes with 0 tests: it must have run, once.
    assert!(
        output.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{name} in a private mount namespace: {}\n{stdout}\n{stderr}",
        output.status
    );
    true
}

/// Refuses to mount outside the namespace the outer test made.
fn inside() -> bool {
    let inside = std::env::var_os(MARKER).is_some();
    if !inside {
        eprintln!("SKIPPED: an inner test runs only through its outer test's private mount namespace");
    }
    inside
}

fn mounts_at(path: &Path) -> usize {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    mountinfo::parse(&text)
        .unwrap()
        .iter()
        .filter(|e| e.mount_point == path)
        .count()
}

fn files(text: &str) -> Vec<File> {
    vec![File {
        name: "tls.crt".into(),
        contents: text.as_bytes().to_vec(),
    }]
}

fn issued_metadata(id: &str, target: &Path) -> Metadata {
    let mut metadata = Metadata::new(id, target.to_str().unwrap(), &BTreeMap::default());
    metadata.next_issuance_time = Some(jiff::Timestamp::now());
    metadata
}

/// A store with its tmpfs, in a fresh directory.
fn store(size: u64) -> (tempfile::TempDir, Store, Mounts) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("volumes");
    let store = Store::open(&root).unwrap();
    let mounts = Mounts::new(&root).unwrap();
    let tmpfs = mounts.ensure_tmpfs(size, "").unwrap();
    assert!(!tmpfs.reused);
    assert_eq!(tmpfs.entry.fs_type, "tmpfs");
    (dir, store, mounts)
}

#[test]
fn the_tmpfs_refuses_writes_past_its_size() {
    in_namespace("inner_tmpfs_size");
}

#[test]
#[ignore = "run by the_tmpfs_refuses_writes_past_its_size in a private mount namespace"]
fn inner_tmpfs_size() {
    if !inside() {
        return;
    }
    let (dir, _store, _mounts) = store(MIB);
    let mut file = std::fs::File::create(dir.path().join("volumes/big")).unwrap();
    let chunk = vec![0u8; 64 * 1024];
    let error = (0..32)
        .find_map(|_| file.write_all(&chunk).err())
        .expect("2 MiB fit in a 1 MiB tmpfs");
    assert_eq!(error.raw_os_error(), Some(ENOSPC), "{error}");
}

#[test]
fn a_volume_is_bound_read_only_renewed_through_its_mount_and_unmounted() {
    in_namespace("inner_bind");
}

#[test]
#[ignore = "run by a_volume_is_bound_read_only_renewed_through_its_mount_and_unmounted"]
fn inner_bind() {
    if !inside() {
        return;
    }
    let (dir, store, mounts) = store(MIB);
    let target = dir.path().join("pods/u1/volumes/kubernetes.io~csi/tls/mount");
    store.put_metadata(&issued_metadata("csi-1", &target)).unwrap();
    store.write_files("csi-1", &files("first"), None).unwrap();
    let source = store.data_dir("csi-1").unwrap();
    assert!(!mounts.is_mounted(&source, &target).unwrap());
    mounts.mount(&source, &target).unwrap();
    assert!(mounts.is_mounted(&source, &target).unwrap());
    assert_eq!(std::fs::read_to_string(target.join("tls.crt")).unwrap(), "first");
    let error = std::fs::File::create(target.join("written")).unwrap_err();
    assert_eq!(error.raw_os_error(), Some(EROFS), "{error}");

    // A renewal swaps `..data` in the source: the mount made before it shows it.
    store.write_files("csi-1", &files("renewed"), None).unwrap();
    assert_eq!(
        std::fs::read_to_string(target.join("tls.crt")).unwrap(),
        "renewed"
    );

    mounts.unmount(&target).unwrap();
    assert_eq!(mounts_at(&target), 0);
    assert!(!target.exists(), "Unpublish removes the target");
    mounts.unmount(&target).unwrap();
}

#[test]
fn statx_and_mountinfo_agree_on_what_is_bound_where() {
    in_namespace("inner_bound");
}

/// One row: what is on the target, and whether the volume's own directory is bound there.
struct Case {
    name: &'static str,
    target: &'static str,
    bound: bool,
}

#[test]
#[ignore = "run by statx_and_mountinfo_agree_on_what_is_bound_where"]
fn inner_bound() {
    if !inside() {
        return;
    }
    let (dir, store, mounts) = store(MIB);
    for id in ["csi-1", "csi-2"] {
        store.put_metadata(&issued_metadata(id, dir.path())).unwrap();
        store.write_files(id, &files(id), None).unwrap();
    }
    let source = store.data_dir("csi-1").unwrap();
    let at = |name: &str| dir.path().join(name);
    std::fs::create_dir_all(at("plain")).unwrap();
    mounts.mount(&source, &at("ours")).unwrap();
    mounts
        .mount(&store.data_dir("csi-2").unwrap(), &at("other-volume"))
        .unwrap();
    // A directory of the tmpfs seen through a bind of its parent: the tmpfs's device, no mount.
    mounts
        .mount(&store.data_dir("csi-1").unwrap().join(".."), &at("parent"))
        .unwrap();
    // An earlier run's tmpfs left on the target, then the Publish's bind stacked on it.
    tmpfs_on(&at("stale"));
    tmpfs_on(&at("stacked"));
    mounts.mount(&source, &at("stacked")).unwrap();
    std::os::unix::fs::symlink(at("ours"), at("link")).unwrap();
    let cases = [
        Case {
            name: "nothing there",
            target: "missing",
            bound: false,
        },
        Case {
            name: "a plain directory",
            target: "plain",
            bound: false,
        },
        Case {
            name: "the volume's bind",
            target: "ours",
            bound: true,
        },
        Case {
            name: "another volume's bind",
            target: "other-volume",
            bound: false,
        },
        Case {
            name: "inside a bind of the tmpfs",
            target: "parent/data",
            bound: false,
        },
        Case {
            name: "an earlier run's tmpfs",
            target: "stale",
            bound: false,
        },
        Case {
            name: "the bind stacked on it",
            target: "stacked",
            bound: true,
        },
        Case {
            name: "a symlink to the bind",
            target: "link",
            bound: true,
        },
    ];
    for case in &cases {
        let target = at(case.target);
        assert_eq!(
            mounts.bound_by_statx(&source, &target).unwrap(),
            Some(case.bound),
            "statx: {}",
            case.name
        );
        assert_eq!(
            mounts.bound_by_mountinfo(&source, &target).unwrap(),
            case.bound,
            "mountinfo: {}",
            case.name
        );
    }
    // Unpublish takes every mount stacked on the target, whichever answers.
    mounts.unmount(&at("stacked")).unwrap();
    assert_eq!(mounts_at(&at("stacked")), 0);
    assert!(!at("stacked").exists());
}

/// A small tmpfs of its own on `path`, as an earlier run of the plugin leaves behind.
fn tmpfs_on(path: &Path) {
    std::fs::create_dir_all(path).unwrap();
    let flags = rustix::mount::MountFlags::empty();
    rustix::mount::mount("tmpfs", path, "tmpfs", flags, c"size=1m").unwrap();
}

/// Counts its issuances.
#[derive(Default)]
struct Counting(AtomicU32);

impl Issue for Counting {
    async fn issue(&self, _: &Publish) -> Result<Issued, tonic::Status> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(Issued {
            private_key_pem: "key".into(),
            certificate_pem: "certificate".into(),
            ca_pem: "ca".into(),
            keystores: Vec::new(),
            next_issuance_time: jiff::Timestamp::now(),
            not_after: jiff::Timestamp::now(),
        })
    }
}

fn publish_request(target: &Path) -> NodePublishVolumeRequest {
    let context: HashMap<String, String> = [
        ("csi.storage.k8s.io/pod.name", "web-0"),
        ("csi.storage.k8s.io/pod.namespace", "shop"),
        ("csi.storage.k8s.io/pod.uid", "0b9d"),
        ("csi.storage.k8s.io/ephemeral", "true"),
        ("csi.cert-manager.io/issuer-name", "ca"),
        ("csi.cert-manager.io/dns-names", "web.shop.svc"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    NodePublishVolumeRequest {
        volume_id: "csi-0b9d".into(),
        target_path: target.to_str().unwrap().into(),
        volume_capability: Some(VolumeCapability {
            access_type: Some(AccessType::Mount(MountVolume::default())),
            access_mode: None,
        }),
        readonly: true,
        volume_context: context,
        ..Default::default()
    }
}

#[test]
fn publish_twice_issues_and_mounts_once_and_unpublish_undoes_it() {
    in_namespace("inner_publish_twice");
}

#[tokio::test]
#[ignore = "run by publish_twice_issues_and_mounts_once_and_unpublish_undoes_it"]
async fn inner_publish_twice() {
    if !inside() {
        return;
    }
    let (dir, store, mounts) = store(MIB);
    let issuer = Arc::new(Counting::default());
    let node = NodeService::new("node-1", store.clone(), Arc::new(mounts), issuer.clone());
    let target = dir.path().join("pods/0b9d/volumes/kubernetes.io~csi/tls/mount");
    for _ in 0..2 {
        node.node_publish_volume(tonic::Request::new(publish_request(&target)))
            .await
            .unwrap();
    }
    assert_eq!(issuer.0.load(Ordering::SeqCst), 1);
    assert_eq!(mounts_at(&target), 1);
    assert_eq!(
        std::fs::read_to_string(target.join("tls.crt")).unwrap(),
        "certificate"
    );

    let unpublish = NodeUnpublishVolumeRequest {
        volume_id: "csi-0b9d".into(),
        target_path: target.to_str().unwrap().into(),
    };
    node.node_unpublish_volume(tonic::Request::new(unpublish))
        .await
        .unwrap();
    assert_eq!(mounts_at(&target), 0);
    assert!(!target.exists());
    assert_eq!(store.volume_ids().unwrap(), Vec::<String>::new());
}

#[test]
fn a_restart_reuses_the_tmpfs_and_sorts_the_volumes() {
    in_namespace("inner_restart");
}

#[test]
#[ignore = "run by a_restart_reuses_the_tmpfs_and_sorts_the_volumes"]
fn inner_restart() {
    if !inside() {
        return;
    }
    let (dir, store, mounts) = store(MIB);
    // kubelet's root reached through a symlink: mountinfo spells the resolved path.
    std::fs::create_dir(dir.path().join("pods")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("pods"), dir.path().join("kubelet")).unwrap();
    let target = |id: &str| -> PathBuf { dir.path().join("kubelet").join(id).join("mount") };
    for id in ["live", "orphan"] {
        store.put_metadata(&issued_metadata(id, &target(id))).unwrap();
        store.write_files(id, &files(id), None).unwrap();
    }
    for id in ["never", "pending"] {
        store
            .put_metadata(&Metadata::new(
                id,
                target(id).to_str().unwrap(),
                &BTreeMap::default(),
            ))
            .unwrap();
    }
    let pending = Pending {
        request: "r".into(),
        private_key_pem: "k".into(),
        since: jiff::Timestamp::now(),
    };
    store.put_pending("pending", &pending).unwrap();
    mounts
        .mount(&store.data_dir("live").unwrap(), &target("live"))
        .unwrap();
    // A bind of a tmpfs that is no longer the store's (csi-lib#74's leftover).
    store
        .put_metadata(&issued_metadata("stale", &target("stale")))
        .unwrap();
    let old = dir.path().join("old");
    std::fs::create_dir_all(&old).unwrap();
    let flags = rustix::mount::MountFlags::empty();
    rustix::mount::mount("tmpfs", &old, "tmpfs", flags, None).unwrap();
    std::fs::create_dir_all(old.join("stale/data")).unwrap();
    mounts.mount(&old.join("stale/data"), &target("stale")).unwrap();
    let first = mounts.tmpfs(&mounts.table().unwrap()).unwrap();

    // The restarted plugin: a new store and mounter on the same root.
    let root = dir.path().join("volumes");
    let (store, mounts) = (Store::open(&root).unwrap(), Mounts::new(&root).unwrap());
    let tmpfs = mounts.ensure_tmpfs(MIB, "").unwrap();
    assert!(tmpfs.reused);
    assert_eq!(tmpfs.entry, first);
    assert_eq!(mounts_at(&root), 1, "a second tmpfs on the store's root");
    assert_eq!(
        std::fs::read_to_string(target("live").join("tls.crt")).unwrap(),
        "live"
    );

    let found = rediscover(&store, &mounts.table().unwrap(), &tmpfs.entry).unwrap();
    let live: Vec<&str> = found.live.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(live, ["live"]);
    assert_eq!(found.pending, ["pending"]);
    assert_eq!(
        found.removed,
        [
            ("never".to_string(), Fate::NeverIssued),
            ("orphan".to_string(), Fate::Orphan)
        ]
    );
    let stale: Vec<(&str, &Path)> = found
        .stale
        .iter()
        .map(|s| (s.volume.as_str(), s.target.as_path()))
        .collect();
    let resolved = std::fs::canonicalize(target("stale")).unwrap();
    assert_eq!(stale, [("stale", resolved.as_path())]);
    assert_eq!(store.volume_ids().unwrap(), ["live", "pending", "stale"]);
    assert_eq!(
        std::fs::read_to_string(target("live").join("tls.crt")).unwrap(),
        "live"
    );
    assert!(std::fs::metadata(target("orphan")).is_err_and(|e| e.kind() == ErrorKind::NotFound));
}
