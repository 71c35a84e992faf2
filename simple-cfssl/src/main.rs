//! simple-cfssl: a multirootca-compatible CA for tests and demos.
//!
//! Prints one fact per line on stdout, for scripts: `URL=<base url>`, `CA=<root PEM path>` and,
//! with TLS, `TLS_CA=<TLS CA PEM path>`. Logs go to stderr. Stops cleanly on SIGINT or SIGTERM.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use simple_cfssl::{Config, Label};
use tokio::signal::unix::{SignalKind, signal};

/// A small CFSSL multirootca-compatible CA server for tests and demos.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// YAML or JSON config file (`.json` is read as JSON); default: the test configuration.
    #[arg(long, env = "SIMPLE_CFSSL_CONFIG")]
    config: Option<PathBuf>,
    /// Hex HMAC key of every keyed profile of the test configuration (ignored with --config).
    #[arg(
        long,
        env = "SIMPLE_CFSSL_KEY",
        default_value = "0123456789abcdef0123456789abcdef"
    )]
    key: String,
    /// Listen address, e.g. 0.0.0.0:8888 [default: the config's, 127.0.0.1:0 for the test one].
    #[arg(long, env = "SIMPLE_CFSSL_LISTEN")]
    listen: Option<String>,
    /// Directory for root.pem, tls-ca.pem and labels/<label>.pem [default: a new temporary one].
    #[arg(long, env = "SIMPLE_CFSSL_DIR")]
    dir: Option<PathBuf>,
    /// Replace the configured labels with these (repeatable); each gets a generated intermediate.
    #[arg(long = "label")]
    labels: Vec<String>,
    /// Label used when a request names none (multirootca's -l).
    #[arg(long)]
    default_label: Option<String>,
    /// Serve HTTPS with a certificate from a generated TLS CA.
    #[arg(long)]
    tls: bool,
    /// Name (DNS or IP) for the TLS certificate (repeatable) [default: 127.0.0.1, localhost].
    #[arg(long = "tls-host")]
    tls_hosts: Vec<String>,
    /// Ignore `bundle: true`, as stock multirootca does.
    #[arg(long)]
    no_bundle: bool,
    /// Print the effective configuration as YAML and exit.
    #[arg(long)]
    print_config: bool,
}

impl Args {
    fn config(&self) -> anyhow::Result<Config> {
        let mut config = match &self.config {
            Some(path) => Config::load(path)?,
            None => Config::test_default(&self.key),
        };
        if let Some(listen) = &self.listen {
            config.listen = listen.clone();
        }
        if !self.labels.is_empty() {
            config.labels = self.labels.iter().map(|l| Label::generated(l.as_str())).collect();
        }
        if self.default_label.is_some() {
            config.default_label = self.default_label.clone();
        }
        config.tls |= self.tls;
        if !self.tls_hosts.is_empty() {
            config.tls_hosts = self.tls_hosts.clone();
        }
        config.bundle_support &= !self.no_bundle;
        if let Some(dir) = &self.dir {
            config.dir = Some(dir.clone());
        }
        Ok(config)
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let mut config = args.config()?;
    if args.print_config {
        print!("{}", serde_saphyr::to_string(&config)?);
        return Ok(());
    }
    if config.dir.is_none() {
        let dir = std::env::temp_dir().join(format!("simple-cfssl-{}", std::process::id()));
        config.dir = Some(dir);
    }
    // Install the handlers before announcing the URL, so a script's kill is never missed.
    let mut interrupt = signal(SignalKind::interrupt()).context("SIGINT handler")?;
    let mut terminate = signal(SignalKind::terminate()).context("SIGTERM handler")?;
    let running = simple_cfssl::spawn(config).await?;
    println!("URL={}", running.url);
    if let Some(files) = &running.files {
        println!("CA={}", files.root.display());
        if let Some(tls_ca) = &files.tls_ca {
            println!("TLS_CA={}", tls_ca.display());
        }
    }
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
    tracing::info!("shutting down");
    running.shutdown();
    if tokio::time::timeout(Duration::from_secs(5), running.stopped())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after 5s; exiting anyway");
    }
    Ok(())
}
