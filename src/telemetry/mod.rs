//! Logging, metrics and health endpoints.

pub mod certificates;
pub mod metrics;
pub mod server;

pub use metrics::Metrics;
pub use server::{Health, Role};

use tracing_subscriber::EnvFilter;

/// The filter when `RUST_LOG` is unset: `level` for everything but kube-runtime, which is held
/// at `warn` unless more is asked for. kube-runtime opens an `info` span per reconcile; our own
/// log lines name their object, and the span costs every reconcile a formatted allocation.
pub fn default_directives(level: &str) -> String {
    match level {
        "info" => "info,kube_runtime=warn".to_string(),
        other => other.to_string(),
    }
}

/// Logging for one-shot commands: warnings and errors to stderr unless `RUST_LOG` says more.
pub fn init_cli_logging() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Logging for the manager: `RUST_LOG` (default `default_level`), as text or one JSON object
/// per line.
pub fn init_logging(json: bool, default_level: &str) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(default_directives(default_level)));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if json {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.try_init()
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn default_directives_table() {
        let cases = [
            ("info", "info,kube_runtime=warn"),
            ("debug", "debug"),
            ("warn", "warn"),
            ("error", "error"),
        ];
        for (level, want) in cases {
            assert_eq!(super::default_directives(level), want, "{level}");
        }
    }
}
