use std::path::{Path, PathBuf};

use super::mountinfo::{self, Entry, Target};
use super::size::{self, SizeError};
use super::{MountError, tmpfs_options};

const TABLE: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:45 / /csi-data-dir/volumes rw,nosuid,nodev,noexec - tmpfs tmpfs rw,size=65536k,mode=700
31 22 0:45 /csi-abc/data /var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/tls/mount ro,nosuid master:7 - tmpfs tmpfs rw,size=65536k
32 22 0:45 /csi-def/data /var/lib/kubelet/pods/u2/volumes/kubernetes.io~csi/my\\040tls/mount ro - tmpfs tmpfs rw
33 22 0:50 /csi-ghi/data /var/lib/kubelet/pods/u3/volumes/kubernetes.io~csi/tls/mount ro - tmpfs tmpfs rw
34 22 8:1 /srv /mnt/back\\134slash rw - ext4 /dev/sda1 rw
35 31 0:46 / /var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/tls/mount rw - tmpfs other rw
";

fn entry(id: u32, device: &str, root: &str, mount_point: &str, fs_type: &str) -> Entry {
    Entry {
        id,
        parent: if id == 35 {
            31
        } else if id == 22 {
            1
        } else {
            22
        },
        device: device.to_string(),
        root: root.into(),
        mount_point: mount_point.into(),
        fs_type: fs_type.to_string(),
        source: match (fs_type, id) {
            ("ext4", _) => "/dev/sda1".to_string(),
            (_, 35) => "other".to_string(),
            _ => "tmpfs".to_string(),
        },
    }
}

#[test]
fn mountinfo_lines_are_read_with_their_escapes() {
    let parsed = mountinfo::parse(TABLE).unwrap();
    let pods = "/var/lib/kubelet/pods";
    let want = vec![
        entry(22, "8:1", "/", "/", "ext4"),
        entry(30, "0:45", "/", "/csi-data-dir/volumes", "tmpfs"),
        entry(
            31,
            "0:45",
            "/csi-abc/data",
            &format!("{pods}/u1/volumes/kubernetes.io~csi/tls/mount"),
            "tmpfs",
        ),
        entry(
            32,
            "0:45",
            "/csi-def/data",
            &format!("{pods}/u2/volumes/kubernetes.io~csi/my tls/mount"),
            "tmpfs",
        ),
        entry(
            33,
            "0:50",
            "/csi-ghi/data",
            &format!("{pods}/u3/volumes/kubernetes.io~csi/tls/mount"),
            "tmpfs",
        ),
        entry(34, "8:1", "/srv", "/mnt/back\\slash", "ext4"),
        entry(
            35,
            "0:46",
            "/",
            &format!("{pods}/u1/volumes/kubernetes.io~csi/tls/mount"),
            "tmpfs",
        ),
    ];
    assert_eq!(parsed, want);
}

#[test]
fn malformed_mountinfo_lines_are_refused_with_their_number() {
    let cases = [
        (
            "22 1 8:1 / / rw shared:1 ext4 /dev/sda1 rw",
            1,
            "no \"-\" separator",
        ),
        ("\n22 1 8:1 / / - ext4 /dev/sda1 rw", 2, "too few fields"),
        ("22 1 8:1 / / rw - ext4", 1, "too few fields"),
        (
            "x 1 8:1 / / rw - ext4 /dev/sda1 rw",
            1,
            "mount ID is not a number",
        ),
        (
            "22 y 8:1 / / rw - ext4 /dev/sda1 rw",
            1,
            "parent ID is not a number",
        ),
    ];
    for (text, line, problem) in cases {
        assert_eq!(
            mountinfo::parse(text),
            Err(mountinfo::ParseError { line, problem }),
            "{text}"
        );
    }
}

