//! Prometheus metrics: ours, all prefixed `cfssl_issuer_`, and in standalone mode
//! cert-manager's certificate metrics ([`super::certificates`]).

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry, Unit};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use super::certificates::CertificateCollector;
use crate::api::certmanager::Certificate;
use crate::clock::lock;
use kube::runtime::reflector::Store;
use std::sync::atomic::AtomicU64;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum Controller {
    Issuer,
    ClusterIssuer,
    CertificateRequest,
    CertificateSigningRequest,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    pub controller: Controller,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    /// `Issuer/ns/name` or `ClusterIssuer/name`.
    pub issuer: String,
    pub label: String,
    /// `check` or `sign`.
    pub call: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallErrorLabels {
    pub issuer: String,
    pub label: String,
    pub call: &'static str,
    /// `retryable`, `permanent` or `issuer`.
    pub class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct IssuerLabels {
    pub issuer: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CertificateLabels {
    pub namespace: String,
    /// The Certificate a request was made for, or the request itself when it has none.
    pub name: String,
    pub issuer: String,
}

/// Everything the controllers report. Cheap to share: every field is internally synchronised.
pub struct Metrics {
    pub registry: Registry,
    pub reconciles: Family<ControllerLabels, Counter>,
    pub reconcile_errors: Family<ControllerLabels, Counter>,
    pub cfssl_duration: Family<CallLabels, Histogram>,
    pub cfssl_errors: Family<CallErrorLabels, Counter>,
    pub issued: Family<IssuerLabels, Counter>,
    pub issuer_ready: Family<IssuerLabels, Gauge>,
    pub certificate_expiry: Family<CertificateLabels, Gauge<f64, AtomicU64>>,
    pub possible_duplicates: Family<IssuerLabels, Counter>,
    /// Certificates signed whose `Issued` status write has not landed: signatures at risk while
    /// the API server refuses writes (kept in memory and written on the next retry).
    pub signed_unsaved: Gauge,
    /// Objects that joined an issuer's line for its issuance budget, per issuer.
    pub issuance_budget_waits: Family<IssuerLabels, Counter>,
    /// Objects waiting for an issuance budget now, over all issuers.
    pub issuance_budget_waiting: Gauge,
    /// 1 while this replica reconciles (the leader, or leader election is off), set from its
    /// role at each scrape.
    pub leader: Gauge,
    /// cert-manager's certificate series, read from the Certificate store at each scrape.
    certificates: CertificateCollector,
    /// The CFSSL call series of each issuer, so a deleted issuer's can be removed:
    /// prometheus-client cannot list a family's label sets.
    calls: Mutex<HashMap<String, IssuerCalls>>,
}

/// Registers an empty family under `name` and hands it back.
fn registered<F>(registry: &mut Registry, name: &str, help: &str, unit: Option<Unit>) -> F
where
    F: Metric + Clone + Default,
{
    let family = F::default();
    match unit {
        Some(unit) => registry.register_with_unit(name, help, unit, family.clone()),
        None => registry.register(name, help, family.clone()),
    }
    family
}

/// Which series exist per issuer, to remove them when it goes (prometheus-client cannot list
/// a family's series).
#[derive(Debug, Default)]
struct IssuerCalls {
    durations: HashSet<CallLabels>,
    errors: HashSet<CallErrorLabels>,
}

impl Default for Metrics {
    fn default() -> Self {
        use prometheus_client::registry::Unit::Seconds;
        let mut registry = Registry::default();
        let certificates = CertificateCollector::default();
        registry.register_collector(Box::new(certificates.clone()));
        let r = registry.sub_registry_with_prefix("cfssl_issuer");
        let reconciles = registered(r, "reconciles", "Reconciles run, per controller", None);
        let reconcile_errors = registered(
            r,
            "reconcile_errors",
            "Reconciles that failed with an API error and were retried, per controller",
            None,
        );
        let cfssl_duration = Family::<CallLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 16))
        });
        r.register_with_unit(
            "cfssl_request_duration",
            "Time of each CFSSL check or sign, including failover, per issuer and label",
            Seconds,
            cfssl_duration.clone(),
        );
        let cfssl_errors = registered(
            r,
            "cfssl_request_errors",
            "Failed CFSSL checks and signs, per issuer, label and error class",
            None,
        );
        let issued = registered(r, "certificates_issued", "Certificates signed, per issuer", None);
        let issuer_ready = registered(
            r,
            "issuer_ready",
            "1 when the issuer's last check passed, 0 otherwise",
            None,
        );
        let certificate_expiry = registered(
            r,
            "certificate_expiration_timestamp",
            "notAfter of the last certificate issued for each Certificate, as a Unix time",
            Some(Seconds),
        );
        let possible_duplicates = registered(
            r,
            "possible_duplicate_signatures",
            "Sign requests a CA took without answering in time before the next URL was tried; each may have been signed twice",
            None,
        );
        let signed_unsaved = registered(
            r,
            "signed_unsaved_certificates",
            "Certificates signed whose Issued status write has not landed yet; lost on a restart, and signed again after one",
            None,
        );
        let issuance_budget_waits = registered(
            r,
            "issuance_budget_waits",
            "Requests that had to wait for their issuer's issuance budget (--issuance-budget), per issuer",
            None,
        );
        let issuance_budget_waiting = registered(
            r,
            "issuance_budget_waiting",
            "Requests waiting for an issuer's issuance budget now, over all issuers",
            None,
        );
        let leader = registered(
            r,
            "leader",
            "1 while this replica reconciles: it holds the leader Lease, or leader election is off",
            None,
        );
        Metrics {
            registry,
            leader,
            certificates,
            issuance_budget_waits,
            issuance_budget_waiting,
            reconciles,
            reconcile_errors,
            cfssl_duration,
            cfssl_errors,
            issued,
            issuer_ready,
            certificate_expiry,
            possible_duplicates,
            signed_unsaved,
            calls: Mutex::default(),
        }
    }
}

