//! `metadata.managedFields` and server-side apply across several managers, as kube-apiserver
//! does them (https://kubernetes.io/docs/reference/using-api/server-side-apply/): every answer
//! carries one `Apply` entry per manager and subresource, with `fieldsV1` naming exactly what
//! that manager owns; a manager's apply removes what it alone owned and no longer sends;
//! `force` moves a contested field to the applier, after which the previous owner can no longer
//! remove it.

mod support;

use std::time::Duration;

use cfssl_issuer::certificates::secret::{FieldSet, PathElement};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::{
    api::core::v1::{ConfigMap, Secret},
    apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta},
};
use kube::{
    Api,
    api::{
        ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams, WatchEvent,
        WatchParams,
    },
};
use serde_json::{Value, json};
use support::{code, start};

fn apply(manager: &str) -> PatchParams {
    PatchParams::apply(manager)
}

fn force(manager: &str) -> PatchParams {
    PatchParams::apply(manager).force()
}

fn entry<'m>(
    meta: &'m ObjectMeta,
    manager: &str,
    subresource: Option<&str>,
) -> Option<&'m ManagedFieldsEntry> {
    meta.managed_fields
        .iter()
        .flatten()
        .find(|e| e.manager.as_deref() == Some(manager) && e.subresource.as_deref() == subresource)
}

/// The `fieldsV1` of `manager`'s entry, or Null when it has none.
fn fields_of(meta: &ObjectMeta, manager: &str, subresource: Option<&str>) -> Value {
    entry(meta, manager, subresource)
        .and_then(|e| e.fields_v1.as_ref())
        .map_or(Value::Null, |f| f.0.clone())
}

fn issued_secret() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {
            "name": "tls",
            "labels": { "controller.cert-manager.io/fao": "true" },
            "annotations": { "cert-manager.io/certificate-name": "c" },
            "ownerReferences": [{ "apiVersion": "cert-manager.io/v1", "kind": "Certificate", "name": "c",
                                  "uid": "u-1", "controller": true, "blockOwnerDeletion": true }]
        },
        "type": "kubernetes.io/tls",
        "data": { "tls.crt": "Y3J0", "tls.key": "a2V5" }
    })
}

/// What kube-apiserver records for `issued_secret` applied by one manager.
fn issued_secret_fields() -> Value {
    json!({
        "f:metadata": {
            "f:labels": { "f:controller.cert-manager.io/fao": {} },
            "f:annotations": { "f:cert-manager.io/certificate-name": {} },
            "f:ownerReferences": { "k:{\"uid\":\"u-1\"}": {
                ".": {}, "f:apiVersion": {}, "f:blockOwnerDeletion": {}, "f:controller": {},
                "f:kind": {}, "f:name": {}, "f:uid": {} } }
        },
        "f:type": {},
        "f:data": { "f:tls.crt": {}, "f:tls.key": {} }
    })
}

