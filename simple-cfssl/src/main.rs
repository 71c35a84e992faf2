use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;
use simple_cfssl::Config;

/// A small CFSSL multirootca-compatible CA for tests and demos.
///
/// Prints `URL=...`, `CA=...` (the root PEM file) and, with TLS, `TLS_CA=...` on stdout, one per
/// line, then serves until SIGINT or SIGTERM.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Listen address.
    #[arg(long, default_value = "127.0.0.1:8888")]
    listen: String,
    /// Directory for root.pem, <label>.pem and tls-ca.pem.
    #[arg(long)]
    dir: PathBuf,
    /// Hex HMAC key for every authenticated profile of the default configuration.
    #[arg(
        long,
        env = "SIMPLE_CFSSL_KEY",
        default_value = "0123456789abcdef0123456789abcdef"
    )]
    key: String,
    /// Serve HTTPS with a generated server certificate.
    #[arg(long)]
    tls: bool,
    /// JSON config file (labels, profiles, keys) replacing the default configuration.
    #[arg(long)]
    config: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_writer(std::io::stderr).init();
    let args = Args::parse();
    let mut config = match &args.config {
        Some(path) => {
            let text = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
            serde_json::from_slice(&text).with_context(|| format!("parse {}", path.display()))?
        }
        None => Config::test_default(&args.key),
    };
    config.listen = args.listen;
    config.tls |= args.tls;
    config.dir = Some(args.dir.clone());
    let running = simple_cfssl::spawn(config).await?;
    println!("URL={}", running.url);
    println!("CA={}", args.dir.join("root.pem").display());
    if running.tls_ca_pem.is_some() {
        println!("TLS_CA={}", args.dir.join("tls-ca.pem").display());
    }
    shutdown_signal().await;
    running.shutdown();
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
