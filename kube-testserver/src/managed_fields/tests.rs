use serde_json::{Value, json};

use super::*;

fn conditions_schema() -> Value {
    json!({ "type": "object", "properties": { "status": { "type": "object", "properties": {
        "conditions": { "type": "array", "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["type"],
                        "items": { "type": "object", "properties": {
                            "type": { "type": "string" }, "status": { "type": "string" } } } },
        "ports": { "type": "array", "x-kubernetes-list-type": "map",
                   "x-kubernetes-list-map-keys": ["protocol", "port"],
                   "items": { "type": "object" } },
        "hosts": { "type": "array", "x-kubernetes-list-type": "set", "items": { "type": "string" } },
        "names": { "type": "array", "items": { "type": "string" } }
    } } } })
}

/// The encodings kube-apiserver writes (structured-merge-diff `Set.ToJSON` over the set
/// `TypedValue.ToFieldSet` makes): leaves `{}`, list-map items `k:` with `.`, set members
/// `v:`, atomic lists as one leaf, plain maps without `.`.
#[test]
fn fields_v1_follows_the_real_encoding() {
    let schema = conditions_schema();
    let cases: Vec<(Value, Value)> = vec![
        (
            json!({ "metadata": { "labels": { "app": "web" }, "annotations": { "a/b": "c" } } }),
            json!({ "f:metadata": { "f:labels": { "f:app": {} }, "f:annotations": { "f:a/b": {} } } }),
        ),
        (
            json!({ "status": { "conditions": [{ "type": "Ready", "status": "True" }] } }),
            json!({ "f:status": { "f:conditions": { "k:{\"type\":\"Ready\"}": {
                ".": {}, "f:type": {}, "f:status": {} } } } }),
        ),
        (
            json!({ "status": { "ports": [{ "port": 80, "protocol": "TCP" }] } }),
            json!({ "f:status": { "f:ports": { "k:{\"port\":80,\"protocol\":\"TCP\"}": {
                ".": {}, "f:port": {}, "f:protocol": {} } } } }),
        ),
        (
            json!({ "status": { "hosts": ["a", "b"], "names": ["x"] } }),
            json!({ "f:status": { "f:hosts": { "v:\"a\"": {}, "v:\"b\"": {} }, "f:names": {} } }),
        ),
        (
            json!({ "metadata": { "finalizers": ["x/y"], "ownerReferences": [{ "uid": "u1", "kind": "K" }] } }),
            json!({ "f:metadata": { "f:finalizers": { "v:\"x/y\"": {} },
                    "f:ownerReferences": { "k:{\"uid\":\"u1\"}": { ".": {}, "f:kind": {}, "f:uid": {} } } } }),
        ),
        (json!({ "metadata": { "labels": {} } }), Value::Null),
    ];
    for (config, want) in cases {
        let got = fields_v1(&config, &config, Some(&schema)).unwrap_or(Value::Null);
        assert_eq!(got, want, "config {config}");
    }
}

#[test]
fn fields_v1_parses_with_the_managers_reader() {
    use cfssl_issuer::certificates::secret::{FieldSet, PathElement};
    let config = json!({ "metadata": { "labels": { "l": "1" } },
                         "status": { "conditions": [{ "type": "Ready", "status": "True" }] } });
    let set = FieldSet::from_json(&fields_v1(&config, &config, Some(&conditions_schema())).unwrap()).unwrap();
    let key = serde_json::from_value(json!({ "type": "Ready" })).unwrap();
    let f = PathElement::field;
    assert!(set.has(&[f("metadata"), f("labels"), f("l")]));
    assert!(set.has(&[f("status"), f("conditions"), PathElement::key(&key)]));
    assert!(set.has(&[f("status"), f("conditions"), PathElement::key(&key), f("status")]));
    assert!(!set.has(&[f("metadata"), f("labels")]));
}

#[test]
fn changed_or_removed_leaves_are_not_owned() {
    let config = json!({ "data": { "a": "1", "b": "2", "c": "3" } });
    let object = json!({ "data": { "a": "1", "b": "changed" } });
    assert_eq!(
        fields_v1(&config, &object, None),
        Some(json!({ "f:data": { "f:a": {} } }))
    );
}

#[test]
fn entries_carry_times_versions_and_subresources() {
    let config = json!({ "data": { "a": "1" } });
    let status = json!({ "status": { "phase": "x" } });
    let object = json!({ "data": { "a": "1" }, "status": { "phase": "x" } });
    let previous = vec![
        json!({ "manager": "old", "operation": "Apply", "apiVersion": "v0",
                                "time": "2026-01-01T00:00:00Z" }),
    ];
    let cx = Context {
        object: &object,
        schema: None,
        previous: &previous,
        applying: Some(Applying {
            manager: "new",
            sub: Sub::Status,
            api_version: "v2",
        }),
        changed: true,
        api_version: "v1",
        now: "2026-02-02T00:00:00Z",
    };
    let owners = [
        Owner {
            manager: "old",
            sub: Sub::Main,
            config: &config,
        },
        Owner {
            manager: "new",
            sub: Sub::Status,
            config: &status,
        },
        Owner {
            manager: "none",
            sub: Sub::Main,
            config: &json!({ "data": { "gone": "1" } }),
        },
    ];
    assert_eq!(
        entries(owners, &cx),
        [
            json!({ "manager": "old", "operation": "Apply", "apiVersion": "v0",
                    "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                    "fieldsV1": { "f:data": { "f:a": {} } } }),
            json!({ "manager": "new", "operation": "Apply", "apiVersion": "v2",
                    "time": "2026-02-02T00:00:00Z", "fieldsType": "FieldsV1",
                    "fieldsV1": { "f:status": { "f:phase": {} } }, "subresource": "status" }),
        ]
    );
}
