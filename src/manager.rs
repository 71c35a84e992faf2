//! `cfssl-issuer run`: the long-running manager. Flags keep the Go cfssl-issuer's names where
//! they overlap, so a Deployment's args carry over.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};

use futures::FutureExt;

use crate::cfssl::AllowList;
use crate::controllers::{self, Config, CsrSettings};
use crate::telemetry::{Health, Metrics, Role, server};

mod budget;
pub mod cert_manager;
mod leader;
mod renewal;
mod standalone;

pub use self::budget::BudgetArgs;
pub use self::leader::{Lease, lead_then_run, lease_identity};
pub use self::renewal::{Timing, TimingError};
pub use self::standalone::StandaloneArgs;

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
    /// The longest one sign or health check may take, every URL of the issuer tried included.
    #[arg(long, default_value = "45s", value_parser = parse_duration)]
    pub cfssl_sign_deadline: Duration,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Address of the Prometheus `/metrics` endpoint.
    #[arg(long, default_value = "0.0.0.0:8080", value_parser = parse_addr)]
    pub metrics_addr: SocketAddr,
    /// Address of `/healthz` and `/readyz`.
    #[arg(long, default_value = "0.0.0.0:8081", value_parser = parse_addr)]
    pub health_addr: SocketAddr,
    /// Reconcile only while holding a coordination.k8s.io Lease, so replicas never act twice.
    #[arg(long)]
    pub enable_leader_election: bool,
    /// Namespace of the Lease [default: the cluster resource namespace].
    #[arg(long)]
    pub leader_election_namespace: Option<String>,
    /// Name of the Lease; the Go cfssl-issuer's, so old and new never lead at once during a switch.
    #[arg(long, default_value = "51059ce8.wikimedia.org")]
    pub leader_election_id: String,
    /// How long a Lease stays valid without renewal; a standby takes over within this time.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub leader_election_lease_duration: Duration,
    /// How long the leader goes on without a renewal that landed before it stops reconciling
    /// and exits; shorter than the lease duration [default: 10s, or two thirds of a shorter
    /// lease duration].
    #[arg(long, value_parser = parse_duration)]
    pub leader_election_renew_deadline: Option<Duration>,
    /// How often the Lease is renewed, and a failed request retried [default: 2s, or half of a
    /// shorter renew deadline].
    #[arg(long, value_parser = parse_duration)]
    pub leader_election_retry_period: Option<Duration>,
    /// Do not sign Kubernetes CertificateSigningRequests (no CSR watch; the chart then drops
    /// the CSR RBAC too).
    #[arg(long)]
    pub disable_kubernetes_csr_controller: bool,
    /// Sign CSRs for ClusterIssuers only: `issuers.cfssl-issuer.wikimedia.org/<ns>.<name>`
    /// is then another signer's, and no SubjectAccessReview is created.
    #[arg(long)]
    pub disable_kubernetes_csr_namespaced_signers: bool,
    /// The only CA hosts namespaced Issuers may use: comma-separated host names, `*.suffix`
    /// wildcards, IP addresses and CIDRs (`10.0.0.0/8`). Names are matched as written, never
    /// resolved. Unset: any host, but what answers is never quoted in a namespaced Issuer's
    /// status. ClusterIssuers are never restricted.
    #[arg(long, env = "NAMESPACED_ISSUER_ALLOWED_HOSTS")]
    pub namespaced_issuer_allowed_hosts: Option<AllowList>,
    /// Serve only this namespace (repeatable): Issuers, CertificateRequests, Secrets (and
    /// standalone, Certificates) are watched there only, so Roles suffice for them.
    /// ClusterIssuers are still served, their Secrets read in the cluster resource namespace.
    /// Unset: every namespace.
    #[arg(long = "namespace", value_name = "NAMESPACE")]
    pub namespaces: Vec<String>,
    #[command(flatten)]
    pub budget: BudgetArgs,
    #[command(flatten)]
    pub standalone: StandaloneArgs,
    #[command(flatten)]
    pub zap: ZapFlags,
}

