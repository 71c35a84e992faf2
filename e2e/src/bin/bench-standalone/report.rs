//! The standalone bench's figures and their printout, each target beside its figure with `ok`
//! or `MISSED` (printed, never asserted).

use std::time::Duration;

use crate::Settings;
use crate::budget::BudgetFigures;
use crate::floor::Floor;
use crate::machine::Keygen;
use crate::phase::Outcome;
use e2e::harness::load;

/// The issue's targets.
const TARGET_RATE: f64 = 100.0;
const TARGET_MANAGER_MS: f64 = 2.0;
const TARGET_SCALE_RATIO: f64 = 1.3;
const TARGET_WRITES: f64 = 10.0;
const TARGET_EVENTS: f64 = 6.0;
const TARGET_RSA_SHARE: f64 = 0.8;
const TARGET_READY_MIB: f64 = 100.0;
const TARGET_IDLE_CPU: f64 = 0.01;

/// The manager left alone with every Certificate Ready.
#[derive(Debug, Clone, Copy)]
pub struct Idle {
    pub ready: usize,
    pub rss_kib: u64,
    pub seconds: f64,
    pub writes: u64,
    pub cpu: Duration,
}

/// A manager started after the first one stopped, on every Certificate Ready.
#[derive(Debug, Clone, Copy)]
pub struct Restarted {
    pub rss_kib: u64,
    pub writes: u64,
}

/// Everything one run measured.
pub struct Figures {
    /// Issue ECDSA, renew ECDSA, issue ECDSA at scale, issue RSA, then any fill.
    pub phases: Vec<Outcome>,
    /// RSA-2048 keys this machine makes on all its cores.
    pub keygen: Option<Keygen>,
    pub idle: Idle,
    /// Manager RSS (KiB): idle, idle with the unrelated Secrets, idle with every Certificate
    /// Ready, peak.
    pub rss: [u64; 4],
    pub budget: Option<BudgetFigures>,
    /// Phase 1's API traffic from a bare client.
    pub floor: Option<Floor>,
    pub restarted: Option<Restarted>,
}

pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn verdict(ok: bool) -> &'static str {
    if ok { "ok" } else { "MISSED" }
}

fn row(what: &str, value: String, target: String, ok: bool) {
    println!("  {what:<60} {value:>9}  {target:<9} {}", verdict(ok));
}

pub fn print(s: &Settings, f: &Figures, build: &str) {
    println!();
    println!(
        "cfssl-issuer standalone bench: N={}, scale N={}, --concurrency {}, simple-cfssl over {}, {build}",
        s.n,
        s.scale_n,
        s.concurrency,
        if s.tls { "HTTPS" } else { "HTTP" },
    );
    println!(
        "{:<34} {:>6} {:>9} {:>8} {:>10} {:>10} {:>8} {:>7} {:>9}",
        "phase", "N", "time", "Certs/s", "manager ms", "bench ms", "writes", "events", "peak MiB"
    );
    for p in &f.phases {
        println!(
            "{:<34} {:>6} {:>8.2}s {:>8.0} {:>10.2} {:>10.2} {:>8.2} {:>7.2} {:>9.1}",
            p.name,
            p.n,
            p.elapsed.as_secs_f64(),
            p.rate(p.n),
            p.manager_ms_per(p.n),
            p.bench_ms_per(p.n),
            p.object_writes_per(p.n),
            p.event_writes_per(p.n),
            mib(p.peak_kib)
        );
    }
    println!(
        "(manager ms, bench ms: CPU per Certificate of the manager, and of this process: test API server, simple-cfssl, client; writes: per Certificate, Events apart)"
    );
    targets(f);
    floor(f);
    rsa_cpu(f);
    details(s, f);
}

