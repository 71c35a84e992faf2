//! Property-based fuzzing on stable Rust, shared by `tests/fuzz_parsers.rs` and
//! `simple-cfssl/tests/fuzz_requests.rs`.
//!
//! proptest generates and mutates the inputs and catches every panic; this harness adds the two
//! checks proptest does not make:
//!
//! - allocation: a counting global allocator (wrapping the System allocator) keeps each thread's
//!   live and peak heap bytes, and each case's peak above where it started must stay within a
//!   budget the target derives from its input's size (and size cap);
//! - hangs: a watchdog thread aborts the process, naming the target and case, when one case runs
//!   longer than [`HANG_BOUND`]. That is a hang detector, not a performance claim: a case takes
//!   micro- to milliseconds.
//!
//! `FUZZ_CASES` sets the cases per target (default 10,000, what `make test` runs; `make fuzz`
//! runs 1,000,000). `FUZZ_SEED` picks the generator's seed: unset, a fixed one, so CI is
//! deterministic; `random`, a fresh one (printed, so a failure can be replayed with
//! `FUZZ_SEED=<n>`). Nothing is written to disk: proptest's failure persistence is off.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // tests stop at the first surprise

pub mod mutate;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};

/// One case running longer than this is taken for a hang.
pub const HANG_BOUND: Duration = Duration::from_secs(5);

/// Cases per target unless `FUZZ_CASES` says otherwise.
pub const DEFAULT_CASES: u32 = 10_000;

/// The seed used unless `FUZZ_SEED` says otherwise (any fixed number would do).
pub const DEFAULT_SEED: u64 = 0x00c0_ffee;

/// Counts heap bytes per thread; installed as the test binary's allocator below.
pub struct Counting;

thread_local! {
    /// Bytes allocated minus bytes freed on this thread (negative when it frees memory another
    /// thread allocated).
    static LIVE: Cell<isize> = const { Cell::new(0) };
    /// The highest `LIVE` since the last [`reset_peak`].
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn grow(bytes: usize) {
    let bytes = isize::try_from(bytes).unwrap_or(isize::MAX);
    LIVE.with(|live| {
        let now = live.get().saturating_add(bytes);
        live.set(now);
        PEAK.with(|peak| peak.set(peak.get().max(now)));
    });
}

fn shrink(bytes: usize) {
    let bytes = isize::try_from(bytes).unwrap_or(isize::MAX);
    LIVE.with(|live| live.set(live.get().saturating_sub(bytes)));
}

// SAFETY: every call is forwarded to `System` unchanged; the counters are plain thread-local
// cells with const initialisers, which neither allocate nor need a destructor.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            grow(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            grow(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        shrink(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            shrink(layout.size());
            grow(new_size);
        }
        new
    }
}

/// Starts a measurement: returns this thread's live bytes, the base of the next [`peak_since`].
pub fn reset_peak() -> isize {
    let live = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(live));
    live
}

/// The most heap this thread held at once since `base` (from [`reset_peak`]), above `base`.
pub fn peak_since(base: isize) -> usize {
    usize::try_from(PEAK.with(Cell::get) - base).unwrap_or(0)
}

/// `FUZZ_CASES`, or [`DEFAULT_CASES`].
pub fn cases() -> u32 {
    match std::env::var("FUZZ_CASES") {
        Ok(n) => n.trim().parse().expect("FUZZ_CASES is a whole number"),
        Err(_) => DEFAULT_CASES,
    }
}

/// `FUZZ_SEED`: unset is [`DEFAULT_SEED`], `random` a fresh seed, else the number given.
pub fn seed() -> u64 {
    match std::env::var("FUZZ_SEED").as_deref() {
        Err(_) => DEFAULT_SEED,
        Ok("random") => {
            let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
            // Any 64 bits of the clock make a seed.
            u64::try_from(nanos % u128::from(u64::MAX)).unwrap()
                ^ u64::from(std::process::id()).rotate_left(32)
        }
        Ok(n) => n.trim().parse().expect("FUZZ_SEED is `random` or a number"),
    }
}

