use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::ByteString;
use tonic::Code;
use x509_parser::prelude::{FromDer, GeneralName, ParsedExtension, X509CertificationRequest};

mod io;

use super::outcome::{Outcome, denied_event, outcome};
use super::shape::{certificate_request, certificate_spec, hash_identifier, request_name};
use super::*;
use crate::api::certmanager::{CertificateRequestCondition, CertificateRequestStatus};
use crate::certificates::fixtures;
use crate::csi::attributes::key;
use crate::csi::node::decide;
use crate::pki::keys::KeySpec;

/// A checked Publish of volume `csi-0b9d` of pod `shop/web-0` with `extra` attributes.
fn publish(extra: &[(&str, &str)]) -> Publish {
    let request = crate::csi::testing::publish_request(
        "csi-0b9d",
        "/var/lib/kubelet/pods/0b9d/volumes/kubernetes.io~csi/tls/mount",
        crate::csi::testing::pod_context(extra),
    );
    decide::publish(&request).unwrap()
}

/// Computed apart (a few lines of Python: FNV-1 32, decimal, apimachinery's alphabet).
#[test]
fn hash_identifier_is_csi_libs() {
    let cases = [
        ("", "65bb57b6b5"),
        ("node-1", "9bd6bbf5f"),
        ("csi-0b9d", "6d5c58c744"),
    ];
    for (text, want) in cases {
        assert_eq!(hash_identifier(text), want, "{text:?}");
    }
}

#[test]
fn request_names_are_version_4_uuids() {
    let cases = [
        ([0u8; 16], "00000000-0000-4000-8000-000000000000"),
        ([0xff; 16], "ffffffff-ffff-4fff-bfff-ffffffffffff"),
        (
            [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16],
            "01020304-0506-4708-890a-0b0c0d0e0f10",
        ),
    ];
    for (bytes, want) in cases {
        assert_eq!(request_name(bytes), want);
    }
}

#[test]
fn the_request_has_csi_libs_shape() {
    let publish = publish(&[
        (key::ISSUER_KIND, "ClusterIssuer"),
        (key::DURATION, "1h"),
        (key::IS_CA, "true"),
        (key::KEY_USAGES, "cert sign,server auth"),
        (key::DNS_NAMES, "web.shop.svc"),
        ("example.com/team", "payments"),
    ]);
    let got = certificate_request(&publish, "node-1", "0000-name", "PEM");
    let want = serde_json::json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "CertificateRequest",
        "metadata": {
            "name": "0000-name",
            "namespace": "shop",
            "labels": {
                "csi.cert-manager.io/node-id-hash": "9bd6bbf5f",
                "csi.cert-manager.io/volume-id-hash": "6d5c58c744",
            },
            "annotations": {"example.com/team": "payments"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "web-0", "uid": "0b9d"}],
        },
        "spec": {
            "request": "UEVN",
            "issuerRef": {"name": "ca", "kind": "ClusterIssuer", "group": "cfssl-issuer.wikimedia.org"},
            "duration": "1h0m0s",
            "isCA": true,
            "usages": ["cert sign", "server auth"],
        },
    });
    assert_eq!(serde_json::to_value(&got).unwrap(), want);
}

/// What a CSR built from a volume's attributes says, read back with x509-parser.
fn csr_facts(publish: &Publish) -> (String, Vec<String>) {
    let key = fixtures::ec();
    let pem = crate::pki::request::build_csr(&certificate_spec(&publish.attributes), key).unwrap();
    let der = ::pem::parse(pem).unwrap().into_contents();
    let (_, csr) = X509CertificationRequest::from_der(&der).unwrap();
    let subject = csr.certification_request_info.subject.to_string();
    let mut names = Vec::new();
    for extension in csr.requested_extensions().into_iter().flatten() {
        if let ParsedExtension::KeyUsage(usage) = extension {
            names.push(format!("KU:{usage}"));
        }
        if let ParsedExtension::ExtendedKeyUsage(eku) = extension {
            names.push(format!(
                "EKU:server={},client={}",
                eku.server_auth, eku.client_auth
            ));
        }
        if let ParsedExtension::SubjectAlternativeName(san) = extension {
            for name in &san.general_names {
                names.push(match name {
                    GeneralName::DNSName(d) => format!("DNS:{d}"),
                    GeneralName::IPAddress(ip) => format!("IP:{}", hex::encode(ip)),
                    GeneralName::URI(u) => format!("URI:{u}"),
                    other => format!("{other:?}"),
                });
            }
        }
    }
    (subject, names)
}

