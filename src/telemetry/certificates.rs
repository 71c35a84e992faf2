//! cert-manager's certificate metrics (`certmanager_certificate_*`, with cert-manager's names,
//! types, labels and help), for the Certificates standalone mode manages. Computed at scrape
//! time from the Certificate store the controllers already keep: a Certificate's series exist
//! while it is in the store, and nothing is kept per Certificate between scrapes.

use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::reflector::Store;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::api::certmanager::Certificate;

const READY: (&str, &str) = (
    "certmanager_certificate_ready_status",
    "The ready status of the certificate.",
);
/// The four timestamp families: name, help, and the status field each reads.
const TIMESTAMPS: [(&str, &str, Field); 4] = [
    (
        "certmanager_certificate_not_after_timestamp_seconds",
        "The timestamp after which the certificate is invalid, expressed as a Unix Epoch Time.",
        Field::NotAfter,
    ),
    (
        "certmanager_certificate_not_before_timestamp_seconds",
        "The timestamp before which the certificate is invalid, expressed as a Unix Epoch Time.",
        Field::NotBefore,
    ),
    (
        "certmanager_certificate_expiration_timestamp_seconds",
        "The timestamp after which the certificate expires, expressed in Unix Epoch Time.",
        Field::NotAfter,
    ),
    (
        "certmanager_certificate_renewal_timestamp_seconds",
        "The timestamp after which the certificate should be renewed, expressed in Unix Epoch Time.",
        Field::RenewalTime,
    ),
];
const CLOCK: (&str, &str) = (
    "certmanager_clock_time_seconds_gauge",
    "The clock time given in seconds (from 1970/01/01 UTC). Gauge form of the deprecated clock_time_seconds counter. No labels.",
);
const CONDITIONS: [&str; 3] = ["True", "False", "Unknown"];

#[derive(Clone, Copy, Debug)]
enum Field {
    NotAfter,
    NotBefore,
    RenewalTime,
}

/// The store to read, once standalone mode hands it over; until then nothing is exported.
#[derive(Clone, Debug, Default)]
pub struct CertificateCollector {
    store: Arc<OnceLock<Store<Certificate>>>,
}

impl CertificateCollector {
    /// Starts exporting the Certificates of `store`. Only the first store counts.
    pub fn watch(&self, store: Store<Certificate>) {
        let _ = self.store.set(store);
    }
}

impl Collector for CertificateCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(store) = self.store.get() else {
            return Ok(());
        };
        let certificates = store.state();
        let mut family = encoder.encode_descriptor(READY.0, READY.1, None, MetricType::Gauge)?;
        for crt in &certificates {
            encode_ready(crt, &mut family)?;
        }
        for (name, help, field) in TIMESTAMPS {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for crt in &certificates {
                let labels = labels(crt);
                let value = seconds(timestamp(crt, field));
                ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
            }
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let clock = encoder.encode_descriptor(CLOCK.0, CLOCK.1, None, MetricType::Gauge)?;
        ConstGauge::new(now).encode(clock)
    }
}

/// cert-manager's three series per Certificate: 1 for the `Ready` condition's status (Unknown
/// when it has none), 0 for the others (all three 0 for a status outside the three).
fn encode_ready(
    crt: &Certificate,
    family: &mut prometheus_client::encoding::MetricEncoder<'_>,
) -> Result<(), std::fmt::Error> {
    let status = crt.condition("Ready").map_or("Unknown", |c| c.status.as_str());
    let [name, namespace, issuer_name, issuer_kind, issuer_group] = labels(crt);
    for condition in CONDITIONS {
        let labels = [
            name,
            namespace,
            ("condition", condition),
            issuer_name,
            issuer_kind,
            issuer_group,
        ];
        let value = i64::from(condition == status);
        ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// cert-manager's labels, in its order, borrowed from the stored object. The issuer's kind and
/// group are as written in `issuerRef` (empty when left out), as cert-manager exports them.
fn labels(crt: &Certificate) -> [(&'static str, &str); 5] {
    let issuer = &crt.spec.issuer_ref;
    [
        ("name", crt.metadata.name.as_deref().unwrap_or_default()),
        ("namespace", crt.metadata.namespace.as_deref().unwrap_or_default()),
        ("issuer_name", issuer.name.as_str()),
        ("issuer_kind", issuer.kind.as_str()),
        ("issuer_group", issuer.group.as_str()),
    ]
}

fn timestamp(crt: &Certificate, field: Field) -> Option<&Time> {
    let status = crt.status.as_ref()?;
    match field {
        Field::NotAfter => status.not_after.as_ref(),
        Field::NotBefore => status.not_before.as_ref(),
        Field::RenewalTime => status.renewal_time.as_ref(),
    }
}

/// Whole Unix seconds, 0 when the status has no such time (as cert-manager).
fn seconds(time: Option<&Time>) -> i64 {
    time.map_or(0, |t| t.0.as_second())
}

#[cfg(test)]
#[path = "certificates/tests.rs"]
mod tests;
