use std::process::ExitCode;

use clap::{Parser, Subcommand};

use cfssl_issuer::{cli, csi, manager, renew};

/// mimalloc, not glibc's malloc: a signed request allocates and frees a few hundred small
/// buffers (JSON, PEM, DER, HTTP), and glibc spent 10% of the manager's CPU on them (perf).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// cert-manager external issuer backed by a CFSSL multirootca CA.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: manager::RunArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the controllers against the cluster in KUBECONFIG or in-cluster (the default).
    Run(Box<manager::RunArgs>),
    /// Print the Issuer and ClusterIssuer CRDs as YAML.
    Crd(CrdArgs),
    /// Check that a CFSSL CA accepts a label, profile and key (health + credential probe).
    Check(cli::CfsslArgs),
    /// Sign a CSR with a CFSSL CA and print the PEM chain.
    Sign(cli::SignArgs),
    /// Mark Certificates for manual renewal, as `cmctl renew` (standalone mode).
    Renew(renew::RenewArgs),
    /// Run the CSI node plugin (in progress: it issues each volume through a CertificateRequest
    /// but cannot mount yet, so a Publish still fails at the mount; see the README's Develop
    /// section).
    Csi(csi::server::CsiArgs),
}

#[derive(Debug, clap::Args)]
struct CrdArgs {
    /// Print cert-manager's Certificate and CertificateRequest CRDs instead (generated from this
    /// manager's types, for a cluster without cert-manager).
    #[arg(long)]
    cert_manager: bool,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    cfssl_issuer::install_crypto_provider();
    let cli = Cli::parse();
    match cli.command {
        None => manager::run(cli.run).await,
        Some(Command::Run(args)) => manager::run(*args).await,
        Some(Command::Crd(args)) => {
            let yaml = if args.cert_manager {
                cfssl_issuer::api::cert_manager_crds_yaml()
            } else {
                cfssl_issuer::api::crds_yaml()
            };
            match yaml {
                Ok(yaml) => {
                    print!("{yaml}");
                    ExitCode::SUCCESS
                }
                Err(err) => {
                    eprintln!("cannot print the CRDs: {err}");
                    ExitCode::FAILURE
                }
            }
        }
        Some(Command::Check(args)) => {
            cfssl_issuer::telemetry::init_cli_logging();
            cli::check(args).await
        }
        Some(Command::Sign(args)) => {
            cfssl_issuer::telemetry::init_cli_logging();
            cli::sign(args).await
        }
        Some(Command::Renew(args)) => {
            cfssl_issuer::telemetry::init_cli_logging();
            renew::run(args).await
        }
        Some(Command::Csi(args)) => {
            cfssl_issuer::telemetry::init_logging(false, "info");
            csi::server::run(args).await
        }
    }
}
