//! The time source, injected so every decision (and every CFSSL token) can be tested at any
//! instant, and the one lock helper the manager's in-memory maps share.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use k8s_openapi::jiff::Timestamp;

/// Now, as the manager sees it.
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// The wall clock.
pub fn system_clock() -> Clock {
    Arc::new(Timestamp::now)
}

/// A clock that always says `at`.
pub fn fixed_clock(at: Timestamp) -> Clock {
    Arc::new(move || at)
}

/// Locks `mutex`, carrying on past a panic in another holder: every map guarded this way
/// holds plain bookkeeping that stays consistent between statements.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
