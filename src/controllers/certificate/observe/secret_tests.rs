//! `secret_named` against a scripted API: an issued Secret the store keeps as a summary comes
//! whole from `recent` when it holds that version, and is read live (once) when not.

use std::sync::Arc;
use std::time::Duration;

use http::{Method, StatusCode};
use k8s_openapi::api::core::v1::Secret;
use serde_json::json;

use super::secret_named;
use crate::api::certmanager::{Certificate, ISSUING, READY};
use crate::certificates::fixtures;
use crate::controllers::certificate::summary::{is_summary, secret_summary};
use crate::controllers::certificate::testing::{scripted_with_secrets, with_condition};
use crate::csi::testing::{answer, next_call};

const STEP: Duration = Duration::from_secs(30);
const PATH: &str = "/api/v1/namespaces/apps/secrets/web-tls";

fn certificate(settled: bool) -> Certificate {
    let mut crt = fixtures::certificate("web", fixtures::spec());
    crt.metadata.namespace = Some("apps".into());
    crt.spec.secret_name = "web-tls".into();
    let (type_, reason) = if settled {
        (READY, "Ready")
    } else {
        (ISSUING, "Renewing")
    };
    with_condition(crt, type_, "True", reason, "2026-02-01T00:00:00Z")
}

/// The issued Secret at `version`, whole.
fn whole(version: &str) -> Secret {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "web-tls", "namespace": "apps", "resourceVersion": version,
            "annotations": {"cert-manager.io/issuer-group": "cfssl-issuer.wikimedia.org"}},
        "data": {"tls.crt": "Q0VSVA==", "tls.key": "S0VZ"},
    }))
    .unwrap()
}

/// Per row: what the store holds, the version `recent` holds whole, whether the Certificate is
/// in flight; whether one GET is made. Each row then asks again: never a second GET. A copy
/// read for a Certificate in flight is pinned; one read for a settled one is not.
#[tokio::test]
async fn summaries_come_whole_from_recent_or_are_read_live_once() {
    type Row = (&'static str, Secret, Option<&'static str>, bool, bool);
    let rows: [Row; 5] = [
        (
            "summary, its version here",
            secret_summary(&whole("7")).unwrap(),
            Some("7"),
            false,
            false,
        ),
        (
            "summary, nothing here",
            secret_summary(&whole("7")).unwrap(),
            None,
            false,
            true,
        ),
        (
            "summary, another version here",
            secret_summary(&whole("7")).unwrap(),
            Some("6"),
            false,
            true,
        ),
        (
            "summary, nothing here, in flight",
            secret_summary(&whole("7")).unwrap(),
            None,
            true,
            true,
        ),
        ("kept whole (a next-key Secret)", whole("7"), None, false, false),
    ];
    let stored_is_summary = |ctx: &Arc<crate::controllers::certificate::CertificateContext>| {
        let cached = ctx.secrets.state();
        cached.iter().all(|s| is_summary(s))
    };
    for (row, stored, here, in_flight, reads) in rows {
        let (ctx, mut handle) = scripted_with_secrets(vec![stored]);
        if let Some(version) = here {
            ctx.recent.remember(Arc::new(whole(version)), false);
        }
        let crt = certificate(!in_flight);
        let ask = |ctx: Arc<crate::controllers::certificate::CertificateContext>, crt: Certificate| {
            tokio::spawn(async move { secret_named(&ctx, &crt, "web-tls").await.unwrap() })
        };
        let run = ask(ctx.clone(), crt.clone());
        if reads {
            let (method, uri, _, send) = next_call(&mut handle, STEP).await;
            assert_eq!((method, uri.as_str()), (Method::GET, PATH), "{row}");
            answer(send, StatusCode::OK, &serde_json::to_value(whole("7")).unwrap());
        }
        let got = tokio::time::timeout(STEP, run).await.unwrap().unwrap();
        assert_eq!(got.as_deref(), Some(&whole("7")), "{row}");
        let summarised = stored_is_summary(&ctx);
        assert_eq!(
            ctx.recent.is_pinned("apps", "web-tls"),
            in_flight && summarised,
            "{row}"
        );
        // Asked again: from the store or from `recent`, with no request (one would hang).
        let again = tokio::time::timeout(STEP, ask(ctx.clone(), crt)).await;
        let again = again
            .unwrap_or_else(|_| panic!("{row}: read live again"))
            .unwrap();
        assert_eq!(again.as_deref(), Some(&whole("7")), "{row}");
    }
}

/// Settled: Ready and not Issuing.
#[test]
fn settled_is_ready_and_not_issuing() {
    let at = "2026-02-01T00:00:00Z";
    let bare = || {
        let mut crt = fixtures::certificate("web", fixtures::spec());
        crt.metadata.namespace = Some("apps".into());
        crt
    };
    let rows: [(&str, Certificate, bool); 5] = [
        ("no conditions", bare(), false),
        ("Ready", with_condition(bare(), READY, "True", "Ready", at), true),
        (
            "not Ready",
            with_condition(bare(), READY, "False", "Expired", at),
            false,
        ),
        (
            "Ready and Issuing",
            with_condition(
                with_condition(bare(), READY, "True", "Ready", at),
                ISSUING,
                "True",
                "Renewing",
                at,
            ),
            false,
        ),
        (
            "Ready, Issuing False",
            with_condition(
                with_condition(bare(), READY, "True", "Ready", at),
                ISSUING,
                "False",
                "Issued",
                at,
            ),
            true,
        ),
    ];
    for (row, crt, want) in rows {
        assert_eq!(super::settled(&crt), want, "{row}");
    }
}
