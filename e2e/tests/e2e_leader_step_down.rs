//! A leader whose Lease renewals are all refused steps down before the Lease can lapse: the real
//! manager binary with `--enable-leader-election` against the in-process API server, every
//! Lease write answered 500 from some point on. Within the Lease duration its `/healthz` fails,
//! it exits non-zero (to restart as a candidate), and a request created after that is never
//! sent to the CA: by then a standby may lead.
//!
//! Runs its own manager and injects faults, so it never runs against a real cluster
//! (`E2E_KUBECONFIG`).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use tokio::time::Instant;

use e2e::harness::objects;
use e2e::harness::{Csr, Manager, OwnManagers, SYSTEM, eventually};
use kube_testserver::{Fault, FaultKind, Verb};

const GROUP: &str = "cfssl-issuer.wikimedia.org";
const ISSUER: &str = "step-down-ca";
const WAIT: Duration = Duration::from_secs(60);
/// The manager's default Lease name.
const LEASE_NAME: &str = "51059ce8.wikimedia.org";
/// Short so the test is quick; the renew deadline and retry period take their defaults for it.
const LEASE: Duration = Duration::from_secs(6);

/// Creates and approves a request to [`ISSUER`] for a fresh key; returns that key's CSR.
async fn request(env: &OwnManagers, name: &str) -> anyhow::Result<Csr> {
    let csr = Csr::new(&format!("{name}.{}.svc", env.ns))?;
    objects::create_request(env.client(), &env.ns, name, GROUP, "Issuer", ISSUER, &csr.pem).await?;
    objects::approve(env.client(), &env.ns, name).await?;
    Ok(csr)
}

/// Polls `/healthz` until it stops answering 200: `Some(body)` when it answered otherwise,
/// `None` when the process no longer listens. `Err` while it still says ok after `timeout`.
async fn wait_unhealthy(manager: &Manager, timeout: Duration) -> anyhow::Result<Option<String>> {
    eventually(timeout, "/healthz to fail", || async {
        match manager.probe("/healthz").await {
            Ok((200, _)) => None,
            Ok((status, body)) => Some(Some(format!("{status} {body}"))),
            Err(_) => Some(None),
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_renewals_are_refused_steps_down_within_the_lease() -> anyhow::Result<()> {
    let Some(env) = OwnManagers::start("step-down").await? else {
        return Ok(());
    };
    let options = env
        .options()
        .arg("--enable-leader-election")
        .arg(format!("--leader-election-namespace={SYSTEM}"))
        .arg(format!("--leader-election-lease-duration={}s", LEASE.as_secs()))
        .env("POD_NAME", "leader");
    let mut manager = Manager::start(options).await?;
    let leases = Api::<Lease>::namespaced(env.client().clone(), SYSTEM);
    eventually(WAIT, "the manager to lead", || async {
        let lease = leases.get_opt(LEASE_NAME).await.ok().flatten()?;
        lease.spec?.holder_identity.filter(|h| h.starts_with("leader_"))
    })
    .await?;
    env.create_issuer(ISSUER, None).await?;
    let before = request(&env, "before").await?;
    objects::wait_request_reason(env.client(), &env.ns, "before", "Issued", WAIT).await?;
    assert_eq!(env.ca.signatures_for(&before), Some(1));

    // From now on every Lease write is refused: the last renewal that landed is before this.
    for verb in [Verb::Patch, Verb::Update, Verb::Create] {
        let refuse = Fault::new(FaultKind::InternalError)
            .verb(verb)
            .resource("leases")
            .namespace(SYSTEM)
            .times(u32::MAX);
        env.server().inject(refuse);
    }
    let refused = Instant::now();
    let unhealthy = wait_unhealthy(&manager, LEASE).await;
    let stepped_down = refused.elapsed();
    let exit = manager.wait_exit(LEASE.saturating_sub(stepped_down)).await;
    let exited = refused.elapsed();
    let after = request(&env, "after").await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let signed_after = env.ca.signatures_for(&after);
    let log = manager.log();
    eprintln!(
        "renewals refused (Lease {LEASE:?}): /healthz failed after {stepped_down:?} ({unhealthy:?}), \
         exit after {exited:?} ({exit:?}); a request created then signed {signed_after:?} times"
    );
    assert_eq!(
        signed_after,
        Some(0),
        "a request created after stepping down never reaches the CA:\n{log}"
    );
    let unhealthy = unhealthy.map_err(|err| anyhow::anyhow!("{err}:\n{log}"))?;
    if let Some(body) = &unhealthy {
        assert!(body.starts_with("503 leader election lost: "), "{body}");
        assert!(body.contains("renew deadline"), "the body says why: {body}");
    }
    let status = exit.map_err(|err| anyhow::anyhow!("{err}:\n{log}"))?;
    assert!(!status.success(), "stepping down is an error exit:\n{log}");
    assert!(exited < LEASE, "stopped within the Lease duration");
    assert!(log.contains("renew deadline"), "the log says why:\n{log}");
    Ok(())
}