/// The Go issuer's logging flags (controller-runtime's zap options), accepted so that its
/// Deployment args work unchanged. `RUST_LOG` and `--log-format` take precedence.
#[derive(Debug, Default, Args)]
pub struct ZapFlags {
    /// `debug`, `info`, `error` or a zap level number; the default log level.
    #[arg(long, hide = true)]
    pub zap_log_level: Option<String>,
    /// `json` or `console`.
    #[arg(long, hide = true)]
    pub zap_encoder: Option<String>,
    /// Accepted and ignored.
    #[arg(long, hide = true, num_args = 0..=1, default_missing_value = "true")]
    pub zap_devel: Option<String>,
    /// Accepted and ignored.
    #[arg(long, hide = true)]
    pub zap_stacktrace_level: Option<String>,
    /// Accepted and ignored.
    #[arg(long, hide = true)]
    pub zap_time_encoding: Option<String>,
}

impl ZapFlags {
    /// The tracing level a zap level means: zap's numbers go down as verbosity goes up.
    pub fn level(&self) -> &'static str {
        match self.zap_log_level.as_deref().map(str::trim) {
            Some("debug") => "debug",
            Some("error") => "error",
            Some("warn") => "warn",
            Some(n) if n.parse::<i32>().is_ok_and(|n| n >= 2) => "trace",
            Some(n) if n.parse::<i32>().is_ok_and(|n| n == 1) => "debug",
            _ => "info",
        }
    }
}

/// A flag value that does not parse; `text` is the value given.
#[derive(Debug, thiserror::Error)]
pub enum FlagError {
    #[error("{text:?}: {source}")]
    Addr {
        text: String,
        #[source]
        source: std::net::AddrParseError,
    },
    #[error("{text:?}: {source}")]
    Duration {
        text: String,
        #[source]
        source: k8s_openapi::jiff::Error,
    },
    #[error("{text:?} is negative")]
    Negative { text: String },
}

