use tonic::Code;

use super::decide::{self, Again};
use super::*;
use crate::csi::attributes::{key, kubelet};
use crate::csi::proto::VolumeCapability;
use crate::csi::proto::volume_capability::{AccessType, BlockVolume, MountVolume};
use crate::csi::store::TOKENS_KEY;

fn request() -> NodePublishVolumeRequest {
    crate::csi::testing::publish_request(
        "csi-0b9d",
        "/var/lib/kubelet/pods/0b9d/volumes/kubernetes.io~csi/tls/mount",
        crate::csi::testing::pod_context(&[(TOKENS_KEY, "{\"\":{\"token\":\"t\"}}")]),
    )
}

type Edit = fn(&mut NodePublishVolumeRequest);

/// Every refusal of a Publish, with its code and exact message.
#[test]
fn publish_refusals() {
    let cases: &[(&str, Edit, Code, &str)] = &[
        (
            "no volume id",
            |r| r.volume_id.clear(),
            Code::InvalidArgument,
            "volume_id is empty",
        ),
        (
            "a path as volume id",
            |r| r.volume_id = "../x".into(),
            Code::InvalidArgument,
            "volume_id \"../x\" is not one this plugin can store: letters, digits, '-', '_' and '.', not first, at most 128",
        ),
        (
            "no target",
            |r| r.target_path.clear(),
            Code::InvalidArgument,
            "target_path is empty",
        ),
        (
            "no capability",
            |r| r.volume_capability = None,
            Code::InvalidArgument,
            "volume_capability is missing",
        ),
        (
            "block",
            |r| {
                r.volume_capability = Some(VolumeCapability {
                    access_type: Some(AccessType::Block(BlockVolume {})),
                    access_mode: None,
                });
            },
            Code::InvalidArgument,
            "a block volume cannot hold certificate files: this driver serves mount volumes",
        ),
        (
            "no access type",
            |r| r.volume_capability = Some(VolumeCapability::default()),
            Code::InvalidArgument,
            "volume_capability has no access type (mount)",
        ),
        (
            "read-write",
            |r| r.readonly = false,
            Code::InvalidArgument,
            "pod.spec.volumes[].csi.readOnly must be true: the certificate files are read-only",
        ),
        (
            "not ephemeral",
            |r| {
                r.volume_context.remove(kubelet::EPHEMERAL);
            },
            Code::InvalidArgument,
            "only inline pod volumes are served, and csi.storage.k8s.io/ephemeral is not \"true\": the CSIDriver needs volumeLifecycleModes [Ephemeral] and podInfoOnMount true",
        ),
        (
            "no pod info",
            |r| {
                r.volume_context.remove(kubelet::POD_UID);
            },
            Code::InvalidArgument,
            "kubelet sent no pod name, namespace and UID: the CSIDriver needs podInfoOnMount true",
        ),
        (
            "attributes",
            |r| {
                r.volume_context.insert(key::IS_CA.into(), "no".into());
            },
            Code::InvalidArgument,
            "invalid volume attributes: csi.cert-manager.io/is-ca: must be \"true\" or \"false\", not \"no\"",
        ),
        (
            "mount group",
            |r| {
                r.volume_capability = Some(VolumeCapability {
                    access_type: Some(AccessType::Mount(MountVolume {
                        volume_mount_group: "staff".into(),
                        ..Default::default()
                    })),
                    access_mode: None,
                });
            },
            Code::InvalidArgument,
            "volume_mount_group \"staff\" is not a group ID",
        ),
    ];
    for (name, edit, code, message) in cases {
        let mut r = request();
        edit(&mut r);
        let status = decide::publish(&r).unwrap_err();
        assert_eq!((status.code(), status.message()), (*code, *message), "{name}");
    }
}

