//! The figures of one run, printed against their targets with "ok" or "MISSED".

use std::time::Duration;

use e2e::harness::load;
use kube_testserver::Counts;

/// One printed line: what, the measured value, and the target with whether it is met.
type Row = (String, String, Option<(String, bool)>);

/// Everything one run measured.
pub struct Figures {
    pub n: usize,
    pub concurrency: usize,
    pub ca: String,
    pub profile: &'static str,
    pub raw_rate: f64,
    /// The CA's CPU per signature in the raw loop, when it is a process of its own.
    pub raw_ca_cpu: Option<Duration>,
    pub e2e_rate: f64,
    /// CPU per issued request over the run (first create to last Issued), by process.
    pub manager_cpu: Duration,
    pub ca_cpu: Option<Duration>,
    pub bench_cpu: Option<Duration>,
    pub rss_idle_kib: u64,
    pub rss_after_kib: u64,
    pub rss_peak_kib: u64,
    /// The manager's API requests (the bench's own taken away).
    pub by_manager: Counts,
    pub conflicts: u64,
    pub signed: Option<u64>,
    pub duplicate_serials: usize,
    pub mismatched: usize,
    pub phases: String,
    /// `BENCH_BASELINE`: the capacity ratio of the commit compared with, measured the same
    /// way just before; the change must not lower it.
    pub baseline: Option<f64>,
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

impl Figures {
    /// `(1 s / manager CPU per request) / raw rate`: how many CAs one manager core keeps up with.
    pub fn capacity_ratio(&self) -> f64 {
        1e6 / us(self.manager_cpu).max(1.0) / self.raw_rate
    }

    pub fn api_per_request(&self) -> f64 {
        self.by_manager.total() as f64 / self.n as f64
    }

    /// Whether every correctness row holds.
    pub fn correct(&self) -> bool {
        self.signed.is_none_or(|s| s == self.n as u64) && self.mismatched == 0 && self.duplicate_serials == 0
    }

    pub fn print(&self) {
        let n = self.n;
        println!();
        println!(
            "cfssl-issuer bench: N={n}, concurrency {}, {}, {} build",
            self.concurrency, self.ca, self.profile
        );
        println!("{:<44} {:>12}  target", "", "measured");
        for (what, value, target) in self.rows() {
            let verdict = match target {
                Some((_, true)) => "ok",
                Some((_, false)) => "MISSED",
                None => "",
            };
            let target = target.map(|(t, _)| t).unwrap_or_default();
            println!("{what:<44} {value:>12}  {target:<10} {verdict}");
        }
        println!("{}", self.phases);
        println!(
            "API requests by the manager per CertificateRequest ({:.2} in all):",
            self.api_per_request()
        );
        print!("{}", load::per_request_table(&self.by_manager, n as u64));
    }

    /// (what, measured, (target, met)).
    fn rows(&self) -> Vec<Row> {
        let target = |t: &str, ok: bool| Some((t.to_string(), ok));
        let n = self.n;
        let cpu = |d: Option<Duration>| d.map_or("-".to_string(), |d| format!("{:.0}", us(d)));
        let manager_us = us(self.manager_cpu);
        let ratio = self.capacity_ratio();
        let api = self.api_per_request();
        let (idle, after) = (mib(self.rss_idle_kib), mib(self.rss_after_kib));
        vec![
            (
                "raw authsign rate (/s)".into(),
                format!("{:.0}", self.raw_rate),
                None,
            ),
            (
                "CA CPU per signature, raw loop (µs)".into(),
                cpu(self.raw_ca_cpu),
                None,
            ),
            (
                "end-to-end CertificateRequests/s".into(),
                format!("{:.0}", self.e2e_rate),
                None,
            ),
            (
                "ratio e2e/raw".into(),
                format!("{:.2}", self.e2e_rate / self.raw_rate),
                None,
            ),
            (
                "manager CPU per issued request (µs)".into(),
                format!("{manager_us:.0}"),
                target("<= 150", manager_us <= 150.0),
            ),
            (
                "capacity ratio (1 s / manager CPU) / raw".into(),
                format!("{ratio:.2}"),
                target(">= 1.3", ratio >= 1.3),
            ),
            (
                "capacity ratio vs BENCH_BASELINE".into(),
                self.baseline.map_or("-".into(), |_| format!("{ratio:.2}")),
                self.baseline
                    .and_then(|b| target(&format!(">= {b:.2}"), ratio >= b)),
            ),
            ("CA CPU per issued request (µs)".into(), cpu(self.ca_cpu), None),
            (
                "bench CPU per issued request (µs)".into(),
                cpu(self.bench_cpu),
                None,
            ),
            (
                "API requests per issued request".into(),
                format!("{api:.2}"),
                target("<= 2", api <= 2.0),
            ),
            (
                "manager RSS idle (MiB)".into(),
                format!("{idle:.1}"),
                target("<= 20", idle <= 20.0),
            ),
            (
                format!("manager RSS after {n} (MiB)"),
                format!("{after:.1}"),
                target("<= 40", after <= 40.0),
            ),
            (
                "manager peak RSS (MiB)".into(),
                format!("{:.1}", mib(self.rss_peak_kib)),
                None,
            ),
            (
                "409 conflicts".into(),
                self.conflicts.to_string(),
                target("0", self.conflicts == 0),
            ),
            (
                "CA signatures".into(),
                self.signed.map_or("-".into(), |s| s.to_string()),
                target(&n.to_string(), self.signed.is_none_or(|s| s == n as u64)),
            ),
            (
                "serial numbers issued twice".into(),
                self.duplicate_serials.to_string(),
                target("0", self.duplicate_serials == 0),
            ),
            (
                "certificates not for their CSR".into(),
                self.mismatched.to_string(),
                target("0", self.mismatched == 0),
            ),
        ]
    }
}
