//! The `Certificate` and `CertificateRequest` CRDs generated from our types (`cfssl-issuer crd
//! --cert-manager`, for standalone mode) accept everything cert-manager's own CRDs accept, look
//! the same to `kubectl`, and are installable (structural).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

mod api_common;

use std::collections::BTreeSet;
use std::process::Command;

use api_common::{crd_level_problems, load_crd, structural_problems, validate, version_schema};
use cfssl_issuer::api;
use cfssl_issuer::api::certmanager::{
    Certificate, CertificateRequest, CertificateRequestSpec, CertificateSpec,
};
use kube::CustomResourceExt;
use serde_json::{Value, json};

const CERTIFICATES: &str = "cert-manager.io_certificates.yaml";
const REQUESTS: &str = "cert-manager.io_certificaterequests.yaml";
const SCHEMA: &str = "/spec/versions/0/schema/openAPIV3Schema";

/// Our two CRDs, each with the file of cert-manager's it must match.
fn pairs() -> [(Value, &'static str); 2] {
    [
        (serde_json::to_value(Certificate::crd()).unwrap(), CERTIFICATES),
        (serde_json::to_value(CertificateRequest::crd()).unwrap(), REQUESTS),
    ]
}

/// (1) Every field path of cert-manager's schemas exists in ours with a compatible type, and ours
/// is no stricter anywhere (required, enums, patterns, formats, list types).
#[test]
fn every_cert_manager_field_exists_in_ours_and_nothing_is_stricter() {
    for (ours, file) in pairs() {
        let theirs = load_crd(file);
        let problems = crd_level_problems(&theirs, &ours);
        assert!(problems.is_empty(), "{file}:\n{}", problems.join("\n"));
    }
}

/// The walk in (1) is only worth something if it names what is missing or stricter.
#[test]
fn field_walk_reports_what_is_missing_or_stricter() {
    type Mutation = (&'static str, &'static str, fn(&mut Value));
    let rows: [Mutation; 9] = [
        (
            CERTIFICATES,
            r#"v1 schema .spec: property "literalSubject" missing from ours"#,
            |s| {
                s["properties"]["spec"]["properties"]
                    .as_object_mut()
                    .unwrap()
                    .remove("literalSubject");
            },
        ),
        (
            CERTIFICATES,
            r#"v1 schema .status: property "acme" missing from ours"#,
            |s| {
                s["properties"]["status"]["properties"]
                    .as_object_mut()
                    .unwrap()
                    .remove("acme");
            },
        ),
        (
            CERTIFICATES,
            r#"v1 schema .status.acme.ari.suggestedWindow: property "end" missing from ours"#,
            |s| {
                let ari = &mut s["properties"]["status"]["properties"]["acme"]["properties"]["ari"];
                let window = &mut ari["properties"]["suggestedWindow"];
                window["properties"].as_object_mut().unwrap().remove("end");
                window["required"] = json!(["start"]);
            },
        ),
        (
            REQUESTS,
            r#"v1 schema .spec: property "extra" missing from ours"#,
            |s| {
                s["properties"]["spec"]["properties"]
                    .as_object_mut()
                    .unwrap()
                    .remove("extra");
            },
        ),
        (
            CERTIFICATES,
            r#"v1 schema .spec.privateKey.size: type Some(String("string")), theirs Some(String("integer"))"#,
            |s| {
                s["properties"]["spec"]["properties"]["privateKey"]["properties"]["size"]["type"] =
                    json!("string");
            },
        ),
        (
            CERTIFICATES,
            r#"v1 schema .spec.privateKey.size: format "int64" added"#,
            |s| {
                s["properties"]["spec"]["properties"]["privateKey"]["properties"]["size"]["format"] =
                    json!("int64");
            },
        ),
        (
            REQUESTS,
            r#"v1 schema .spec.usages[]: enum ["signing","digital signature"] is stricter than theirs Some(Array"#,
            |s| {
                s["properties"]["spec"]["properties"]["usages"]["items"]["enum"] =
                    json!(["signing", "digital signature"]);
            },
        ),
        (
            CERTIFICATES,
            r#"v1 schema .spec.issuerRef: requires ["kind"], theirs only {"name"}"#,
            |s| s["properties"]["spec"]["properties"]["issuerRef"]["required"] = json!(["kind", "name"]),
        ),
        (
            REQUESTS,
            "v1 schema .status.conditions: x-kubernetes-list-type atomic, theirs map",
            |s| {
                let conditions = &mut s["properties"]["status"]["properties"]["conditions"];
                conditions
                    .as_object_mut()
                    .unwrap()
                    .remove("x-kubernetes-list-type");
            },
        ),
    ];
    for (file, want, mutate) in rows {
        let theirs = load_crd(file);
        let (mut ours, _) = pairs().into_iter().find(|(_, f)| *f == file).unwrap();
        assert!(crd_level_problems(&theirs, &ours).is_empty(), "{file}");
        mutate(ours.pointer_mut(SCHEMA).unwrap());
        let problems = crd_level_problems(&theirs, &ours);
        assert!(
            problems.iter().any(|p| p.starts_with(want)),
            "{file}: want {want:?}, got {problems:#?}"
        );
    }
}

/// The printer columns as `kubectl get` uses them (descriptions aside).
fn columns(crd: &Value) -> Vec<Value> {
    crd["spec"]["versions"][0]["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            json!([
                c["name"],
                c["type"],
                c["jsonPath"],
                c.get("priority"),
                c.get("format")
            ])
        })
        .collect()
}

