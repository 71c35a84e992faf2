use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher;
use serde_json::json;

use crate::telemetry::{Metrics, Role};

use super::*;

fn certificate(namespace: &str, name: &str, status: serde_json::Value) -> Certificate {
    serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{namespace}-{name}")},
        "spec": {
            "secretName": name, "commonName": "x.example",
            "issuerRef": {"name": "ca", "kind": "ClusterIssuer", "group": "cfssl-issuer.wikimedia.org"},
        },
        "status": status,
    }))
    .expect("a Certificate")
}

fn store_of(certificates: Vec<Certificate>) -> (Writer<Certificate>, Store<Certificate>) {
    let mut writer = Writer::default();
    for crt in certificates {
        writer.apply_watcher_event(&watcher::Event::Apply(crt));
    }
    let store = writer.as_reader();
    (writer, store)
}

/// Our lines of the scrape starting with `prefix`, the clock's value masked.
fn lines(text: &str, prefix: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with(prefix) || l.starts_with(&format!("# TYPE {prefix}")))
        .map(
            |l| match l.strip_prefix("certmanager_clock_time_seconds_gauge ") {
                Some(_) => "certmanager_clock_time_seconds_gauge NOW".to_string(),
                None => l.to_string(),
            },
        )
        .collect()
}

const ISSUER: &str =
    r#"issuer_name="ca",issuer_kind="ClusterIssuer",issuer_group="cfssl-issuer.wikimedia.org""#;

#[test]
fn nothing_before_the_store_is_handed_over() {
    let metrics = Metrics::default();
    let text = metrics.encode();
    assert_eq!(lines(&text, "certmanager_"), Vec::<String>::new());
    assert!(text.ends_with("# EOF\n"), "{text}");
}

#[test]
fn each_certificate_has_cert_managers_series() {
    let ready = certificate(
        "apps",
        "web",
        json!({
            "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "ok"}],
            "notBefore": "2026-01-01T00:00:00Z", "notAfter": "2026-04-01T00:00:00Z",
            "renewalTime": "2026-03-02T00:00:00Z",
        }),
    );
    let new = certificate("apps", "new", json!({}));
    let (_writer, store) = store_of(vec![ready, new]);
    let metrics = Metrics::default();
    metrics.watch_certificates(store);
    let mut got = lines(&metrics.encode(), "certmanager_");
    got.sort();
    let mut want: Vec<String> = [
        "# TYPE certmanager_certificate_ready_status gauge".to_string(),
        "# TYPE certmanager_certificate_not_after_timestamp_seconds gauge".to_string(),
        "# TYPE certmanager_certificate_not_before_timestamp_seconds gauge".to_string(),
        "# TYPE certmanager_certificate_expiration_timestamp_seconds gauge".to_string(),
        "# TYPE certmanager_certificate_renewal_timestamp_seconds gauge".to_string(),
        "# TYPE certmanager_clock_time_seconds_gauge gauge".to_string(),
        "certmanager_clock_time_seconds_gauge NOW".to_string(),
    ]
    .into_iter()
    .collect();
    for (name, ready) in [("web", "True"), ("new", "Unknown")] {
        for condition in ["True", "False", "Unknown"] {
            let value = u8::from(condition == ready);
            want.push(format!(
                r#"certmanager_certificate_ready_status{{name="{name}",namespace="apps",condition="{condition}",{ISSUER}}} {value}"#
            ));
        }
    }
    let web = [
        ("not_after", 1_775_001_600),
        ("not_before", 1_767_225_600),
        ("expiration", 1_775_001_600),
        ("renewal", 1_772_409_600),
    ];
    for (family, value) in web {
        for (name, value) in [("web", value), ("new", 0)] {
            want.push(format!(
                r#"certmanager_certificate_{family}_timestamp_seconds{{name="{name}",namespace="apps",{ISSUER}}} {value}"#
            ));
        }
    }
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn a_deleted_certificate_takes_its_series_with_it() {
    let (mut writer, store) = store_of(vec![
        certificate("apps", "gone", json!({})),
        certificate("apps", "kept", json!({})),
    ]);
    let metrics = Metrics::default();
    metrics.watch_certificates(store);
    writer.apply_watcher_event(&watcher::Event::Delete(certificate("apps", "gone", json!({}))));
    let text = metrics.encode();
    let series = |name: &str| {
        text.lines()
            .filter(|l| l.contains(&format!(r#"name="{name}""#)))
            .count()
    };
    assert_eq!((series("gone"), series("kept")), (0, 7));
}

#[test]
fn leader_follows_the_role() {
    let metrics = Metrics::default();
    let cases = [
        (Role::Alone, 1),
        (Role::Standby, 0),
        (Role::Leader, 1),
        (Role::Lost, 0),
    ];
    for (role, want) in cases {
        metrics.set_leading(role.reconciles());
        let line = format!("cfssl_issuer_leader {want}");
        assert!(metrics.encode().lines().any(|l| l == line), "{role:?}");
    }
}

/// The cost of the series at 10,000 Certificates: the bytes of one scrape are exact (fixed
/// names); the time is printed (`--nocapture`) for the README, not asserted.
#[test]
fn ten_thousand_certificates_cost() {
    let status = json!({
        "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "ok"}],
        "notBefore": "2026-01-01T00:00:00Z", "notAfter": "2026-04-01T00:00:00Z",
        "renewalTime": "2026-03-02T00:00:00Z",
    });
    let all = (0..10_000)
        .map(|i| {
            certificate(
                &format!("ns-{:03}", i % 100),
                &format!("cert-{i:05}"),
                status.clone(),
            )
        })
        .collect();
    let (_writer, store) = store_of(all);
    let metrics = Metrics::default();
    let without = metrics.encode().len();
    metrics.watch_certificates(store);
    let started = std::time::Instant::now();
    let text = metrics.encode();
    let took = started.elapsed();
    let series = text
        .lines()
        .filter(|l| l.starts_with("certmanager_certificate_"))
        .count();
    assert_eq!(series, 70_000, "7 series per Certificate");
    let bytes = text.len() - without;
    println!("10,000 Certificates: {series} series, {bytes} bytes, encoded in {took:?}");
    assert_eq!(bytes, 10_000 * 1_299 + 1_237);
}