fn targets(f: &Figures) {
    println!("\ntargets (printed, not asserted):");
    let [issue, renew, scale] = [0, 1, 2].map(|i| &f.phases[i]);
    // Absent when `BENCH_RSA=0`.
    let rsa = f.phases.get(3).filter(|p| p.name.contains("RSA"));
    for (what, p) in [("issue", issue), ("renew", renew)] {
        let rate = p.rate(p.n);
        row(
            &format!("ECDSA Certificates/s ({what})"),
            format!("{rate:.0}"),
            format!(">= {TARGET_RATE:.0}"),
            rate >= TARGET_RATE,
        );
        let ms = p.manager_ms_per(p.n);
        row(
            &format!("manager CPU per Certificate, ms ({what})"),
            format!("{ms:.2}"),
            format!("<= {TARGET_MANAGER_MS}"),
            ms <= TARGET_MANAGER_MS,
        );
    }
    let ratio = scale.manager_ms_per(scale.n) / issue.manager_ms_per(issue.n);
    row(
        &format!("manager CPU per Certificate, N={} / N={}", scale.n, issue.n),
        format!("{ratio:.2}"),
        format!("<= {TARGET_SCALE_RATIO}"),
        ratio <= TARGET_SCALE_RATIO,
    );
    for p in f.phases.iter().take(3).chain(rsa) {
        let writes = p.object_writes_per(p.n);
        row(
            &format!("writes per Certificate without Events, {}", p.name),
            format!("{writes:.2}"),
            format!("<= {TARGET_WRITES:.0}"),
            writes <= TARGET_WRITES,
        );
        let events = p.event_writes_per(p.n);
        row(
            &format!("Events per Certificate, {}", p.name),
            format!("{events:.2}"),
            format!("<= {TARGET_EVENTS:.0}"),
            events <= TARGET_EVENTS,
        );
    }
    if let (Some(rsa), Some(keygen)) = (rsa, &f.keygen) {
        let share = rsa.rate(rsa.n) / keygen.rate;
        row(
            &format!(
                "RSA-2048 Certificates/s / keys/s on all cores ({:.1})",
                keygen.rate
            ),
            format!("{share:.2}"),
            format!(">= {TARGET_RSA_SHARE}"),
            share >= TARGET_RSA_SHARE,
        );
    }
    let idle = f.idle;
    let ready_mib = mib(idle.rss_kib);
    row(
        &format!("manager RSS with {} Ready Certificates, MiB", idle.ready),
        format!("{ready_mib:.1}"),
        format!("<= {TARGET_READY_MIB:.0}"),
        ready_mib <= TARGET_READY_MIB,
    );
    if let Some(r) = f.restarted {
        let mib = mib(r.rss_kib);
        row(
            &format!(
                "restarted manager RSS with {} Ready Certificates, MiB",
                idle.ready
            ),
            format!("{mib:.1}"),
            format!("<= {TARGET_READY_MIB:.0}"),
            mib <= TARGET_READY_MIB,
        );
        row(
            "restarted manager: API writes until settled",
            r.writes.to_string(),
            "= 0".into(),
            r.writes == 0,
        );
    }
    let per_minute = idle.writes as f64 * 60.0 / idle.seconds;
    row(
        "idle: API writes per minute",
        format!("{per_minute:.1}"),
        "= 0".into(),
        idle.writes == 0,
    );
    let share = idle.cpu.as_secs_f64() / idle.seconds;
    row(
        "idle: share of a core",
        format!("{:.2}%", share * 100.0),
        "<= 1%".into(),
        share <= TARGET_IDLE_CPU,
    );
    if let Some(b) = &f.budget {
        let most = (b.rate + b.burst) as usize;
        row(
            &format!("budget {}/s: most signs at the CA in any second", b.rate),
            b.max_in_any_second.to_string(),
            format!("<= {most}"),
            b.max_in_any_second <= most,
        );
        row(
            "budget: signs before a more urgent one in line",
            b.out_of_line.to_string(),
            "= 0".into(),
            b.out_of_line == 0,
        );
        println!("\n{b}");
    }
}

