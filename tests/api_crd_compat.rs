//! Our Issuer and ClusterIssuer CRDs accept every object the Go cfssl-issuer's CRDs accept, and
//! what `cfssl-issuer crd` prints is an installable, structural CRD.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

mod api_common;

use api_common::{crd_level_problems, load_crd, structural_problems, validate, version_schema};
use cfssl_issuer::api::{self, ClusterIssuer, Issuer, IssuerSpec};
use kube::CustomResourceExt;
use serde_json::{Value, json};

const GO_ISSUERS: &str = "cfssl-issuer.wikimedia.org_issuers.yaml";
const GO_CLUSTER_ISSUERS: &str = "cfssl-issuer.wikimedia.org_clusterissuers.yaml";

fn ours() -> [(Value, &'static str); 2] {
    [
        (serde_json::to_value(Issuer::crd()).unwrap(), GO_ISSUERS),
        (
            serde_json::to_value(ClusterIssuer::crd()).unwrap(),
            GO_CLUSTER_ISSUERS,
        ),
    ]
}

#[test]
fn our_crds_accept_everything_the_go_crds_accept() {
    for (ours, file) in ours() {
        let theirs = load_crd(file);
        let problems = crd_level_problems(&theirs, &ours);
        assert!(problems.is_empty(), "{file}:\n{}", problems.join("\n"));
    }
}

/// The checker is only worth something if it fails on the regressions it is meant to catch.
#[test]
fn compatibility_check_catches_tightening() {
    let theirs = load_crd(GO_ISSUERS);
    let base = serde_json::to_value(Issuer::crd()).unwrap();
    let schema = "/spec/versions/0/schema/openAPIV3Schema";
    type Mutation = (&'static str, fn(&mut Value));
    let mutations: [Mutation; 9] = [
        ("new required field", |s| {
            s["properties"]["spec"]["required"]
                .as_array_mut()
                .unwrap()
                .push(json!("caBundle"));
        }),
        ("spec required at the root", |s| s["required"] = json!(["spec"])),
        ("property removed", |s| {
            s["properties"]["spec"]["properties"]
                .as_object_mut()
                .unwrap()
                .remove("profile");
        }),
        ("type changed", |s| {
            s["properties"]["spec"]["properties"]["bundle"]["type"] = json!("string");
        }),
        ("enum narrowed", |s| {
            s["properties"]["status"]["properties"]["conditions"]["items"]["properties"]["status"]["enum"] =
                json!(["True", "False"]);
        }),
        ("pattern added", |s| {
            s["properties"]["spec"]["properties"]["url"]["pattern"] = json!("^https://");
        }),
        ("maxLength added", |s| {
            s["properties"]["spec"]["properties"]["label"]["maxLength"] = json!(63);
        }),
        ("format added", |s| {
            s["properties"]["spec"]["properties"]["url"]["format"] = json!("uri");
        }),
        ("list-map on a key theirs does not require", |s| {
            s["properties"]["status"]["properties"]["conditions"]["x-kubernetes-list-map-keys"] =
                json!(["reason"]);
        }),
    ];
    assert!(crd_level_problems(&theirs, &base).is_empty());
    for (name, mutate) in mutations {
        let mut ours = base.clone();
        mutate(ours.pointer_mut(schema).unwrap());
        assert!(
            !crd_level_problems(&theirs, &ours).is_empty(),
            "not caught: {name}"
        );
    }
    let mut scoped = base.clone();
    scoped["spec"]["scope"] = json!("Cluster");
    assert!(
        !crd_level_problems(&theirs, &scoped).is_empty(),
        "not caught: scope"
    );
}

/// Manifests as users of the Go issuer write them: each is valid under the Go CRD and ours,
/// and survives a trip through our types unchanged.
const SAMPLES: &[(&str, &str)] = &[
    (
        "minimal Issuer",
        r#"
apiVersion: cfssl-issuer.wikimedia.org/v1alpha1
kind: Issuer
metadata:
  name: issuer-sample
  namespace: default
spec:
  authSecretName: "issuer-sample-credentials"
  url: "https://api.simple-cfssl.svc.cluster.local:30888"
  label: "intermediate1"
"#,
    ),
    (
        "ClusterIssuer with profile and bundle",
        r"
apiVersion: cfssl-issuer.wikimedia.org/v1alpha1
kind: ClusterIssuer
metadata:
  name: bundleissuer-sample
spec:
  authSecretName: clusterissuer-sample-credentials
  url: https://api.simple-cfssl.svc.cluster.local:30888
  label: intermediate1
  profile: server
  bundle: true
",
    ),
    (
        "several URLs, trailing slashes and spaces",
        r#"
apiVersion: cfssl-issuer.wikimedia.org/v1alpha1
kind: ClusterIssuer
metadata:
  name: failover
spec:
  authSecretName: creds
  url: "https://dead.end.local/, https://ca1.example.org:8888/,https://ca2.example.org/api/"
  label: discovery
"#,
    ),
    (
        "explicit bundle false is kept",
        r#"
apiVersion: cfssl-issuer.wikimedia.org/v1alpha1
kind: Issuer
metadata:
  name: nobundle
  namespace: team-a
  labels:
    app: web
spec:
  authSecretName: creds
  url: http://cfssl.team-a.svc:8888
  label: ops
  profile: ""
  bundle: false
"#,
    ),
    (
        "status written by the Go controller",
        r#"
apiVersion: cfssl-issuer.wikimedia.org/v1alpha1
kind: Issuer
metadata:
  name: migrated
  namespace: default
  generation: 3
spec:
  authSecretName: creds
  url: https://ca.example.org
  label: intermediate1
status:
  conditions:
  - type: Ready
    status: "True"
    reason: IssuerReconciler
    message: Success
    lastTransitionTime: "2024-02-03T04:05:06Z"
"#,
    ),
];

fn roundtrip<K>(doc: &Value) -> Value
where
    K: serde::Serialize + serde::de::DeserializeOwned,
{
    let typed: K = serde_json::from_value(doc.clone()).expect("parses into our type");
    serde_json::to_value(typed).unwrap()
}

#[test]
fn go_issuer_manifests_are_valid_and_round_trip() {
    let issuers = (load_crd(GO_ISSUERS), serde_json::to_value(Issuer::crd()).unwrap());
    let cluster = (
        load_crd(GO_CLUSTER_ISSUERS),
        serde_json::to_value(ClusterIssuer::crd()).unwrap(),
    );
    for (name, yaml) in SAMPLES {
        let doc: Value = serde_saphyr::from_str(yaml).unwrap();
        let (theirs, ours, back) = match doc["kind"].as_str() {
            Some("Issuer") => (&issuers.0, &issuers.1, roundtrip::<Issuer>(&doc)),
            Some("ClusterIssuer") => (&cluster.0, &cluster.1, roundtrip::<ClusterIssuer>(&doc)),
            other => panic!("{name}: kind {other:?}"),
        };
        for (side, crd) in [("Go", theirs), ("our", ours)] {
            let mut problems = Vec::new();
            validate(version_schema(crd, "v1alpha1"), &doc, "", &mut problems);
            assert!(problems.is_empty(), "{name} under the {side} CRD: {problems:?}");
        }
        assert_eq!(back, doc, "{name}");
        // Straight from YAML too, as fixtures and `kubectl get -o yaml` output are read.
        let direct = match doc["kind"].as_str() {
            Some("Issuer") => serde_json::to_value(serde_saphyr::from_str::<Issuer>(yaml).unwrap()),
            _ => serde_json::to_value(serde_saphyr::from_str::<ClusterIssuer>(yaml).unwrap()),
        };
        assert_eq!(direct.unwrap(), doc, "{name} from YAML");
    }
}

#[test]
fn url_list_is_kept_verbatim() {
    // Splitting and normalising is the CFSSL client's job; the type must not touch it.
    let doc: Value = serde_saphyr::from_str(SAMPLES[2].1).unwrap();
    let issuer: ClusterIssuer = serde_json::from_value(doc).unwrap();
    assert_eq!(
        issuer.spec.url,
        "https://dead.end.local/, https://ca1.example.org:8888/,https://ca2.example.org/api/"
    );
}

#[test]
fn issuer_without_spec_is_accepted_like_the_go_crd_does() {
    let doc = json!({
        "apiVersion": "cfssl-issuer.wikimedia.org/v1alpha1",
        "kind": "Issuer",
        "metadata": {"name": "empty", "namespace": "default"},
    });
    for crd in [load_crd(GO_ISSUERS), serde_json::to_value(Issuer::crd()).unwrap()] {
        let mut problems = Vec::new();
        validate(version_schema(&crd, "v1alpha1"), &doc, "", &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
    }
    // One such object must not break a watch of all issuers: it reads as an empty spec.
    let issuer: Issuer = serde_json::from_value(doc.clone()).unwrap();
    assert_eq!(issuer.spec, IssuerSpec::default());
    let yaml = "apiVersion: cfssl-issuer.wikimedia.org/v1alpha1\nkind: Issuer\nmetadata:\n  name: empty\n";
    assert_eq!(
        serde_saphyr::from_str::<Issuer>(yaml).unwrap().spec,
        IssuerSpec::default()
    );
    let mut with_null = doc;
    with_null["spec"] = Value::Null;
    let issuer: ClusterIssuer = serde_json::from_value(with_null).unwrap();
    assert_eq!(issuer.spec, IssuerSpec::default());
}

#[test]
fn ca_bundle_is_base64_pem_bytes() {
    let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    let doc = json!({
        "apiVersion": "cfssl-issuer.wikimedia.org/v1alpha1",
        "kind": "Issuer",
        "metadata": {"name": "private-ca", "namespace": "default"},
        "spec": {
            "authSecretName": "creds", "url": "https://ca.internal", "label": "l",
            "caBundle": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=",
        },
    });
    let mut problems = Vec::new();
    validate(
        version_schema(&serde_json::to_value(Issuer::crd()).unwrap(), "v1alpha1"),
        &doc,
        "",
        &mut problems,
    );
    assert!(problems.is_empty(), "{problems:?}");
    let issuer: Issuer = serde_json::from_value(doc.clone()).unwrap();
    assert_eq!(
        issuer.spec.ca_bundle.as_ref().map(|b| b.0.as_slice()),
        Some(pem.as_bytes())
    );
    assert_eq!(serde_json::to_value(&issuer).unwrap(), doc);
}

/// `crds_yaml()` output, parsed back as a Kubernetes client would.
fn printed_crds() -> Vec<Value> {
    let yaml = api::crds_yaml().expect("the CRDs serialize to YAML");
    assert!(yaml.starts_with("---\n"), "every document opens with ---");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&yaml).expect("valid multi-document YAML");
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

#[test]
fn printed_crds_are_ours_exactly() {
    let docs = printed_crds();
    let expected: Vec<Value> = api::crds()
        .iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    assert_eq!(docs, expected, "YAML parses back to the same objects");
    let names: Vec<_> = docs
        .iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "issuers.cfssl-issuer.wikimedia.org",
            "clusterissuers.cfssl-issuer.wikimedia.org"
        ],
        "only our kinds, never cert-manager's"
    );
}

#[test]
fn printed_crds_are_structural_with_status_columns_and_list_map_conditions() {
    for crd in printed_crds() {
        let name = crd["metadata"]["name"].as_str().unwrap().to_string();
        assert_eq!(crd["apiVersion"], "apiextensions.k8s.io/v1", "{name}");
        let versions = crd["spec"]["versions"].as_array().unwrap();
        assert_eq!(versions.len(), 1, "{name}");
        let version = &versions[0];
        assert_eq!(version["name"], "v1alpha1");
        assert_eq!(
            (&version["served"], &version["storage"]),
            (&json!(true), &json!(true)),
            "{name}"
        );
        assert_eq!(
            version["subresources"]["status"],
            json!({}),
            "{name}: status subresource"
        );

        let columns: Vec<_> = version["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap(),
                    c["jsonPath"].as_str().unwrap(),
                    c.get("priority").cloned(),
                )
            })
            .collect();
        let ready = r#".status.conditions[?(@.type=="Ready")]"#;
        assert_eq!(
            columns,
            [
                ("Ready", format!("{ready}.status").as_str(), None),
                ("Reason", format!("{ready}.reason").as_str(), None),
                ("Message", format!("{ready}.message").as_str(), Some(json!(1))),
                ("Age", ".metadata.creationTimestamp", None),
            ],
            "{name}"
        );

        let schema = version_schema(&crd, "v1alpha1");
        let mut problems = Vec::new();
        structural_problems(schema, "", &mut problems);
        assert!(problems.is_empty(), "{name}: {problems:?}");
        let yaml = serde_saphyr::to_string(&crd).unwrap();
        assert!(!yaml.contains("$ref") && !yaml.contains("definitions"), "{name}");

        let conditions = &schema["properties"]["status"]["properties"]["conditions"];
        assert_eq!(conditions["x-kubernetes-list-type"], "map", "{name}");
        assert_eq!(
            conditions["x-kubernetes-list-map-keys"],
            json!(["type"]),
            "{name}"
        );
        let ca_bundle = &schema["properties"]["spec"]["properties"]["caBundle"];
        assert_eq!(
            (&ca_bundle["type"], &ca_bundle["format"]),
            (&json!("string"), &json!("byte")),
            "{name}"
        );
        assert!(
            schema.get("required").is_none(),
            "{name}: spec is optional at the root, as in the Go CRD"
        );
    }
}

