//! Operator commands that talk to a CFSSL CA directly: `check` and `sign`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use crate::cfssl::{AuthKey, Class, Client, ClientConfig, Error};

/// Exit code for a CA that refused or failed.
pub const EXIT_REFUSED: u8 = 1;
/// Exit code for unusable input (as clap does for bad flags).
pub const EXIT_USAGE: u8 = 2;

/// How to reach and authenticate to one CFSSL label.
#[derive(Debug, Args)]
pub struct CfsslArgs {
    /// CFSSL base URL(s), comma-separated, tried in order.
    #[arg(long, env = "CFSSL_URL")]
    pub url: String,
    /// multirootca signer label.
    #[arg(long, env = "CFSSL_LABEL")]
    pub label: String,
    /// Signing profile (empty: the CA's default).
    #[arg(long, env = "CFSSL_PROFILE", default_value = "")]
    pub profile: String,
    /// File holding the hex HMAC key (as in the issuer Secret's `key`).
    #[arg(long, env = "CFSSL_KEY_FILE")]
    pub key_file: PathBuf,
    /// File holding `additional_data` for the token, if the CA uses it.
    #[arg(long)]
    pub additional_data_file: Option<PathBuf>,
    /// PEM bundle to trust for TLS to the CA, instead of the system roots (as `spec.caBundle`).
    #[arg(long)]
    pub ca_file: Option<PathBuf>,
    /// Per-request timeout in seconds.
    #[arg(long, default_value_t = 30)]
    pub timeout_seconds: u64,
}

#[derive(Debug, Args)]
pub struct SignArgs {
    #[command(flatten)]
    pub cfssl: CfsslArgs,
    /// PEM CSR to sign.
    #[arg(long)]
    pub csr: PathBuf,
    /// Ask the CA for its chain (needs a multirootca with bundle support).
    #[arg(long)]
    pub bundle: bool,
}

/// An input problem, reported before anything is sent.
#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: {source}")]
    Key {
        path: PathBuf,
        source: crate::cfssl::KeyError,
    },
}

fn read(path: &PathBuf) -> Result<Vec<u8>, UsageError> {
    std::fs::read(path).map_err(|source| UsageError::Read {
        path: path.clone(),
        source,
    })
}

impl CfsslArgs {
    pub fn client_config(&self, bundle: bool) -> Result<ClientConfig, UsageError> {
        let key_text = String::from_utf8_lossy(&read(&self.key_file)?).into_owned();
        let mut key = AuthKey::from_hex(&key_text).map_err(|source| UsageError::Key {
            path: self.key_file.clone(),
            source,
        })?;
        if let Some(path) = &self.additional_data_file {
            key = key.with_additional_data(read(path)?);
        }
        let mut config = ClientConfig::new(&self.url, &self.label, key);
        config.profile.clone_from(&self.profile);
        config.bundle = bundle;
        config.ca_bundle_pem = self.ca_file.as_ref().map(read).transpose()?;
        config.timeout = Duration::from_secs(self.timeout_seconds);
        Ok(config)
    }
}

fn fail(err: &dyn std::fmt::Display, code: u8) -> ExitCode {
    eprintln!("error: {err}");
    ExitCode::from(code)
}

fn refused(err: &Error) -> ExitCode {
    let class = match err.class() {
        Class::Retryable => "retryable".to_string(),
        Class::Permanent => "permanent".to_string(),
        Class::Issuer(fault) => format!("issuer fault: {fault:?}"),
    };
    fail(&format_args!("{err} [{class}]"), EXIT_REFUSED)
}

fn build(config: Result<ClientConfig, UsageError>) -> Result<Client, ExitCode> {
    let config = config.map_err(|e| fail(&e, EXIT_USAGE))?;
    Client::new(config).map_err(|e| match e.class() {
        Class::Issuer(_) => fail(&e, EXIT_USAGE),
        _ => refused(&e),
    })
}

/// `cfssl-issuer check`: one line saying whether the CA accepts this label, profile and key.
pub async fn check(args: CfsslArgs) -> ExitCode {
    let client = match build(args.client_config(false)) {
        Ok(client) => client,
        Err(code) => return code,
    };
    match client.check().await {
        Ok(health) => {
            println!(
                "ok: {} label {:?} profile {:?} accepts the key (expiry {}, usages {})",
                health.info.endpoint,
                args.label,
                if args.profile.is_empty() {
                    "default"
                } else {
                    &args.profile
                },
                health.info.expiry,
                health.info.usages.join(", ")
            );
            ExitCode::SUCCESS
        }
        Err(err) => refused(&err),
    }
}

/// `cfssl-issuer sign`: prints the chain (leaf first), then the root when known.
pub async fn sign(args: SignArgs) -> ExitCode {
    let client = match build(args.cfssl.client_config(args.bundle)) {
        Ok(client) => client,
        Err(code) => return code,
    };
    let csr = match read(&args.csr) {
        Ok(csr) => csr,
        Err(e) => return fail(&e, EXIT_USAGE),
    };
    match client.sign(&csr).await {
        Ok(signed) => {
            print!("{}", signed.chain.certificates);
            if let Some(ca) = signed.chain.ca {
                eprintln!("root CA known; printing it after the chain");
                print!("{ca}");
            }
            ExitCode::SUCCESS
        }
        Err(err) => refused(&err),
    }
}
