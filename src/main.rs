use std::process::ExitCode;

use clap::{Parser, Subcommand};

use cfssl_issuer::cli;

/// cert-manager external issuer backed by a CFSSL multirootca CA.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check that a CFSSL CA accepts a label, profile and key (health + credential probe).
    Check(cli::CfsslArgs),
    /// Sign a CSR with a CFSSL CA and print the PEM chain.
    Sign(cli::SignArgs),
}

#[tokio::main]
async fn main() -> ExitCode {
    cfssl_issuer::install_crypto_provider();
    cfssl_issuer::telemetry::init_cli_logging();
    match Cli::parse().command {
        Command::Check(args) => cli::check(args).await,
        Command::Sign(args) => cli::sign(args).await,
    }
}
