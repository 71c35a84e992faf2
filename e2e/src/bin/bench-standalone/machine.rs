//! What this machine can do without the manager, measured in the same run as the phases it is
//! compared with: the RSA-2048 key generation rate on all its cores, and the CPU each key
//! takes (the rate counts in wall-clock time on a machine that may be shared; the CPU per key
//! does not).

use std::time::{Duration, Instant};

use cfssl_issuer::pki::keys::{Key, KeySpec};
use e2e::harness::cpu;

/// RSA-2048 key generation on all cores.
#[derive(Debug, Clone, Copy)]
pub struct Keygen {
    /// Keys per second, in wall-clock time.
    pub rate: f64,
    pub keys: u64,
    /// CPU per key, the generating threads' own (`/proc/thread-self/stat`).
    pub cpu_per_key: Duration,
    pub cores: usize,
}

impl Keygen {
    /// Keys per second the cores would make with nothing else running: cores / CPU per key.
    pub fn rate_on_idle_cores(&self) -> f64 {
        self.cores as f64 / self.cpu_per_key.as_secs_f64().max(1e-9)
    }
}

/// One thread per core generating RSA-2048 keys for `for_at_least`.
pub fn rsa_2048_keygen_rate(for_at_least: Duration) -> anyhow::Result<Keygen> {
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let start = Instant::now();
    let counts = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| -> anyhow::Result<(u64, Duration)> {
                    let before = cpu::thread_cpu_time().unwrap_or_default();
                    let mut made = 0;
                    while start.elapsed() < for_at_least {
                        Key::generate(KeySpec::Rsa(2048))?;
                        made += 1;
                    }
                    let used = cpu::thread_cpu_time().unwrap_or_default().saturating_sub(before);
                    Ok((made, used))
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .map_err(|_| anyhow::anyhow!("a key generation thread panicked"))?
            })
            .collect::<anyhow::Result<Vec<(u64, Duration)>>>()
    })?;
    let keys: u64 = counts.iter().map(|(made, _)| made).sum();
    let used: Duration = counts.iter().map(|(_, used)| *used).sum();
    Ok(Keygen {
        rate: keys as f64 / start.elapsed().as_secs_f64(),
        keys,
        cpu_per_key: used / u32::try_from(keys.max(1)).unwrap_or(u32::MAX),
        cores: threads,
    })
}
