use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::api::certmanager::CertificateRequestCondition;
use crate::certificates::fixtures::{self, at, key};
use crate::certificates::keys::annotation;
use crate::controllers::certificate::testing::{deleted, with_condition, with_status};
use crate::controllers::kit::plan::Create;
use crate::pki::keys::KeySpec;

fn issuing(revision: Option<i64>) -> Certificate {
    let crt = fixtures::certificate("web", fixtures::spec());
    let crt = with_status(crt, |s| s.revision = revision);
    with_condition(crt, ISSUING, "True", "DoesNotExist", "2026-02-01T00:00:00Z")
}

fn request(name: &str, revision: Option<i64>, key: &Key) -> CertificateRequest {
    let mut cr = fixtures::request_for(&fixtures::spec(), key);
    cr.metadata.name = Some(name.to_string());
    cr.metadata.uid = Some(format!("uid-{name}"));
    cr.metadata.annotations =
        revision.map(|r| BTreeMap::from([(annotation::CERTIFICATE_REVISION.to_string(), r.to_string())]));
    cr
}

fn failed_at(mut cr: CertificateRequest, when: &str) -> CertificateRequest {
    let status = cr.status.get_or_insert_with(Default::default);
    status.conditions.push(CertificateRequestCondition {
        type_: READY.into(),
        status: "False".into(),
        reason: REASON_FAILED.into(),
        ..Default::default()
    });
    status.failure_time = Some(Time(at(when)));
    cr
}

/// What a plan writes: the requests it deletes, and the revision of the one it creates.
type Writes = (Vec<&'static str>, Option<i64>);

fn work(delete: &[&'static str], create: Option<i64>) -> Writes {
    (delete.to_vec(), create)
}

/// The revision of the request `plan` creates, if it creates one.
fn created_revision(plan: &FullPlan<()>) -> Option<i64> {
    plan.writes().find_map(|w| match w {
        Write::Create(Create { body, .. }) => body["metadata"]["annotations"]
            [annotation::CERTIFICATE_REVISION]
            .as_str()
            .and_then(|r| r.parse().ok()),
        _ => None,
    })
}

fn facts<'a>(
    crt: &'a Certificate,
    next_key: Option<&'a Key>,
    requests: Vec<&'a CertificateRequest>,
) -> Facts<'a> {
    Facts {
        certificate: crt,
        next_key,
        key_secret: "web-key",
        requests,
        prefixes: &[],
    }
}

