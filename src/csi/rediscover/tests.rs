use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::*;
use crate::csi::mount::mountinfo;
use crate::csi::store::Pending;

#[test]
fn each_volume_state_has_one_fate() {
    use Target::{Foreign, Ours, Unmounted};
    let cases = [
        // (issued, pending, target) -> fate
        ((true, false, Ours), Fate::Live),
        ((true, false, Unmounted), Fate::Orphan),
        ((true, false, Foreign), Fate::Stale),
        ((false, true, Unmounted), Fate::Pending),
        ((false, true, Ours), Fate::Pending),
        ((true, true, Unmounted), Fate::Pending),
        ((false, false, Unmounted), Fate::NeverIssued),
        ((false, false, Ours), Fate::NeverIssued),
        ((false, false, Foreign), Fate::NeverIssued),
    ];
    for ((issued, pending, target), want) in cases {
        assert_eq!(
            fate(issued, pending, target),
            want,
            "{issued} {pending} {target:?}"
        );
    }
}

#[test]
fn a_binds_root_names_its_volume() {
    let cases = [
        ("/csi-abc/data", Some("csi-abc")),
        ("/csi-abc/data/x", None),
        ("/csi-abc", None),
        ("/", None),
        ("/a/b/data", None),
        ("/..x/data", None),
        ("csi-abc/data", None),
    ];
    for (root, want) in cases {
        assert_eq!(volume_of(Path::new(root)).as_deref(), want, "{root}");
    }
}

const POD: [(&str, &str); 3] = [
    ("csi.storage.k8s.io/pod.name", "web-0"),
    ("csi.storage.k8s.io/pod.namespace", "shop"),
    ("csi.storage.k8s.io/pod.uid", "u-1"),
];

fn metadata(id: &str, target: &str, issued: bool) -> Metadata {
    let context: BTreeMap<String, String> = POD.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let mut m = Metadata::new(id, target, &context);
    m.next_issuance_time = issued.then(|| "2026-11-28T00:00:00Z".parse().unwrap());
    m
}

fn table(lines: &[&str]) -> Vec<Entry> {
    mountinfo::parse(&lines.join("\n")).unwrap()
}

const TMPFS: &str = "30 22 0:45 / /data/volumes rw - tmpfs tmpfs rw";

#[test]
fn binds_no_live_volume_claims_are_stale() {
    let table = table(&[
        TMPFS,
        "31 22 0:45 /live/data /t/live rw - tmpfs tmpfs rw",
        "32 22 0:45 /gone/data /t/gone rw - tmpfs tmpfs rw",
        "33 22 0:45 /live/data /t/elsewhere rw - tmpfs tmpfs rw",
        "34 22 0:45 /not/a/volume /t/x rw - tmpfs tmpfs rw",
        "35 22 0:46 /other/data /t/other rw - tmpfs tmpfs rw",
    ]);
    let live = vec![(PathBuf::from("/live/data"), PathBuf::from("/t/live"))];
    let stale = |volume: &str, target: &str| Stale {
        volume: volume.into(),
        target: target.into(),
        pod: None,
    };
    assert_eq!(
        unclaimed(&table, &table[0], &live),
        vec![stale("gone", "/t/gone"), stale("live", "/t/elsewhere")]
    );
}

#[test]
fn rediscovery_removes_orphans_and_never_issued_volumes_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    for (id, target, issued) in [
        ("live", "/t/live", true),
        ("orphan", "/t/orphan", true),
        ("never", "/t/never", false),
        ("pending", "/t/pending", false),
        ("stale", "/t/stale", true),
    ] {
        store.put_metadata(&metadata(id, target, issued)).unwrap();
    }
    let pending = Pending {
        request: "r".into(),
        private_key_pem: "k".into(),
        since: "2026-11-28T00:00:00Z".parse().unwrap(),
    };
    store.put_pending("pending", &pending).unwrap();
    std::fs::create_dir(dir.path().join("no-metadata")).unwrap();
    std::fs::create_dir(dir.path().join(".hidden")).unwrap();
    let table = table(&[
        TMPFS,
        "31 22 0:45 /live/data /t/live rw - tmpfs tmpfs rw",
        "32 22 0:44 /stale/data /t/stale rw - tmpfs tmpfs rw",
        "33 22 0:45 /vanished/data /t/vanished rw - tmpfs tmpfs rw",
    ]);
    let found = rediscover(&store, &table, &table[0]).unwrap();
    assert_eq!(
        found.live,
        vec![("live".to_string(), metadata("live", "/t/live", true))]
    );
    assert_eq!(found.pending, vec!["pending".to_string()]);
    assert_eq!(
        found.removed,
        vec![
            ("never".to_string(), Fate::NeverIssued),
            ("orphan".to_string(), Fate::Orphan)
        ]
    );
    let pod = PodInfo::from_context(metadata("stale", "", true).volume_context());
    assert_eq!(
        found.stale,
        vec![
            Stale {
                volume: "stale".into(),
                target: "/t/stale".into(),
                pod,
            },
            Stale {
                volume: "vanished".into(),
                target: "/t/vanished".into(),
                pod: None,
            },
        ]
    );
    assert_eq!(found.foreign, vec!["no-metadata".to_string()]);
    assert_eq!(
        store.volume_ids().unwrap(),
        ["live", "no-metadata", "pending", "stale"]
    );
    assert!(dir.path().join(".hidden").is_dir());
}

#[test]
fn the_stale_event_names_the_volume_and_target_on_the_pod() {
    let stale = Stale {
        volume: "csi-1".into(),
        target: "/var/lib/kubelet/pods/u-1/volumes/kubernetes.io~csi/tls/mount".into(),
        pod: None,
    };
    let pod = PodInfo::from_context(metadata("x", "", true).volume_context()).unwrap();
    let now: Timestamp = "2026-11-28T00:00:00Z".parse().unwrap();
    let event = stale_event(&stale, &pod, &"n".repeat(200), now);
    assert_eq!(event.metadata.name.as_deref(), Some("web-0.18ec0c69cf1f0000"));
    assert_eq!(event.metadata.namespace.as_deref(), Some("shop"));
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.reason.as_deref(), Some("StaleVolumeMount"));
    assert_eq!(
        event.note.as_deref(),
        Some(
            "volume csi-1: /var/lib/kubelet/pods/u-1/volumes/kubernetes.io~csi/tls/mount does not show the volume's current files (a mount from before the CSI plugin restarted); renewals will not reach this pod until it is restarted"
        )
    );
    let regarding = event.regarding.unwrap();
    assert_eq!(
        (
            regarding.kind.as_deref(),
            regarding.name.as_deref(),
            regarding.uid.as_deref()
        ),
        (Some("Pod"), Some("web-0"), Some("u-1"))
    );
    assert_eq!(event.reporting_instance.map(|i| i.len()), Some(128));
}
