//! Tests of what the issuer watches forget and pass on.

use super::*;
use crate::api::{Issuer, IssuerSpec};
use crate::cfssl::{AuthKey, ClientConfig};
use crate::controllers::kit::testing::shared;
use crate::controllers::signing::signer::Fingerprint;
use crate::controllers::signing::testing::signer;
use crate::telemetry::metrics::{CallLabels, IssuerLabels};

fn context() -> IssuerContext {
    let shared = shared();
    let signer = signer(&shared);
    IssuerContext::new(shared, signer)
}

#[test]
fn only_spec_changes_pass() {
    let g = Generations::default();
    let issuer = |name: &str, uid: &str, generation: Option<i64>| {
        let mut i = Issuer::new(name, IssuerSpec::default());
        i.metadata.namespace = Some("apps".into());
        i.metadata.uid = Some(uid.into());
        i.metadata.generation = generation;
        i
    };
    let cases = [
        ("first sight", "a", "u1", Some(1), true),
        ("status-only write", "a", "u1", Some(1), false),
        ("again", "a", "u1", Some(1), false),
        ("another issuer", "b", "u9", Some(1), true),
        ("spec change", "a", "u1", Some(2), true),
        ("same name, recreated", "a", "u2", Some(2), true),
        ("no generation", "c", "u3", None, true),
        ("no generation, again", "c", "u3", None, true),
    ];
    for (row, name, uid, generation, want) in cases {
        assert_eq!(g.changed(&issuer(name, uid, generation)), want, "{row}");
    }
    assert_eq!(g.len(), 2);
    g.forget("Issuer/apps/a");
    assert!(g.changed(&issuer("a", "u2", Some(2))), "forgotten: passes again");
    g.retain(|key| key != "Issuer/apps/b");
    assert_eq!(g.len(), 1);
}

/// Puts a CFSSL client for the issuer `key` in the signer's cache.
fn build_client(ctx: &IssuerContext, key: &str, uid: &str) {
    let fingerprint = Fingerprint {
        issuer_uid: uid.into(),
        generation: 1,
        secret_version: "1".into(),
    };
    let config = || ClientConfig::new("http://127.0.0.1:1", "l", AuthKey::from_hex("00").unwrap());
    ctx.signer.clients.get_or_build(key, fingerprint, config).unwrap();
}

#[tokio::test]
async fn a_deleted_issuer_is_forgotten() {
    let ctx = context();
    let mut gone = Issuer::new("gone", IssuerSpec::default());
    gone.metadata.namespace = Some("apps".into());
    gone.metadata.uid = Some("uid-gone".into());
    gone.metadata.generation = Some(1);
    let mut kept = gone.clone();
    kept.metadata.name = Some("kept".into());
    kept.metadata.uid = Some("uid-kept".into());
    for issuer in [&gone, &kept] {
        let key = key(issuer);
        build_client(&ctx, &key, &issuer.uid().unwrap());
        ctx.backoff.next(key.clone());
        ctx.generations.changed(issuer);
        let labels = CallLabels {
            issuer: key.clone(),
            label: "l".into(),
            call: "check",
        };
        ctx.shared.metrics.observe_call(labels, 0.1, Some("retryable"));
        ctx.shared
            .metrics
            .issuer_ready
            .get_or_create(&IssuerLabels { issuer: key })
            .set(0);
    }

    issuer_event(&Event::Apply(gone.clone()), &ctx, &mut Relist::default());
    assert_eq!(
        (ctx.signer.clients.len(), ctx.backoff.len(), ctx.generations.len()),
        (2, 2, 2),
        "not on update"
    );
    issuer_event(&Event::Delete(gone), &ctx, &mut Relist::default());

    assert_eq!(
        ctx.signer.clients.len(),
        1,
        "the client and its HMAC key are dropped"
    );
    assert_eq!(ctx.backoff.len(), 1);
    assert_eq!(ctx.generations.len(), 1);
    let text = ctx.shared.metrics.encode();
    assert!(!text.contains("Issuer/apps/gone"), "{text}");
    assert!(text.contains("Issuer/apps/kept"), "{text}");
}

#[tokio::test]
async fn a_relist_sweeps_issuers_of_its_kind_whose_delete_was_missed() {
    let ctx = context();
    let issuer = |name: &str| {
        let mut i = Issuer::new(name, IssuerSpec::default());
        i.metadata.namespace = Some("apps".into());
        i.metadata.generation = Some(1);
        i
    };
    let keys = ["Issuer/apps/live", "Issuer/apps/gone", "ClusterIssuer/other"];
    for key in keys {
        build_client(&ctx, key, key);
        ctx.backoff.next(key.to_string());
        ctx.shared.metrics.set_issuer_ready(key, true);
    }
    ctx.generations.changed(&issuer("live"));
    ctx.generations.changed(&issuer("gone"));
    let mut relist = Relist::default();
    for event in [Event::Init, Event::InitApply(issuer("live")), Event::InitDone] {
        issuer_event(&event, &ctx, &mut relist);
    }
    assert_eq!(
        (ctx.signer.clients.len(), ctx.backoff.len(), ctx.generations.len()),
        (2, 2, 1)
    );
    let text = ctx.shared.metrics.encode();
    assert!(!text.contains("Issuer/apps/gone"), "{text}");
    assert!(
        text.contains("Issuer/apps/live") && text.contains("ClusterIssuer/other"),
        "{text}"
    );
}

/// The cache keeps what the checks read, each field bounded; a `caBundle` over the limit stays
/// one byte over it, so the check still refuses it.
#[test]
fn slim_table() {
    let issuer = |url: usize, bundle: usize| {
        let mut i = Issuer::new(
            "ca",
            IssuerSpec {
                url: "u".repeat(url),
                label: "intermediate".into(),
                profile: Some("p".repeat(url)),
                ca_bundle: Some(k8s_openapi::ByteString(vec![b'b'; bundle])),
                ..IssuerSpec::default()
            },
        );
        i.metadata.annotations = Some([("note".to_string(), "n".repeat(100_000))].into());
        i.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
        i
    };
    // (row, url and profile length, caBundle length, url and profile kept, caBundle kept)
    let cases = [
        ("small", 20, 1_000, 20, 1_000),
        (
            "at the limits",
            MAX_FIELD,
            MAX_CA_BUNDLE,
            MAX_FIELD,
            MAX_CA_BUNDLE,
        ),
        ("over them", 100_000, 1 << 20, MAX_FIELD, MAX_CA_BUNDLE + 1),
    ];
    for (row, url, bundle, want_url, want_bundle) in cases {
        let mut slim_issuer = issuer(url, bundle);
        slim(&mut slim_issuer);
        let slim = slim_issuer;
        let spec = &slim.spec;
        let got = (
            spec.url.len(),
            spec.profile.as_deref().map(str::len),
            spec.ca_bundle.as_ref().map(|b| b.0.len()),
            spec.label.as_str(),
            slim.metadata.annotations.is_none() && slim.metadata.labels.is_none(),
        );
        assert_eq!(
            got,
            (want_url, Some(want_url), Some(want_bundle), "intermediate", true),
            "{row}"
        );
    }
}
