//! The demo's standalone-mode part: the sample Certificates became Secrets through the
//! manager's own Certificate controllers (`--certificate-controllers`), and one renews.

use std::path::Path;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;

use cfssl_issuer::api::certmanager::Certificate;
use e2e::harness::{eventually, fleet};

use super::{Applied, WAIT};

/// Waits for every applied Certificate, prints it and its Secret, then renews the first one
/// once. Returns whether all of it went as it should.
pub async fn show(client: &kube::Client, kubeconfig: &Path, applied: &[Applied]) -> anyhow::Result<bool> {
    println!(
        "\nCertificates (standalone mode: the manager made each key, its CertificateRequest, \
         approved it, and wrote the Secret; no cert-manager runs):"
    );
    let mut all_good = true;
    let certificates: Vec<&Applied> = applied.iter().filter(|id| id.kind == "Certificate").collect();
    for id in &certificates {
        let api = api(client, id)?;
        let crt = wait_revision(&api, &id.name, 1).await?;
        all_good &= fleet::ready_at(&crt, 1);
        print_certificate(&crt);
        let secret = Api::<Secret>::namespaced(client.clone(), ns(id)?)
            .get(&crt.spec.secret_name)
            .await;
        match secret {
            Ok(secret) => print_secret(&secret)?,
            Err(err) => {
                all_good = false;
                println!("      Secret {}: {err}", crt.spec.secret_name);
            }
        }
    }
    kubectl(kubeconfig, &["get", "certificates", "-A", "-o", "wide"]);

    let Some(id) = certificates.first().filter(|_| all_good) else {
        return Ok(all_good);
    };
    let api = api(client, id)?;
    let before = api.get(&id.name).await?;
    let renewal = before.status.as_ref().and_then(|s| s.renewal_time.as_ref());
    println!(
        "\nRenewing {} once. Left alone it renews at its renewalTime ({}), two thirds into the \
         sample issuer's 10-minute server-short profile; the demo does not wait for that but does \
         what `cmctl renew` does: condition Issuing=True, reason ManuallyTriggered, on the status.",
        id.display(),
        renewal.map(|t| t.0.to_string()).unwrap_or_else(|| "none".into())
    );
    let secrets = Api::<Secret>::namespaced(client.clone(), ns(id)?);
    let old = secrets.get(&before.spec.secret_name).await?;
    fleet::manual_trigger(&api, &before).await?;
    let after = wait_revision(&api, &id.name, 2).await?;
    all_good &= fleet::ready_at(&after, 2);
    print_certificate(&after);
    let secret = secrets.get(&after.spec.secret_name).await?;
    print_secret(&secret)?;
    let key = |s: &Secret| {
        s.data
            .as_ref()
            .and_then(|d| d.get("tls.key"))
            .map(|k| k.0.clone())
    };
    println!(
        "      renewed:  a new certificate{} (rotationPolicy defaults to Always)",
        if key(&old) != key(&secret) {
            " for a new private key"
        } else {
            " for the SAME private key"
        }
    );
    kubectl(
        kubeconfig,
        &["get", "certificaterequests", "-n", ns(id)?, "-o", "wide"],
    );
    Ok(all_good)
}

fn ns(id: &Applied) -> anyhow::Result<&str> {
    id.namespace.as_deref().context("Certificates are namespaced")
}

fn api(client: &kube::Client, id: &Applied) -> anyhow::Result<Api<Certificate>> {
    Ok(Api::namespaced(client.clone(), ns(id)?))
}

/// The Certificate once Ready at `revision`, or as it is after [`WAIT`].
async fn wait_revision(api: &Api<Certificate>, name: &str, revision: i64) -> anyhow::Result<Certificate> {
    let done = eventually(WAIT, "Certificate Ready", || async {
        let crt = api.get(name).await.ok()?;
        fleet::ready_at(&crt, revision).then_some(crt)
    })
    .await;
    match done {
        Ok(crt) => Ok(crt),
        Err(_) => Ok(api.get(name).await?),
    }
}

fn print_certificate(crt: &Certificate) {
    let status = crt.status.clone().unwrap_or_default();
    let ready = crt.condition("Ready");
    let time = |t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
        t.map(|t| t.0.to_string()).unwrap_or_else(|| "-".into())
    };
    println!(
        "  {}/{}: Ready={} ({}) {}; revision {}",
        crt.metadata.namespace.as_deref().unwrap_or_default(),
        crt.metadata.name.as_deref().unwrap_or_default(),
        ready.map(|c| c.status.as_str()).unwrap_or("-"),
        ready.map(|c| c.reason.as_str()).unwrap_or("none"),
        ready.map(|c| c.message.as_str()).unwrap_or(""),
        status.revision.unwrap_or(0)
    );
    println!(
        "      status:   notBefore {}, notAfter {}, renewalTime {}",
        time(status.not_before.as_ref()),
        time(status.not_after.as_ref()),
        time(status.renewal_time.as_ref())
    );
}

/// The Secret's type and keys, and what its `tls.crt` leaf says.
fn print_secret(secret: &Secret) -> anyhow::Result<()> {
    let data = secret.data.clone().unwrap_or_default();
    let keys: Vec<&str> = data.keys().map(String::as_str).collect();
    println!(
        "      Secret {}: type {}, keys: {}",
        secret.metadata.name.as_deref().unwrap_or_default(),
        secret.type_.as_deref().unwrap_or("-"),
        keys.join(", ")
    );
    let chain = &data.get("tls.crt").context("no tls.crt")?.0;
    let block = ::pem::parse(chain)?;
    let (_, leaf) = x509_parser::parse_x509_certificate(block.contents())?;
    let validity = leaf.validity();
    let subject = leaf.subject().to_string();
    let sans: Vec<String> = leaf
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|ext| ext.value.general_names.iter().map(general_name).collect())
        .unwrap_or_default();
    if subject.is_empty() {
        println!("      subject:  (empty: the Certificate names no commonName)");
    } else {
        println!("      subject:  {subject}");
    }
    println!("      SANs:     {}", sans.join(", "));
    println!("      issuer:   {}", leaf.issuer());
    println!("      serial:   {}", leaf.raw_serial_as_string());
    println!(
        "      validity: {} to {}",
        validity.not_before, validity.not_after
    );
    let key = data.get("tls.key").context("no tls.key")?;
    let key = cfssl_issuer::pki::keys::Key::from_pem(&key.0)?;
    let matches = key.public_key_der() == leaf.public_key().raw;
    println!(
        "      tls.key:  {}, {}",
        key.spec.describe(),
        if matches {
            "matches the certificate"
        } else {
            "DOES NOT match the certificate"
        }
    );
    anyhow::ensure!(matches, "tls.key does not match tls.crt");
    Ok(())
}

fn general_name(name: &x509_parser::extensions::GeneralName) -> String {
    use x509_parser::extensions::GeneralName;
    match name {
        GeneralName::DNSName(dns) => dns.to_string(),
        other => other.to_string(),
    }
}

/// Runs kubectl against the demo's API server and prints what it prints, as a user would see it.
fn kubectl(kubeconfig: &Path, args: &[&str]) {
    println!("\n$ kubectl {}", args.join(" "));
    let out = std::process::Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdin(std::process::Stdio::null())
        .output();
    match out {
        Ok(out) => {
            print!("{}", String::from_utf8_lossy(&out.stdout));
            eprint!("{}", String::from_utf8_lossy(&out.stderr));
        }
        Err(err) => println!("  (kubectl not run: {err})"),
    }
}
