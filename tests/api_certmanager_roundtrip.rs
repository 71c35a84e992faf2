//! cert-manager objects survive a trip through our types, fields we do not model included, and
//! every field we do model exists in cert-manager's CRDs under that name and type.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

mod api_common;

use api_common::{Walk, compare, load_crd, version_schema};
use cfssl_issuer::api::certmanager::{self, Certificate, CertificateRequest};
use cfssl_issuer::api::{GROUP, IssuerKind};
use kube::{CustomResourceExt, Resource};
use serde_json::{Value, json};

fn certificate_request() -> Value {
    json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "CertificateRequest",
        "metadata": {
            "name": "web-1",
            "namespace": "default",
            "generation": 1,
            "uid": "5b1c9c1e-0000-4000-8000-000000000001",
            "annotations": {
                "cert-manager.io/certificate-name": "web",
                "cert-manager.io/certificate-revision": "1",
                "cert-manager.io/private-key-secret-name": "web-x7kq2",
            },
            "ownerReferences": [{
                "apiVersion": "cert-manager.io/v1", "kind": "Certificate", "name": "web",
                "uid": "5b1c9c1e-0000-4000-8000-000000000002", "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "request": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KLS0tLS1FTkQgQ0VSVElGSUNBVEUgUkVRVUVTVC0tLS0tCg==",
            "issuerRef": {"name": "ca", "kind": "ClusterIssuer", "group": "cfssl-issuer.wikimedia.org", "future": "x"},
            "duration": "2160h0m0s",
            "isCA": true,
            "usages": ["digital signature", "key encipherment", "server auth"],
            "username": "system:serviceaccount:cert-manager:cert-manager",
            "uid": "9f0e1d2c-0000-4000-8000-000000000003",
            "groups": ["system:serviceaccounts", "system:authenticated"],
            "extra": {"authentication.kubernetes.io/pod-name": ["cert-manager-6f7b"]},
            "foo": {"nested": [1, 2, {"deep": true}]},
        },
        "status": {
            "conditions": [
                {
                    "type": "Approved", "status": "True", "reason": "cert-manager.io",
                    "message": "Certificate request has been approved by cert-manager.io",
                    "lastTransitionTime": "2025-01-02T03:04:05Z",
                },
                {
                    "type": "Ready", "status": "True", "reason": "Issued",
                    "message": "Certificate fetched from issuer successfully",
                    "lastTransitionTime": "2025-01-02T03:04:06Z", "futureConditionField": 7,
                },
            ],
            "certificate": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K",
            "ca": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K",
            "failureTime": "2025-01-02T03:04:07Z",
            "bar": "a field of a future cert-manager",
        },
    })
}

