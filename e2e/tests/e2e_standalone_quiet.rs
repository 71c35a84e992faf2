//! Once a Certificate is Ready the standalone controllers fall quiet: no write of any kind
//! until something changes (a controller that re-applied what is already there would run
//! itself again through its own watch, for ever).

mod standalone;

use std::time::Duration;

use e2e::apiserver::Verb;
use standalone::Env;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_certificate_causes_no_more_writes() -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    let Some(server) = env.cluster.server() else {
        return Ok(()); // counts need the in-process server
    };
    env.issuer("team-ca").await?;
    let extra = serde_json::json!({
        "secretTemplate": {"labels": {"team": "a"}},
        "additionalOutputFormats": [{"type": "CombinedPEM"}, {"type": "DER"}],
    });
    env.certificate("quiet", "quiet-tls", "team-ca", extra).await?;
    env.with_manager_log(env.wait_ready("quiet", Duration::from_secs(60)).await)?;
    // Let the last watch events of the issuance arrive, then count.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let writes = |c: &e2e::apiserver::Counts| {
        [Verb::Create, Verb::Update, Verb::Patch, Verb::Delete].map(|v| c.verb_total(v))
    };
    let before = writes(&server.counts());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = writes(&server.counts());
    assert_eq!(
        after, before,
        "writes (create, update, patch, delete) while nothing changed"
    );
    Ok(())
}
