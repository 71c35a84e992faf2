//! Renewal windows (`spec.renewal.windows`): the renewal time moves into a cron window, as
//! cert-manager's `applyRenewBeforeWithWindows` does.
//!
//! The desired time stands if it lies inside a window (a cron start `S` with
//! `S <= desired <= S + windowDuration`); otherwise the earliest cron start after it wins; the
//! search runs from `notBefore - windowDuration` to `notAfter + windowDuration`, so a window can
//! put the renewal after expiry (the lifecycle controllers guard that). When no window fits,
//! the desired time comes back with an error, which cert-manager reports as `WindowError`.

use jiff::{SignedDuration, Timestamp};

use super::cron::{CronError, Schedule, load_location};
use crate::api::certmanager::RenewalWindow;
use crate::certificates::go::{parse_go_duration, time_string};

/// Why windows could not place a renewal; the messages are cert-manager's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    #[error("error parsing timezone in window {0}")]
    Timezone(String),
    #[error("error parsing cron in window failed to parse cron spec '{spec}': {source}")]
    Cron {
        spec: String,
        #[source]
        source: CronError,
    },
    #[error("windowDuration must be a positive duration in window {{{cron} {timezone} {duration}}}")]
    Duration {
        cron: String,
        timezone: String,
        duration: String,
    },
    /// The desired time is returned with this error: the caller may still renew at it.
    #[error("cannot find a time with the given windows between {} and {} for: {}", time_string(*.not_before), time_string(*.not_after), time_string(*.desired))]
    NoWindow {
        not_before: Timestamp,
        not_after: Timestamp,
        desired: Timestamp,
    },
}

/// A window ready to search: its schedule and how long it stays open.
struct Window {
    schedule: Schedule,
    open: SignedDuration,
}

fn window(spec: &RenewalWindow) -> Result<Window, WindowError> {
    load_location(&spec.timezone).map_err(WindowError::Timezone)?;
    let schedule = Schedule::for_window(&spec.cron, &spec.timezone).map_err(|source| WindowError::Cron {
        spec: spec.cron.clone(),
        source,
    })?;
    let open = parse_go_duration(&spec.window_duration)
        .ok()
        .filter(SignedDuration::is_positive)
        .ok_or_else(|| WindowError::Duration {
            cron: spec.cron.clone(),
            timezone: spec.timezone.clone(),
            duration: spec.window_duration.clone(),
        })?;
    Ok(Window { schedule, open })
}

/// The renewal time `desired` moved into `windows` (unchanged when there are none).
pub fn within_windows(
    not_before: Timestamp,
    not_after: Timestamp,
    desired: Timestamp,
    windows: &[RenewalWindow],
) -> Result<Timestamp, WindowError> {
    if windows.is_empty() {
        return Ok(desired);
    }
    let mut inside = false;
    let mut after: Option<Timestamp> = None;
    for spec in windows {
        let w = window(spec)?;
        let (Ok(low), Ok(high)) = (not_before.checked_sub(w.open), not_after.checked_add(w.open)) else {
            continue;
        };
        inside |= contains(&w, low, high, desired);
        if let Some(start) = first_start_after(&w, low, high, desired) {
            after = Some(after.map_or(start, |best| best.min(start)));
        }
    }
    match (inside, after) {
        (true, _) => Ok(desired),
        (false, Some(start)) => Ok(start),
        (false, None) => Err(WindowError::NoWindow {
            not_before,
            not_after,
            desired,
        }),
    }
}

/// Whether the latest window start in `[low, min(desired, high)]` keeps the window open at
/// `desired`.
fn contains(w: &Window, low: Timestamp, high: Timestamp, desired: Timestamp) -> bool {
    if desired < low {
        return false;
    }
    latest_start(&w.schedule, low, desired.min(high))
        .and_then(|start| start.checked_add(w.open).ok())
        .is_some_and(|end| desired <= end)
}

/// The first window start at or after `max(desired, low)`, if it is not beyond `high`; a start
/// equal to `desired` gives `desired` itself.
fn first_start_after(w: &Window, low: Timestamp, high: Timestamp, desired: Timestamp) -> Option<Timestamp> {
    let from = desired.max(low);
    let start = w
        .schedule
        .next(from.checked_sub(SignedDuration::from_secs(1)).ok()?)?;
    (start <= high && start >= desired).then_some(start)
}

/// The latest start `S` with `low <= S <= high`, by bisection over `next` (cert-manager's
/// search, to the second).
fn latest_start(schedule: &Schedule, low: Timestamp, high: Timestamp) -> Option<Timestamp> {
    let one = SignedDuration::from_secs(1);
    if low >= high || schedule.next(low.checked_sub(one).ok()?)? > high {
        return None;
    }
    let (mut low, mut high_bound) = (low, high);
    while high_bound.duration_since(low) > one {
        let mid = low.checked_add(high_bound.duration_since(low) / 2).ok()?;
        match schedule.next(mid) {
            Some(next) if next <= high => low = mid,
            _ => high_bound = mid,
        }
    }
    schedule
        .next(low.checked_sub(one).ok()?)
        .filter(|last| *last <= high)
}

#[cfg(test)]
mod tests;
