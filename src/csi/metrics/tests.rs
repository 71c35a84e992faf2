use std::collections::BTreeMap;

use super::*;

fn volume(id: &str, due: Option<&str>, not_after: Option<&str>) -> Metadata {
    let mut metadata = Metadata::new(id, "/target", &BTreeMap::new());
    metadata.next_issuance_time = due.map(|t| t.parse().unwrap());
    metadata.not_after = not_after.map(|t| t.parse().unwrap());
    metadata
}

#[test]
fn the_store_summarised() {
    let now: Timestamp = "2026-11-28T12:00:00Z".parse().unwrap();
    let issued = |id, due, end| volume(id, Some(due), Some(end));
    let cases = [
        ("empty", vec![], Summary::default()),
        (
            "one pending",
            vec![volume("a", None, None)],
            Summary {
                pending: 1,
                ..Summary::default()
            },
        ),
        (
            "the earliest end, one overdue",
            vec![
                issued("a", "2026-11-28T11:59:59Z", "2026-11-28T13:00:00Z"),
                issued("b", "2026-11-28T12:00:00Z", "2026-11-28T12:30:00Z"),
                issued("c", "2026-11-29T00:00:00Z", "2026-11-30T00:00:00Z"),
                volume("d", None, None),
            ],
            Summary {
                issued: 3,
                pending: 1,
                earliest_expiry: Some("2026-11-28T12:30:00Z".parse().unwrap()),
                overdue: 1,
            },
        ),
        (
            "issued before notAfter was kept",
            vec![volume("a", Some("2026-11-29T00:00:00Z"), None)],
            Summary {
                issued: 1,
                ..Summary::default()
            },
        ),
    ];
    for (name, volumes, want) in cases {
        assert_eq!(summarize(&volumes, now), want, "{name}");
    }
}

#[test]
fn rendered_without_a_series_per_volume() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let issued = volume(
        "csi-a",
        Some("2026-11-28T11:00:00Z"),
        Some("2026-11-28T13:00:00Z"),
    );
    store.put_metadata(&issued).unwrap();
    store.put_metadata(&volume("csi-b", None, None)).unwrap();
    let now: Timestamp = "2026-11-28T12:00:00Z".parse().unwrap();
    let metrics = CsiMetrics::new(store, std::sync::Arc::new(move || now));
    metrics.publish(tonic::Code::Ok, 0.002);
    metrics.publish(tonic::Code::DeadlineExceeded, 60.0);
    metrics.issuance(tonic::Code::Ok, 0.05);
    metrics.request_created();
    metrics.renewal("renewed");
    let text = metrics.render().unwrap();
    for line in [
        "cfssl_issuer_csi_volumes{state=\"issued\"} 1",
        "cfssl_issuer_csi_volumes{state=\"pending\"} 1",
        "cfssl_issuer_csi_renewals_overdue 1",
        "cfssl_issuer_csi_earliest_expiration_timestamp_seconds 1795870800",
        "cfssl_issuer_csi_publish_duration_seconds_count{code=\"Ok\"} 1",
        "cfssl_issuer_csi_publish_duration_seconds_count{code=\"DeadlineExceeded\"} 1",
        "cfssl_issuer_csi_issuance_duration_seconds_count{code=\"Ok\"} 1",
        "cfssl_issuer_csi_requests_created_total 1",
        "cfssl_issuer_csi_renewals_total{outcome=\"renewed\"} 1",
        "cfssl_issuer_csi_stale_mounts_total 0",
    ] {
        assert!(text.contains(line), "{line} in\n{text}");
    }
    assert!(!text.contains("csi-a") && !text.contains("csi-b"), "{text}");
}
