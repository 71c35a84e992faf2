//! The node plugin's Prometheus metrics, on its own `/metrics` (`--metrics-addr`). No series
//! per volume or pod: a node holds hundreds of short-lived volumes, and the series would
//! outlive them in Prometheus; what an operator alerts on is counted or summarised instead.
//!
//! Volumes by state, the earliest expiry and the overdue renewals are read from the store at
//! each scrape ([`summarize`], pure), so they never disagree with what is on disk.

use std::sync::Arc;

use jiff::Timestamp;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::clock::Clock;
use crate::csi::store::{Metadata, Store};

/// How a Publish or an issuance ended: its gRPC code (`Ok`, `DeadlineExceeded`, ...).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabel {
    pub code: String,
}

/// How a renewal ended.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: String,
}

/// Every series the plugin reports; cheap to share.
pub struct CsiMetrics {
    registry: Registry,
    publish: Family<CodeLabel, Histogram>,
    issuance: Family<CodeLabel, Histogram>,
    renewals: Family<OutcomeLabel, Counter>,
    requests_created: Counter,
    stale_mounts: Counter,
}

fn latency() -> Family<CodeLabel, Histogram> {
    // 1 ms to about 131 s: a re-publish is sub-millisecond, a wait for approval up to 110 s.
    Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.001, 2.0, 18)))
}

impl CsiMetrics {
    /// The families, with the store's summary read at each scrape.
    pub fn new(store: Store, clock: Clock) -> Self {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(StoreCollector { store, clock }));
        let r = registry.sub_registry_with_prefix("cfssl_issuer_csi");
        let (publish, issuance) = (latency(), latency());
        r.register_with_unit(
            "publish_duration",
            "NodePublishVolume calls by gRPC code, re-publishes of mounted volumes included",
            Unit::Seconds,
            publish.clone(),
        );
        r.register_with_unit(
            "issuance_duration",
            "Issuances (key, CertificateRequest, wait) for Publish and renewal, by gRPC code",
            Unit::Seconds,
            issuance.clone(),
        );
        let renewals = Family::default();
        r.register(
            "renewals",
            "Renewals of issued volumes, by outcome",
            renewals.clone(),
        );
        let requests_created = Counter::default();
        r.register(
            "requests_created",
            "CertificateRequests created",
            requests_created.clone(),
        );
        let stale_mounts = Counter::default();
        r.register(
            "stale_mounts",
            "Mounts found at start whose volume this plugin no longer holds",
            stale_mounts.clone(),
        );
        Self {
            registry,
            publish,
            issuance,
            renewals,
            requests_created,
            stale_mounts,
        }
    }

    pub fn publish(&self, code: tonic::Code, seconds: f64) {
        self.publish.get_or_create(&label(code)).observe(seconds);
    }

    pub fn issuance(&self, code: tonic::Code, seconds: f64) {
        self.issuance.get_or_create(&label(code)).observe(seconds);
    }

    pub fn renewal(&self, outcome: &str) {
        let outcome = OutcomeLabel {
            outcome: outcome.to_string(),
        };
        self.renewals.get_or_create(&outcome).inc();
    }

    pub fn request_created(&self) {
        self.requests_created.inc();
    }

    pub fn stale_mount(&self) {
        self.stale_mounts.inc();
    }

    /// The OpenMetrics text exposition.
    pub fn render(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

impl std::fmt::Debug for CsiMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CsiMetrics").finish_non_exhaustive()
    }
}

fn label(code: tonic::Code) -> CodeLabel {
    CodeLabel {
        code: format!("{code:?}"),
    }
}

/// What the store holds, as the scrape reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub issued: i64,
    /// Recorded, never issued: waiting for approval, or retried by kubelet.
    pub pending: i64,
    /// The earliest notAfter of an issued volume.
    pub earliest_expiry: Option<Timestamp>,
    /// Issued volumes past their renewal time.
    pub overdue: i64,
}

/// Summarises the store's volumes at `now`.
pub fn summarize<'a>(volumes: impl IntoIterator<Item = &'a Metadata>, now: Timestamp) -> Summary {
    let mut summary = Summary::default();
    for volume in volumes {
        let Some(due) = volume.next_issuance_time else {
            summary.pending += 1;
            continue;
        };
        summary.issued += 1;
        if due < now {
            summary.overdue += 1;
        }
        if let Some(not_after) = volume.not_after {
            summary.earliest_expiry = Some(summary.earliest_expiry.map_or(not_after, |e| e.min(not_after)));
        }
    }
    summary
}

struct StoreCollector {
    store: Store,
    clock: Clock,
}

impl std::fmt::Debug for StoreCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreCollector").finish_non_exhaustive()
    }
}

impl StoreCollector {
    fn summary(&self) -> Summary {
        let ids = self.store.volume_ids().unwrap_or_default();
        let volumes: Vec<Metadata> = ids
            .iter()
            .filter_map(|id| self.store.metadata(id).ok().flatten())
            .collect();
        summarize(&volumes, (self.clock)())
    }
}

impl Collector for StoreCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let summary = self.summary();
        let name = "cfssl_issuer_csi_volumes";
        let help = "Volumes this node holds, by state (issued, pending)";
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for (state, count) in [("issued", summary.issued), ("pending", summary.pending)] {
            let labels = [("state", state)];
            ConstGauge::new(count).encode(family.encode_family(&labels)?)?;
        }
        let gauge = |encoder: &mut DescriptorEncoder, name, help, unit, value: i64| {
            let metric = encoder.encode_descriptor(name, help, unit, MetricType::Gauge)?;
            ConstGauge::new(value).encode(metric)
        };
        let help = "Issued volumes past their renewal time (renewal failing or late)";
        gauge(
            &mut encoder,
            "cfssl_issuer_csi_renewals_overdue",
            help,
            None,
            summary.overdue,
        )?;
        if let Some(expiry) = summary.earliest_expiry {
            let help = "The earliest notAfter of an issued volume's certificate, as a Unix time";
            let name = "cfssl_issuer_csi_earliest_expiration_timestamp";
            gauge(&mut encoder, name, help, Some(&Unit::Seconds), expiry.as_second())?;
        }
        Ok(())
    }
}

/// Serves `/metrics` on `addr` until the process ends; the bound address.
pub async fn serve(
    addr: std::net::SocketAddr,
    metrics: Arc<CsiMetrics>,
) -> std::io::Result<std::net::SocketAddr> {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || async move {
            match metrics.render() {
                Ok(text) => {
                    let kind = "application/openmetrics-text; version=1.0.0; charset=utf-8";
                    ([(header::CONTENT_TYPE, kind)], text).into_response()
                }
                Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "cannot encode the metrics").into_response(),
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(bound)
}

#[cfg(test)]
mod tests;
