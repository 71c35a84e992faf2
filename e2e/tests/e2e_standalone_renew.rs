//! `cfssl-issuer renew` through the binary, as users run `cmctl renew`: by name, by selector,
//! `--all` and across namespaces; each marked Certificate keeps `Ready` and issues a new
//! revision.

mod standalone;

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use standalone::Env;

const WAIT: Duration = Duration::from_secs(60);

/// Runs `cfssl-issuer renew args` with the suite's kubeconfig: (exit code, stdout, stderr).
async fn renew(env: &Env, args: &[&str]) -> anyhow::Result<(i32, String, String)> {
    let out = tokio::process::Command::new(e2e::harness::manager_binary())
        .env("KUBECONFIG", &env.cluster.kubeconfig)
        .arg("renew")
        .args(args)
        .output()
        .await?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout)?,
        String::from_utf8(out.stderr)?,
    ))
}

async fn label(env: &Env, name: &str, app: &str) -> anyhow::Result<()> {
    let body = serde_json::json!({ "metadata": { "labels": { "app": app } } });
    env.certificates()
        .patch(name, &PatchParams::default(), &Patch::Merge(&body))
        .await?;
    Ok(())
}

/// Right after the command: `Issuing=True/ManuallyTriggered` with cmctl's message and a
/// transition time, and `Ready` still there (a new issuance, not a lost status).
async fn assert_marked(env: &Env, name: &str) -> anyhow::Result<()> {
    let crt = env.certificates().get(name).await?;
    assert!(crt.condition("Ready").is_some(), "{name}: Ready vanished");
    let issuing = crt.condition("Issuing");
    let issued_already = crt.status.as_ref().and_then(|s| s.revision) > Some(1);
    if let Some(c) = issuing.filter(|c| c.is_true()) {
        assert_eq!(
            (c.reason.as_str(), c.message.as_str()),
            ("ManuallyTriggered", "Certificate re-issuance manually triggered")
        );
        assert!(c.last_transition_time.is_some(), "{name}: no lastTransitionTime");
    } else {
        assert!(
            issued_already,
            "{name}: not marked and not re-issued: {issuing:?}"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renew_marks_certificates_as_cmctl_renew_does() -> anyhow::Result<()> {
    let env = Env::start(&[]).await?;
    env.issuer("team-ca").await?;
    for (name, app) in [("one", "a"), ("two", "b"), ("three", "b")] {
        env.certificate(name, &format!("{name}-tls"), "team-ca", serde_json::json!({}))
            .await?;
        label(&env, name, app).await?;
    }
    for name in ["one", "two", "three"] {
        env.wait_revision(name, 1, WAIT).await?;
    }
    let ns = env.ns.clone();

    let (code, _, err) = renew(&env, &["-n", &ns]).await?;
    assert_eq!(code, 1);
    assert!(
        err.contains("please either supply one or more Certificate resource names"),
        "{err}"
    );

    let (code, out, err) = renew(&env, &["one", "-n", &ns]).await?;
    assert_eq!(
        (code, out.as_str()),
        (
            0,
            format!("Manually triggered issuance of Certificate {ns}/one\n").as_str()
        ),
        "{err}"
    );
    assert_marked(&env, "one").await?;
    env.wait_revision("one", 2, WAIT).await?;

    let (code, out, err) = renew(&env, &["--namespace", &ns, "-l", "app=b"]).await?;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 2, "{out}");
    for name in ["two", "three"] {
        assert_marked(&env, name).await?;
        env.wait_revision(name, 2, WAIT).await?;
    }

    let (code, out, err) = renew(&env, &["-n", &ns, "--all"]).await?;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 3, "{out}");
    for name in ["one", "two", "three"] {
        env.wait_revision(name, 3, WAIT).await?;
    }

    let (code, out, err) = renew(&env, &["-A", "--selector", "app=a"]).await?;
    assert_eq!(
        (code, out.as_str()),
        (
            0,
            format!("Manually triggered issuance of Certificate {ns}/one\n").as_str()
        ),
        "{err}"
    );
    env.wait_revision("one", 4, WAIT).await?;

    let (code, out, err) = renew(&env, &["-n", &ns, "-l", "app=none"]).await?;
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (
            0,
            "",
            format!("No Certificates found in {ns} namespace.\n").as_str()
        )
    );

    for name in ["one", "two", "three"] {
        assert!(env.certificates().get(name).await?.has_true("Ready"), "{name}");
    }
    env.assert_api_hygiene();
    Ok(())
}