/// cert-manager's usages when none are asked for, as x509-parser prints them.
const DEFAULT_USAGES: &str = "KU:Digital Signature, Key Encipherment";

#[test]
fn csrs_parse_back_to_the_attributes() {
    type Row = (
        &'static str,
        &'static [(&'static str, &'static str)],
        &'static str,
        &'static [&'static str],
    );
    let cases: &[Row] = &[
        (
            "names expanded",
            &[
                (key::DNS_NAMES, "${POD_NAME}.${POD_NAMESPACE}.svc"),
                (key::COMMON_NAME, "web"),
            ],
            "CN=web",
            &["DNS:web-0.shop.svc", DEFAULT_USAGES],
        ),
        (
            "ip and uri",
            &[
                (key::IP_SANS, "10.0.0.1"),
                (key::URI_SANS, "spiffe://cluster/ns/shop/sa/web"),
            ],
            "",
            &[
                "IP:0a000001",
                "URI:spiffe://cluster/ns/shop/sa/web",
                DEFAULT_USAGES,
            ],
        ),
        (
            "subject fields",
            &[
                (key::COMMON_NAME, "web"),
                (key::ORGANIZATIONS, "Shop"),
                (key::COUNTRIES, "NL"),
            ],
            "C=NL, O=Shop, CN=web",
            &[DEFAULT_USAGES],
        ),
        (
            "literal subject",
            &[(key::LITERAL_SUBJECT, "CN=web,O=Shop")],
            "O=Shop, CN=web",
            &[DEFAULT_USAGES],
        ),
        (
            "a CA signs certificates",
            &[(key::COMMON_NAME, "ca"), (key::IS_CA, "true")],
            "CN=ca",
            &["KU:Digital Signature, Key Encipherment, Key Cert Sign"],
        ),
        (
            "usages asked for",
            &[
                (key::COMMON_NAME, "web"),
                (key::KEY_USAGES, "digital signature,server auth,client auth"),
            ],
            "CN=web",
            &["KU:Digital Signature", "EKU:server=true,client=true"],
        ),
    ];
    for (row, extra, subject, names) in cases {
        let (got_subject, got_names) = csr_facts(&publish(extra));
        assert_eq!(got_subject, *subject, "{row}");
        assert_eq!(got_names, *names, "{row}");
    }
}

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> CertificateRequestCondition {
    CertificateRequestCondition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        ..CertificateRequestCondition::default()
    }
}

fn request_with(conditions: Vec<CertificateRequestCondition>, certificate: &[u8]) -> CertificateRequest {
    let mut request =
        CertificateRequest::new("r", crate::api::certmanager::CertificateRequestSpec::default());
    request.status = Some(CertificateRequestStatus {
        conditions,
        certificate: (!certificate.is_empty()).then(|| ByteString(certificate.to_vec())),
        ca: Some(ByteString(b"CA".to_vec())),
        ..CertificateRequestStatus::default()
    });
    request
}

#[test]
fn outcomes_of_conditions() {
    let issued = || Outcome::Issued {
        certificate: "CERT".into(),
        ca: "CA".into(),
    };
    let long = "x".repeat(1200);
    let cases = vec![
        ("no conditions", vec![], &b""[..], Outcome::Waiting),
        (
            "approved only",
            vec![condition("Approved", "True", "policy", "")],
            b"",
            Outcome::Waiting,
        ),
        (
            "pending",
            vec![condition("Ready", "False", "Pending", "waiting")],
            b"",
            Outcome::Waiting,
        ),
        (
            "issued",
            vec![condition("Ready", "True", "Issued", "")],
            b"CERT",
            issued(),
        ),
        (
            "ready without a certificate",
            vec![condition("Ready", "True", "Issued", "")],
            b"",
            Outcome::Failed("it is Ready but has no certificate".into()),
        ),
        (
            "denied wins over ready",
            vec![
                condition("Ready", "True", "Issued", ""),
                condition("Denied", "True", "policy", "no"),
            ],
            b"CERT",
            Outcome::Denied("no".into()),
        ),
        (
            "ready false denied",
            vec![condition("Ready", "False", "Denied", "by policy")],
            b"",
            Outcome::Denied("by policy".into()),
        ),
        (
            "failed",
            vec![condition("Ready", "False", "Failed", "CA down")],
            b"",
            Outcome::Failed("CA down".into()),
        ),
        (
            "invalid",
            vec![condition("InvalidRequest", "True", "BadCSR", "bad")],
            b"",
            Outcome::Failed("bad".into()),
        ),
        (
            "long message cut",
            vec![condition("Denied", "True", "policy", &long)],
            b"",
            Outcome::Denied(format!("{}...", "x".repeat(1000))),
        ),
        (
            "certificate not text",
            vec![condition("Ready", "True", "Issued", "")],
            &[0xff, 0xfe][..],
            Outcome::Failed("its certificate is not PEM text".into()),
        ),
    ];
    for (row, conditions, certificate, want) in cases {
        assert_eq!(outcome(&request_with(conditions, certificate)), want, "{row}");
    }
    let huge = vec![b'A'; outcome::MAX_PEM + 1];
    assert_eq!(
        outcome(&request_with(
            vec![condition("Ready", "True", "Issued", "")],
            &huge
        )),
        Outcome::Failed("its certificate is larger than 262144 bytes".into())
    );
}

