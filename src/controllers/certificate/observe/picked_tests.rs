//! `picked_requests` against a scripted API: a summarised request of the current or next
//! revision comes whole from the copies when they hold its version, else is read live once
//! (and left out when gone or replaced); the rest come as the store holds them.

use std::sync::Arc;
use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::{Value, json};

use super::picked_requests;
use crate::api::certmanager::{Certificate, CertificateRequest, ISSUING, READY};
use crate::certificates::fixtures;
use crate::certificates::keys::annotation::CERTIFICATE_REVISION;
use crate::controllers::certificate::testing::{scripted_with, with_condition, with_status};
use crate::csi::testing::{answer, next_call};

const STEP: Duration = Duration::from_secs(30);
const PATH: &str = "/apis/cert-manager.io/v1/namespaces/apps/certificaterequests/web-1";

/// `web` at revision 2, Ready, or Issuing (in flight).
fn certificate(in_flight: bool) -> Certificate {
    let mut crt = fixtures::certificate("web", fixtures::spec());
    crt.metadata.namespace = Some("apps".into());
    crt.metadata.uid = Some("uid-web".into());
    let crt = with_status(crt, |s| s.revision = Some(2));
    let (type_, reason) = if in_flight {
        (ISSUING, "Renewing")
    } else {
        (READY, "Ready")
    };
    with_condition(crt, type_, "True", reason, "2026-02-01T00:00:00Z")
}

/// `web`'s request `web-1` for `revision`, signed, at `version`, with `uid`.
fn request(revision: i64, version: &str, uid: &str) -> CertificateRequest {
    serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "CertificateRequest",
        "metadata": {
            "name": "web-1", "namespace": "apps", "uid": uid, "resourceVersion": version,
            "annotations": { CERTIFICATE_REVISION: revision.to_string() },
            "ownerReferences": [{ "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
                "name": "web", "uid": "uid-web", "controller": true }],
        },
        "spec": { "request": "Q1NS", "issuerRef": { "name": "ca" } },
        "status": { "certificate": "Q0VSVA==", "conditions": [
            { "type": "Ready", "status": "True", "reason": "Issued", "message": "ok" }] },
    }))
    .unwrap()
}

fn summary(cr: &CertificateRequest) -> CertificateRequest {
    cr.summary(CERTIFICATE_REVISION)
}

/// What the pass gets: whole, a summary, or nothing.
#[derive(Debug, PartialEq)]
enum Got {
    Whole,
    Summary,
    Nothing,
}

struct Row {
    name: &'static str,
    stored: CertificateRequest,
    copy: Option<CertificateRequest>,
    in_flight: bool,
    live: Option<(StatusCode, Value)>,
    got: Got,
}

fn rows() -> Vec<Row> {
    let (current, next, older) = (
        request(2, "7", "u1"),
        request(3, "7", "u1"),
        request(1, "7", "u1"),
    );
    let missing = json!({ "kind": "Status", "code": 404, "reason": "NotFound" });
    let replaced = serde_json::to_value(request(2, "9", "u2")).unwrap();
    // A tenant may write any field: `summarised` is one the API never gives us.
    let mut marked = serde_json::to_value(&current).unwrap();
    marked["spec"]["summarised"] = json!({ "revision": 2, "chainSha256": null });
    let marked: CertificateRequest = serde_json::from_value(marked).unwrap();
    let live = |cr: &CertificateRequest| Some((StatusCode::OK, serde_json::to_value(cr).unwrap()));
    vec![
        Row {
            name: "current, copy here",
            stored: summary(&current),
            copy: Some(current.clone()),
            in_flight: false,
            live: None,
            got: Got::Whole,
        },
        Row {
            name: "current, no copy: read live",
            stored: summary(&current),
            copy: None,
            in_flight: false,
            live: live(&current),
            got: Got::Whole,
        },
        Row {
            name: "next, no copy, in flight: read live and pinned",
            stored: summary(&next),
            copy: None,
            in_flight: true,
            live: live(&next),
            got: Got::Whole,
        },
        Row {
            name: "current, copy of an older version: read live",
            stored: summary(&current),
            copy: Some(request(2, "6", "u1")),
            in_flight: true,
            live: live(&current),
            got: Got::Whole,
        },
        Row {
            name: "an older revision stays a summary",
            stored: summary(&older),
            copy: None,
            in_flight: false,
            live: None,
            got: Got::Summary,
        },
        Row {
            name: "not a summary: as stored",
            stored: current.clone(),
            copy: None,
            in_flight: false,
            live: None,
            got: Got::Whole,
        },
        Row {
            name: "gone: left out",
            stored: summary(&current),
            copy: None,
            in_flight: false,
            live: Some((StatusCode::NOT_FOUND, missing)),
            got: Got::Nothing,
        },
        Row {
            name: "read live with a `summarised` field a tenant wrote: whole",
            stored: summary(&current),
            copy: None,
            in_flight: false,
            live: live(&marked),
            got: Got::Whole,
        },
        Row {
            name: "replaced by another of its name: left out",
            stored: summary(&current),
            copy: None,
            in_flight: false,
            live: Some((StatusCode::OK, replaced)),
            got: Got::Nothing,
        },
    ]
}

#[tokio::test]
async fn the_current_and_next_requests_are_had_whole() {
    for Row {
        name: row,
        stored,
        copy,
        in_flight,
        live,
        got,
    } in rows()
    {
        let (ctx, mut handle) = scripted_with(Vec::new(), vec![stored]);
        if let Some(copy) = copy {
            ctx.request_copies.remember(Arc::new(copy), false);
        }
        let crt = certificate(in_flight);
        let ask = |ctx: Arc<crate::controllers::certificate::CertificateContext>, crt: Certificate| {
            tokio::spawn(async move { picked_requests(&ctx, &crt).await.unwrap() })
        };
        let run = ask(ctx.clone(), crt.clone());
        let read = live.is_some();
        if let Some((status, body)) = live {
            let (method, uri, _, send) = next_call(&mut handle, STEP).await;
            assert_eq!((method, uri.as_str()), (Method::GET, PATH), "{row}");
            answer(send, status, &body);
        }
        let picked = tokio::time::timeout(STEP, run).await.unwrap().unwrap();
        let seen = match picked.as_slice() {
            [] => Got::Nothing,
            [one] if one.is_summary() => Got::Summary,
            [one] => {
                assert_eq!(one.metadata.resource_version.as_deref(), Some("7"), "{row}");
                Got::Whole
            }
            more => panic!("{row}: {more:?}"),
        };
        assert_eq!(seen, got, "{row}");
        assert_eq!(
            ctx.request_copies.is_pinned("apps", "web-1"),
            in_flight && got == Got::Whole,
            "{row}"
        );
        if got == Got::Whole && read {
            // Remembered: asked again, no request (one would hang).
            let again = tokio::time::timeout(STEP, ask(ctx.clone(), crt)).await;
            let again = again
                .unwrap_or_else(|_| panic!("{row}: read live again"))
                .unwrap();
            assert!(again.iter().all(|cr| !cr.is_summary()), "{row}");
        }
    }
}