/// The apply answer, GET, LIST, metadata-only GET and LIST, and a watch all carry the same
/// managedFields, one `Apply` entry for the manager; the manager's reader parses it.
#[tokio::test]
async fn every_answer_carries_managed_fields() {
    let h = start().await;
    let secrets: Api<Secret> = h.api();
    let applied = secrets
        .patch(
            "tls",
            &force("cfssl-issuer-issuing"),
            &Patch::Apply(issued_secret()),
        )
        .await
        .unwrap();
    let e = entry(&applied.metadata, "cfssl-issuer-issuing", None).expect("an entry for the manager");
    assert_eq!(
        (
            e.operation.as_deref(),
            e.api_version.as_deref(),
            e.fields_type.as_deref()
        ),
        (Some("Apply"), Some("v1"), Some("FieldsV1"))
    );
    assert!(e.time.is_some());
    assert_eq!(
        fields_of(&applied.metadata, "cfssl-issuer-issuing", None),
        issued_secret_fields()
    );
    let want = applied.metadata.managed_fields.clone();
    assert_eq!(want.as_ref().map(Vec::len), Some(1));

    let got = secrets.get("tls").await.unwrap();
    assert_eq!(got.metadata.managed_fields, want, "GET");
    let listed = secrets.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items[0].metadata.managed_fields, want, "LIST");
    let meta_only = secrets.get_metadata("tls").await.unwrap();
    assert_eq!(meta_only.metadata.managed_fields, want, "metadata-only GET");
    let meta_list = secrets.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(
        meta_list.items[0].metadata.managed_fields, want,
        "metadata-only LIST"
    );
    let mut events = secrets.watch(&WatchParams::default(), "0").await.unwrap().boxed();
    let first = tokio::time::timeout(Duration::from_secs(5), events.try_next())
        .await
        .unwrap()
        .unwrap();
    match first {
        Some(WatchEvent::Added(s)) => assert_eq!(s.metadata.managed_fields, want, "WATCH"),
        other => panic!("expected ADDED, got {other:?}"),
    }

    let fields = FieldSet::from_json(&want.unwrap()[0].fields_v1.as_ref().unwrap().0).unwrap();
    let metadata = fields.descend(&PathElement::field("metadata"));
    let labels = metadata.descend(&PathElement::field("labels")).field_names();
    assert_eq!(
        labels.into_iter().collect::<Vec<_>>(),
        ["controller.cert-manager.io/fao"]
    );
    let data = fields.descend(&PathElement::field("data")).field_names();
    assert_eq!(data.into_iter().collect::<Vec<_>>(), ["tls.crt", "tls.key"]);
}

/// An apply to /status is its own entry, with `subresource: status`; the main resource's
/// apply keeps its own.
#[tokio::test]
async fn status_applies_are_entries_of_their_own() {
    let h = start().await;
    h.install_widgets().await;
    let widgets: Api<support::Widget> = h.api();
    let spec = json!({ "apiVersion": "test.example.com/v1", "kind": "Widget", "metadata": { "name": "w" },
                       "spec": { "size": 1 } });
    widgets
        .patch("w", &apply("author"), &Patch::Apply(spec))
        .await
        .unwrap();
    let status = json!({ "apiVersion": "test.example.com/v1", "kind": "Widget",
                         "status": { "conditions": [{ "type": "Ready", "status": "True" }] } });
    let out = widgets
        .patch_status("w", &apply("reporter"), &Patch::Apply(status))
        .await
        .unwrap();
    assert_eq!(
        fields_of(&out.metadata, "author", None),
        json!({ "f:spec": { "f:size": {} } })
    );
    assert_eq!(
        fields_of(&out.metadata, "reporter", Some("status")),
        json!({ "f:status": { "f:conditions": { "k:{\"type\":\"Ready\"}": { ".": {}, "f:status": {}, "f:type": {} } } } })
    );
    assert_eq!(out.metadata.managed_fields.as_ref().map(Vec::len), Some(2));
}

fn data_config(data: Value) -> Value {
    json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "a" }, "data": data })
}

/// Without force, changing a field another manager owns is a 409; with force the field moves:
/// the previous owner's entry loses it, and that owner's later apply without it leaves it alone.
#[tokio::test]
async fn force_takes_ownership_from_the_previous_owner() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    let first = data_config(json!({ "x": "1", "y": "1" }));
    cms.patch("a", &apply("first"), &Patch::Apply(first))
        .await
        .unwrap();
    let take = data_config(json!({ "x": "2" }));
    let err = cms
        .patch("a", &apply("second"), &Patch::Apply(&take))
        .await
        .unwrap_err();
    assert_eq!(code(&err), 409);
    let out = cms
        .patch("a", &force("second"), &Patch::Apply(&take))
        .await
        .unwrap();
    assert_eq!(
        fields_of(&out.metadata, "first", None),
        json!({ "f:data": { "f:y": {} } })
    );
    assert_eq!(
        fields_of(&out.metadata, "second", None),
        json!({ "f:data": { "f:x": {} } })
    );

    let out = cms
        .patch(
            "a",
            &apply("first"),
            &Patch::Apply(data_config(json!({ "y": "1" }))),
        )
        .await
        .unwrap();
    assert_eq!(out.data.unwrap()["x"], "2");
    let out = cms
        .patch("a", &apply("first"), &Patch::Apply(data_config(json!({}))))
        .await
        .unwrap();
    let data: Vec<(String, String)> = out.data.unwrap().into_iter().collect();
    assert_eq!(data, [("x".to_string(), "2".to_string())]);
    assert!(
        entry(&out.metadata, "first", None).is_none(),
        "first owns nothing now"
    );
}