/// Go-style listen addresses: `:8080` means every interface.
pub fn parse_addr(text: &str) -> Result<SocketAddr, FlagError> {
    let full = if text.starts_with(':') {
        format!("0.0.0.0{text}")
    } else {
        text.to_string()
    };
    full.parse().map_err(|source| FlagError::Addr {
        text: text.to_string(),
        source,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Go-style durations (`1m`, `90s`, `1h30m`) as cert-manager users write them.
pub fn parse_duration(text: &str) -> Result<Duration, FlagError> {
    let signed: k8s_openapi::jiff::SignedDuration = text.parse().map_err(|source| FlagError::Duration {
        text: text.to_string(),
        source,
    })?;
    Duration::try_from(signed).map_err(|_| FlagError::Negative {
        text: text.to_string(),
    })
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
        config.sign_deadline = self.cfssl_sign_deadline;
        config.standalone = self.standalone.settings()?;
        config.kubernetes_csr = (!self.disable_kubernetes_csr_controller).then_some(CsrSettings {
            namespaced_signers: !self.disable_kubernetes_csr_namespaced_signers,
        });
        config.namespaced_issuer_allowed_hosts = self.namespaced_issuer_allowed_hosts.clone().map(Arc::new);
        config.scope = controllers::Scope::new(self.namespaces.iter().cloned());
        config.issuance_budget = self.budget.settings();
        Ok(config)
    }
}

pub async fn run(args: RunArgs) -> ExitCode {
    let json = args.log_format == LogFormat::Json || args.zap.zap_encoder.as_deref() == Some("json");
    crate::telemetry::init_logging(json, args.zap.level());
    let (config, client, lease) = match configure(&args).await {
        Ok(ready) => ready,
        Err(code) => return code,
    };
    let guard = match cert_manager::Guard::start(&client, &config, controllers::system_clock()).await {
        Ok(guard) => guard,
        Err(refusal) => return refuse(&refusal),
    };
    let metrics = Arc::new(Metrics::default());
    let health = Arc::new(Health::new(if args.enable_leader_election {
        Role::Standby
    } else {
        Role::Alone
    }));
    let Some(stop_servers) = serve_probes(&args, &metrics, &health).await else {
        return ExitCode::from(crate::cli::EXIT_USAGE);
    };
    let signal = match shutdown_signal() {
        Ok(signal) => guard.or(signal).boxed().shared(),
        Err(err) => {
            tracing::error!(error = %err, "cannot handle SIGTERM");
            return ExitCode::FAILURE;
        }
    };
    let run_controllers = {
        let (client, health) = (client.clone(), health.clone());
        move |stop: futures::future::BoxFuture<'static, ()>| {
            controllers::run(client, config, controllers::system_clock(), metrics, health, stop)
        }
    };
    let code = match lease {
        Some(lease) => lead_then_run(client, lease, health, signal, run_controllers).await,
        None => finish(run_controllers(signal.boxed()).await),
    };
    let _ = stop_servers.send(true);
    guard.exit_code(code)
}

/// The controllers' configuration, a client and the Lease to lead with (with leader election
/// on), or the exit code saying why not.
async fn configure(args: &RunArgs) -> Result<(Config, kube::Client, Option<Lease>), ExitCode> {
    let usage = |err: String| {
        tracing::error!("{err}");
        ExitCode::from(crate::cli::EXIT_USAGE)
    };
    let config = args.config().map_err(usage)?;
    let lease = args
        .enable_leader_election
        .then(|| lease(args, &config.cluster_resource_namespace))
        .transpose()
        .map_err(|err| usage(err.to_string()))?;
    let client = kube::Client::try_default().await.map_err(|err| {
        tracing::error!(error = %err, "no Kubernetes configuration (in-cluster or KUBECONFIG)");
        ExitCode::from(crate::cli::EXIT_USAGE)
    })?;
    Ok((config, client, lease))
}

/// The leader-election Lease the flags name, in `cluster_resource_namespace` unless they name
/// another; a usage error when its durations cannot work together.
fn lease(args: &RunArgs, cluster_resource_namespace: &str) -> Result<Lease, TimingError> {
    let timing = Timing::new(
        args.leader_election_lease_duration,
        args.leader_election_renew_deadline,
        args.leader_election_retry_period,
    )?;
    let namespace = args
        .leader_election_namespace
        .clone()
        .unwrap_or_else(|| cluster_resource_namespace.to_string());
    Ok(Lease {
        name: args.leader_election_id.clone(),
        namespace,
        timing,
    })
}

/// Standalone mode must not start: says why, exit 1.
fn refuse(refusal: &cert_manager::Refusal) -> ExitCode {
    match std::error::Error::source(refusal) {
        Some(cause) => tracing::error!(%cause, "{refusal}"),
        None => tracing::error!("{refusal}"),
    }
    ExitCode::FAILURE
}

/// Serves metrics and probes until the returned sender says stop; `None` when it cannot listen.
async fn serve_probes(
    args: &RunArgs,
    metrics: &Arc<Metrics>,
    health: &Arc<Health>,
) -> Option<tokio::sync::watch::Sender<bool>> {
    let (stop_servers, servers_stopped) = tokio::sync::watch::channel(false);
    let servers_stop = async move {
        let mut rx = servers_stopped;
        let _ = rx.wait_for(|s| *s).await;
    }
    .shared();
    let addrs = (args.metrics_addr, args.health_addr);
    match server::serve(addrs.0, addrs.1, metrics.clone(), health.clone(), servers_stop).await {
        Ok((m, h)) => tracing::info!(metrics = %m, health = %h, "serving metrics and probes"),
        Err(err) => {
            tracing::error!(error = %err, "cannot listen for metrics or probes");
            return None;
        }
    }
    Some(stop_servers)
}

pub(crate) fn finish(result: Result<(), controllers::RunError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err}");
            ExitCode::FAILURE
        }
    }
}

