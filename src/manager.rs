//! `cfssl-issuer run`: the long-running manager. Flags keep the Go cfssl-issuer's names where
//! they overlap, so a Deployment's args carry over.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::controllers::{self, Config};

/// Where the service account's namespace is mounted in a pod.
const SERVICE_ACCOUNT_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Namespace holding ClusterIssuer credential Secrets [default: the namespace the manager runs in].
    #[arg(long, env = "CLUSTER_RESOURCE_NAMESPACE")]
    pub cluster_resource_namespace: Option<String>,
    /// Sign requests without waiting for cert-manager's approval (cert-manager < 1.3 only).
    #[arg(long)]
    pub disable_approved_check: bool,
    /// How often a Ready issuer is checked again (e.g. 1m, 30s).
    #[arg(long, default_value = "1m", value_parser = parse_duration)]
    pub health_check_interval: Duration,
    /// How long a request is retried after retryable errors before it is failed.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub max_retry_duration: Duration,
    /// Reconciles in flight per controller.
    #[arg(long, default_value_t = 8)]
    pub concurrency: u16,
    /// Timeout of each request to a CFSSL CA.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub cfssl_timeout: Duration,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Go-style durations (`1m`, `90s`, `1h30m`) as cert-manager users write them.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let signed: k8s_openapi::jiff::SignedDuration = text.parse().map_err(|e| format!("{text:?}: {e}"))?;
    Duration::try_from(signed).map_err(|_| format!("{text:?} is negative"))
}

/// Pure: the cluster resource namespace from the flag, `POD_NAMESPACE` or the service account.
pub fn resolve_namespace(
    flag: Option<&str>,
    pod_namespace: Option<&str>,
    service_account: Option<&str>,
) -> Result<String, String> {
    [flag, pod_namespace, service_account]
        .into_iter()
        .flatten()
        .map(str::trim)
        .find(|ns| !ns.is_empty())
        .map(str::to_string)
        .ok_or_else(|| {
            "please supply --cluster-resource-namespace: not running in a cluster and POD_NAMESPACE is unset"
                .to_string()
        })
}

impl RunArgs {
    pub fn config(&self) -> Result<Config, String> {
        let service_account = std::fs::read_to_string(Path::new(SERVICE_ACCOUNT_NAMESPACE)).ok();
        let namespace = resolve_namespace(
            self.cluster_resource_namespace.as_deref(),
            std::env::var("POD_NAMESPACE").ok().as_deref(),
            service_account.as_deref(),
        )?;
        let mut config = Config::new(namespace);
        config.approval_required = !self.disable_approved_check;
        config.health_check_interval = self.health_check_interval;
        config.max_retry_duration = self.max_retry_duration;
        config.concurrency = self.concurrency;
        config.cfssl_timeout = self.cfssl_timeout;
        Ok(config)
    }
}

pub async fn run(args: RunArgs) -> ExitCode {
    crate::telemetry::init_logging(args.log_format == LogFormat::Json);
    let config = match args.config() {
        Ok(c) => c,
        Err(err) => {
            tracing::error!("{err}");
            return ExitCode::from(crate::cli::EXIT_USAGE);
        }
    };
    let client = match kube::Client::try_default().await {
        Ok(c) => c,
        Err(err) => {
            tracing::error!(error = %err, "no Kubernetes configuration (in-cluster or KUBECONFIG)");
            return ExitCode::from(crate::cli::EXIT_USAGE);
        }
    };
    match controllers::run(client, config, controllers::system_clock(), shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err}");
            ExitCode::FAILURE
        }
    }
}

/// SIGTERM (Kubernetes) or SIGINT (a terminal).
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down: finishing in-flight reconciles");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_resolution_table() {
        let cases = [
            (Some("flag"), Some("pod"), Some("sa\n"), Ok("flag")),
            (None, Some("pod"), Some("sa"), Ok("pod")),
            (None, None, Some("sa\n"), Ok("sa")),
            (Some(""), None, Some("sa"), Ok("sa")),
            (None, None, None, Err(())),
        ];
        for (flag, pod, sa, want) in cases {
            let got = resolve_namespace(flag, pod, sa);
            match want {
                Ok(ns) => assert_eq!(got.as_deref(), Ok(ns)),
                Err(()) => assert!(got.unwrap_err().contains("--cluster-resource-namespace")),
            }
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1m").is_err());
    }
}
