//! CPU time a process has used, from `/proc/<pid>/stat`: what a benchmark charges to the
//! manager, the CA and itself over a phase.

use std::time::Duration;

/// User plus system CPU of every thread of `pid` so far (`utime` and `stime`, fields 14 and
/// 15 of `/proc/<pid>/stat`).
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat, ticks_per_second())
}

/// User plus system CPU of the calling thread so far (`/proc/thread-self/stat`).
pub fn thread_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    parse_stat(&stat, ticks_per_second())
}

/// Pure: the CPU time in a `stat` line. The command name (field 2) may hold spaces and
/// parentheses, so fields are counted from the last `)`.
pub fn parse_stat(stat: &str, ticks_per_second: u64) -> Option<Duration> {
    let (_, rest) = stat.rsplit_once(')')?;
    // `rest` starts at field 3 (state): utime is its 12th field, stime the 13th.
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    let ticks = utime + stime;
    Some(Duration::from_micros(ticks * 1_000_000 / ticks_per_second.max(1)))
}

/// `getconf CLK_TCK`, 100 where it cannot be asked (every Linux architecture we run on).
fn ticks_per_second() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100)
    })
}

/// CPU used by a set of processes between two points: start with [`Meter::start`], read with
/// [`Meter::used`].
#[derive(Debug, Clone)]
pub struct Meter {
    pid: u32,
    at: Duration,
}

impl Meter {
    pub fn start(pid: u32) -> Option<Meter> {
        Some(Meter {
            pid,
            at: cpu_time(pid)?,
        })
    }

    /// CPU used since the start.
    pub fn used(&self) -> Option<Duration> {
        Some(cpu_time(self.pid)?.saturating_sub(self.at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_table() {
        let line = |comm: &str, utime: &str, stime: &str| {
            format!(
                "4242 ({comm}) S 1 4242 4242 0 -1 4194560 1234 0 0 0 {utime} {stime} 0 0 20 0 9 0 555 0 0"
            )
        };
        // (row, stat line, ticks per second, want)
        let cases = [
            (
                "plain name",
                line("cfssl-issuer", "150", "50"),
                100,
                Some(Duration::from_secs(2)),
            ),
            (
                "name with spaces and parens",
                line("a (b) c", "1", "0"),
                100,
                Some(Duration::from_millis(10)),
            ),
            (
                "250 Hz",
                line("x", "250", "250"),
                250,
                Some(Duration::from_secs(2)),
            ),
            ("truncated", "4242 (x) S 1 2".to_string(), 100, None),
            ("no command", "garbage".to_string(), 100, None),
        ];
        for (row, stat, hz, want) in cases {
            assert_eq!(parse_stat(&stat, hz), want, "{row}");
        }
    }

    #[test]
    fn this_process_has_used_some_cpu_and_it_grows() {
        let pid = std::process::id();
        let meter = Meter::start(pid).expect("own stat");
        // Spin until the kernel has counted 20 ms of this process's CPU (two ticks at 100 Hz).
        // A busy machine only makes that take longer; a meter that never grows fails at 30 s.
        let give_up = std::time::Instant::now() + Duration::from_secs(30);
        let mut x = 0u64;
        let mut used = Duration::ZERO;
        while used < Duration::from_millis(20) && std::time::Instant::now() < give_up {
            for _ in 0..100_000 {
                x = x.wrapping_mul(31).wrapping_add(7);
            }
            used = meter.used().expect("own stat");
        }
        assert!(x != 1);
        assert!(used >= Duration::from_millis(20), "used {used:?}");
    }
}