#[test]
fn error_codes_and_messages() {
    let request = || "shop/r-1".to_string();
    let cases = [
        (
            IssueError::Denied {
                request: request(),
                message: "not this pod".into(),
            },
            Code::FailedPrecondition,
            "volume csi-1: CertificateRequest shop/r-1 was denied: not this pod",
        ),
        (
            IssueError::Failed {
                request: request(),
                message: "CA refused".into(),
            },
            Code::Aborted,
            "volume csi-1: CertificateRequest shop/r-1 failed: CA refused",
        ),
        (
            IssueError::Deleted { request: request() },
            Code::Aborted,
            "volume csi-1: CertificateRequest shop/r-1 was deleted before it was issued",
        ),
        (
            IssueError::Deadline {
                request: request(),
                waited: Duration::from_secs(60),
            },
            Code::DeadlineExceeded,
            "volume csi-1: CertificateRequest shop/r-1 is not issued after 60s (not approved yet?); the next Publish waits for it again",
        ),
        (
            IssueError::Certificate {
                request: request(),
                source: files::CertificateError::OtherKey,
            },
            Code::Internal,
            "volume csi-1: CertificateRequest shop/r-1 cannot be used: its certificate is not for the volume's private key",
        ),
    ];
    for (error, code, message) in cases {
        let status = error.status("csi-1");
        assert_eq!((status.code(), status.message()), (code, message));
    }
}

/// Two thirds through 2026-01-01..31 moved by the jitter share of volume `csi-0b9d`.
pub(super) fn jittered_two_thirds() -> Timestamp {
    let spread = crate::certificates::renewal::spread_of("csi-0b9d");
    let at = |t: &str| t.parse::<Timestamp>().unwrap();
    let due = crate::csi::due::next_issuance(
        at("2026-01-01T00:00:00Z"),
        at("2026-01-31T00:00:00Z"),
        None,
        at("2026-01-01T00:00:00Z"),
        spread,
    );
    assert!(due < at("2026-01-21T00:00:00Z") && due >= at("2026-01-18T00:00:00Z"));
    due
}

#[test]
fn an_issued_certificate_must_be_for_the_volumes_key() {
    let publish = publish(&[(key::DNS_NAMES, "web.shop.svc"), (key::KEY_ALGORITHM, "ECDSA")]);
    let spec = certificate_spec(&publish.attributes);
    let key = fixtures::key(KeySpec::Ecdsa(256), false);
    let other = fixtures::key(KeySpec::Ecdsa(256), true);
    let pem =
        |k| String::from_utf8(fixtures::certificate_pem(&spec, k, (2026, 1, 1), (2026, 1, 31))).unwrap();
    let own = pem(key);
    let now = "2026-01-01T00:00:00Z".parse().unwrap();
    let issued = files::issued(
        key,
        (own.clone(), "CA".into()),
        &publish.attributes,
        ("csi-0b9d", now),
    )
    .unwrap();
    assert_eq!(issued.next_issuance_time, jittered_two_thirds());
    assert_eq!(issued.certificate_pem, own);
    assert!(issued.private_key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
    let refused = files::issued(
        key,
        (pem(other), "CA".into()),
        &publish.attributes,
        ("csi-0b9d", now),
    )
    .unwrap_err();
    assert!(matches!(refused, files::CertificateError::OtherKey), "{refused}");
}

#[test]
fn a_denial_leaves_a_warning_on_the_pod() {
    let publish = publish(&[]);
    let now: Timestamp = "2026-11-27T12:00:00Z".parse().unwrap();
    let event = denied_event(&publish, "node-1", "shop/r-1", "not this pod", now);
    let want = serde_json::json!({
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": format!("web-0.{:x}", now.as_nanosecond()), "namespace": "shop"},
        "eventTime": "2026-11-27T12:00:00.000000Z",
        "type": "Warning",
        "reason": "CertificateRequestDenied",
        "action": "Issuing",
        "note": "volume csi-0b9d: CertificateRequest shop/r-1 was denied: not this pod",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "name": "web-0", "namespace": "shop", "uid": "0b9d"},
        "reportingController": "cfssl-issuer-csi",
        "reportingInstance": "cfssl-issuer-csi-node-1",
    });
    assert_eq!(serde_json::to_value(&event).unwrap(), want);
}