/// (2) What `kubectl` sees: names, short names, categories, columns, field selectors, scope,
/// versions and subresources are cert-manager's exactly.
#[test]
fn names_columns_selectable_fields_and_versions_are_cert_managers() {
    for (ours, file) in pairs() {
        let theirs = load_crd(file);
        assert_eq!(ours["metadata"]["name"], theirs["metadata"]["name"], "{file}");
        for key in ["group", "scope"] {
            assert_eq!(ours["spec"][key], theirs["spec"][key], "{file} {key}");
        }
        let mut names = theirs["spec"]["names"].clone();
        // The API server defaults listKind to `<kind>List`, which is what theirs spells out.
        let list_kind = names.as_object_mut().unwrap().remove("listKind").unwrap();
        assert_eq!(
            list_kind,
            json!(format!("{}List", names["kind"].as_str().unwrap()))
        );
        assert_eq!(ours["spec"]["names"], names, "{file}");
        assert_eq!(columns(&ours), columns(&theirs), "{file}");
        let (ours_v, theirs_v) = (&ours["spec"]["versions"], &theirs["spec"]["versions"]);
        assert_eq!(ours_v.as_array().unwrap().len(), 1, "{file}");
        for key in ["name", "served", "storage", "selectableFields", "subresources"] {
            assert_eq!(ours_v[0][key], theirs_v[0][key], "{file} {key}");
        }
    }
    // Spelled out once, so a change to the reference files shows up here too.
    let certificate = serde_json::to_value(Certificate::crd()).unwrap();
    assert_eq!(
        certificate["spec"]["names"]["shortNames"],
        json!(["cert", "certs"])
    );
    let request = serde_json::to_value(CertificateRequest::crd()).unwrap();
    assert_eq!(request["spec"]["names"]["shortNames"], json!(["cr", "crs"]));
    for crd in [&certificate, &request] {
        assert_eq!(crd["spec"]["names"]["categories"], json!(["cert-manager"]));
        assert_eq!(
            crd["spec"]["versions"][0]["selectableFields"],
            json!([
                {"jsonPath": ".spec.issuerRef.group"},
                {"jsonPath": ".spec.issuerRef.kind"},
                {"jsonPath": ".spec.issuerRef.name"},
            ])
        );
    }
}

/// (3) One condition per type on both kinds, so a server-side apply of `Ready` never clobbers
/// the approver's `Approved`.
#[test]
fn conditions_are_a_list_map_keyed_by_type() {
    for (ours, file) in pairs() {
        let conditions = &ours.pointer(SCHEMA).unwrap()["properties"]["status"]["properties"]["conditions"];
        assert_eq!(conditions["x-kubernetes-list-type"], "map", "{file}");
        assert_eq!(
            conditions["x-kubernetes-list-map-keys"],
            json!(["type"]),
            "{file}"
        );
        assert_eq!(
            conditions["items"]["required"],
            json!(["status", "type"]),
            "{file}"
        );
        assert_eq!(
            conditions["items"]["properties"]["status"]["enum"],
            json!(["True", "False", "Unknown"]),
            "{file}"
        );
    }
}

