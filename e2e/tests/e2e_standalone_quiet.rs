//! Once a Certificate is Ready the standalone controllers fall quiet: no write of any kind
//! until something changes (a controller that re-applied what is already there would run
//! itself again through its own watch, for ever).

mod standalone;

use std::time::Duration;

use kube_testserver::Verb;
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
    let writes = |c: &kube_testserver::Counts| {
        [Verb::Create, Verb::Update, Verb::Patch, Verb::Delete].map(|v| c.verb_total(v))
    };
    // Let the last writes of the issuance land (the next-key Secret's delete may follow Ready):
    // the first 2 s without a write, on however busy a machine; then count.
    let mut before = writes(&server.counts());
    let give_up = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = writes(&server.counts());
        if now == before || tokio::time::Instant::now() > give_up {
            break;
        }
        before = now;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = writes(&server.counts());
    assert_eq!(
        after, before,
        "writes (create, update, patch, delete) while nothing changed"
    );
    Ok(())
}