impl Metrics {
    pub fn reconciled(&self, controller: Controller) {
        self.reconciles
            .get_or_create(&ControllerLabels { controller })
            .inc();
    }

    pub fn reconcile_failed(&self, controller: Controller) {
        self.reconcile_errors
            .get_or_create(&ControllerLabels { controller })
            .inc();
    }

    /// Sets `issuer_ready` of `issuer`.
    pub fn set_issuer_ready(&self, issuer: &str, ready: bool) {
        let labels = IssuerLabels {
            issuer: issuer.into(),
        };
        self.issuer_ready.get_or_create(&labels).set(i64::from(ready));
        lock(&self.calls).entry(issuer.into()).or_default();
    }

    /// Forgets every issuer with series whose key starts with `kind_prefix` (`Issuer/`,
    /// `ClusterIssuer/`) and is not in `live`: deletes missed while a watch was down.
    pub fn retain_issuers(&self, kind_prefix: &str, live: &HashSet<String>) {
        let gone: Vec<String> = lock(&self.calls)
            .keys()
            .filter(|k| k.starts_with(kind_prefix) && !live.contains(*k))
            .cloned()
            .collect();
        for issuer in gone {
            self.forget_issuer(&issuer);
        }
    }

    /// Records one CFSSL call of `labels.issuer`: its latency and, when it failed, its class.
    pub fn observe_call(&self, labels: CallLabels, seconds: f64, error_class: Option<&'static str>) {
        self.cfssl_duration.get_or_create(&labels).observe(seconds);
        let error = error_class.map(|class| CallErrorLabels {
            issuer: labels.issuer.clone(),
            label: labels.label.clone(),
            call: labels.call,
            class,
        });
        if let Some(error) = &error {
            self.cfssl_errors.get_or_create(error).inc();
        }
        let mut calls = lock(&self.calls);
        let seen = calls.entry(labels.issuer.clone()).or_default();
        seen.durations.insert(labels);
        seen.errors.extend(error);
    }

    /// The counter of `issuer`'s possible duplicate signatures, handed to its CFSSL client.
    /// An object joined `issuer`'s line for its issuance budget.
    pub fn budget_wait(&self, issuer: &str) {
        let labels = IssuerLabels {
            issuer: issuer.into(),
        };
        self.issuance_budget_waits.get_or_create(&labels).inc();
    }

    pub fn possible_duplicates_of(&self, issuer: &str) -> Counter {
        let labels = IssuerLabels {
            issuer: issuer.into(),
        };
        self.possible_duplicates.get_or_create(&labels).clone()
    }

    /// Removes every series labelled with `issuer` (`Issuer/ns/name` or `ClusterIssuer/name`):
    /// it was deleted. Its certificates' expiry series stay while their requests do.
    pub fn forget_issuer(&self, issuer: &str) {
        let labels = IssuerLabels {
            issuer: issuer.into(),
        };
        self.issuer_ready.remove(&labels);
        self.issued.remove(&labels);
        self.possible_duplicates.remove(&labels);
        self.issuance_budget_waits.remove(&labels);
        let calls = lock(&self.calls).remove(issuer);
        for durations in calls.iter().flat_map(|c| &c.durations) {
            self.cfssl_duration.remove(durations);
        }
        for errors in calls.iter().flat_map(|c| &c.errors) {
            self.cfssl_errors.remove(errors);
        }
    }

    /// Exports cert-manager's certificate metrics for the Certificates of `store` (standalone
    /// mode's), read at each scrape.
    pub fn watch_certificates(&self, store: Store<Certificate>) {
        self.certificates.watch(store);
    }