/// The watchdog: aborts the process when a case has been running longer than [`HANG_BOUND`].
struct Watchdog {
    /// Milliseconds since `epoch` when the running case started, plus one; 0 when idle.
    started: Arc<AtomicU64>,
    case: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
    epoch: Instant,
}

impl Watchdog {
    fn start(name: &'static str, seed: u64) -> Watchdog {
        let started = Arc::new(AtomicU64::new(0));
        let case = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let epoch = Instant::now();
        let (s, c, d) = (started.clone(), case.clone(), done.clone());
        std::thread::spawn(move || {
            while !d.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let began = s.load(Ordering::Relaxed);
                let now = u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
                if began != 0
                    && now.saturating_sub(began - 1) > u64::try_from(HANG_BOUND.as_millis()).unwrap()
                {
                    let case = c.load(Ordering::Relaxed);
                    eprintln!(
                        "fuzz {name}: case {case} has run over {HANG_BOUND:?}: a hang \
                         (replay with FUZZ_SEED={seed})"
                    );
                    std::process::abort();
                }
            }
        });
        Watchdog {
            started,
            case,
            done,
            epoch,
        }
    }

    fn begin(&self, case: u64) {
        self.case.store(case, Ordering::Relaxed);
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
        self.started.store(now + 1, Ordering::Relaxed);
    }

    fn end(&self) {
        self.started.store(0, Ordering::Relaxed);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

/// Runs `case` on [`cases`] inputs from `strategy`. A case fails when it panics (a property
/// `case` asserts, or the parser itself), when its peak heap exceeds `budget(input)` bytes, or
/// when it runs over [`HANG_BOUND`]. `case` returns whether the parser accepted the input.
/// Prints `fuzz NAME: N cases, 0 failures` when all pass, with how many were accepted and the
/// highest share of its budget a case used.
pub fn run<S>(
    name: &'static str,
    strategy: S,
    budget: impl Fn(&S::Value) -> usize,
    case: impl Fn(&S::Value) -> bool,
) where
    S: Strategy,
    S::Value: std::fmt::Debug,
{
    let seed = seed();
    let cases = cases();
    let config = Config {
        cases,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(seed),
        max_shrink_iters: 2_000,
        ..Config::default()
    };
    let watchdog = Watchdog::start(name, seed);
    let count = AtomicU64::new(0);
    let accepted = AtomicU64::new(0);
    let worst = std::sync::Mutex::new(0f64);
    let started = Instant::now();
    let result = TestRunner::new(config).run(&strategy, |input| {
        let limit = budget(&input);
        let n = count.fetch_add(1, Ordering::Relaxed);
        watchdog.begin(n);
        let base = reset_peak();
        let began = Instant::now();
        let ok = case(&input);
        let took = began.elapsed();
        let peak = peak_since(base);
        watchdog.end();
        accepted.fetch_add(u64::from(ok), Ordering::Relaxed);
        let mut worst = worst.lock().unwrap();
        *worst = worst.max(peak as f64 / limit as f64);
        drop(worst);
        if took > HANG_BOUND {
            return Err(TestCaseError::fail(format!("ran {took:?}, over the hang bound")));
        }
        if peak > limit {
            return Err(TestCaseError::fail(format!(
                "allocated {peak} bytes at peak, over its budget of {limit}"
            )));
        }
        Ok(())
    });
    drop(watchdog);
    if let Err(err) = result {
        panic!("fuzz {name} (FUZZ_SEED={seed}): {err}");
    }
    // Counted over every case run, which is `cases` when none failed.
    let accepted = accepted.load(Ordering::Relaxed);
    let worst = *worst.lock().unwrap();
    println!(
        "fuzz {name}: {cases} cases, 0 failures ({accepted} accepted, peak heap at most {:.0}% of \
         budget, {:.1} s, seed {seed})",
        worst * 100.0,
        started.elapsed().as_secs_f64()
    );
}
