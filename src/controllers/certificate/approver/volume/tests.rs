use k8s_openapi::ByteString;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};

use super::*;
use crate::controllers::certificate::testing::event;
use crate::csi::approval::volume_handle;
use crate::csi::attributes::key;
use crate::csi::testing::{plugin_request, pod};

const ASKED: [(&str, &str); 3] = [
    (key::ISSUER_NAME, "ca"),
    (key::DNS_NAMES, "${POD_NAME}.shop.svc"),
    (key::KEY_ALGORITHM, "ECDSA"),
];

/// The request the plugin on `node-1` makes for volume `tls` of [`pod`] asking [`ASKED`].
fn genuine() -> CertificateRequest {
    plugin_request(&pod(&ASKED), "tls", "node-1")
}

fn owner(kind: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        ..OwnerReference::default()
    }
}

fn with_volume_attributes(mut pod: Pod, pairs: &[(&str, &str)]) -> Pod {
    let volumes = pod
        .spec
        .as_mut()
        .and_then(|s| s.volumes.as_mut())
        .expect("volumes");
    let csi = volumes[1].csi.as_mut().expect("tls");
    csi.volume_attributes = Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    pod
}

type Edit<T> = &'static dyn Fn(&mut T);
/// A case: why, what changes in the request and in the Pod, the check that fails.
type Row = (&'static str, Edit<CertificateRequest>, Edit<Pod>, Option<Failed>);

/// Every check, in order, failing alone; and the plugin's own request passing.
#[test]
fn verdict_table() {
    let unreadable = crate::pki::check_csr_pem(b"not a CSR")
        .expect_err("not PEM")
        .to_string();
    let invalid = crate::csi::attributes::parse(
        &crate::csi::testing::pod_context(&[(key::IS_CA, "maybe")]),
        &crate::csi::approval::pod_info(&pod(&ASKED)),
    )
    .expect_err("invalid")
    .to_string();
    let rows: [Row; 17] = [
        ("the plugin's own", &|_| {}, &|_| {}, None),
        (
            "no owner",
            &|r| r.metadata.owner_references = None,
            &|_| {},
            Some(Failed::Owner),
        ),
        (
            "two owners",
            &|r| {
                r.metadata
                    .owner_references
                    .as_mut()
                    .unwrap()
                    .push(owner("Pod", "web-1", "0b9e"));
            },
            &|_| {},
            Some(Failed::Owner),
        ),
        (
            "a Deployment owner",
            &|r| r.metadata.owner_references = Some(vec![owner("Deployment", "web", "0b9d")]),
            &|_| {},
            Some(Failed::Owner),
        ),
        (
            "no such Pod",
            &|_| {},
            &|_| {},
            Some(Failed::PodGone("web-0".into())),
        ),
        (
            "another Pod's UID",
            &|r| r.metadata.owner_references = Some(vec![owner("Pod", "web-0", "0b9e")]),
            &|_| {},
            Some(Failed::PodUid("web-0".into())),
        ),
        (
            "not scheduled",
            &|_| {},
            &|p| p.spec.as_mut().unwrap().node_name = None,
            Some(Failed::NotScheduled("web-0".into())),
        ),
        (
            "succeeded",
            &|_| {},
            &|p| p.status.as_mut().unwrap().phase = Some("Succeeded".into()),
            Some(Failed::Terminated("web-0".into())),
        ),
        (
            "being deleted",
            &|_| {},
            &|p| p.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH)),
            Some(Failed::Terminated("web-0".into())),
        ),
        (
            "another node's label",
            &|r| {
                let labels = r.metadata.labels.as_mut().unwrap();
                labels.insert(NODE_ID_HASH.into(), hash_identifier("node-2"));
            },
            &|_| {},
            Some(Failed::Node("node-1".into())),
        ),
        (
            "the emptyDir's volume label",
            &|r| {
                let labels = r.metadata.labels.as_mut().unwrap();
                labels.insert(
                    VOLUME_ID_HASH.into(),
                    hash_identifier(&volume_handle("0b9d", "cache")),
                );
            },
            &|_| {},
            Some(Failed::Volume("web-0".into())),
        ),
        (
            "the volume is another driver's",
            &|_| {},
            &|p| {
                let volumes = p.spec.as_mut().unwrap().volumes.as_mut().unwrap();
                volumes[1].csi.as_mut().unwrap().driver = "csi.cert-manager.io".into();
            },
            Some(Failed::Volume("web-0".into())),
        ),
        (
            "the volume's attributes are invalid",
            &|_| {},
            &|p| *p = with_volume_attributes(p.clone(), &[(key::ISSUER_NAME, "ca"), (key::IS_CA, "maybe")]),
            Some(Failed::Attributes("tls".into(), invalid.clone())),
        ),
        (
            "a DNS name the volume does not ask",
            &|_| {},
            &|p| {
                let asked = [
                    ASKED[0],
                    (key::DNS_NAMES, "web-0.shop.svc,admin.shop.svc"),
                    ASKED[2],
                ];
                *p = with_volume_attributes(p.clone(), &asked);
            },
            Some(Failed::Differs("tls".into(), vec!["spec.dnsNames".into()])),
        ),
        (
            "a CA and longer",
            &|r| {
                r.spec.is_ca = true;
                r.spec.duration = Some("87600h0m0s".into());
            },
            &|_| {},
            Some(Failed::Differs(
                "tls".into(),
                vec!["spec.isCA".into(), "spec.duration".into()],
            )),
        ),
        (
            "an unreadable CSR",
            &|r| r.spec.request = ByteString(b"not a CSR".to_vec()),
            &|_| {},
            Some(Failed::Csr(unreadable.clone())),
        ),
        (
            "not our issuer kind",
            &|r| r.spec.issuer_ref.kind = "ClusterIssuers".into(),
            &|_| {},
            Some(Failed::IssuerKind("ClusterIssuers".into())),
        ),
    ];
    for (why, edit_request, edit_pod, want) in rows {
        let mut request = genuine();
        edit_request(&mut request);
        let mut live = pod(&ASKED);
        edit_pod(&mut live);
        let seen = (why != "no such Pod").then_some(&live);
        assert_eq!(verdict(&request, seen).err(), want, "{why}");
    }
}