#[test]
fn cluster_issuer_crd_is_the_issuer_crd_with_names_and_scope_swapped() {
    let issuer = serde_json::to_value(Issuer::crd()).unwrap();
    let mut cluster = serde_json::to_value(ClusterIssuer::crd()).unwrap();
    assert_eq!(cluster["spec"]["scope"], "Cluster");
    cluster["metadata"] = issuer["metadata"].clone();
    cluster["spec"]["scope"] = issuer["spec"]["scope"].clone();
    cluster["spec"]["names"] = issuer["spec"]["names"].clone();
    let schema = "/spec/versions/0/schema/openAPIV3Schema";
    for key in ["title", "description"] {
        cluster.pointer_mut(schema).unwrap()[key] = issuer.pointer(schema).unwrap()[key].clone();
    }
    assert_eq!(cluster, issuer);
}

#[test]
fn validator_rejects_what_the_go_crd_rejects() {
    let theirs = load_crd(GO_ISSUERS);
    let schema = version_schema(&theirs, "v1alpha1");
    let bad = [
        json!({"spec": {"authSecretName": "s", "label": "l"}}),
        json!({"spec": {"url": "u", "authSecretName": "s", "label": "l", "bundle": "yes"}}),
        json!({"spec": {"url": "u", "authSecretName": "s", "label": "l"}, "status": {"conditions": [{"type": "Ready", "status": "Maybe"}]}}),
        json!({"status": {"conditions": [{"status": "True"}]}}),
    ];
    for doc in bad {
        let mut problems = Vec::new();
        validate(schema, &doc, "", &mut problems);
        assert!(!problems.is_empty(), "accepted {doc}");
    }
}
