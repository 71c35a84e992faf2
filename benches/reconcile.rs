//! The CertificateRequest reconciler's own cost per request: observe, decide and act (the
//! server-side apply of the status and the Event), against an in-memory API double that
//! answers at once, on one core. The CA is left out: each request's signed chain is already
//! in the reconciler's "signed but not saved" memory, so the Sign step takes the path a real
//! signature takes right after the CA answers.
//!
//! `cargo bench --bench reconcile` (BENCH_N requests, default 20000). Target: >= 20,000/s.

// A benchmark, like a test, may stop at the first surprise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use cfssl_issuer::api::Issuer;
use cfssl_issuer::api::certmanager::CertificateRequest;
use cfssl_issuer::controllers::signing::once::Signing;
use cfssl_issuer::controllers::{Config, Contexts, certificaterequest};
use cfssl_issuer::pki::Chain;
use http::{Request, Response};
use kube::client::Body;
use kube::runtime::reflector;
use kube::runtime::watcher;
use serde_json::json;

const NAMESPACE: &str = "apps";

fn issuer() -> Issuer {
    serde_json::from_value(json!({
        "apiVersion": "cfssl-issuer.wikimedia.org/v1alpha1", "kind": "Issuer",
        "metadata": {"name": "ca", "namespace": NAMESPACE, "generation": 1, "uid": "issuer-uid"},
        "spec": {"url": "https://ca.example", "authSecretName": "creds", "label": "intermediate1"},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Checked",
            "message": "ok", "lastTransitionTime": "2026-11-22T09:00:00Z", "observedGeneration": 1}]},
    }))
    .unwrap()
}

fn request(i: usize) -> serde_json::Value {
    json!({
        "apiVersion": "cert-manager.io/v1", "kind": "CertificateRequest",
        "metadata": {"name": format!("req-{i}"), "namespace": NAMESPACE, "uid": format!("uid-{i}"),
            "creationTimestamp": "2026-11-22T09:59:00Z", "resourceVersion": "1"},
        "spec": {"request": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0K",
            "issuerRef": {"group": "cfssl-issuer.wikimedia.org", "kind": "Issuer", "name": "ca"}},
        "status": {"conditions": [{"type": "Approved", "status": "True", "reason": "cert-manager.io",
            "message": "approved", "lastTransitionTime": "2026-11-22T09:59:01Z"}]},
    })
}

/// A leaf and its self-signed CA, as a CA would return them.
fn chain() -> Chain {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["svc.example".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    Chain {
        certificates: leaf.pem(),
        ca: Some(ca.pem()),
    }
}

/// An API server that answers every request at once: the request object for status applies,
/// an Event for Event writes.
fn api_double(object: Vec<u8>) -> kube::Client {
    let event = serde_json::to_vec(&json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "e", "namespace": NAMESPACE}, "eventTime": "2026-11-22T10:00:00.000000Z",
        "reportingController": "cfssl-issuer", "reportingInstance": "cfssl-issuer",
        "action": "Issued", "reason": "Issued", "type": "Normal",
    }))
    .unwrap();
    let (object, event) = (bytes::Bytes::from(object), bytes::Bytes::from(event));
    let service = tower::service_fn(move |req: Request<Body>| {
        let body = if req.uri().path().contains("/events") {
            event.clone()
        } else {
            object.clone()
        };
        async move {
            Ok::<_, Infallible>(
                Response::builder()
                    .header("content-type", "application/json")
                    .body(Body::from(body.to_vec()))
                    .unwrap(),
            )
        }
    });
    kube::Client::new(service, NAMESPACE)
}

fn main() {
    let n: usize = std::env::var("BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (issuers, mut writer) = reflector::store();
        writer.apply_watcher_event(&watcher::Event::Apply(issuer()));
        let (cluster_issuers, _) = reflector::store();
        let client = api_double(serde_json::to_vec(&request(0)).unwrap());
        let metrics = Arc::new(cfssl_issuer::telemetry::Metrics::default());
        let clock = cfssl_issuer::controllers::system_clock();
        let (ctx, _rechecks) = Contexts::new(
            client,
            Config::new("cfssl-system"),
            clock,
            issuers,
            cluster_issuers,
            metrics,
        );
        let ctx = ctx.requests;
        let chain = chain();
        let requests: Vec<Arc<CertificateRequest>> = (0..n)
            .map(|i| Arc::new(serde_json::from_value(request(i)).unwrap()))
            .collect();
        {
            for i in 0..n {
                ctx.core
                    .ledger
                    .signings
                    .insert(&format!("uid-{i}"), Signing::Unsaved(chain.clone()));
            }
        }

        let start = Instant::now();
        for cr in &requests {
            certificaterequest::reconcile(Arc::clone(cr), Arc::clone(&ctx))
                .await
                .expect("reconcile");
        }
        let elapsed = start.elapsed();
        assert!(
            ctx.core
                .ledger
                .signings
                .snapshot()
                .values()
                .all(|s| matches!(s, Signing::Saved { .. })),
            "every request was written"
        );
        let per_second = n as f64 / elapsed.as_secs_f64();
        println!(
            "CertificateRequest reconcile (observe + decide + status apply + Event), one core, in-memory API:"
        );
        println!(
            "  {n} requests in {:.3} s: {per_second:.0} requests/s, {:.1} us/request (target >= 20000/s: {})",
            elapsed.as_secs_f64(),
            elapsed.as_secs_f64() * 1e6 / n as f64,
            if per_second >= 20_000.0 { "met" } else { "NOT met" }
        );
    });
}