/// The manager's CPU per issued Certificate beside what its API traffic alone costs.
fn floor(f: &Figures) {
    let (Some(floor), Some(issue)) = (&f.floor, f.phases.first()) else {
        return;
    };
    let (manager, bare) = (issue.manager_ms_per(issue.n), floor.ms_per());
    println!(
        "\nfloor: {} issuances' API traffic (phase 1's requests, {:.2} per Certificate with the \
         watches' lists, and the watch events they cause) from a bare client of the manager's \
         stack, no decisions: {bare:.2} ms of CPU per Certificate ({:.1} s); the manager's \
         {manager:.2} ms is {:.2}x the floor, {:.2} ms above it; the {TARGET_MANAGER_MS} ms \
         target is {:.2}x the floor",
        floor.n,
        floor.requests_per,
        floor.wall_secs,
        manager / bare,
        manager - bare,
        TARGET_MANAGER_MS / bare,
    );
}

/// Where the RSA phase's CPU went: the key generation each Certificate needs, the rest of the
/// manager's work, and this process's; what the cores allow with all of it.
fn rsa_cpu(f: &Figures) {
    let (Some(rsa), Some(k)) = (f.phases.get(3), f.keygen.as_ref()) else {
        return;
    };
    let seconds = rsa.elapsed.as_secs_f64();
    let key_ms = k.cpu_per_key.as_secs_f64() * 1e3;
    let (manager, bench) = (rsa.manager_ms_per(rsa.n), rsa.bench_ms_per(rsa.n));
    let busy = (rsa.manager_cpu + rsa.bench_cpu).as_secs_f64() / (seconds * k.cores as f64);
    let bound = k.cores as f64 * 1e3 / (manager + bench);
    println!(
        "\nRSA-2048: a key takes {key_ms:.1} ms of CPU ({} keys; {:.1} keys/s on {} idle cores); \
         per Certificate the manager used {manager:.1} ms ({:.1} beside its key) and this \
         process {bench:.1} ms; the two kept {:.0}% of the cores busy over {seconds:.1} s; with \
         the cores all theirs, {bound:.1} Certificates/s, {:.2} of the keys/s on idle cores",
        k.keys,
        k.rate_on_idle_cores(),
        k.cores,
        manager - key_ms,
        busy * 100.0,
        bound / k.rate_on_idle_cores(),
    );
}

fn details(s: &Settings, f: &Figures) {
    let [idle, idle_secrets, ready, peak] = f.rss;
    println!(
        "\nmanager RSS (MiB): idle {:.1}; idle with {} unrelated Secrets of {} bytes {:.1}; idle with {} Ready Certificates {:.1}; peak {:.1}",
        mib(idle),
        s.secrets,
        s.secret_size,
        mib(idle_secrets),
        f.idle.ready,
        mib(ready),
        mib(peak)
    );
    println!(
        "idle {:.0} s: {} writes, {:.2} s of manager CPU",
        f.idle.seconds,
        f.idle.writes,
        f.idle.cpu.as_secs_f64()
    );
    for p in &f.phases {
        println!(
            "\n{}: {} signed by the CA, {} Certificates issued more than once, {} Secrets not \
             matching their key, {} with the wrong key type{}",
            p.name,
            p.signed,
            p.reissued,
            p.check.mismatched,
            p.check.wrong_key,
            p.rotated
                .map(|r| format!(", {r} with a new key"))
                .unwrap_or_default()
        );
        println!(
            "API requests by the manager per Certificate ({:.2} in all):",
            p.counts.total() as f64 / p.n as f64
        );
        print!(
            "{}",
            load::per_request_table(&p.counts, p.n as u64).replace("/request", "/Cert")
        );
        if !p.events.is_empty() {
            println!("Events in the phase by type and reason, per Certificate:");
            for (reason, n) in &p.events {
                println!("  {reason:<44} {n:>6} {:>9.3}/Cert", *n as f64 / p.n as f64);
            }
        }
    }
}