#[test]
fn request_manager_table() {
    let ec = fixtures::ec();
    let other = key(KeySpec::Ecdsa(256), true);
    let rsa = key(KeySpec::Rsa(2048), false);
    let good = request("web-1", Some(1), ec);
    let unnumbered = request("web-x", None, ec);
    let other_key = request("web-1", Some(1), other);
    let mut old_spec = fixtures::spec();
    old_spec.dns_names = vec!["old.example.com".into()];
    let mut stale = fixtures::request_for(&old_spec, ec);
    stale.metadata = request("web-1", Some(1), ec).metadata;
    let failed_before = failed_at(request("web-1", Some(1), ec), "2026-01-31T00:00:00Z");
    let failed_since = failed_at(request("web-1", Some(1), ec), "2026-02-02T00:00:00Z");
    let second = request("web-2", Some(2), ec);
    let not_issuing = fixtures::certificate("web", fixtures::spec());
    struct Case<'a> {
        name: &'static str,
        crt: Certificate,
        next_key: Option<&'a Key>,
        requests: Vec<&'a CertificateRequest>,
        writes: Writes,
    }
    let rows = vec![
        Case {
            name: "not issuing",
            crt: not_issuing,
            next_key: Some(ec),
            requests: vec![],
            writes: work(&[], None),
        },
        Case {
            name: "no next key yet",
            crt: issuing(None),
            next_key: None,
            requests: vec![],
            writes: work(&[], None),
        },
        Case {
            name: "next key of another algorithm",
            crt: issuing(None),
            next_key: Some(rsa),
            requests: vec![],
            writes: work(&[], None),
        },
        Case {
            name: "no request: create revision 1",
            crt: issuing(None),
            next_key: Some(ec),
            requests: vec![],
            writes: work(&[], Some(1)),
        },
        Case {
            name: "the request is there",
            crt: issuing(None),
            next_key: Some(ec),
            requests: vec![&good],
            writes: work(&[], None),
        },
        Case {
            name: "a request without a revision goes",
            crt: issuing(None),
            next_key: Some(ec),
            requests: vec![&unnumbered, &good],
            writes: work(&["web-x"], None),
        },
        Case {
            name: "a request for another key is replaced",
            crt: issuing(None),
            next_key: Some(ec),
            requests: vec![&other_key],
            writes: work(&["web-1"], Some(1)),
        },
        Case {
            name: "a request for an old spec is replaced",
            crt: issuing(None),
            next_key: Some(ec),
            requests: vec![&stale],
            writes: work(&["web-1"], Some(1)),
        },
        Case {
            name: "failed before this issuance: replaced",
            crt: issuing(None),
            next_key: Some(ec),
            requests: vec![&failed_before],
            writes: work(&["web-1"], Some(1)),
        },
        Case {
            name: "failed during this issuance: kept",
            crt: issuing(None),
            next_key: Some(ec),
            requests: vec![&failed_since],
            writes: work(&[], None),
        },
        Case {
            name: "revision 2 after 1",
            crt: issuing(Some(1)),
            next_key: Some(ec),
            requests: vec![&good],
            writes: work(&[], Some(2)),
        },
        Case {
            name: "revision 2 there",
            crt: issuing(Some(1)),
            next_key: Some(ec),
            requests: vec![&good, &second],
            writes: work(&[], None),
        },
    ];
    for Case {
        name,
        crt,
        next_key,
        requests,
        writes: (delete, create),
    } in rows
    {
        let facts = facts(&crt, next_key, requests);
        let plan = decide(&facts);
        // Only a pass that signs a CSR goes to the crypto pool.
        assert_eq!(signs(&facts), create.is_some(), "{name}: signs");
        assert_eq!(plan.plan, Plan::idle(Next::AwaitChange), "{name}");
        assert_eq!(deleted(&plan), delete, "{name}");
        assert_eq!(created_revision(&plan), create, "{name}");
    }
}

#[test]
fn request_names_table() {
    let long = "a".repeat(240);
    let digest = hex::encode(Sha256::digest(long.as_bytes()));
    let dotted = format!("{}.b{}", "a".repeat(167), "c".repeat(100));
    let dotted_digest = hex::encode(Sha256::digest(dotted.as_bytes()));
    let rows = [
        ("web".to_string(), 1, "web-1".to_string()),
        ("a".repeat(233), 7, format!("{}-7", "a".repeat(233))),
        (long.clone(), 2, format!("{}-{digest}-2", "a".repeat(168))),
        (
            dotted.clone(),
            3,
            format!("{}-{dotted_digest}-3", "a".repeat(167)),
        ),
    ];
    for (name, revision, want) in rows {
        assert_eq!(request_name(&name, revision), want, "{name}");
    }
}

use sha2::{Digest, Sha256};