#[test]
fn octal_escapes_become_their_bytes() {
    let cases = [
        ("plain", "plain"),
        ("a\\040b", "a b"),
        ("tab\\011", "tab\t"),
        ("nl\\012x", "nl\nx"),
        ("back\\134slash", "back\\slash"),
        ("not\\08", "not\\08"),
        ("short\\04", "short\\04"),
    ];
    for (field, want) in cases {
        assert_eq!(mountinfo::unescape(field), want, "{field}");
    }
}

#[test]
fn a_target_is_ours_only_from_the_current_tmpfs_and_its_own_volume() {
    let table = mountinfo::parse(TABLE).unwrap();
    let tmpfs = table[1].clone();
    let pods = Path::new("/var/lib/kubelet/pods");
    let tls = |uid: &str, name: &str| {
        pods.join(uid)
            .join("volumes/kubernetes.io~csi")
            .join(name)
            .join("mount")
    };
    let cases: Vec<(PathBuf, &str, Target)> = vec![
        // Another mount stacked on top wins: a lookup sees that one.
        (tls("u1", "tls"), "/csi-abc/data", Target::Foreign),
        (tls("u2", "my tls"), "/csi-def/data", Target::Ours),
        // The same tmpfs, but another volume's directory.
        (tls("u2", "my tls"), "/csi-abc/data", Target::Foreign),
        // A bind of a tmpfs this run did not mount (csi-lib#74's stale copy).
        (tls("u3", "tls"), "/csi-ghi/data", Target::Foreign),
        (tls("u4", "tls"), "/csi-jkl/data", Target::Unmounted),
        // Stat would say "same device as the tmpfs" for any path inside it.
        (
            PathBuf::from("/csi-data-dir/volumes/csi-abc/data"),
            "/csi-abc/data",
            Target::Unmounted,
        ),
    ];
    for (target, data, want) in cases {
        assert_eq!(
            mountinfo::target(&table, &tmpfs, &target, Path::new(data)),
            want,
            "{}",
            target.display()
        );
    }
}

#[test]
fn tmpfs_sizes_are_kubernetes_quantities() {
    let cases = [
        ("64Mi", Ok(64 << 20)),
        ("1Gi", Ok(1 << 30)),
        ("2048Ki", Ok(2 << 20)),
        ("100M", Ok(100_000_000)),
        ("1048576", Ok(1 << 20)),
        ("1Ti", Ok(1 << 40)),
        ("1023Ki", Err(SizeError::Range("1023Ki".into()))),
        ("2Ti", Err(SizeError::Range("2Ti".into()))),
        (
            "99999999999999999999Gi",
            Err(SizeError::Syntax("99999999999999999999Gi".into())),
        ),
        ("64MB", Err(SizeError::Syntax("64MB".into()))),
        ("Mi", Err(SizeError::Syntax("Mi".into()))),
        ("1.5Gi", Err(SizeError::Syntax("1.5Gi".into()))),
        ("-64Mi", Err(SizeError::Syntax("-64Mi".into()))),
        ("", Err(SizeError::Syntax(String::new()))),
    ];
    for (text, want) in cases {
        assert_eq!(size::parse(text), want, "{text}");
    }
}

#[test]
fn tmpfs_options_quote_the_selinux_context() {
    let cases = [
        ("", Some("size=1048576,mode=0700")),
        (
            "system_u:object_r:container_file_t:s0",
            Some("size=1048576,mode=0700,context=\"system_u:object_r:container_file_t:s0\""),
        ),
        (
            "system_u:object_r:container_file_t:s0:c1,c2",
            Some("size=1048576,mode=0700,context=\"system_u:object_r:container_file_t:s0:c1,c2\""),
        ),
        ("a\"b", None),
        ("a\nb", None),
        ("  ", None),
    ];
    for (context, want) in cases {
        let got = tmpfs_options(1 << 20, context);
        match (got, want) {
            (Ok(options), Some(want)) => assert_eq!(options, want),
            (Err(MountError::Context(c)), None) => assert_eq!(c, context),
            (got, want) => panic!("{context:?}: {got:?}, want {want:?}"),
        }
    }
}
