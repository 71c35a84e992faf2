//! The chart's monitoring, as it renders (Helm's engine, `scripts/chart-lint.py`), checked by
//! the real `promtool` (Debian's `prometheus`; `scripts/test-deps.sh` installs it as root):
//!
//! - the PrometheusRule passes `promtool check rules`, for the defaults and for every option set;
//! - `promtool test rules` runs `chart_monitoring/alerts_test.yaml`, each alert firing and not;
//! - every PromQL expression of the Grafana dashboard parses (`promtool check rules` over a rule
//!   file of them) and names only series the manager or cert-manager exports;
//! - the ServiceMonitor gives the series the job label the rules and the cert-manager mixin
//!   select on, and none of it renders by default.
//!
//! Fails, never skips, when `promtool` or Helm's Python bindings are missing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{Value, json};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The directory `scripts/chart-lint.py --out` rendered every case into, once per process.
fn chart_render() -> &'static Path {
    static OUT: OnceLock<PathBuf> = OnceLock::new();
    OUT.get_or_init(|| {
        let out = scratch("render");
        let venv = repo().join(".venv/bin/python3");
        let python = if venv.exists() {
            venv
        } else {
            PathBuf::from("python3")
        };
        let result = Command::new(python)
            .arg(repo().join("scripts/chart-lint.py"))
            .arg("--out")
            .arg(&out)
            .output()
            .expect("cannot start python3 (scripts/chart-lint.py needs it)");
        assert!(
            result.status.success(),
            "scripts/chart-lint.py failed (`scripts/test-deps.sh` installs Helm's bindings):\n{}{}",
            String::from_utf8_lossy(&result.stdout),
            String::from_utf8_lossy(&result.stderr)
        );
        out
    })
}

/// A fresh directory of this process named `name`.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("chart-monitoring-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn chart_case(case: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(chart_render().join(format!("{case}.yaml"))).expect("rendered case");
    serde_saphyr::from_multiple::<Value>(&text)
        .expect("rendered YAML")
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