#[test]
fn copied_annotations_table() {
    let all: BTreeMap<String, String> = [
        ("team", "a"),
        ("kubectl.kubernetes.io/last-applied-configuration", "{}"),
        ("fluxcd.io/x", "1"),
        ("example.com/keep", "yes"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let prefixes = |p: &[&str]| p.iter().map(ToString::to_string).collect::<Vec<_>>();
    let defaults = prefixes(&[
        "*",
        "-kubectl.kubernetes.io/",
        "-fluxcd.io/",
        "-argocd.argoproj.io/",
    ]);
    let rows: [(&str, Vec<String>, Vec<&str>); 4] = [
        (
            "cert-manager's defaults",
            defaults,
            vec!["example.com/keep", "team"],
        ),
        (
            "one prefix",
            prefixes(&["example.com/"]),
            vec!["example.com/keep"],
        ),
        ("nothing", prefixes(&[]), vec![]),
        (
            "exclusion before all does not exclude",
            prefixes(&["-team", "*"]),
            vec![
                "example.com/keep",
                "fluxcd.io/x",
                "kubectl.kubernetes.io/last-applied-configuration",
                "team",
            ],
        ),
    ];
    for (name, p, want) in rows {
        let got = annotations_to_copy(&all, &p);
        assert_eq!(got.keys().map(String::as_str).collect::<Vec<_>>(), want, "{name}");
    }
}

#[test]
fn the_request_carries_the_spec_labels_annotations_and_owner() {
    let mut crt = fixtures::certificate("web", fixtures::spec());
    crt.metadata.namespace = Some("ns".into());
    crt.metadata.uid = Some("uid-1".into());
    crt.metadata.labels = Some(BTreeMap::from([("app".to_string(), "web".to_string())]));
    crt.metadata.annotations = Some(BTreeMap::from([("team".to_string(), "a".to_string())]));
    crt.spec.duration = Some("2h".into());
    crt.spec.usages = vec!["server auth".into()];
    let ec = fixtures::ec();
    let cr = super::request(&crt, ec, 3, "web-key", &["*".to_string()]).expect("request");
    assert_eq!(cr.metadata.name.as_deref(), Some("web-3"));
    assert_eq!(cr.metadata.namespace.as_deref(), Some("ns"));
    assert_eq!(cr.metadata.labels, crt.metadata.labels);
    let annotations: Vec<(&str, &str)> = cr
        .annotations()
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        annotations,
        [
            ("cert-manager.io/certificate-name", "web"),
            ("cert-manager.io/certificate-revision", "3"),
            ("cert-manager.io/private-key-secret-name", "web-key"),
            ("team", "a"),
        ]
    );
    let owner = &cr.owner_references()[0];
    let mut renewing = crt.clone();
    let not_after = "2026-12-01T00:00:00Z".parse().unwrap();
    renewing.status = Some(crate::api::certmanager::CertificateStatus {
        not_after: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(not_after)),
        ..Default::default()
    });
    let renewal = super::request(&renewing, ec, 3, "web-key", &[]).expect("request");
    assert_eq!(
        renewal
            .annotations()
            .get("cfssl-issuer.wikimedia.org/renew-by")
            .map(String::as_str),
        Some("2026-12-01T00:00:00Z"),
        "a renewal says by when, for its place in the issuance budget's line"
    );
    assert_eq!(
        (owner.uid.as_str(), owner.controller, owner.block_owner_deletion),
        ("uid-1", Some(true), Some(true))
    );
    assert_eq!(
        (cr.spec.duration.as_deref(), cr.spec.is_ca, cr.spec.usages.clone()),
        (Some("2h0m0s"), false, vec!["server auth".to_string()])
    );
    assert_eq!(cr.spec.issuer_ref, crt.spec.issuer_ref);
    assert!(
        crate::certificates::matching::request_has_key(&cr, ec),
        "the CSR is for the next key"
    );
    assert!(request_matches_spec(&cr, &crt.spec).expect("parses").is_empty());
}

/// A request's `spec.duration` as Go's `time.Duration.String` prints the parsed value, as
/// cert-manager's request manager writes it.
#[test]
fn the_request_duration_is_written_as_go_prints_it() {
    let cases = [
        ("2160h", "2160h0m0s"),
        ("90m", "1h30m0s"),
        ("1h", "1h0m0s"),
        ("3600s", "1h0m0s"),
        ("1.5h", "1h30m0s"),
        ("1h0.5s", "1h0m0.5s"),
        ("45s", "45s"),
        ("2m", "2m0s"),
        ("1500ms", "1.5s"),
        ("0.25s", "250ms"),
        ("1h30m0s", "1h30m0s"),
        ("not a duration", "not a duration"),
    ];
    for (text, want) in cases {
        assert_eq!(super::go_duration_string(text), want, "{text}");
        let mut crt = fixtures::certificate("web", fixtures::spec());
        crt.spec.duration = Some(text.into());
        let cr = super::request(&crt, fixtures::ec(), 1, "web-key", &[]).expect("request");
        assert_eq!(cr.spec.duration.as_deref(), Some(want), "{text}");
    }
}
