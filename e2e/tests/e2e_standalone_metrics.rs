//! cert-manager's certificate metrics through the manager binary in standalone mode: each
//! Certificate for our issuers has exactly cert-manager's series and label sets, their values
//! follow its status (at issuance, again at renewal), and they go with the Certificate.
//! Certificates for other issuers have none. simple-cfssl's `renewing` profile renews 9 to 69 s
//! after the first issuance (see e2e_standalone_renewal.rs).

mod standalone;

use std::collections::BTreeSet;
use std::time::Duration;

use cfssl_issuer::api::certmanager::Certificate;
use e2e::harness::eventually;
use e2e::harness::scrape::{Exposition, scrape};
use kube::api::DeleteParams;
use serde_json::json;
use standalone::{Env, GROUP, times};

const WAIT: Duration = Duration::from_secs(30);
const RENEWAL_WAIT: Duration = Duration::from_secs(110);

const TIMESTAMPS: [&str; 4] = [
    "certmanager_certificate_not_after_timestamp_seconds",
    "certmanager_certificate_not_before_timestamp_seconds",
    "certmanager_certificate_expiration_timestamp_seconds",
    "certmanager_certificate_renewal_timestamp_seconds",
];

/// Samples as (name, sorted labels, value).
type Series = BTreeSet<(String, Vec<(String, String)>, i64)>;

/// Every `certmanager_certificate_*` sample.
fn certificate_samples(m: &Exposition) -> Series {
    m.samples
        .iter()
        .filter(|s| s.name.starts_with("certmanager_certificate_"))
        .map(|s| {
            let labels = s.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            (s.name.clone(), labels, s.value as i64)
        })
        .collect()
}

/// What cert-manager exports for `crt` (Ready=True): 3 ready series and 4 timestamps.
fn expected(ns: &str, crt: &Certificate) -> Series {
    let (not_before, not_after, renewal) = times(crt);
    let name = crt.metadata.name.clone().expect("name");
    let labels = |condition: Option<&str>| {
        let mut l = vec![
            ("issuer_group", GROUP),
            ("issuer_kind", "Issuer"),
            ("issuer_name", "short-ca"),
            ("name", name.as_str()),
            ("namespace", ns),
        ];
        l.extend(condition.map(|c| ("condition", c)));
        l.sort();
        l.into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Vec<_>>()
    };
    let mut want: BTreeSet<_> = ["True", "False", "Unknown"]
        .into_iter()
        .map(|c| {
            let value = i64::from(c == "True");
            (
                "certmanager_certificate_ready_status".to_string(),
                labels(Some(c)),
                value,
            )
        })
        .collect();
    let values = [not_after, not_before, not_after, renewal];
    for (family, at) in TIMESTAMPS.into_iter().zip(values) {
        want.insert((family.to_string(), labels(None), at.as_second()));
    }
    want
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_series_are_created_updated_at_renewal_and_gone_with_the_certificate()
-> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    let Some(manager) = env.manager.as_ref() else {
        eprintln!("skipped against a real cluster: scrapes the manager it starts");
        return Ok(());
    };
    let addr = manager.metrics_addr.clone();
    env.issuer_with_profile("short-ca", "renewing").await?;
    env.certificate("web", "web-tls", "short-ca", json!({})).await?;
    let theirs = json!({"issuerRef": {"name": "le", "kind": "ClusterIssuer", "group": "cert-manager.io"}});
    env.certificate("acme", "acme-tls", "le", theirs).await?;

    let first = env.with_manager_log(env.wait_revision("web", 1, WAIT).await)?;
    let want = expected(&env.ns, &first);
    let m = eventually(WAIT, "the first issuance in the metrics", || async {
        scrape(&addr)
            .await
            .ok()
            .filter(|m| certificate_samples(m) == want)
    })
    .await;
    let m = env.with_manager_log(m)?;
    assert_eq!(m.types["certmanager_certificate_ready_status"], "gauge");
    for family in TIMESTAMPS
        .into_iter()
        .chain(["certmanager_clock_time_seconds_gauge"])
    {
        assert_eq!(m.types[family], "gauge", "{family}");
    }
    let clock = m
        .value("certmanager_clock_time_seconds_gauge", &[])
        .expect("the clock");
    let now = k8s_openapi::jiff::Timestamp::now().as_second() as f64;
    assert!((now - clock).abs() <= 5.0, "clock {clock}, now {now}");

    env.with_manager_log(env.wait_revision("web", 2, RENEWAL_WAIT).await)?;
    // Readiness writes the new times after issuing writes the revision.
    let renewed = eventually(WAIT, "the renewed times in the status", || async {
        let crt = env.certificates().get("web").await.ok()?;
        let moved = crt.status.as_ref()?.renewal_time.is_some() && times(&crt) != times(&first);
        moved.then_some(crt)
    })
    .await;
    let renewed = env.with_manager_log(renewed)?;
    let want = expected(&env.ns, &renewed);
    let m = eventually(WAIT, "the renewal in the metrics", || async {
        scrape(&addr)
            .await
            .ok()
            .filter(|m| certificate_samples(m) == want)
    })
    .await;
    env.with_manager_log(m)?;

    env.certificates().delete("web", &DeleteParams::default()).await?;
    let m = eventually(WAIT, "no series after the delete", || async {
        scrape(&addr)
            .await
            .ok()
            .filter(|m| certificate_samples(m).is_empty())
    })
    .await;
    let m = env.with_manager_log(m)?;
    assert!(
        m.types.contains_key("certmanager_certificate_ready_status"),
        "the families stay, empty"
    );
    Ok(())
}