fn certificates() -> ApiResource {
    let gvk = GroupVersionKind::gvk("cert-manager.io", "v1", "Certificate");
    ApiResource::from_gvk_with_plural(&gvk, "certificates")
}

async fn with_certificate() -> (support::Harness, Api<DynamicObject>) {
    let h = start().await;
    for crd in cfssl_issuer::api::certmanager::cert_manager_crds() {
        h.install_crd(crd).await;
    }
    let api: Api<DynamicObject> = Api::namespaced_with(h.client.clone(), "default", &certificates());
    let cert: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": { "name": "c" },
        "spec": { "secretName": "tls", "issuerRef": { "name": "ca", "kind": "Issuer", "group": "cfssl-issuer.wikimedia.org" } }
    }))
    .unwrap();
    api.create(&PostParams::default(), &cert).await.unwrap();
    (h, api)
}

fn condition_status(conditions: Value) -> Value {
    json!({ "apiVersion": "cert-manager.io/v1", "kind": "Certificate", "status": { "conditions": conditions } })
}

fn issuing(status: &str, reason: &str) -> Value {
    json!([{ "type": "Issuing", "status": status, "reason": reason, "message": "m" }])
}

const ISSUING: &str = "k:{\"type\":\"Issuing\"}";

/// The fields of `conditions[type=Issuing]` a manager's status entry names.
fn issuing_fields(obj: &DynamicObject, manager: &str) -> Vec<String> {
    let fields = fields_of(&obj.metadata, manager, Some("status"));
    fields
        .pointer(&format!("/f:status/f:conditions/{ISSUING}"))
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// Two managers applying `conditions[type=Issuing]` to /status with force hand the fields
/// that differ back and forth; the fields both set to the same value stay shared.
#[tokio::test]
async fn forced_applies_hand_a_condition_back_and_forth() {
    let (_h, certs) = with_certificate().await;
    let trigger = force("cfssl-issuer-trigger");
    let issuer = force("cfssl-issuer-issuing");
    certs
        .patch_status(
            "c",
            &trigger,
            &Patch::Apply(condition_status(issuing("True", "Renewing"))),
        )
        .await
        .unwrap();
    let out = certs
        .patch_status(
            "c",
            &issuer,
            &Patch::Apply(condition_status(issuing("False", "Failed"))),
        )
        .await
        .unwrap();
    assert_eq!(out.data["status"]["conditions"][0]["status"], "False");
    assert_eq!(
        issuing_fields(&out, "cfssl-issuer-trigger"),
        [".", "f:message", "f:type"]
    );
    assert_eq!(
        issuing_fields(&out, "cfssl-issuer-issuing"),
        [".", "f:message", "f:reason", "f:status", "f:type"]
    );
    let out = certs
        .patch_status(
            "c",
            &trigger,
            &Patch::Apply(condition_status(issuing("True", "Renewing"))),
        )
        .await
        .unwrap();
    assert_eq!(out.data["status"]["conditions"][0]["status"], "True");
    assert_eq!(
        issuing_fields(&out, "cfssl-issuer-trigger"),
        [".", "f:message", "f:reason", "f:status", "f:type"]
    );
    assert_eq!(
        issuing_fields(&out, "cfssl-issuer-issuing"),
        [".", "f:message", "f:type"]
    );
}

/// A manager that applied a list-map item another manager also owns, then stops sending it,
/// removes only the fields it alone owned: the item and the shared fields stay.
#[tokio::test]
async fn dropping_a_shared_item_removes_only_what_the_manager_alone_owned() {
    let (_h, certs) = with_certificate().await;
    let ready = json!([{ "type": "Ready", "status": "True" }]);
    let ready_more = json!([{ "type": "Ready", "status": "True", "reason": "Ready", "message": "ok" }]);
    certs
        .patch_status("c", &apply("readiness"), &Patch::Apply(condition_status(ready)))
        .await
        .unwrap();
    certs
        .patch_status("c", &apply("other"), &Patch::Apply(condition_status(ready_more)))
        .await
        .unwrap();
    let out = certs
        .patch_status("c", &apply("other"), &Patch::Apply(condition_status(json!([]))))
        .await
        .unwrap();
    assert_eq!(
        out.data["status"]["conditions"],
        json!([{ "type": "Ready", "status": "True" }])
    );
    assert!(entry(&out.metadata, "other", Some("status")).is_none());
    assert_eq!(
        fields_of(&out.metadata, "readiness", Some("status")),
        json!({ "f:status": { "f:conditions": { "k:{\"type\":\"Ready\"}": { ".": {}, "f:status": {}, "f:type": {} } } } })
    );
}

/// managedFields sent in a PUT body are ignored: the server keeps its own record.
#[tokio::test]
async fn managed_fields_in_a_body_are_ignored() {
    let h = start().await;
    let cms: Api<ConfigMap> = h.api();
    let out = cms
        .patch(
            "a",
            &apply("owner"),
            &Patch::Apply(data_config(json!({ "x": "1" }))),
        )
        .await
        .unwrap();
    let mut forged = out.clone();
    forged.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
        manager: Some("forger".into()),
        operation: Some("Apply".into()),
        ..Default::default()
    }]);
    forged.data.as_mut().unwrap().insert("z".into(), "1".into());
    let out = cms.replace("a", &PostParams::default(), &forged).await.unwrap();
    assert!(entry(&out.metadata, "forger", None).is_none());
    assert_eq!(
        fields_of(&out.metadata, "owner", None),
        json!({ "f:data": { "f:x": {} } })
    );
}

