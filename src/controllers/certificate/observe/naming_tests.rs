//! `naming_secret` takes names from the index and keeps only the Certificates that do name the
//! Secret: an index may offer more (a Certificate whose change the store has applied and the
//! index not yet, or two keys sharing a hash).

use std::sync::Arc;

use kube::ResourceExt;
use kube::runtime::watcher::Event;

use super::naming_secret;
use crate::api::certmanager::Certificate;
use crate::certificates::fixtures;
use crate::controllers::certificate::testing::{filled, scripted};

fn certificate(name: &str, secret: &str) -> Certificate {
    let mut crt = fixtures::certificate(name, fixtures::spec());
    crt.metadata.namespace = Some("apps".into());
    crt.spec.secret_name = secret.into();
    crt
}

#[tokio::test]
async fn offers_only_the_certificates_naming_the_secret() {
    let (ctx, _handle) = scripted();
    let mut ctx = Arc::try_unwrap(ctx).unwrap_or_else(|_| panic!("one context"));
    let (a, b) = (certificate("a", "tls"), certificate("b", "other"));
    ctx.certificates = filled(vec![a.clone(), b]);
    // The index still files `b` under its old Secret `tls`.
    ctx.indexes.certificates.apply(&Event::Apply(a.clone()));
    ctx.indexes
        .certificates
        .apply(&Event::Apply(certificate("b", "tls")));
    assert_eq!(ctx.indexes.certificates.get("apps", "tls"), ["a", "b"]);

    let names: Vec<String> = naming_secret(&ctx, &a).iter().map(|c| c.name_any()).collect();
    assert_eq!(names, ["a"]);
}
