//! No renewal loop (cert-manager#5838): cfssl backdates `notBefore` by five minutes, so with
//! simple-cfssl's `server-short` profile (600 s) and `renewBefore: 9m30s` cert-manager's
//! renewal time falls 4m30s before the certificate even arrives, and cert-manager re-issues
//! it over and over. Standalone mode moves such a renewal to two thirds of the validity left
//! at issuance (here about 3m20s after it), says so once in a Warning Event, and the trigger
//! waits for that time.

mod standalone;

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::json;
use standalone::{Env, times};

const WAIT: Duration = Duration::from_secs(60);

/// How long the test watches for re-issuance: a loop re-issues every second or two (each
/// issuance is a key, a request, a signature and a Secret write), so 5+ times in this window.
const WATCH: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_due_at_issuance_is_moved_once_and_not_repeated() -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    if env.cluster.is_external() {
        eprintln!("skipped against a real cluster: needs simple-cfssl's server-short profile");
        return Ok(());
    }
    env.issuer_with_profile("short-ca", "server-short").await?;
    let spec = json!({ "renewBefore": "9m30s", "privateKey": { "algorithm": "ECDSA" } });
    env.certificate("looping", "looping-tls", "short-ca", spec)
        .await?;
    env.with_manager_log(env.wait_revision("looping", 1, WAIT).await)?;
    let crt = env.with_manager_log(env.wait_ready("looping", WAIT).await)?;
    let (not_before, not_after, renewal) = times(&crt);
    assert_eq!(
        not_after.duration_since(not_before),
        SignedDuration::from_secs(600)
    );
    let requests = env.requests_of("looping").await?;
    assert_eq!(requests.len(), 1, "one request so far");
    let issued = requests[0]
        .metadata
        .creation_timestamp
        .clone()
        .expect("creationTimestamp")
        .0;
    let computed = not_after - SignedDuration::from_secs(570);
    assert!(
        computed <= issued,
        "cert-manager's renewal {computed} has passed at issuance {issued}"
    );
    let left = not_after.duration_since(issued);
    let moved = issued + left / 3 * 2;
    let moved = Timestamp::from_second(moved.as_second())?;
    assert_eq!(renewal, moved, "two thirds of the validity left at issuance");

    let signed = env.signed();
    tokio::time::sleep(WATCH).await;
    let after = env.certificates().get("looping").await?;
    let status = after.status.as_ref().expect("status");
    assert_eq!(status.revision, Some(1), "no re-issuance");
    assert_eq!(env.requests_of("looping").await?.len(), 1, "no new request");
    assert_eq!(env.signed(), signed, "no new signature");
    assert_eq!(status.renewal_time.as_ref().map(|t| t.0), Some(moved));
    assert_eq!(after.condition("Ready").map(|c| c.status.as_str()), Some("True"));

    let adjusted: Vec<_> = env
        .events_of("looping")
        .await?
        .into_iter()
        .filter(|(reason, _)| reason == "RenewalTimeAdjusted")
        .collect();
    assert_eq!(adjusted.len(), 1, "one Warning: {adjusted:?}");
    let note = &adjusted[0].1;
    let said = format!(
        "Renewal time moved from {computed} to {moved}: the computed time is not after the certificate's issuance at {issued}"
    );
    assert!(note.starts_with(&said), "{note}");
    env.assert_api_hygiene();
    Ok(())
}