/// Every node of a schema with its field path (`[]` for items, `{}` for map values).
fn nodes<'a>(schema: &'a Value, path: &str, out: &mut Vec<(String, &'a Value)>) {
    out.push((path.to_string(), schema));
    for (name, child) in schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        nodes(child, &format!("{path}.{name}"), out);
    }
    for (key, suffix) in [("items", "[]"), ("additionalProperties", "{}")] {
        if let Some(child) = schema.get(key).filter(|c| c.is_object()) {
            nodes(child, &format!("{path}{suffix}"), out);
        }
    }
}

/// The paths of the nodes that carry a `default`.
fn defaults(schema: &Value) -> Vec<String> {
    let mut all = Vec::new();
    nodes(schema, "", &mut all);
    all.into_iter()
        .filter(|(_, n)| n.get("default").is_some())
        .map(|(p, _)| p)
        .collect()
}

/// (4) No defaulting of `issuerRef.kind`/`group` (cert-manager #8158): a stored default would
/// look like the user's choice. Nothing else is defaulted either, as in cert-manager's CRDs.
#[test]
fn issuer_ref_kind_and_group_have_no_default() {
    for (ours, file) in pairs() {
        let schema = ours.pointer(SCHEMA).unwrap();
        let issuer_ref = &schema["properties"]["spec"]["properties"]["issuerRef"];
        for field in ["kind", "group"] {
            let node = &issuer_ref["properties"][field];
            assert_eq!(node["type"], "string", "{file} {field}");
            assert!(node.get("default").is_none(), "{file} {field}");
        }
        assert_eq!(issuer_ref["required"], json!(["name"]), "{file}");
        let found = defaults(schema);
        assert!(found.is_empty(), "{file}: defaults at {found:?}");
    }
    // The walk finds a default where there is one.
    let mut ours = serde_json::to_value(Certificate::crd()).unwrap();
    let kind = SCHEMA.to_string() + "/properties/spec/properties/issuerRef/properties/kind";
    ours.pointer_mut(&kind).unwrap()["default"] = json!("Issuer");
    assert_eq!(defaults(ours.pointer(SCHEMA).unwrap()), [".spec.issuerRef.kind"]);
}

/// (5) Installable: structural, no `$ref`; as in cert-manager's CRDs, unknown fields and nulls
/// are pruned by the server rather than kept (no `x-kubernetes-preserve-unknown-fields`, no
/// `nullable`), and `spec` is optional at the root.
#[test]
fn generated_crds_are_structural() {
    for (ours, file) in pairs() {
        let schema = ours.pointer(SCHEMA).unwrap();
        let mut problems = Vec::new();
        structural_problems(schema, "", &mut problems);
        assert!(problems.is_empty(), "{file}: {problems:?}");
        let text = serde_json::to_string(&ours).unwrap();
        for absent in [
            "$ref",
            "definitions",
            "x-kubernetes-preserve-unknown-fields",
            "nullable",
        ] {
            assert!(!text.contains(absent), "{file}: {absent}");
        }
        assert!(schema.get("required").is_none(), "{file}");
        let root: Vec<_> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert_eq!(
            root,
            ["apiVersion", "kind", "metadata", "spec", "status"],
            "{file}"
        );
    }
}

/// Manifests as cert-manager users write them, together using every field of both kinds.
const SAMPLES: &[(&str, &str)] = &[
    (
        "minimal Certificate",
        include_str!("data/cert-manager/certificate-minimal.yaml"),
    ),
    (
        "Certificate with every spec field",
        include_str!("data/cert-manager/certificate-full.yaml"),
    ),
    (
        "CA Certificate with status",
        include_str!("data/cert-manager/certificate-ca-status.yaml"),
    ),
    (
        "CertificateRequest issued",
        include_str!("data/cert-manager/certificaterequest-issued.yaml"),
    ),
    (
        "CertificateRequest denied",
        include_str!("data/cert-manager/certificaterequest-denied.yaml"),
    ),
];

