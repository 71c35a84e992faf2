use serde_json::json;

use super::*;

const NOW: &str = "2026-11-22T10:00:00Z";

fn ts(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn lease(spec: serde_json::Value) -> Lease {
    serde_json::from_value(json!({
        "metadata": {"name": LEASE_NAME, "namespace": "kube-system"},
        "spec": spec,
    }))
    .unwrap()
}

fn holder(identity: &str, until: &str) -> Option<Holder> {
    Some(Holder {
        identity: identity.into(),
        until: ts(until),
    })
}

#[test]
fn held_table() {
    let cases = [
        (
            "renewed 10 s ago for 60 s",
            json!({"holderIdentity": "cm-1", "renewTime": "2026-11-22T09:59:50.000000Z", "leaseDurationSeconds": 60}),
            holder("cm-1", "2026-11-22T10:00:50Z"),
        ),
        (
            "no duration: cert-manager's 60 s",
            json!({"holderIdentity": "cm-1", "renewTime": "2026-11-22T09:59:30.000000Z"}),
            holder("cm-1", "2026-11-22T10:00:30Z"),
        ),
        (
            "no duration, renewed 61 s ago",
            json!({"holderIdentity": "cm-1", "renewTime": "2026-11-22T09:58:59.000000Z"}),
            None,
        ),
        (
            "stale: renewed 2 min ago for 60 s",
            json!({"holderIdentity": "cm-1", "renewTime": "2026-11-22T09:58:00.000000Z", "leaseDurationSeconds": 60}),
            None,
        ),
        (
            "expires exactly now",
            json!({"holderIdentity": "cm-1", "renewTime": "2026-11-22T09:59:00.000000Z", "leaseDurationSeconds": 60}),
            None,
        ),
        (
            "one microsecond left",
            json!({"holderIdentity": "cm-1", "renewTime": "2026-11-22T09:59:00.000001Z", "leaseDurationSeconds": 60}),
            holder("cm-1", "2026-11-22T10:00:00.000001Z"),
        ),
        (
            "no holder",
            json!({"renewTime": "2026-11-22T09:59:50.000000Z", "leaseDurationSeconds": 60}),
            None,
        ),
        (
            "released: empty holder",
            json!({"holderIdentity": "", "renewTime": "2026-11-22T09:59:59.000000Z", "leaseDurationSeconds": 1}),
            None,
        ),
        (
            "never renewed",
            json!({"holderIdentity": "cm-1", "acquireTime": "2026-11-22T09:59:59.000000Z", "leaseDurationSeconds": 60}),
            None,
        ),
        ("no spec fields", json!({}), None),
    ];
    for (what, spec, want) in cases {
        assert_eq!(held(&lease(spec), ts(NOW)), want, "{what}");
    }
    let mut no_spec = lease(json!({}));
    no_spec.spec = None;
    assert_eq!(held(&no_spec, ts(NOW)), None, "no spec");
}

fn api_error(code: u16) -> kube::Error {
    let status: kube::core::Status =
        serde_json::from_value(json!({"code": code, "reason": "x", "message": "m"})).unwrap();
    kube::Error::Api(Box::new(status))
}

#[test]
fn only_a_403_is_final() {
    let cases = [
        (api_error(403), ReadFailure::Forbidden),
        (api_error(401), ReadFailure::Retry),
        (api_error(500), ReadFailure::Retry),
        (api_error(429), ReadFailure::Retry),
        (kube::Error::LinesCodecMaxLineLengthExceeded, ReadFailure::Retry),
    ];
    for (error, want) in cases {
        assert_eq!(classify(&error), want, "{error}");
    }
}

#[test]
fn only_a_forbidden_watch_stops_the_manager() {
    let status = |code: u16| -> Box<kube::core::Status> {
        serde_json::from_value(json!({"code": code, "reason": "x", "message": "m"})).unwrap()
    };
    let cases = [
        (watcher::Error::InitialListFailed(api_error(403)), true),
        (watcher::Error::WatchStartFailed(api_error(403)), true),
        (watcher::Error::WatchFailed(api_error(403)), true),
        (watcher::Error::WatchError(status(403)), true),
        (watcher::Error::InitialListFailed(api_error(500)), false),
        (watcher::Error::WatchError(status(410)), false),
        (watcher::Error::WatchFailed(api_error(404)), false),
        (watcher::Error::NoResourceVersion, false),
    ];
    for (error, stops) in cases {
        let what = error.to_string();
        assert_eq!(forbidden(error).is_ok(), stops, "{what}");
    }
}

#[test]
fn refusal_messages_name_the_lease() {
    let running = judge(
        Some(&lease(json!({"holderIdentity": "cm-7f_1", "renewTime": "2026-11-22T09:59:50.000000Z", "leaseDurationSeconds": 60}))),
        "kube-system",
        ts(NOW),
    )
    .unwrap_err();
    assert_eq!(
        running.to_string(),
        "standalone mode refused: cert-manager is running (Lease kube-system/cert-manager-controller held by cm-7f_1 until 2026-11-22T10:00:50Z); run either cert-manager or --certificate-controllers, not both"
    );
    let forbidden = Refusal::Forbidden {
        namespace: "cm".into(),
        source: api_error(403),
    };
    assert!(
        forbidden
            .to_string()
            .starts_with("standalone mode refused: RBAC does not let this manager read the Lease cm/cert-manager-controller,"),
        "{forbidden}"
    );
    assert!(std::error::Error::source(&forbidden).is_some());
    let unreadable = Refusal::Unreadable {
        namespace: "cm".into(),
        attempts: 4,
        source: api_error(500),
    };
    assert_eq!(
        unreadable.to_string(),
        "standalone mode refused: cannot read the Lease cm/cert-manager-controller after 4 attempts, so whether cert-manager is running is unknown"
    );
    assert!(judge(None, "kube-system", ts(NOW)).is_ok(), "no Lease");
}
