//! Field selectors as kube-apiserver serves them for custom resources: only `metadata.name`,
//! `metadata.namespace` (namespaced kinds) and the CRD version's `selectableFields`
//! (https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#crd-selectable-fields,
//! beta in 1.31, GA in 1.32); any other field is 400 "field label not supported: <path>".
//! cert-manager's Certificate and CertificateRequest CRDs declare `spec.issuerRef.group`,
//! `.kind` and `.name`.

mod support;

use futures::TryStreamExt;
use kube::{
    Api,
    api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams, WatchParams},
};
use serde_json::json;
use support::{Gadget, code, reason, start};

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("cert-manager.io", "v1", kind), plural)
}

async fn with_cert_manager() -> support::Harness {
    let h = start().await;
    for crd in cfssl_issuer::api::certmanager::cert_manager_crds() {
        h.install_crd(crd).await;
    }
    h
}

fn issuer_ref(name: &str, kind: &str, group: &str) -> serde_json::Value {
    json!({ "name": name, "kind": kind, "group": group })
}

async fn names(api: &Api<DynamicObject>, selector: &str) -> Vec<String> {
    let list = api.list(&ListParams::default().fields(selector)).await.unwrap();
    list.items.into_iter().filter_map(|o| o.metadata.name).collect()
}

async fn seed(api: &Api<DynamicObject>, kind: &str, spec: impl Fn(serde_json::Value) -> serde_json::Value) {
    let refs = [
        ("a", issuer_ref("ca", "Issuer", "cfssl-issuer.wikimedia.org")),
        (
            "b",
            issuer_ref("ca", "ClusterIssuer", "cfssl-issuer.wikimedia.org"),
        ),
        ("c", issuer_ref("other", "Issuer", "cert-manager.io")),
    ];
    for (name, issuer) in refs {
        let obj = json!({ "apiVersion": "cert-manager.io/v1", "kind": kind, "metadata": { "name": name },
                          "spec": spec(issuer) });
        api.create(&PostParams::default(), &serde_json::from_value(obj).unwrap())
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn certificates_select_by_issuer_ref() {
    let h = with_cert_manager().await;
    let certs: Api<DynamicObject> = Api::namespaced_with(
        h.client.clone(),
        "default",
        &resource("Certificate", "certificates"),
    );
    seed(
        &certs,
        "Certificate",
        |issuer| json!({ "secretName": "s", "issuerRef": issuer }),
    )
    .await;
    assert_eq!(names(&certs, "spec.issuerRef.name=ca").await, ["a", "b"]);
    assert_eq!(names(&certs, "spec.issuerRef.kind=Issuer").await, ["a", "c"]);
    assert_eq!(
        names(
            &certs,
            "spec.issuerRef.group=cfssl-issuer.wikimedia.org,spec.issuerRef.kind!=Issuer"
        )
        .await,
        ["b"]
    );
    assert_eq!(
        names(&certs, "metadata.name=c,metadata.namespace=default").await,
        ["c"]
    );
    let err = certs
        .list(&ListParams::default().fields("spec.secretName=s"))
        .await
        .unwrap_err();
    assert_eq!((code(&err), reason(&err).as_str()), (400, "BadRequest"));
    match err {
        kube::Error::Api(status) => assert_eq!(status.message, "field label not supported: spec.secretName"),
        other => panic!("{other:?}"),
    }
    let watch = certs
        .watch(&WatchParams::default().fields("spec.secretName=s"), "0")
        .await;
    let err = match watch {
        Err(err) => err,
        Ok(stream) => match futures::StreamExt::boxed(stream).try_next().await {
            Err(err) => err,
            Ok(event) => panic!("expected a refused watch, got {event:?}"),
        },
    };
    assert_eq!(code(&err), 400);
}

#[tokio::test]
async fn certificate_requests_select_by_issuer_ref() {
    let h = with_cert_manager().await;
    let crs: Api<DynamicObject> = Api::namespaced_with(
        h.client.clone(),
        "default",
        &resource("CertificateRequest", "certificaterequests"),
    );
    seed(
        &crs,
        "CertificateRequest",
        |issuer| json!({ "request": "Y3Ny", "issuerRef": issuer }),
    )
    .await;
    assert_eq!(names(&crs, "spec.issuerRef.name=other").await, ["c"]);
    assert_eq!(names(&crs, "spec.issuerRef.kind=ClusterIssuer").await, ["b"]);
    let err = crs
        .list(&ListParams::default().fields("spec.request=Y3Ny"))
        .await
        .unwrap_err();
    assert_eq!(code(&err), 400);
}

/// A cluster-scoped custom resource has no `metadata.namespace` to select on.
#[tokio::test]
async fn cluster_scoped_custom_resources_select_by_name_only() {
    let h = start().await;
    h.install_gadgets().await;
    let gadgets: Api<Gadget> = h.cluster_api();
    gadgets
        .create(
            &PostParams::default(),
            &Gadget::new("g", support::GadgetSpec { model: "m".into() }),
        )
        .await
        .unwrap();
    let listed = gadgets
        .list(&ListParams::default().fields("metadata.name=g"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    let err = gadgets
        .list(&ListParams::default().fields("metadata.namespace="))
        .await
        .unwrap_err();
    assert_eq!(code(&err), 400);
}