fn roundtrip<K: serde::Serialize + serde::de::DeserializeOwned>(doc: &Value) -> Value {
    serde_json::to_value(serde_json::from_value::<K>(doc.clone()).expect("parses")).unwrap()
}

/// (6) Valid under cert-manager's CRD and ours, and unchanged through our types.
#[test]
fn cert_manager_manifests_are_valid_and_round_trip() {
    let [(certificates, _), (requests, _)] = pairs();
    let (their_certificates, their_requests) = (load_crd(CERTIFICATES), load_crd(REQUESTS));
    for (name, yaml) in SAMPLES {
        let doc: Value = serde_saphyr::from_str(yaml).unwrap();
        let (ours, theirs, back) = match doc["kind"].as_str() {
            Some("Certificate") => (&certificates, &their_certificates, roundtrip::<Certificate>(&doc)),
            Some("CertificateRequest") => (&requests, &their_requests, roundtrip::<CertificateRequest>(&doc)),
            other => panic!("{name}: kind {other:?}"),
        };
        for (side, crd) in [("cert-manager's", theirs), ("our", ours)] {
            let mut problems = Vec::new();
            validate(version_schema(crd, "v1"), &doc, "", &mut problems);
            assert!(problems.is_empty(), "{name} under {side} CRD: {problems:?}");
        }
        assert_eq!(back, doc, "{name}");
    }
}

/// Both CRDs, like cert-manager's, accept an object without `spec` (cert-manager's webhook, which
/// refuses it, does not run in standalone mode). It must read as an empty spec rather than fail,
/// or one such object would break a watch of the whole kind.
#[test]
fn objects_without_spec_are_accepted_and_read_as_empty_specs() {
    let [(certificates, _), (requests, _)] = pairs();
    let (their_certificates, their_requests) = (load_crd(CERTIFICATES), load_crd(REQUESTS));
    for (kind, ours, theirs) in [
        ("Certificate", &certificates, &their_certificates),
        ("CertificateRequest", &requests, &their_requests),
    ] {
        let doc = json!({
            "apiVersion": "cert-manager.io/v1",
            "kind": kind,
            "metadata": {"name": "empty", "namespace": "default"},
        });
        for crd in [theirs, ours] {
            let mut problems = Vec::new();
            validate(version_schema(crd, "v1"), &doc, "", &mut problems);
            assert!(problems.is_empty(), "{kind}: {problems:?}");
        }
        let mut with_null = doc.clone();
        with_null["spec"] = Value::Null;
        for doc in [doc, with_null] {
            match kind {
                "Certificate" => {
                    let cert: Certificate = serde_json::from_value(doc).unwrap();
                    assert_eq!(cert.spec, CertificateSpec::default());
                }
                _ => {
                    let cr: CertificateRequest = serde_json::from_value(doc).unwrap();
                    assert_eq!(cr.spec, CertificateRequestSpec::default());
                }
            }
        }
    }
    let yaml = "apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata:\n  name: empty\n";
    let cert: Certificate = serde_saphyr::from_str(yaml).unwrap();
    assert_eq!(cert.spec.secret_name, "");
    // A spec that is there is read as before: its required fields stay required.
    let partial = json!({
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": {"name": "partial"}, "spec": {"dnsNames": ["a.example"]},
    });
    let err = serde_json::from_value::<Certificate>(partial).unwrap_err();
    assert_eq!(err.to_string(), "missing field `secretName`");
}

/// Every field path a set of documents sets (map keys of `additionalProperties` folded).
fn used_paths(schema: &Value, value: &Value, path: &str, out: &mut BTreeSet<String>) {
    out.insert(path.to_string());
    if let Some(object) = value.as_object() {
        for (name, field) in object {
            if let Some(child) = schema.get("properties").and_then(|p| p.get(name)) {
                used_paths(child, field, &format!("{path}.{name}"), out);
            } else if let Some(child) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                used_paths(child, field, &format!("{path}{{}}"), out);
            }
        }
    }
    for item in value.as_array().into_iter().flatten() {
        used_paths(&schema["items"], item, &format!("{path}[]"), out);
    }
}