#[test]
fn which_requests_are_judged_here() {
    let decided = {
        let mut cr = genuine();
        cr.status.get_or_insert_with(Default::default).conditions.push(
            crate::api::certmanager::CertificateRequestCondition {
                type_: DENIED.into(),
                status: "True".into(),
                ..Default::default()
            },
        );
        cr
    };
    let rows: [(&str, CertificateRequest, bool); 5] = [
        ("the plugin's own", genuine(), true),
        ("decided", decided, false),
        (
            "another group's",
            {
                let mut cr = genuine();
                cr.spec.issuer_ref.group = "cert-manager.io".into();
                cr
            },
            false,
        ),
        (
            "labels alone",
            {
                let mut cr = genuine();
                cr.metadata.owner_references = None;
                cr
            },
            true,
        ),
        (
            "neither labels nor a Pod",
            {
                let mut cr = genuine();
                cr.metadata.owner_references = None;
                cr.metadata.labels = None;
                cr
            },
            false,
        ),
    ];
    for (why, cr, want) in rows {
        assert_eq!(claims(&cr), want, "{why}");
    }
    assert_eq!(pod_name(&genuine()), Some("web-0"));
}

#[test]
fn plans_tell_a_failure_once() {
    let now: Timestamp = "2026-03-01T00:00:00Z".parse().unwrap();
    let note = "Not a request of the CSI driver's for a volume of its Pod (its Pod \"web-0\" does \
                not exist): not approved by cfssl-issuer";
    let gone = || Err(Failed::PodGone("web-0".into()));
    let warning = Some(("Warning".to_string(), "NotApproved".to_string(), note.to_string()));
    let rows = [
        ("first told", gone(), None, warning.clone(), false),
        ("told already", gone(), Some(note), None, false),
        (
            "another failure told before",
            gone(),
            Some("other"),
            warning,
            false,
        ),
        (
            "approved",
            Ok(()),
            Some(note),
            Some((
                "Normal".into(),
                super::super::REASON.into(),
                super::super::MESSAGE.into(),
            )),
            true,
        ),
    ];
    for (why, verdict, said, want_event, approves) in rows {
        let plan = decide(verdict, said, now);
        assert_eq!(event(&plan), want_event, "{why}");
        assert_eq!(plan.status.is_some(), approves, "{why}");
        assert_eq!(plan.next, Next::AwaitChange, "{why}");
    }
    assert_eq!(plan_status(now), Some(super::super::approval(now)));
}

fn plan_status(now: Timestamp) -> Option<serde_json::Value> {
    decide(Ok(()), None, now).status
}

#[test]
fn said_remembers_the_last_message_per_request() {
    let said = Said::default();
    assert_eq!(said.get("uid-1"), None);
    said.set("uid-1", "a".into());
    said.set("uid-1", "b".into());
    assert_eq!((said.get("uid-1"), said.get("uid-2")), (Some("b".into()), None));
}

mod io;
