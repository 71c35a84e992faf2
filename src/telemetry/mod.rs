//! Logging, metrics and health endpoints.

pub mod metrics;
pub mod server;

pub use metrics::Metrics;
pub use server::{Health, Role};

use tracing_subscriber::EnvFilter;

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
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if json {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.try_init()
    };
}
