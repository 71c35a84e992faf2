//! Tenants against the manager's one runtime thread: what one tenant makes the manager compute
//! must neither stall `/healthz` (the runtime thread also answers probes and renews the leader
//! Lease) nor hold back another tenant's Certificate. One row per attack; each row runs the
//! real manager in standalone mode, polls `/healthz` every ~100 ms throughout, and issues a
//! bystander Certificate in another namespace while the attack is being worked on.

mod standalone;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cfssl_issuer::api::certmanager::Certificate;
use der::{Decode, Encode};
use e2e::harness::objects::{self, Kind};
use e2e::harness::{Manager, eventually};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use standalone::{Env, GROUP, data};
use tokio::time::Instant;

/// The longest a `/healthz` answer may take while an attack is worked on.
const PROBE_BOUND: Duration = Duration::from_secs(1);
/// How long a probe is waited for before it counts as this long (the manager is stalled).
const PROBE_GIVE_UP: Duration = Duration::from_secs(5);
/// How soon the bystander Certificate must be Ready: an ECDSA issuance takes about a second
/// here; a stalled runtime thread takes the length of the attack's computation.
const BYSTANDER_BOUND: Duration = Duration::from_secs(10);
/// How long the attack's own outcome may take (an RSA-8192 key takes ~10 s of one core).
const ATTACK_BOUND: Duration = Duration::from_secs(120);
/// The MAC iteration count the tampered `keystore.p12` claims.
const CLAIMED_ITERATIONS: i32 = i32::MAX;

/// One tenant attack on the manager's computation.
#[derive(Debug, Clone, Copy)]
enum Attack {
    /// A Certificate asking for an RSA-8192 key.
    Rsa8192Key,
    /// A tenant rewrites its own Secret's `keystore.p12` to claim 2^31-1 MAC iterations.
    Pkcs12MacIterations,
}

/// What a row measured.
#[derive(Debug, Default)]
struct Figures {
    probes: usize,
    worst_probe: Duration,
    bystander_ready: Option<Duration>,
}

impl Attack {
    fn name(self) -> &'static str {
        match self {
            Attack::Rsa8192Key => "rsa-8192-key",
            Attack::Pkcs12MacIterations => "pkcs12-mac-iterations",
        }
    }

    /// Sets the attack going in `env.ns`.
    async fn start(self, env: &Env) -> anyhow::Result<()> {
        match self {
            Attack::Rsa8192Key => {
                let spec = json!({ "privateKey": { "algorithm": "RSA", "size": 8192 } });
                env.certificate("big", "big-tls", "team-ca", spec).await
            }
            Attack::Pkcs12MacIterations => {
                let spec = json!({ "keystores": { "pkcs12": { "create": true, "password": "changeit" } } });
                env.certificate("stores", "stores-tls", "team-ca", spec).await?;
                env.wait_ready("stores", ATTACK_BOUND).await?;
                let secret = env.secret("stores-tls").await?;
                let tampered = with_mac_iterations(&data(&secret, "keystore.p12"), CLAIMED_ITERATIONS)?;
                let body = json!({ "data": { "keystore.p12": base64_of(&tampered) } });
                let params = PatchParams {
                    field_manager: Some("tenant".into()),
                    ..Default::default()
                };
                env.secrets()
                    .patch("stores-tls", &params, &Patch::Merge(&body))
                    .await?;
                Ok(())
            }
        }
    }

    /// What the attack's own object ends as.
    async fn check(self, env: &Env) -> anyhow::Result<()> {
        match self {
            Attack::Rsa8192Key => {
                env.wait_ready("big", ATTACK_BOUND).await?;
                let secret = env.secret("big-tls").await?;
                env.verify_secret(&secret, &["big.example.com"])
            }
            Attack::Pkcs12MacIterations => {
                let store = eventually(ATTACK_BOUND, "keystore.p12 written again", || async {
                    let secret = env.secret("stores-tls").await.ok()?;
                    let store = data(&secret, "keystore.p12");
                    let iterations = mac_iterations(&store).ok()?;
                    (iterations != CLAIMED_ITERATIONS).then_some(iterations)
                })
                .await?;
                // LegacyRC2, the default profile, MACs with one iteration.
                assert_eq!(store, 1, "the rewritten keystore's MAC iterations");
                let events = env.events_of("stores").await?;
                let want = format!(
                    "keystore.p12 claims {CLAIMED_ITERATIONS} MAC iterations, over the 2048 this manager checks; writing it again"
                );
                assert!(
                    events
                        .iter()
                        .any(|(reason, note)| reason == "KeystoreOverLimit" && *note == want),
                    "no KeystoreOverLimit Warning saying {want:?}: {events:?}"
                );
                Ok(())
            }
        }
    }
}