fn certificate() -> Value {
    let names = json!({
        "dnsDomains": ["example.org"], "ipRanges": ["10.0.0.0/8"],
        "emailAddresses": ["example.org"], "uriDomains": ["example.org"],
    });
    json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": "web", "namespace": "default", "generation": 4},
        "spec": {
            "secretName": "web-tls",
            "issuerRef": {"name": "ca", "kind": "Issuer", "group": "cfssl-issuer.wikimedia.org"},
            "commonName": "web.example.org",
            "literalSubject": "CN=web.example.org,O=Example",
            "subject": {
                "organizations": ["Example"], "countries": ["NL"], "organizationalUnits": ["Ops"],
                "localities": ["Amsterdam"], "provinces": ["NH"], "streetAddresses": ["Dam 1"],
                "postalCodes": ["1012"], "serialNumber": "42",
            },
            "dnsNames": ["web.example.org", "www.example.org"],
            "ipAddresses": ["192.0.2.1"],
            "uris": ["spiffe://example.org/web"],
            "emailAddresses": ["ops@example.org"],
            "otherNames": [{"oid": "1.3.6.1.4.1.311.20.2.3", "utf8Value": "web@example.org"}],
            "duration": "2160h",
            "renewBefore": "360h",
            "renewBeforePercentage": 25,
            "renewal": {
                "policy": "RenewBefore",
                "windows": [{"cron": "0 2 * * 1-5", "timezone": "Europe/Amsterdam", "windowDuration": "2h"}],
            },
            "isCA": true,
            "usages": ["server auth", "client auth"],
            "encodeUsagesInRequest": false,
            "privateKey": {"algorithm": "ECDSA", "size": 384, "encoding": "PKCS8", "rotationPolicy": "Always"},
            "signatureAlgorithm": "ECDSAWithSHA384",
            "secretTemplate": {"annotations": {"a": "1"}, "labels": {"team": "web"}},
            "keystores": {
                "jks": {"create": true, "alias": "web", "passwordSecretRef": {"name": "jks-pass", "key": "password"}},
                "pkcs12": {"create": false, "profile": "Modern2023", "password": "changeit"},
            },
            "revisionHistoryLimit": 3,
            "additionalOutputFormats": [{"type": "DER"}, {"type": "CombinedPEM"}],
            "nameConstraints": {"critical": true, "permitted": names, "excluded": names},
            "foo": "a field of a future cert-manager",
        },
        "status": {
            "conditions": [
                {
                    "type": "Ready", "status": "True", "reason": "Ready",
                    "message": "Certificate is up to date and has not expired",
                    "lastTransitionTime": "2025-01-02T03:04:05Z", "observedGeneration": 4,
                },
                {"type": "Issuing", "status": "False", "reason": "Issued", "observedGeneration": 4},
            ],
            "notBefore": "2025-01-02T03:04:05Z",
            "notAfter": "2025-04-02T03:04:05Z",
            "renewalTime": "2025-03-03T03:04:05Z",
            "revision": 2,
            "nextPrivateKeySecretName": "web-x7kq2",
            "lastFailureTime": "2025-01-01T00:00:00Z",
            "failedIssuanceAttempts": 1,
            "acme": {"ari": {"lastChecked": "2025-01-02T03:04:05Z"}},
            "bar": {"baz": [true]},
        },
    })
}

fn roundtrip<K>(doc: &Value) -> (K, Value)
where
    K: serde::Serialize + serde::de::DeserializeOwned,
{
    let typed: K = serde_json::from_value(doc.clone()).expect("parses");
    let back = serde_json::to_value(&typed).unwrap();
    (typed, back)
}

#[test]
fn certificate_request_round_trips_exactly() {
    let doc = certificate_request();
    let (cr, back) = roundtrip::<CertificateRequest>(&doc);
    assert_eq!(back, doc);
    assert!(
        cr.spec
            .request
            .0
            .starts_with(b"-----BEGIN CERTIFICATE REQUEST-----")
    );
    assert!(cr.spec.is_ca);
    assert_eq!(cr.spec.issuer_ref.group, GROUP);
    assert_eq!(cr.spec.unknown["foo"]["nested"][2]["deep"], json!(true));
    assert_eq!(cr.spec.issuer_ref.unknown["future"], "x");
    let status = cr.status.as_ref().unwrap();
    assert_eq!(status.unknown["bar"], "a field of a future cert-manager");
    assert!(
        status
            .certificate
            .as_ref()
            .unwrap()
            .0
            .starts_with(b"-----BEGIN CERTIFICATE-----")
    );
    assert!(cr.has_true(certmanager::APPROVED) && !cr.has_true(certmanager::DENIED));
    assert_eq!(
        cr.condition(certmanager::READY).unwrap().reason,
        certmanager::REASON_ISSUED
    );
    assert_eq!(
        IssuerKind::for_issuer_ref(&cr.spec.issuer_ref),
        Some(Ok(IssuerKind::ClusterIssuer))
    );
}

#[test]
fn certificate_round_trips_exactly() {
    let doc = certificate();
    let (cert, back) = roundtrip::<Certificate>(&doc);
    assert_eq!(back, doc);
    assert_eq!(cert.spec.private_key.as_ref().unwrap().size, 384);
    assert_eq!(cert.spec.encode_usages_in_request, Some(false));
    let ari = cert.status.as_ref().unwrap().acme.as_ref().unwrap().ari.as_ref();
    assert_eq!(
        ari.and_then(|a| a.last_checked.as_ref()).map(|t| t.0.to_string()),
        Some("2025-01-02T03:04:05Z".to_string())
    );
    assert!(cert.has_true(certmanager::READY) && !cert.has_true(certmanager::ISSUING));
}