    /// Sets `leader`: whether this replica reconciles (it leads, or election is off).
    pub fn set_leading(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// The OpenMetrics text exposition.
    pub fn render(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }

    /// [`Metrics::render`] for tests.
    #[cfg(test)]
    pub fn encode(&self) -> String {
        self.render().expect("writing to a String")
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_conventions() {
        let m = Metrics::default();
        m.reconciled(Controller::CertificateRequest);
        let labels = CallLabels {
            issuer: "Issuer/ns/ca".into(),
            label: "l".into(),
            call: "sign",
        };
        m.cfssl_duration.get_or_create(&labels).observe(0.01);
        let issuer = IssuerLabels {
            issuer: "Issuer/ns/ca".into(),
        };
        m.issued.get_or_create(&issuer).inc();
        m.issuer_ready.get_or_create(&issuer).set(1);
        let cert = CertificateLabels {
            namespace: "ns".into(),
            name: "web".into(),
            issuer: "Issuer/ns/ca".into(),
        };
        m.certificate_expiry.get_or_create(&cert).set(1.8e9);
        m.signed_unsaved.set(2);
        let text = m.encode();
        for name in [
            "cfssl_issuer_reconciles_total{controller=\"CertificateRequest\"} 1",
            "cfssl_issuer_cfssl_request_duration_seconds_count{issuer=\"Issuer/ns/ca\",label=\"l\",call=\"sign\"} 1",
            "cfssl_issuer_certificates_issued_total{issuer=\"Issuer/ns/ca\"} 1",
            "cfssl_issuer_issuer_ready{issuer=\"Issuer/ns/ca\"} 1",
            "cfssl_issuer_certificate_expiration_timestamp_seconds{namespace=\"ns\",name=\"web\",issuer=\"Issuer/ns/ca\"} 1800000000",
            "cfssl_issuer_signed_unsaved_certificates 2",
        ] {
            assert!(text.contains(name), "{name} missing from\n{text}");
        }
    }

    fn call(issuer: &str, label: &str, call: &'static str) -> CallLabels {
        CallLabels {
            issuer: issuer.into(),
            label: label.into(),
            call,
        }
    }

    #[test]
    fn a_deleted_issuer_takes_its_series_with_it() {
        let m = Metrics::default();
        for issuer in ["Issuer/ns/gone", "Issuer/ns/kept"] {
            m.observe_call(call(issuer, "l1", "check"), 0.01, None);
            m.observe_call(call(issuer, "l1", "sign"), 0.01, Some("retryable"));
            // The label changed in the spec: the old series are the issuer's too.
            m.observe_call(call(issuer, "l2", "sign"), 0.01, Some("issuer"));
            let labels = IssuerLabels {
                issuer: issuer.into(),
            };
            m.issuer_ready.get_or_create(&labels).set(1);
            m.issued.get_or_create(&labels).inc();
        }
        let cert = CertificateLabels {
            namespace: "ns".into(),
            name: "web".into(),
            issuer: "Issuer/ns/gone".into(),
        };
        m.certificate_expiry.get_or_create(&cert).set(1.8e9);
        let series = |m: &Metrics, issuer: &str| {
            let text = m.encode();
            let needle = format!("issuer=\"{issuer}\"");
            let count = |metric: &str| {
                text.lines()
                    .filter(|l| l.starts_with(metric) && l.contains(&needle))
                    .count()
            };
            [
                count("cfssl_issuer_cfssl_request_duration_seconds_count"),
                count("cfssl_issuer_cfssl_request_errors_total"),
                count("cfssl_issuer_issuer_ready"),
                count("cfssl_issuer_certificates_issued_total"),
            ]
        };
        assert_eq!(series(&m, "Issuer/ns/gone"), [3, 2, 1, 1]);
        assert_eq!(series(&m, "Issuer/ns/kept"), [3, 2, 1, 1]);
        m.forget_issuer("Issuer/ns/gone");

        assert_eq!(series(&m, "Issuer/ns/gone"), [0, 0, 0, 0]);
        assert_eq!(series(&m, "Issuer/ns/kept"), [3, 2, 1, 1]);
        let text = m.encode();
        let gone = text
            .lines()
            .filter(|l| l.contains("Issuer/ns/gone") && !l.starts_with("cfssl_issuer_certificate_expiration"))
            .collect::<Vec<_>>();
        assert!(gone.is_empty(), "series of the deleted issuer left: {gone:?}");
        assert!(text.contains("issuer=\"Issuer/ns/kept\""), "{text}");
        assert!(
            m.certificate_expiry.get(&cert).is_some(),
            "expiry series follow requests, not issuers"
        );
        assert!(m.calls.lock().unwrap().get("Issuer/ns/gone").is_none());
        m.forget_issuer("Issuer/ns/never-seen");
        assert_eq!(series(&m, "Issuer/ns/kept"), [3, 2, 1, 1]);
    }

    #[test]
    fn a_relist_sweeps_issuers_whose_delete_was_missed() {
        let m = Metrics::default();
        for issuer in ["Issuer/a/live", "Issuer/a/gone", "ClusterIssuer/gone"] {
            m.set_issuer_ready(issuer, true);
        }
        m.observe_call(call("Issuer/a/gone", "l", "check"), 0.1, None);
        let live = HashSet::from(["Issuer/a/live".to_string()]);
        m.retain_issuers("Issuer/", &live);
        let text = m.encode();
        assert!(text.contains("Issuer/a/live"), "{text}");
        assert!(!text.contains("Issuer/a/gone"), "{text}");
        assert!(
            text.contains("ClusterIssuer/gone"),
            "another kind's relist: {text}"
        );
    }
}
