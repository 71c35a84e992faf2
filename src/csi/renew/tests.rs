mod io;

use super::*;
use crate::csi::attributes::key;
use crate::csi::testing::{pod_context, publish_request};

#[test]
fn a_stored_volume_reads_back_as_its_publish() {
    type Row = (
        &'static str,
        &'static [(&'static str, &'static str)],
        &'static str,
    );
    let cases: [Row; 3] = [
        ("plain", &[], ""),
        ("mount group", &[(key::DNS_NAMES, "web.shop.svc")], "2000"),
        (
            "fs-group and reuse",
            &[(key::FS_GROUP, "3000"), (key::REUSE_PRIVATE_KEY, "true")],
            "2000",
        ),
    ];
    for (row, extra, group) in cases {
        let mut request = publish_request("csi-0b9d", "/var/lib/kubelet/t", pod_context(extra));
        if let Some(crate::csi::proto::volume_capability::AccessType::Mount(mount)) = request
            .volume_capability
            .as_mut()
            .and_then(|c| c.access_type.as_mut())
        {
            mount.volume_mount_group = group.into();
        }
        let publish = decide::publish(&request).unwrap();
        let mut stored = publish.metadata.clone();
        stored.next_issuance_time = Some(Timestamp::UNIX_EPOCH);
        assert_eq!(publish_of(&stored).unwrap(), publish, "{row}");
    }
}

#[test]
fn stored_attributes_that_no_longer_parse_are_refused() {
    let request = publish_request("csi-0b9d", "/t", pod_context(&[]));
    let publish = decide::publish(&request).unwrap();
    let mut context = publish.metadata.volume_context().clone();
    context.insert(key::DURATION.into(), "soon".into());
    let stored = Metadata::new("csi-0b9d", "/t", &context);
    let status = publish_of(&stored).unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
}