/// SIGTERM (Kubernetes) or SIGINT (a terminal); the SIGTERM handler is installed at once.
pub fn shutdown_signal() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        tracing::info!("shutting down: finishing in-flight reconciles");
    })
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

    /// Flag errors keep their cause as `source()`; clap prints the same message as before.
    #[test]
    fn flag_errors_keep_their_cause() {
        use std::error::Error as _;
        let cases = [
            (
                parse_addr("nowhere").unwrap_err(),
                r#""nowhere": invalid socket address syntax"#,
                true,
            ),
            (
                parse_duration("soon").unwrap_err(),
                r#""soon": failed to parse input in the "friendly" duration format: expected duration to start with a unit value (a decimal integer) after an optional sign, but no integer was found"#,
                true,
            ),
            (parse_duration("-1m").unwrap_err(), r#""-1m" is negative"#, false),
        ];
        for (err, want, has_source) in cases {
            assert_eq!(
                (err.to_string(), err.source().is_some()),
                (want.to_string(), has_source)
            );
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1m").ok(), Some(Duration::from_secs(60)));
        assert_eq!(parse_duration("1h30m").ok(), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("90s").ok(), Some(Duration::from_secs(90)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1m").is_err());
    }
}

#[cfg(test)]
mod go_flag_tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    /// The Go issuer's Deployment args parse unchanged, and its zap flags mean what they meant.
    #[test]
    fn go_issuer_args_parse() {
        let cases: [(&[&str], &str, bool); 5] = [
            (
                &["--metrics-addr=:8080", "--enable-leader-election"],
                "info",
                false,
            ),
            (&["--zap-log-level=debug", "--zap-devel"], "debug", false),
            (&["--zap-log-level", "2", "--zap-encoder=json"], "trace", true),
            (
                &[
                    "--zap-log-level=error",
                    "--zap-encoder=console",
                    "--zap-time-encoding=iso8601",
                ],
                "error",
                false,
            ),
            (
                &["--zap-stacktrace-level=panic", "--health-addr=:8081"],
                "info",
                false,
            ),
        ];
        for (args, level, json) in cases {
            let cli = Cli::try_parse_from(std::iter::once("cfssl-issuer").chain(args.iter().copied()))
                .unwrap_or_else(|e| panic!("{args:?}: {e}"));
            assert_eq!(cli.run.zap.level(), level, "{args:?}");
            assert_eq!(
                cli.run.zap.zap_encoder.as_deref() == Some("json"),
                json,
                "{args:?}"
            );
        }
    }

    #[test]
    fn allowed_hosts_flag() {
        let parse = |arg: &str| {
            Cli::try_parse_from(["cfssl-issuer", arg])
                .map(|cli| cli.run.namespaced_issuer_allowed_hosts)
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            parse("--namespaced-issuer-allowed-hosts=10.0.0.0/8, *.svc"),
            Ok(Some("10.0.0.0/8,*.svc".parse().unwrap()))
        );
        let err = parse("--namespaced-issuer-allowed-hosts=ca:8443").unwrap_err();
        assert!(
            err.contains(r#""ca:8443" is not a host name, *.suffix, IP address or CIDR"#),
            "{err}"
        );
    }

    /// `--namespace` repeats; none means the whole cluster.
    #[test]
    fn namespace_flag_repeats() {
        let scope = |args: &[&str]| {
            let cli = Cli::try_parse_from(std::iter::once("cfssl-issuer").chain(args.iter().copied()))
                .unwrap_or_else(|e| panic!("{args:?}: {e}"));
            let config = cli.run.config().expect("config");
            config.scope
        };
        let table: [(&[&str], controllers::Scope); 3] = [
            (
                &["--cluster-resource-namespace=home"],
                controllers::Scope::Cluster,
            ),
            (
                &[
                    "--cluster-resource-namespace=home",
                    "--namespace=b",
                    "--namespace",
                    "a",
                ],
                controllers::Scope::Namespaces(vec!["a".into(), "b".into()]),
            ),
            (
                &["--cluster-resource-namespace=home", "--namespace=a"],
                controllers::Scope::Namespaces(vec!["a".into()]),
            ),
        ];
        for (args, want) in table {
            assert_eq!(scope(args), want, "{args:?}");
        }
    }
}
