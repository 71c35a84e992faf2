use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
use serde_json::json;

use super::*;

fn names(set: &FieldSet) -> Vec<String> {
    set.field_names().into_iter().collect()
}

#[test]
fn reads_members_and_children_as_structured_merge_diff_does() {
    let fields = json!({
        "f:metadata": {
            "f:labels": {".": {}, "f:controller.cert-manager.io/fao": {}, "f:team": {}},
            "f:annotations": {"f:cert-manager.io/common-name": {}, "x:unknown": {}, "long:": {}},
            "f:ownerReferences": {"k:{\"uid\":\"u-1\"}": {".": {}, "f:kind": {}}},
        },
        "f:data": {"f:tls.crt": {}, "f:key.der": null, "f:nested": {"f:inner": {}}},
        "f:type": {},
    });
    let set = FieldSet::from_json(&fields).unwrap();
    let metadata = set.descend(&PathElement::field("metadata"));
    assert_eq!(
        names(&metadata.descend(&PathElement::field("labels"))),
        ["controller.cert-manager.io/fao", "team"]
    );
    assert_eq!(
        names(&metadata.descend(&PathElement::field("annotations"))),
        ["cert-manager.io/common-name"]
    );
    let data = |key: &str| [PathElement::field("data"), PathElement::field(key)];
    let owner = |uid: &str| {
        [
            PathElement::field("metadata"),
            PathElement::field("ownerReferences"),
            PathElement::key(&serde_json::Map::from_iter([("uid".to_string(), json!(uid))])),
        ]
    };
    let table: [(&[PathElement], bool); 9] = [
        (&data("tls.crt"), true),
        (&data("key.der"), true),
        (&data("tls-combined.pem"), false),
        // A node with children but no "." is not itself owned.
        (&data("nested"), false),
        (&[PathElement::field("type")], true),
        (
            &[PathElement::field("metadata"), PathElement::field("labels")],
            true,
        ),
        (
            &[PathElement::field("metadata"), PathElement::field("annotations")],
            false,
        ),
        (&owner("u-1"), true),
        (&owner("u-2"), false),
    ];
    for (path, expected) in table {
        assert_eq!(set.has(path), expected, "{path:?}");
    }
}

#[test]
fn parse_errors() {
    let table = [
        (
            json!({"f:metadata": 1}),
            "expected a JSON object or null for \"f:metadata\", found 1",
        ),
        (
            json!({"f:metadata": {"f:labels": []}}),
            "expected a JSON object or null for \"f:labels\", found []",
        ),
        (
            json!({"a": {}}),
            "parsing key as path element: key must be 2 characters long: \"a\"",
        ),
        (
            json!(["f:data"]),
            "expected a JSON object or null for \"\", found [\"f:data\"]",
        ),
        (
            json!({"k:[1]": {}}),
            "parsing key as path element: \"k:[1]\": a key must be a JSON object",
        ),
        (
            json!({"i:x": {}}),
            "parsing key as path element: \"i:x\": invalid digit found in string",
        ),
    ];
    for (fields, message) in table {
        assert_eq!(
            FieldSet::from_json(&fields).unwrap_err().to_string(),
            message,
            "{fields}"
        );
    }
}

#[test]
fn only_the_given_manager_counts() {
    let entry = |manager: &str, fields: serde_json::Value| ManagedFieldsEntry {
        manager: Some(manager.to_string()),
        operation: Some("Apply".into()),
        fields_v1: Some(FieldsV1(fields)),
        ..ManagedFieldsEntry::default()
    };
    let mut secret = Secret::default();
    secret.metadata.managed_fields = Some(vec![
        entry(
            "cert-manager-certificates-issuing",
            json!({"f:metadata": {"f:labels": {"f:a": {}}, "f:annotations": {"f:x": {}}}}),
        ),
        entry("kubectl", json!({"f:metadata": {"f:labels": {"f:b": {}}}})),
        entry(
            "cert-manager-certificates-issuing",
            json!({"f:metadata": {"f:labels": {"f:c": {}}}}),
        ),
    ]);
    let (labels, annotations) = labels_and_annotations(&secret, "cert-manager-certificates-issuing").unwrap();
    assert_eq!(labels, BTreeSet::from(["a".to_string(), "c".to_string()]));
    assert_eq!(annotations, BTreeSet::from(["x".to_string()]));
    let (labels, _) = labels_and_annotations(&secret, "nobody").unwrap();
    assert!(labels.is_empty());
}

/// The compact text a cache keeps reads as the object it came from; text that is not JSON is
/// an error, never an empty set.
#[test]
fn compact_text_reads_as_the_object() {
    let object = json!({
        "f:metadata": {"f:labels": {"f:a": {}}, "f:annotations": {"f:x": {}, "f:y": {}}},
        "f:data": {".": {}, "f:tls.crt": {}},
    });
    let mut fields = FieldsV1(object.clone());
    compact_fields_v1(&mut fields);
    assert_eq!(fields.0, serde_json::Value::String(object.to_string()));
    let again = fields.clone();
    compact_fields_v1(&mut fields);
    assert_eq!(fields, again, "compacting twice changes nothing");

    let secret_with = |fields: FieldsV1| {
        let mut secret = Secret::default();
        secret.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some("issuing".into()),
            fields_v1: Some(fields),
            ..ManagedFieldsEntry::default()
        }]);
        secret
    };
    let parsed = owned_by(&secret_with(FieldsV1(object)), "issuing").unwrap();
    let from_text = owned_by(&secret_with(fields), "issuing").unwrap();
    assert_eq!(from_text, parsed);
    assert_eq!(
        labels_and_annotations(&secret_with(FieldsV1(json!("{\"f:metadata\":"))), "issuing").unwrap_err(),
        ManagedFieldsError::Text("EOF while parsing a value at line 1 column 14".into())
    );
}
