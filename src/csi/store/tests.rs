use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::*;

fn context() -> BTreeMap<String, String> {
    [
        ("csi.cert-manager.io/issuer-name", "ca"),
        ("csi.storage.k8s.io/pod.name", "web-0"),
        (
            TOKENS_KEY,
            r#"{"":{"token":"secret-token","expirationTimestamp":"x"}}"#,
        ),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn files(key: &str, cert: &str) -> Vec<File> {
    vec![
        File {
            name: "tls.key".into(),
            contents: key.as_bytes().to_vec(),
        },
        File {
            name: "tls.crt".into(),
            contents: cert.as_bytes().to_vec(),
        },
    ]
}

#[test]
fn volume_ids() {
    let cases = [
        ("csi-0123456789abcdef", true),
        ("pvc_1.2", true),
        ("", false),
        ("..", false),
        (".hidden", false),
        ("a/b", false),
        ("a b", false),
        (&*"x".repeat(129), false),
    ];
    for (id, want) in cases {
        assert_eq!(valid_volume_id(id), want, "{id:?}");
    }
}

#[test]
fn metadata_round_trip_has_csi_libs_names_and_no_token() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path()).unwrap();
    let mut metadata = Metadata::new("csi-1", "/var/lib/kubelet/pods/u/volumes/v/mount", &context());
    metadata.next_issuance_time = Some("2026-11-27T12:00:00Z".parse().unwrap());
    metadata.volume_mount_group = Some("2000".into());
    store.put_metadata(&metadata).unwrap();

    let text = std::fs::read_to_string(tmp.path().join("csi-1/metadata.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "volumeID": "csi-1",
            "targetPath": "/var/lib/kubelet/pods/u/volumes/v/mount",
            "nextIssuanceTime": "2026-11-27T12:00:00Z",
            "volumeContext": {
                "csi.cert-manager.io/issuer-name": "ca",
                "csi.storage.k8s.io/pod.name": "web-0",
            },
            "volumeMountGroup": "2000",
        })
    );
    assert!(!text.contains("secret-token"));
    let mode = std::fs::metadata(tmp.path().join("csi-1/metadata.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(store.metadata("csi-1").unwrap(), Some(metadata));
    assert_eq!(store.metadata("csi-2").unwrap(), None);
}

#[test]
fn never_issued_metadata_has_no_time() {
    let metadata = Metadata::new("csi-1", "/t", &BTreeMap::new());
    let json = serde_json::to_value(&metadata).unwrap();
    assert_eq!(json, serde_json::json!({"volumeID": "csi-1", "targetPath": "/t"}));
}

#[test]
fn files_are_links_through_data_to_read_only_files() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path()).unwrap();
    store
        .put_metadata(&Metadata::new("v", "/t", &BTreeMap::new()))
        .unwrap();
    store.write_files("v", &files("k1", "c1"), None).unwrap();
    let data = store.data_dir("v").unwrap();
    assert_eq!(
        std::fs::read_link(data.join("tls.key")).unwrap(),
        Path::new("..data/tls.key")
    );
    assert_eq!(std::fs::read_to_string(data.join("tls.crt")).unwrap(), "c1");
    let mode = std::fs::metadata(data.join("tls.key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o440);

    // A second write: one generation left, a name dropped is unlinked.
    store.write_files("v", &files("k2", "c2")[..1], None).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names.len(), 3, "{names:?}");
    assert_eq!(names[1], "..data");
    assert_eq!(names[2], "tls.key");
    assert_eq!(std::fs::read_to_string(data.join("tls.key")).unwrap(), "k2");

    assert_eq!(store.volume_ids().unwrap(), ["v"]);
    assert!(store.remove("v").unwrap());
    assert!(!store.remove("v").unwrap());
    assert_eq!(store.volume_ids().unwrap(), Vec::<String>::new());
}

#[test]
fn fs_group_is_set_before_the_files_are_visible() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path()).unwrap();
    store
        .put_metadata(&Metadata::new("v", "/t", &BTreeMap::new()))
        .unwrap();
    // Root may give any group; anyone else only their own.
    let own = std::fs::metadata(tmp.path()).unwrap().gid();
    let gid = if own == 0 { 4242 } else { own };
    store.write_files("v", &files("k", "c"), Some(gid)).unwrap();
    let data = store.data_dir("v").unwrap();
    for name in ["tls.key", "tls.crt", "..data", ""] {
        assert_eq!(std::fs::metadata(data.join(name)).unwrap().gid(), gid, "{name}");
    }
}

/// A reader resolving `..data` once never reads a key from one write and a certificate
/// from another, across 1,000 swaps between two real key pairs.
#[test]
fn a_reader_never_sees_a_mixed_pair() {
    let pairs: Vec<(String, String)> = (0..2)
        .map(|_| {
            let key = rcgen::KeyPair::generate().unwrap();
            let cert = rcgen::CertificateParams::new(vec!["a".into()])
                .unwrap()
                .self_signed(&key)
                .unwrap();
            (key.serialize_pem(), cert.pem())
        })
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path()).unwrap();
    store
        .put_metadata(&Metadata::new("v", "/t", &BTreeMap::new()))
        .unwrap();
    store
        .write_files("v", &files(&pairs[0].0, &pairs[0].1), None)
        .unwrap();
    let data = store.data_dir("v").unwrap();

    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (done, data, pairs) = (done.clone(), data.clone(), pairs.clone());
        std::thread::spawn(move || {
            let (mut reads, mut mixed) = (0u32, 0u32);
            while !done.load(Ordering::Relaxed) {
                // As a careful reader does: resolve the link once, read both from there. A
                // directory removed under it is a retry, never a mix.
                let Ok(dir) = std::fs::canonicalize(data.join(DATA_LINK)) else {
                    continue;
                };
                let (Ok(key), Ok(cert)) = (
                    std::fs::read_to_string(dir.join("tls.key")),
                    std::fs::read_to_string(dir.join("tls.crt")),
                ) else {
                    continue;
                };
                reads += 1;
                if !pairs.contains(&(key, cert)) {
                    mixed += 1;
                }
            }
            (reads, mixed)
        })
    };
    for i in 0..1000 {
        let (key, cert) = &pairs[i % 2];
        store.write_files("v", &files(key, cert), None).unwrap();
    }
    done.store(true, Ordering::Relaxed);
    let (reads, mixed) = reader.join().unwrap();
    assert!(reads > 0);
    assert_eq!(mixed, 0, "{mixed} of {reads} reads mixed two writes");
    let generations = std::fs::read_dir(&data)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_type().unwrap().is_dir())
        .count();
    assert_eq!(generations, 1);
}

#[test]
fn bad_volume_ids_never_touch_the_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path()).unwrap();
    let err = store.remove("../etc").unwrap_err();
    assert_eq!(
        err.to_string(),
        "\"../etc\" is not a volume ID this store can hold"
    );
}
