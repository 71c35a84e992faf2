//! What this machine can do without the manager, measured in the same run as the phases it is
//! compared with: the RSA-2048 key generation rate on all its cores.

use std::time::{Duration, Instant};

use cfssl_issuer::pki::keys::{Key, KeySpec};

/// RSA-2048 keys per second, one thread per core generating keys for `for_at_least`.
pub fn rsa_2048_keygen_rate(for_at_least: Duration) -> anyhow::Result<f64> {
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let start = Instant::now();
    let counts = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| -> anyhow::Result<u64> {
                    let mut made = 0;
                    while start.elapsed() < for_at_least {
                        Key::generate(KeySpec::Rsa(2048))?;
                        made += 1;
                    }
                    Ok(made)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .map_err(|_| anyhow::anyhow!("a key generation thread panicked"))?
            })
            .collect::<anyhow::Result<Vec<u64>>>()
    })?;
    let made: u64 = counts.iter().sum();
    Ok(made as f64 / start.elapsed().as_secs_f64())
}