/// `der` with its PFX MacData claiming `iterations` (the MAC itself left as it was).
fn with_mac_iterations(der: &[u8], iterations: i32) -> anyhow::Result<Vec<u8>> {
    let mut pfx = pkcs12::pfx::Pfx::from_der(der)?;
    let mac = pfx
        .mac_data
        .as_mut()
        .ok_or_else(|| anyhow::anyhow!("no MacData"))?;
    mac.iterations = iterations;
    Ok(pfx.to_der()?)
}

fn mac_iterations(der: &[u8]) -> anyhow::Result<i32> {
    let pfx = pkcs12::pfx::Pfx::from_der(der)?;
    Ok(pfx
        .mac_data
        .ok_or_else(|| anyhow::anyhow!("no MacData"))?
        .iterations)
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Polls `/healthz` every ~100 ms until `stop`: how many probes, the slowest.
async fn poll_health(manager: &Manager, stop: &AtomicBool) -> (usize, Duration) {
    let (mut probes, mut worst) = (0, Duration::ZERO);
    while !stop.load(Ordering::SeqCst) {
        let start = Instant::now();
        let answered = tokio::time::timeout(PROBE_GIVE_UP, manager.probe("/healthz")).await;
        let took = start.elapsed();
        let ok = matches!(answered, Ok(Ok((200, _))));
        worst = worst.max(if ok { took } else { took.max(PROBE_GIVE_UP) });
        probes += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (probes, worst)
}

/// An Issuer and a Certificate in namespace `ns` (not the attacker's); the time until it is
/// Ready, failing past [`BYSTANDER_BOUND`].
async fn bystander(env: &Env, ns: &str) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let crt: Certificate = serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": { "name": "bystander", "namespace": ns },
        "spec": {
            "secretName": "bystander-tls", "dnsNames": ["bystander.example.com"],
            "privateKey": { "algorithm": "ECDSA", "size": 256 },
            "issuerRef": { "name": "other-ca", "kind": "Issuer", "group": GROUP },
        },
    }))?;
    let api: Api<Certificate> = Api::namespaced(env.client().clone(), ns);
    api.create(&PostParams::default(), &crt).await?;
    eventually(BYSTANDER_BOUND, "the bystander Ready", || async {
        let crt = api.get("bystander").await.ok()?;
        let ready = crt.condition("Ready")?;
        (ready.status == "True").then_some(())
    })
    .await?;
    Ok(start.elapsed())
}

/// The row: the attack set going, then the bystander issued, then the attack's outcome, all
/// while `/healthz` is polled.
async fn row(attack: Attack) -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    env.issuer("team-ca").await?;
    let other = env.cluster.namespace("bystander").await?;
    env.cluster
        .put_key_secret(&other, "other-ca", &env.ca.key_hex)
        .await?;
    let spec = objects::issuer_spec(&env.ca, "other-ca", "server");
    objects::create_issuer(env.client(), Kind::Issuer, &other, "other-ca", spec).await?;
    let manager = env
        .manager
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("no manager"))?;
    let stop = AtomicBool::new(false);
    let scenario = async {
        let result = async {
            attack.start(&env).await?;
            tokio::time::sleep(Duration::from_millis(500)).await;
            let ready = bystander(&env, &other).await?;
            attack.check(&env).await?;
            anyhow::Ok(ready)
        }
        .await;
        stop.store(true, Ordering::SeqCst);
        result
    };
    let ((probes, worst_probe), result) = tokio::join!(poll_health(manager, &stop), scenario);
    let figures = Figures {
        probes,
        worst_probe,
        bystander_ready: result.as_ref().ok().copied(),
    };
    println!(
        "{}: {} probes, slowest /healthz {:?}, bystander Ready after {:?}",
        attack.name(),
        figures.probes,
        figures.worst_probe,
        figures.bystander_ready
    );
    env.with_manager_log(result)?;
    assert!(
        worst_probe <= PROBE_BOUND,
        "{}: the slowest /healthz took {worst_probe:?}",
        attack.name()
    );
    env.assert_api_hygiene();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rsa_8192_key_stalls_neither_probes_nor_other_tenants() -> anyhow::Result<()> {
    row(Attack::Rsa8192Key).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keystore_claiming_2_31_mac_iterations_is_rewritten_without_a_stall() -> anyhow::Result<()> {
    row(Attack::Pkcs12MacIterations).await
}
