//! Logging, metrics and health endpoints.