#[test]
fn a_publish_keeps_no_token_and_takes_the_groups() {
    let mut r = request();
    r.volume_capability = Some(VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume {
            volume_mount_group: "3000".into(),
            ..Default::default()
        })),
        access_mode: None,
    });
    let publish = decide::publish(&r).unwrap();
    assert_eq!(publish.group, Some(3000));
    assert_eq!(publish.metadata.volume_mount_group.as_deref(), Some("3000"));
    assert!(!publish.metadata.volume_context().contains_key(TOKENS_KEY));
    assert_eq!(publish.pod.namespace, "shop");

    r.volume_context.insert(key::FS_GROUP.into(), "2000".into());
    assert_eq!(decide::publish(&r).unwrap().group, Some(2000), "fs-group wins");
}

#[test]
fn republish() {
    let publish = decide::publish(&request()).unwrap();
    let mut stored = publish.metadata.clone();
    assert_eq!(decide::again(&stored, &publish).unwrap(), Again::Pending);
    stored.next_issuance_time = Some(jiff::Timestamp::UNIX_EPOCH);
    assert_eq!(decide::again(&stored, &publish).unwrap(), Again::Issued);

    // A fresh token (requiresRepublish) is the same volume.
    let mut fresh = request();
    fresh
        .volume_context
        .insert(TOKENS_KEY.into(), "{\"\":{\"token\":\"u\"}}".into());
    assert_eq!(
        decide::again(&stored, &decide::publish(&fresh).unwrap()).unwrap(),
        Again::Issued
    );

    let cases: &[(&str, Edit, &str)] = &[
        (
            "other target",
            |r| r.target_path = "/elsewhere".into(),
            "volume csi-0b9d is published at another target, /var/lib/kubelet/pods/0b9d/volumes/kubernetes.io~csi/tls/mount",
        ),
        (
            "other attributes",
            |r| {
                r.volume_context.insert(key::DNS_NAMES.into(), "a".into());
            },
            "volume csi-0b9d is published with other attributes",
        ),
    ];
    for (name, edit, message) in cases {
        let mut r = request();
        edit(&mut r);
        let status = decide::again(&stored, &decide::publish(&r).unwrap()).unwrap_err();
        assert_eq!(
            (status.code(), status.message()),
            (Code::AlreadyExists, *message),
            "{name}"
        );
    }
}

#[test]
fn unpublish_refusals() {
    let ok = NodeUnpublishVolumeRequest {
        volume_id: "v".into(),
        target_path: "/t".into(),
    };
    assert!(decide::unpublish(&ok).is_ok());
    let cases = [
        (
            NodeUnpublishVolumeRequest {
                volume_id: String::new(),
                target_path: "/t".into(),
            },
            "volume_id is empty",
        ),
        (
            NodeUnpublishVolumeRequest {
                volume_id: "v".into(),
                target_path: String::new(),
            },
            "target_path is empty",
        ),
    ];
    for (r, message) in cases {
        let status = decide::unpublish(&r).unwrap_err();
        assert_eq!(
            (status.code(), status.message()),
            (Code::InvalidArgument, message)
        );
    }
}

#[test]
fn the_one_capability_is_volume_mount_group() {
    let caps = capabilities().capabilities;
    assert_eq!(caps.len(), 1);
    let Some(node_service_capability::Type::Rpc(rpc)) = &caps[0].r#type else {
        panic!("rpc")
    };
    assert_eq!(rpc.r#type, 6, "VOLUME_MOUNT_GROUP is 6 in the spec");
}

#[test]
fn a_full_node_takes_no_new_volume() {
    let full = |held: usize| {
        format!(
            "node node-1 holds {held} certificate volumes, its limit (--max-volumes 256); \
             kubelet retries once other pods' volumes are released"
        )
    };
    let cases = [
        (0, None),
        (255, None),
        (256, Some(full(256))),
        (300, Some(full(300))),
    ];
    for (held, want) in cases {
        let got = decide::room(held, 256, "node-1").err();
        let got = got.map(|s| (s.code(), s.message().to_string()));
        assert_eq!(got, want.map(|m| (Code::ResourceExhausted, m)), "{held}");
    }
}
