//! Runs the in-process Kubernetes API test server as a process, for kubectl and for tests that
//! drive a manager binary. Prints `KUBECONFIG=…` and `URL=…`, then serves until SIGINT/SIGTERM.

use std::{io::Write as _, path::PathBuf, time::Duration};

use clap::Parser;
use kube_testserver::{Auth, Options, TestServer};

#[derive(Parser)]
#[command(
    name = "kube-testserver",
    about = "In-process Kubernetes API server for tests"
)]
struct Args {
    /// Where to write the kubeconfig.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Serve plain HTTP instead of HTTPS.
    #[arg(long)]
    http: bool,
    /// Bearer token clients must send; random when not given.
    #[arg(long, conflicts_with = "no_auth")]
    token: Option<String>,
    /// Accept every request without a token.
    #[arg(long)]
    no_auth: bool,
    /// Seconds between watch bookmarks.
    #[arg(long, default_value_t = 1)]
    bookmark_interval: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let defaults = Options::default();
    let auth = match (args.no_auth, args.token) {
        (true, _) => Auth::None,
        (false, Some(token)) => Auth::Token(token),
        (false, None) => defaults.auth.clone(),
    };
    // Before the URL is printed: whoever reads it may send SIGTERM at once, and a signal that
    // arrives before the handler kills the process instead of shutting it down.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let server = TestServer::start(Options {
        port: args.port,
        tls: !args.http,
        auth,
        kubeconfig: Some(args.kubeconfig),
        bookmark_interval: Duration::from_secs(args.bookmark_interval.max(1)),
        ..defaults
    })
    .await?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "KUBECONFIG={}", server.kubeconfig_path().display())?;
    writeln!(out, "URL={}", server.url())?;
    out.flush()?;
    drop(out);

    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    server.shutdown().await;
    Ok(())
}
