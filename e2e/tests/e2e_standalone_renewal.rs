//! Standalone mode over time: renewal at `renewalTime` (a new key with `rotationPolicy:
//! Always`, the same key with `Never`), and `Ready=False`/`Expired` within 2 s of `notAfter`
//! when the CA cannot renew. simple-cfssl's `renewing` profile signs for 105 s from the rounded
//! minute less 31 s (cfssl's `backdate`), so a renewal falls 9 to 69 s after the first
//! issuance and `notAfter` 44 to 104 s after it.

mod standalone;

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::json;
use standalone::{Env, data, go_time, public_key_of, serial_of, times};

/// Long enough for the expiry (at most 104 s away) and the renewal (69 s).
const RENEWAL_WAIT: Duration = Duration::from_secs(110);
const WAIT: Duration = Duration::from_secs(30);

/// Both Certificates renew once, each at its renewal time: the request for revision 2 is
/// created not before `renewalTime` and at most 2 s after it. `Always` brings a new key,
/// `Never` keeps the key; both bring a new certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renews_at_the_renewal_time_new_key_with_always_same_key_with_never() -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    if env.cluster.is_external() {
        eprintln!("skipped against a real cluster: needs simple-cfssl's renewing profile");
        return Ok(());
    }
    env.issuer_with_profile("short-ca", "renewing").await?;
    for (name, policy) in [("always", "Always"), ("never", "Never")] {
        let spec = json!({ "privateKey": { "rotationPolicy": policy } });
        env.certificate(name, &format!("{name}-tls"), "short-ca", spec)
            .await?;
    }
    let mut first = Vec::new();
    for name in ["always", "never"] {
        let crt = env.wait_revision(name, 1, WAIT).await?;
        let (not_before, not_after, renewal) = times(&crt);
        // cert-manager renews at two thirds of the lifetime: 105 s, so 35 s before notAfter.
        assert_eq!(
            not_after.duration_since(not_before),
            SignedDuration::from_secs(105)
        );
        assert_eq!(renewal, not_after - SignedDuration::from_secs(35), "{name}");
        first.push((crt, env.secret(&format!("{name}-tls")).await?));
    }
    for (crt, before) in first {
        let name = crt.metadata.name.clone().expect("name");
        let renewal = times(&crt).2;
        let renewed = env.wait_revision(&name, 2, RENEWAL_WAIT).await?;
        let requests: Vec<_> = env
            .requests_of(&name)
            .await?
            .into_iter()
            .filter(|cr| standalone::revision_of(cr) == Some(2))
            .collect();
        assert_eq!(requests.len(), 1, "{name}: one request for revision 2");
        let created = requests[0]
            .metadata
            .creation_timestamp
            .clone()
            .expect("creationTimestamp")
            .0;
        let late = created.duration_since(renewal);
        assert!(
            late >= SignedDuration::ZERO && late <= SignedDuration::from_secs(2),
            "{name}: renewal due at {renewal}, request created at {created}"
        );
        let events = env.events_of(&name).await?;
        let want = (
            "Issuing".to_string(),
            format!(
                "Renewing certificate as renewal was scheduled at {}",
                go_time(renewal)
            ),
        );
        assert!(events.contains(&want), "{name}: {events:?}");

        let after = env.secret(&format!("{name}-tls")).await?;
        env.verify_secret(&after, &[&format!("{name}.example.com")])?;
        let (crt_before, crt_after) = (data(&before, "tls.crt"), data(&after, "tls.crt"));
        assert_ne!(
            serial_of(&crt_before)?,
            serial_of(&crt_after)?,
            "{name}: a new certificate"
        );
        let (key_before, key_after) = (data(&before, "tls.key"), data(&after, "tls.key"));
        match name.as_str() {
            "always" => assert_ne!(public_key_of(&key_before)?, public_key_of(&key_after)?),
            _ => assert_eq!(key_before, key_after, "Never keeps the key, byte for byte"),
        }
        // Readiness writes the new times just after the issuing controller the revision.
        let api = env.certificates();
        let later = e2e::harness::eventually(WAIT, &format!("{name}: a later notAfter"), || async {
            let now = api.get(&name).await.ok()?;
            (times(&now).1 > times(&crt).1).then_some(now)
        })
        .await?;
        assert_eq!(later.status.as_ref().and_then(|s| s.revision), Some(2));
        assert_eq!(renewed.status.as_ref().and_then(|s| s.revision), Some(2));
    }
    env.assert_api_hygiene();
    Ok(())
}

/// With the CA down after the first issuance, the renewal cannot happen: the Certificate stays
/// Ready until `notAfter`, then reads `Ready=False`/`Expired` within 2 s, with cert-manager's
/// message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_expired_within_two_seconds_of_not_after_when_the_ca_is_down() -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    if env.cluster.is_external() {
        eprintln!("skipped against a real cluster: takes the CA down");
        return Ok(());
    }
    env.issuer_with_profile("short-ca", "renewing").await?;
    env.certificate("doomed", "doomed-tls", "short-ca", json!({}))
        .await?;
    let crt = env.wait_revision("doomed", 1, WAIT).await?;
    assert!(env.ca.set_available(false));
    let (_, not_after, _) = times(&crt);
    let expired = env
        .wait_condition("doomed", "Ready", "False", Some("Expired"), RENEWAL_WAIT)
        .await;
    let seen = Timestamp::now();
    let expired = env.with_manager_log(expired)?;
    let ready = expired.condition("Ready").expect("Ready").clone();
    let at = ready.last_transition_time.expect("lastTransitionTime").0;
    let late = at.duration_since(not_after);
    assert!(
        late >= SignedDuration::ZERO && late <= SignedDuration::from_secs(2),
        "notAfter {not_after}, Expired at {at}"
    );
    // The claim is the manager's own stamp above; this only shows the stamp is not from the
    // future of what the test saw, with room for the test's polling on a busy machine.
    assert!(
        at <= seen && seen.duration_since(not_after) <= SignedDuration::from_secs(10),
        "notAfter {not_after}, Expired at {at}, seen at {seen}"
    );
    let rfc1123 = not_after.strftime("%a, %d %b %Y %H:%M:%S UTC").to_string();
    assert_eq!(ready.message, format!("Certificate expired on {rfc1123}"));
    let status = expired.status.expect("status");
    assert_eq!(status.revision, Some(1), "no renewal went through");
    let issuing = status.conditions.iter().find(|c| c.type_ == "Issuing");
    assert_eq!(
        issuing.map(|c| (c.status.as_str(), c.reason.as_str())),
        Some(("True", "Renewing")),
        "the renewal began, and cannot end while the CA is down"
    );
    env.assert_api_hygiene();
    Ok(())
}