#[test]
fn only_a_request_in_flight_keeps_its_volume() {
    let cases = [
        (Code::DeadlineExceeded, true),
        (Code::FailedPrecondition, false),
        (Code::Aborted, false),
        (Code::Internal, false),
        (Code::Unavailable, false),
    ];
    for (code, keep) in cases {
        assert_eq!(decide::keep_after(code), keep, "{code:?}");
    }
}

#[test]
fn pending_issuance_round_trips_private_and_0600() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path()).unwrap();
    let publish = publish(&[]);
    store.put_metadata(&publish.metadata).unwrap();
    assert_eq!(store.pending("csi-0b9d").unwrap(), None);
    let pending = Pending {
        request: "r-1".into(),
        private_key_pem: "KEY".into(),
        since: "2026-11-27T12:00:00Z".parse().unwrap(),
    };
    store.put_pending("csi-0b9d", &pending).unwrap();
    assert_eq!(store.pending("csi-0b9d").unwrap(), Some(pending.clone()));
    let file = tmp.path().join("csi-0b9d/pending.json");
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        format!("{pending:?}"),
        "Pending { request: \"r-1\", since: 2026-11-27T12:00:00Z, .. }"
    );
    store.clear_pending("csi-0b9d").unwrap();
    store.clear_pending("csi-0b9d").unwrap();
    assert_eq!(store.pending("csi-0b9d").unwrap(), None);
}

#[test]
fn keystores_and_bundle_hold_the_key_and_chain_as_asked() {
    use crate::csi::attributes::own;
    use crate::pki::keystore::{jks_opens_with, pkcs12_opens_with};
    let publish = publish(&[
        (key::DNS_NAMES, "web.shop.svc"),
        (key::KEY_ALGORITHM, "ECDSA"),
        (key::PKCS12_ENABLE, "true"),
        (key::PKCS12_PASSWORD, "p12-pass"),
        (own::JKS_ENABLE, "true"),
        (own::JKS_PASSWORD, "jks-pass"),
        (own::BUNDLE_FILE, "tls-combined.pem"),
    ]);
    let spec = certificate_spec(&publish.attributes);
    let key = fixtures::key(KeySpec::Ecdsa(256), false);
    let leaf = String::from_utf8(fixtures::certificate_pem(&spec, key, (2026, 1, 1), (2026, 1, 31))).unwrap();
    let at = ("csi-0b9d", "2026-01-01T00:00:00Z".parse().unwrap());
    let issued = files::issued(key, (leaf.clone(), leaf.clone()), &publish.attributes, at).unwrap();
    let names: Vec<&str> = issued.keystores.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["tls-combined.pem", "keystore.p12", "keystore.jks"]);
    let bundle = String::from_utf8(issued.keystores[0].contents.clone()).unwrap();
    assert_eq!(bundle, format!("{}{leaf}", issued.private_key_pem));
    assert!(pkcs12_opens_with(&issued.keystores[1].contents, "p12-pass"));
    assert!(!pkcs12_opens_with(&issued.keystores[1].contents, "jks-pass"));
    assert!(jks_opens_with(&issued.keystores[2].contents, "jks-pass"));
    assert!(!jks_opens_with(&issued.keystores[2].contents, "p12-pass"));
    let plain = publish_files_only(&publish);
    let none = files::issued(key, (leaf.clone(), leaf), &plain.attributes, at).unwrap();
    assert!(none.keystores.is_empty());
}

fn publish_files_only(with: &Publish) -> Publish {
    let mut plain = with.clone();
    plain.attributes.files.pkcs12 = None;
    plain.attributes.files.jks = None;
    plain.attributes.files.bundle = None;
    plain
}