/// The samples above do use every field of cert-manager's schemas (`metadata` aside).
#[test]
fn samples_cover_every_cert_manager_field() {
    for (kind, file) in [("Certificate", CERTIFICATES), ("CertificateRequest", REQUESTS)] {
        let theirs = load_crd(file);
        let schema = version_schema(&theirs, "v1");
        let mut all = Vec::new();
        nodes(schema, "", &mut all);
        let all: BTreeSet<String> = all
            .into_iter()
            .map(|(p, _)| p)
            .filter(|p| !p.starts_with(".metadata."))
            .collect();
        let mut used = BTreeSet::new();
        for (_, yaml) in SAMPLES {
            let doc: Value = serde_saphyr::from_str(yaml).unwrap();
            if doc["kind"] == kind {
                used_paths(schema, &doc, "", &mut used);
            }
        }
        let unused: Vec<_> = all.difference(&used).collect();
        assert!(unused.is_empty(), "{kind}: no sample sets {unused:?}");
    }
}

/// Values cert-manager's CRD refuses are refused by ours too: its enums and patterns are mirrored.
#[test]
fn ours_rejects_what_cert_managers_rejects() {
    let full: Value = serde_saphyr::from_str(SAMPLES[1].1).unwrap();
    type Break = (&'static str, fn(&mut Value));
    let rows: [Break; 5] = [
        ("usage", |d| d["spec"]["usages"] = json!(["server auth", "web"])),
        ("algorithm", |d| {
            d["spec"]["privateKey"]["algorithm"] = json!("DSA");
        }),
        ("isCA", |d| d["spec"]["isCA"] = json!("yes")),
        ("issuerRef.name", |d| {
            d["spec"]["issuerRef"].as_object_mut().unwrap().remove("name");
        }),
        ("secretName", |d| {
            d["spec"].as_object_mut().unwrap().remove("secretName");
        }),
    ];
    let theirs = load_crd(CERTIFICATES);
    let ours = serde_json::to_value(Certificate::crd()).unwrap();
    for (name, mutate) in rows {
        let mut doc = full.clone();
        mutate(&mut doc);
        for crd in [&theirs, &ours] {
            let mut problems = Vec::new();
            validate(version_schema(crd, "v1"), &doc, "", &mut problems);
            assert!(!problems.is_empty(), "{name}: accepted");
        }
    }
    let window =
        "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/renewal/properties/windows/items";
    for key in ["cron", "timezone", "windowDuration"] {
        let (t, o) = (
            &theirs.pointer(window).unwrap()["properties"][key],
            &ours.pointer(window).unwrap()["properties"][key],
        );
        for restriction in ["minLength", "pattern"] {
            assert_eq!(o.get(restriction), t.get(restriction), "{key} {restriction}");
        }
    }
}

/// (7) `cfssl-issuer crd --cert-manager` prints exactly these two CRDs, Certificate first; plain
/// `crd` still prints only ours.
#[test]
fn binary_prints_the_cert_manager_crds() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_cfssl-issuer"))
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.starts_with("---\n"), "{args:?}");
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        docs.into_iter().filter(|d| !d.is_null()).collect::<Vec<_>>()
    };
    let printed = run(&["crd", "--cert-manager"]);
    let expected: Vec<Value> = api::cert_manager_crds()
        .iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    assert_eq!(printed, expected);
    let names: Vec<_> = printed
        .iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "certificates.cert-manager.io",
            "certificaterequests.cert-manager.io"
        ]
    );
    for doc in &printed {
        assert_eq!(doc["apiVersion"], "apiextensions.k8s.io/v1");
        assert_eq!(doc["kind"], "CustomResourceDefinition");
    }
    let plain = run(&["crd"]);
    let names: Vec<_> = plain
        .iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "issuers.cfssl-issuer.wikimedia.org",
            "clusterissuers.cfssl-issuer.wikimedia.org"
        ]
    );
}
