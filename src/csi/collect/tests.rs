use super::*;

#[test]
fn verdicts() {
    let at = |t: &str| t.parse::<Timestamp>().unwrap();
    let now = at("2026-11-27T12:00:00Z");
    let hour = SignedDuration::from_hours(1);
    let cases = [
        (
            "pod gone, young",
            PodState::Gone,
            Some(at("2026-11-27T11:59:00Z")),
            Verdict::PodGone,
        ),
        ("pod gone, no key yet", PodState::Gone, None, Verdict::PodGone),
        (
            "pod there, young",
            PodState::Present,
            Some(at("2026-11-27T11:30:00Z")),
            Verdict::Keep,
        ),
        (
            "pod there, exactly the limit",
            PodState::Present,
            Some(at("2026-11-27T11:00:00Z")),
            Verdict::Keep,
        ),
        (
            "pod there, too old",
            PodState::Present,
            Some(at("2026-11-27T10:59:59Z")),
            Verdict::TooOld,
        ),
        ("pod there, no key yet", PodState::Present, None, Verdict::Keep),
        (
            "pod unknown, young",
            PodState::Unknown,
            Some(at("2026-11-27T11:30:00Z")),
            Verdict::Keep,
        ),
        (
            "pod unknown, too old",
            PodState::Unknown,
            Some(at("2026-11-27T10:00:00Z")),
            Verdict::TooOld,
        ),
    ];
    for (row, pod, since, want) in cases {
        assert_eq!(verdict(pod, since, now, hour), want, "{row}");
    }
}

mod io {
    use std::collections::BTreeMap;

    use http::{Method, Request, Response, StatusCode};
    use kube::client::Body;
    use serde_json::json;

    use super::super::*;
    use crate::csi::attributes::kubelet;
    use crate::csi::testing::{ApiHandle, answer, next_call};

    const STEP: Duration = Duration::from_secs(10);

    /// A volume pending since `since`, for pod `pod` (UID `0b9d`).
    fn pending_volume(store: &Store, id: &str, pod: &str, since: &str) {
        let context: BTreeMap<String, String> = crate::csi::testing::pod_context(&[(kubelet::POD_NAME, pod)]);
        store
            .put_metadata(&Metadata::new(id, "/target", &context))
            .unwrap();
        let pending = Pending {
            request: format!("r-{id}"),
            private_key_pem: "KEY".into(),
            since: since.parse().unwrap(),
        };
        store.put_pending(id, &pending).unwrap();
    }

    type Pass = tokio::task::JoinHandle<Result<Vec<(String, Verdict)>, String>>;

    /// Two pending volumes (pods `web-0` and `web-1`, an hour's max age not reached) and a pass
    /// of the collector over them against a scripted API.
    fn two_pending_and_a_pass() -> (tempfile::TempDir, Store, ApiHandle, Pass) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        pending_volume(&store, "csi-a", "web-0", "2026-11-27T11:59:00Z");
        pending_volume(&store, "csi-b", "web-1", "2026-11-27T11:59:00Z");
        let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = kube::Client::new(service, "default");
        let now = "2026-11-27T12:00:00Z".parse().unwrap();
        let collector = Collector::new(
            client,
            store.clone(),
            Duration::from_secs(3600),
            crate::clock::fixed_clock(now),
        );
        let pass = tokio::spawn(async move { collector.pass().await.map_err(|e| e.to_string()) });
        (dir, store, handle, pass)
    }

    /// One pod gone (its volume's request deleted, then the volume), one there (kept): every
    /// call in order, and nothing else.
    #[tokio::test]
    async fn a_pass_looks_up_each_pending_pod_and_deletes_only_the_orphans_request() {
        let (_dir, store, mut handle, pass) = two_pending_and_a_pass();

        let mut next = async || {
            let (method, uri, _, send) = next_call(&mut handle, STEP).await;
            ((method, uri), send)
        };
        let (call, send) = next().await;
        assert_eq!(
            call,
            (Method::GET, "/api/v1/namespaces/shop/pods/web-0".to_string())
        );
        answer(
            send,
            StatusCode::NOT_FOUND,
            &json!({"kind": "Status", "apiVersion": "v1", "code": 404, "reason": "NotFound"}),
        );
        let (call, send) = next().await;
        assert_eq!(
            call,
            (
                Method::DELETE,
                "/apis/cert-manager.io/v1/namespaces/shop/certificaterequests/r-csi-a?".to_string()
            )
        );
        answer(
            send,
            StatusCode::OK,
            &json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
        );
        let (call, send) = next().await;
        assert_eq!(
            call,
            (Method::GET, "/api/v1/namespaces/shop/pods/web-1".to_string())
        );
        let found = json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                           "metadata": {"name": "web-1", "namespace": "shop", "uid": "0b9d"}});
        answer(send, StatusCode::OK, &found);

        let collected = pass.await.unwrap().unwrap();
        assert_eq!(collected, [("csi-a".to_string(), Verdict::PodGone)]);
        assert_eq!(store.volume_ids().unwrap(), ["csi-b"]);
        assert!(handle.next_request().await.is_none(), "no further call");
    }

    /// A request whose delete the API server refuses keeps its volume for the next pass, and
    /// does not keep the next orphan from being collected.
    #[tokio::test]
    async fn a_refused_delete_does_not_stop_the_pass() {
        let (_dir, store, mut handle, pass) = two_pending_and_a_pass();
        let gone = json!({"kind": "Status", "apiVersion": "v1", "code": 404, "reason": "NotFound"});
        let refused = json!({"kind": "Status", "apiVersion": "v1", "code": 500, "reason": "InternalError"});
        let deleted = json!({"kind": "Status", "apiVersion": "v1", "status": "Success"});
        let answers = [
            ("/api/v1/namespaces/shop/pods/web-0", StatusCode::NOT_FOUND, &gone),
            (
                "/apis/cert-manager.io/v1/namespaces/shop/certificaterequests/r-csi-a?",
                StatusCode::INTERNAL_SERVER_ERROR,
                &refused,
            ),
            ("/api/v1/namespaces/shop/pods/web-1", StatusCode::NOT_FOUND, &gone),
            (
                "/apis/cert-manager.io/v1/namespaces/shop/certificaterequests/r-csi-b?",
                StatusCode::OK,
                &deleted,
            ),
        ];
        for (uri, status, body) in answers {
            let (_, call, _, send) = next_call(&mut handle, STEP).await;
            assert_eq!(call, uri);
            answer(send, status, body);
        }
        let collected = pass.await.unwrap().unwrap();
        assert_eq!(collected, [("csi-b".to_string(), Verdict::PodGone)]);
        assert_eq!(store.volume_ids().unwrap(), ["csi-a"]);
        assert!(handle.next_request().await.is_none(), "no further call");
    }
}