#[test]
fn minimal_objects_round_trip() {
    // What cert-manager writes for a fresh request: no status, optional fields absent.
    let cr = json!({
        "apiVersion": "cert-manager.io/v1", "kind": "CertificateRequest",
        "metadata": {"name": "r", "namespace": "n"},
        "spec": {"request": "", "issuerRef": {"name": "ca"}},
    });
    assert_eq!(roundtrip::<CertificateRequest>(&cr).1, cr);
    let cert = json!({
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": {"name": "c", "namespace": "n"},
        "spec": {"secretName": "s", "issuerRef": {"name": "ca"}, "dnsNames": ["a.example"]},
        "status": {},
    });
    assert_eq!(roundtrip::<Certificate>(&cert).1, cert);
}

#[test]
fn status_patch_body_keeps_unknown_status_fields() {
    // A read-modify-write of status (the fallback when apply is not possible) must send back
    // what it did not understand.
    let (mut cr, _) = roundtrip::<CertificateRequest>(&certificate_request());
    cr.status.as_mut().unwrap().failure_time = None;
    let body = serde_json::to_value(&cr).unwrap();
    assert_eq!(body["status"]["bar"], "a field of a future cert-manager");
    assert_eq!(body["status"]["conditions"][1]["futureConditionField"], 7);
    assert!(body["status"].get("failureTime").is_none());
}

#[test]
fn resource_metadata_matches_cert_manager() {
    assert_eq!(CertificateRequest::api_version(&()), "cert-manager.io/v1");
    assert_eq!(CertificateRequest::plural(&()), "certificaterequests");
    assert_eq!(Certificate::plural(&()), "certificates");
    for (crd, file) in [
        (
            serde_json::to_value(CertificateRequest::crd()).unwrap(),
            "cert-manager.io_certificaterequests.yaml",
        ),
        (
            serde_json::to_value(Certificate::crd()).unwrap(),
            "cert-manager.io_certificates.yaml",
        ),
    ] {
        let theirs = load_crd(file);
        assert_eq!(crd["metadata"]["name"], theirs["metadata"]["name"], "{file}");
        for key in ["group", "scope"] {
            assert_eq!(crd["spec"][key], theirs["spec"][key], "{file}");
        }
        for key in ["kind", "plural", "singular", "shortNames"] {
            assert_eq!(
                crd["spec"]["names"][key], theirs["spec"]["names"][key],
                "{file} {key}"
            );
        }
        assert!(
            crd["spec"]["versions"][0]["subresources"].get("status").is_some(),
            "{file}"
        );
    }
}

/// Every field we model is one cert-manager has, with the same JSON type, and we never require
/// (to parse) what cert-manager leaves optional. Catches a typo in a rename before it silently
/// drops a field.
#[test]
fn modelled_fields_exist_in_cert_manager_crds() {
    for (ours, file) in [
        (
            serde_json::to_value(CertificateRequest::crd()).unwrap(),
            "cert-manager.io_certificaterequests.yaml",
        ),
        (
            serde_json::to_value(Certificate::crd()).unwrap(),
            "cert-manager.io_certificates.yaml",
        ),
    ] {
        let theirs = load_crd(file);
        let mut ours = version_schema(&ours, "v1").clone();
        // Our root requires `spec` to parse; cert-manager's webhook rejects objects without one.
        ours.as_object_mut().unwrap().remove("required");
        let mut problems = Vec::new();
        compare(
            version_schema(&theirs, "v1"),
            &ours,
            "",
            Walk::OursInTheirs,
            &mut problems,
        );
        assert!(problems.is_empty(), "{file}:\n{}", problems.join("\n"));
    }
}

#[test]
fn modelled_field_check_catches_a_misspelt_rename() {
    let theirs = load_crd("cert-manager.io_certificates.yaml");
    let mut ours = serde_json::to_value(Certificate::crd()).unwrap();
    let spec = ours
        .pointer_mut("/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties")
        .unwrap();
    let is_ca = spec.as_object_mut().unwrap().remove("isCA").unwrap();
    spec["isCa"] = is_ca;
    let mut problems = Vec::new();
    compare(
        version_schema(&theirs, "v1"),
        version_schema(&ours, "v1"),
        "",
        Walk::OursInTheirs,
        &mut problems,
    );
    assert!(problems.iter().any(|p| p.contains("isCa")), "{problems:?}");
}
