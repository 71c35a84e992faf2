//! Standalone mode when issuance fails: the CA refuses a request for good (simple-cfssl, like
//! the Go 1.7 cfssl builds, cannot sign an Ed25519 CSR), and a request denied by an approver.

mod standalone;

use std::time::Duration;

use cfssl_issuer::api::certmanager::Certificate;
use e2e::harness::objects;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Patch, PatchParams};
use serde_json::json;
use standalone::{Env, revision_of};

const WAIT: Duration = Duration::from_secs(30);

/// The reason `objects::decide` denies with: as in cert-manager, `Issuing=False` takes the
/// reason and message of the request's `Denied` condition.
const DENIED_REASON: &str = "e2e.denied";

/// `(failedIssuanceAttempts, lastFailureTime)` of a Certificate.
fn failures(crt: &Certificate) -> (i64, Option<Timestamp>) {
    let status = crt.status.as_ref();
    (
        status.and_then(|s| s.failed_issuance_attempts).unwrap_or(0),
        status.and_then(|s| s.last_failure_time.as_ref()).map(|t| t.0),
    )
}

/// Each refusal counts one more failed attempt; with a minimum back-off of 2 s the next
/// attempt comes 2 s after the first failure, then 4 s after the second (doubling), and no
/// sooner: the third failure is 6 s or more after the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_count_attempts_and_back_off_two_then_four_seconds() -> anyhow::Result<()> {
    let env = Env::start(&["--certificate-request-minimum-backoff-duration=2s"]).await?;
    if env.cluster.is_external() {
        eprintln!("skipped against a real cluster: the manager's flags are the deployment's");
        return Ok(());
    }
    env.issuer("team-ca").await?;
    let spec = json!({ "privateKey": { "algorithm": "Ed25519" } });
    env.certificate("refused", "refused-tls", "team-ca", spec).await?;
    let api = env.certificates();
    let mut seen: Vec<(i64, Timestamp)> = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    while seen.last().map(|s| s.0) != Some(3) {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "3 failed attempts not reached: {seen:?}\n{}",
            env.manager.as_ref().map(|m| m.log()).unwrap_or_default()
        );
        if let (attempts, Some(at)) = failures(&api.get("refused").await?)
            && seen.last().map(|s| s.0) != Some(attempts)
        {
            seen.push((attempts, at));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        seen.iter().map(|s| s.0).collect::<Vec<_>>(),
        [1, 2, 3],
        "one more attempt per refusal: {seen:?}"
    );
    let spacing = |i: usize| seen[i].1.duration_since(seen[i - 1].1);
    for (i, backoff) in [(1, 2), (2, 4)] {
        let backoff = SignedDuration::from_secs(backoff);
        assert!(
            spacing(i) >= backoff && spacing(i) <= backoff + SignedDuration::from_secs(10),
            "failure {} came {} after the one before; back-off {backoff}: {seen:?}",
            i + 1,
            spacing(i)
        );
    }
    let crt = api.get("refused").await?;
    let issuing = crt.condition("Issuing").expect("Issuing");
    assert_eq!(
        (issuing.status.as_str(), issuing.reason.as_str()),
        ("False", "Failed")
    );
    assert!(
        issuing
            .message
            .starts_with("The certificate request has failed to complete and will be retried: "),
        "{}",
        issuing.message
    );
    assert_eq!(env.signed(), 0);
    assert!(
        env.requests_of("refused").await?.len() <= 1,
        "a failed request is replaced, never kept beside the next"
    );
    env.assert_api_hygiene();
    Ok(())
}

/// Without the manager's approver, a request the approver denies fails the issuance; the
/// Certificate stays failed (the 1 h default back-off) until its spec changes, and then the
/// new request, once approved, issues at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_request_stays_failed_until_the_spec_changes() -> anyhow::Result<()> {
    let env = Env::start(&["--approve-own-requests=false"]).await?;
    if env.cluster.is_external() {
        eprintln!("skipped against a real cluster: the manager's flags are the deployment's");
        return Ok(());
    }
    env.issuer("team-ca").await?;
    env.certificate("denied", "denied-tls", "team-ca", json!({}))
        .await?;
    let first = wait_request(&env, "denied", None).await?;
    objects::decide(env.client(), &env.ns, &first, false).await?;
    let failed = env
        .wait_condition("denied", "Issuing", "False", Some(DENIED_REASON), WAIT)
        .await;
    let failed = env.with_manager_log(failed)?;
    assert_eq!(failures(&failed).0, 1);

    // Three seconds later nothing has moved: no new request, still one failed attempt.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let crt = env.certificates().get("denied").await?;
    let issuing = crt.condition("Issuing").expect("Issuing");
    assert_eq!(
        (issuing.status.as_str(), issuing.reason.as_str()),
        ("False", DENIED_REASON)
    );
    assert_eq!(
        issuing.message,
        "The certificate request has failed to complete and will be retried: Denied by the e2e suite"
    );
    assert_eq!(failures(&crt).0, 1);
    let requests = env.requests_of("denied").await?;
    assert_eq!(requests.len(), 1);
    assert!(requests[0].has_true("Denied"));
    assert_eq!(env.signed(), 0);

    let names = json!({ "spec": { "dnsNames": ["denied.example.com", "www.denied.example.com"] } });
    env.certificates()
        .patch("denied", &PatchParams::default(), &Patch::Merge(&names))
        .await?;
    let old_uid = requests[0].metadata.uid.clone();
    let second = wait_request(&env, "denied", old_uid.as_deref()).await?;
    objects::approve(env.client(), &env.ns, &second).await?;
    let ready = env.wait_revision("denied", 1, WAIT).await?;
    let secret = env.secret("denied-tls").await?;
    env.verify_secret(&secret, &["denied.example.com", "www.denied.example.com"])?;
    assert_eq!(failures(&ready), (0, None), "a success clears the failures");
    assert_eq!(env.signed(), 1);
    env.assert_api_hygiene();
    Ok(())
}

/// Waits for a request of Certificate `name` for revision 1 other than the one with UID
/// `not`; returns its name.
async fn wait_request(env: &Env, name: &str, not: Option<&str>) -> anyhow::Result<String> {
    let found = e2e::harness::eventually(WAIT, &format!("a new request of {name}"), || async {
        let requests = env.requests_of(name).await.ok()?;
        requests
            .into_iter()
            .find(|cr| revision_of(cr) == Some(1) && cr.metadata.uid.as_deref() != not)
            .and_then(|cr| cr.metadata.name)
    })
    .await;
    env.with_manager_log(found)
}