/// Runs promtool with `args` in `dir`; its output when it succeeds.
fn promtool(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot start promtool ({e}); run scripts/test-deps.sh, or: sudo apt-get install -y prometheus")
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

/// The rule groups of the case's PrometheusRule, as a promtool rule file (JSON is YAML).
fn rules_of(case: &str) -> Value {
    let docs = chart_case(case);
    let rules = of_kind(&docs, "PrometheusRule");
    assert_eq!(rules.len(), 1, "{case}: one PrometheusRule");
    json!({"groups": rules[0]["spec"]["groups"]})
}

fn alerts(rules: &Value) -> Vec<&Value> {
    rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .collect()
}

const ALERTS: [&str; 8] = [
    "CfsslIssuerIssuerNotReady",
    "CfsslIssuerCertificateNotReady",
    "CfsslIssuerCertificateExpiresBeforeRenewal",
    "CfsslIssuerCertificateRenewalOverdue",
    "CfsslIssuerCAErrors",
    "CfsslIssuerCASlow",
    "CfsslIssuerSignedUnsaved",
    "CfsslIssuerNoLeader",
];

#[test]
fn the_rules_pass_promtool_check() {
    for case in ["monitoring", "full"] {
        let dir = scratch(&format!("check-{case}"));
        let rules = rules_of(case);
        let names: Vec<&str> = alerts(&rules)
            .iter()
            .map(|a| a["alert"].as_str().unwrap())
            .collect();
        assert_eq!(names, ALERTS, "{case}");
        for alert in alerts(&rules) {
            for key in ["summary", "description", "runbook"] {
                assert!(
                    alert["annotations"][key].is_string(),
                    "{case}: {} has no {key}",
                    alert["alert"]
                );
            }
        }
        std::fs::write(dir.join("rules.yaml"), rules.to_string()).unwrap();
        let out = promtool(&dir, &["check", "rules", "rules.yaml"]);
        assert!(out.contains("SUCCESS: 8 rules found"), "{case}: {out}");
    }
}

/// Each expected alert of the test file gets the annotations of its rule that hold no
/// template, as rendered; the templated ones are written in the test file.
fn with_static_annotations(mut tests: Value, rules: &Value) -> Value {
    let annotations = |name: &str| {
        alerts(rules)
            .into_iter()
            .find(|a| a["alert"] == name)
            .unwrap_or_else(|| panic!("no alert {name}"))["annotations"]
            .as_object()
            .unwrap()
            .clone()
    };
    for case in tests["tests"].as_array_mut().unwrap() {
        for check in case["alert_rule_test"].as_array_mut().unwrap() {
            let rule = annotations(check["alertname"].as_str().unwrap());
            for alert in check["exp_alerts"].as_array_mut().unwrap() {
                let expected = alert
                    .as_object_mut()
                    .unwrap()
                    .entry("exp_annotations")
                    .or_insert_with(|| json!({}));
                for (key, text) in &rule {
                    if !text.as_str().unwrap().contains("{{") {
                        expected
                            .as_object_mut()
                            .unwrap()
                            .entry(key)
                            .or_insert(text.clone());
                    }
                }
            }
        }
    }
    tests
}

#[test]
fn each_alert_fires_and_stays_quiet_in_promtool_unit_tests() {
    let dir = scratch("unit");
    let rules = rules_of("monitoring");
    std::fs::write(dir.join("rules.yaml"), rules.to_string()).unwrap();
    let text = std::fs::read_to_string(repo().join("tests/chart_monitoring/alerts_test.yaml")).unwrap();
    let tests: Value = serde_saphyr::from_str(&text).expect("alerts_test.yaml");
    let tested: BTreeSet<&str> = tests["tests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().unwrap())
        .map(|c| c["alertname"].as_str().unwrap())
        .collect();
    assert_eq!(tested, ALERTS.into_iter().collect(), "a unit test per alert");
    let tests = with_static_annotations(tests, &rules);
    std::fs::write(dir.join("alerts_test.yaml"), tests.to_string()).unwrap();
    let out = promtool(&dir, &["test", "rules", "alerts_test.yaml"]);
    assert!(out.contains("SUCCESS"), "{out}");
}

/// Every `expr` of the dashboard's panels.
fn dashboard_exprs(dashboard: &Value) -> Vec<String> {
    dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap())
        .map(|t| t["expr"].as_str().unwrap().to_string())
        .collect()
}

/// The series a dashboard or alert may read: ours and cert-manager's certificate series.
const EXPORTED: [&str; 12] = [
    "cfssl_issuer_certificates_issued_total",
    "cfssl_issuer_cfssl_request_duration_seconds_bucket",
    "cfssl_issuer_cfssl_request_duration_seconds_count",
    "cfssl_issuer_cfssl_request_errors_total",
    "cfssl_issuer_issuer_ready",
    "cfssl_issuer_leader",
    "cfssl_issuer_signed_unsaved_certificates",
    "cfssl_issuer_issuance_budget_waiting",
    "certmanager_certificate_ready_status",
    "certmanager_certificate_expiration_timestamp_seconds",
    "certmanager_certificate_renewal_timestamp_seconds",
    "certmanager_clock_time_seconds_gauge",
];

fn series_names(expr: &str) -> Vec<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("cfssl_issuer_") || w.starts_with("certmanager_"))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_dashboard_ships_as_is_and_every_expression_parses() {
    let docs = chart_case("monitoring");
    let maps = of_kind(&docs, "ConfigMap");
    let map = maps
        .iter()
        .find(|m| m["metadata"]["labels"]["grafana_dashboard"] == "1")
        .expect("the dashboard ConfigMap, labelled for Grafana's sidecar");
    let shipped: Value = serde_json::from_str(map["data"]["cfssl-issuer.json"].as_str().unwrap()).unwrap();
    let file =
        std::fs::read_to_string(repo().join("charts/cfssl-issuer/files/grafana-dashboard.json")).unwrap();
    assert_eq!(shipped, serde_json::from_str::<Value>(&file).unwrap());
    let exprs = dashboard_exprs(&shipped);
    assert_eq!(exprs.len(), 12);
    // Grafana's variables become what they stand for; the rest must be PromQL.
    let rules: Vec<Value> = exprs
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let promql = e
                .replace("$__rate_interval", "5m")
                .replace("$job", "cert-manager");
            assert!(!promql.contains('$'), "a Grafana variable left in {promql}");
            json!({"record": format!("dashboard:panel_expr_{i}"), "expr": promql})
        })
        .collect();
    let dir = scratch("dashboard");
    let file = json!({"groups": [{"name": "dashboard", "rules": rules}]});
    std::fs::write(dir.join("dashboard.yaml"), file.to_string()).unwrap();
    let out = promtool(&dir, &["check", "rules", "dashboard.yaml"]);
    assert!(out.contains("SUCCESS: 12 rules found"), "{out}");
    for name in exprs.iter().flat_map(|e| series_names(e)) {
        assert!(
            EXPORTED.contains(&name.as_str()),
            "the dashboard reads {name}, which nothing exports"
        );
    }
    let rules = rules_of("monitoring");
    for alert in alerts(&rules) {
        for name in series_names(alert["expr"].as_str().unwrap()) {
            assert!(
                EXPORTED.contains(&name.as_str()),
                "{} reads {name}",
                alert["alert"]
            );
        }
    }
}

/// The job the ServiceMonitor sets, for each case that renders one.
#[test]
fn the_service_monitor_sets_the_job_the_rules_select() {
    let cases = [
        ("monitoring", Some(("cert-manager", false))),
        ("full", Some(("pki-issuer", true))),
        ("default", None),
    ];
    for (case, want) in cases {
        let docs = chart_case(case);
        let monitors = of_kind(&docs, "ServiceMonitor");
        let got = monitors.first().map(|m| {
            let endpoint = &m["spec"]["endpoints"][0];
            let relabel = &endpoint["relabelings"][0];
            assert_eq!(relabel["targetLabel"], "job", "{case}");
            (
                relabel["replacement"].as_str().unwrap().to_string(),
                endpoint["honorLabels"].as_bool().unwrap(),
            )
        });
        assert_eq!(got, want.map(|(job, honor)| (job.to_string(), honor)), "{case}");
        if let Some((job, _)) = want {
            let rules = rules_of(case);
            let selector = format!("job=\"{job}\"");
            assert!(
                rules.to_string().contains(&selector.replace('"', "\\\"")),
                "{case}: rules select {selector}"
            );
        }
    }
    for case in ["default", "standalone", "minimal"] {
        let docs = chart_case(case);
        assert!(
            of_kind(&docs, "PrometheusRule").is_empty(),
            "{case}: no PrometheusRule by default"
        );
        assert!(
            !of_kind(&docs, "ConfigMap")
                .iter()
                .any(|m| m["metadata"]["name"].as_str().unwrap().ends_with("-dashboard")),
            "{case}: no dashboard by default"
        );
    }
}