/// A CRD's list without `x-kubernetes-list-type` is atomic on kube-apiserver, `conditions`
/// included: a second manager's apply replaces the whole list (409 without force), and the list
/// is then that manager's alone.
#[tokio::test]
async fn unmarked_lists_of_custom_resources_are_atomic() {
    let h = start().await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": { "name": "plains.test.example.com" },
        "spec": { "group": "test.example.com", "scope": "Namespaced",
                  "names": { "plural": "plains", "singular": "plain", "kind": "Plain", "listKind": "PlainList" },
                  "versions": [{ "name": "v1", "served": true, "storage": true, "subresources": { "status": {} },
                                 "schema": { "openAPIV3Schema": { "type": "object", "properties": {
                                     "status": { "type": "object", "properties": { "conditions": {
                                         "type": "array", "items": { "type": "object", "properties": {
                                             "type": { "type": "string" }, "status": { "type": "string" } } } } } } } } } }] }
    });
    h.install_crd(serde_json::from_value(crd).unwrap()).await;
    let gvk = GroupVersionKind::gvk("test.example.com", "v1", "Plain");
    let plains: Api<DynamicObject> = Api::namespaced_with(
        h.client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(&gvk, "plains"),
    );
    let obj: DynamicObject = serde_json::from_value(
        json!({ "apiVersion": "test.example.com/v1", "kind": "Plain", "metadata": { "name": "p" } }),
    )
    .unwrap();
    plains.create(&PostParams::default(), &obj).await.unwrap();
    let status = |t: &str| {
        json!({ "apiVersion": "test.example.com/v1", "kind": "Plain",
                "status": { "conditions": [{ "type": t, "status": "True" }] } })
    };
    plains
        .patch_status("p", &apply("a"), &Patch::Apply(status("Ready")))
        .await
        .unwrap();
    let err = plains
        .patch_status("p", &apply("b"), &Patch::Apply(status("Issuing")))
        .await
        .unwrap_err();
    assert_eq!(code(&err), 409);
    let out = plains
        .patch_status("p", &force("b"), &Patch::Apply(status("Issuing")))
        .await
        .unwrap();
    assert_eq!(
        out.data["status"]["conditions"],
        json!([{ "type": "Issuing", "status": "True" }])
    );
    assert!(entry(&out.metadata, "a", Some("status")).is_none());
    assert_eq!(
        fields_of(&out.metadata, "b", Some("status")),
        json!({ "f:status": { "f:conditions": {} } })
    );
}
