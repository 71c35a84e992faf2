//! Cron schedules as cert-manager reads `renewal.windows[].cron`: robfig/cron's parser with the
//! five standard fields (minute, hour, day of month, month, day of week), the descriptors
//! (`@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`,
//! `@every <duration>`) and an optional `CRON_TZ=<IANA>` (or `TZ=`) prefix.
//!
//! Written here because the cron crates differ from robfig exactly where a renewal window
//! would shift: Quartz day-of-week numbering (Sunday = 1), a mandatory seconds field, or day of
//! month AND day of week where robfig ORs them when neither is `*`. The search walks civil time
//! in the schedule's zone as robfig does and gives up after five years (robfig's zero time).

use std::time::Duration;

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{SignedDuration, Timestamp, ToSpan};

use crate::certificates::go::{GoDurationError, parse_go_duration};

/// Why a cron spec was refused; the texts are robfig's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    #[error("empty spec string")]
    Empty,
    #[error("provided bad location {0}: {1}")]
    Location(String, String),
    #[error("unrecognized descriptor: {0}")]
    Descriptor(String),
    #[error("failed to parse duration {0}: {1}")]
    Every(String, #[source] GoDurationError),
    /// robfig prints the fields as a Go slice.
    #[error("expected exactly 5 fields, found {found}: [{fields}]")]
    FieldCount { found: usize, fields: String },
    #[error("{0}")]
    Field(String),
}

/// A parsed schedule and the zone its fields are read in.
#[derive(Debug, Clone)]
pub struct Schedule {
    kind: Kind,
    zone: TimeZone,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Fields(Fields),
    /// `@every`: a constant delay, whole seconds, at least one.
    Every(Duration),
}

/// One bit per allowed value; `*_star` as robfig's star bit (the field was `*` or `?`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fields {
    minute: u64,
    hour: u64,
    dom: u64,
    month: u64,
    dow: u64,
    dom_star: bool,
    dow_star: bool,
}

struct Bounds {
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const MINUTES: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const HOURS: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
};
const DAYS: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
};
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
const WEEKDAYS: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
};

impl Schedule {
    /// Parses `spec` as cert-manager does for a window: with a non-empty `zone`, as
    /// `CRON_TZ=<zone> <spec>`.
    pub fn for_window(spec: &str, zone: &str) -> Result<Self, CronError> {
        if zone.is_empty() {
            Self::parse(spec)
        } else {
            Self::parse(&format!("CRON_TZ={zone} {spec}"))
        }
    }

    pub fn parse(spec: &str) -> Result<Self, CronError> {
        let spec = spec.trim();
        if spec.is_empty() {
            return Err(CronError::Empty);
        }
        let (zone, rest) = match spec.strip_prefix("CRON_TZ=").or_else(|| spec.strip_prefix("TZ=")) {
            Some(prefixed) => {
                let (name, rest) = prefixed.split_once(' ').unwrap_or((prefixed, ""));
                let zone = load_location(name).map_err(|why| CronError::Location(name.to_string(), why))?;
                (zone, rest.trim())
            }
            None => (TimeZone::UTC, spec),
        };
        let kind = if rest.starts_with('@') {
            descriptor(rest)?
        } else {
            Kind::Fields(fields(rest)?)
        };
        Ok(Self { kind, zone })
    }

    /// The first activation strictly after `after`, or `None` when there is none within five
    /// years.
    pub fn next(&self, after: Timestamp) -> Option<Timestamp> {
        match &self.kind {
            Kind::Every(delay) => {
                let step = SignedDuration::try_from(*delay).ok()?;
                let whole = Timestamp::from_second(after.as_second()).ok()?;
                whole.checked_add(step).ok()
            }
            Kind::Fields(fields) => {
                let local = after.to_zoned(self.zone.clone()).datetime();
                let mut from = truncate_to_second(local.checked_add(1.second()).ok()?);
                // A wall time the zone skips (a DST gap) never fires, as in robfig: search on
                // from the wall time after the gap. A repeated one (a fold) fires at its first
                // instant after `after`: the second one when `after` lies between the two.
                for _ in 0..GAPS_IN_A_ROW {
                    let civil = fields.next_civil(from)?;
                    let found = self.zone.to_ambiguous_zoned(civil);
                    match found.offset() {
                        AmbiguousOffset::Unambiguous { .. } => {
                            return Some(found.compatible().ok()?.timestamp());
                        }
                        AmbiguousOffset::Gap { .. } => from = found.compatible().ok()?.datetime(),
                        AmbiguousOffset::Fold { .. } => {
                            let instants = [found.clone().earlier().ok()?, found.later().ok()?];
                            if let Some(zoned) = instants.into_iter().find(|z| z.timestamp() > after) {
                                return Some(zoned.timestamp());
                            }
                            from = civil.checked_add(1.second()).ok()?;
                        }
                    }
                }
                None
            }
        }
    }
}

/// A zone by name as Go's `time.LoadLocation` finds it, with Go's error text: `""` and `UTC`
/// are UTC, `Local` the machine's zone, anything else an IANA name in the zone database.
pub fn load_location(name: &str) -> Result<TimeZone, String> {
    match name {
        "" | "UTC" => return Ok(TimeZone::UTC),
        "Local" => return Ok(TimeZone::system()),
        _ => {}
    }
    if name.contains("..") || name.starts_with('/') || name.starts_with('\\') {
        return Err("time: invalid location name".to_string());
    }
    TimeZone::get(name).map_err(|_| format!("unknown time zone {name}"))
}

/// More DST gaps in a row than any zone has: the search stops rather than loop.
const GAPS_IN_A_ROW: usize = 4;

fn truncate_to_second(dt: DateTime) -> DateTime {
    dt.with().subsec_nanosecond(0).build().unwrap_or(dt)
}

fn descriptor(spec: &str) -> Result<Kind, CronError> {
    let standard = match spec {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        _ => return every(spec),
    };
    fields(standard).map(Kind::Fields)
}

fn every(spec: &str) -> Result<Kind, CronError> {
    let Some(text) = spec.strip_prefix("@every ") else {
        return Err(CronError::Descriptor(spec.to_string()));
    };
    let parsed = parse_go_duration(text).map_err(|e| CronError::Every(spec.to_string(), e))?;
    // robfig rounds down to whole seconds and never waits less than one.
    let seconds = u64::try_from(parsed.as_secs()).unwrap_or(0).max(1);
    Ok(Kind::Every(Duration::from_secs(seconds)))
}

fn fields(spec: &str) -> Result<Fields, CronError> {
    let parts: Vec<&str> = spec.split_whitespace().collect();
    let [minute, hour, dom, month, dow] = parts[..] else {
        return Err(CronError::FieldCount {
            found: parts.len(),
            fields: parts.join(" "),
        });
    };
    let month_days = field(dom, &DAYS)?;
    let week_days = field(dow, &WEEKDAYS)?;
    Ok(Fields {
        minute: field(minute, &MINUTES)?.0,
        hour: field(hour, &HOURS)?.0,
        dom: month_days.0,
        month: field(month, &MONTHS)?.0,
        dow: week_days.0,
        dom_star: month_days.1,
        dow_star: week_days.1,
    })
}

/// A comma-separated field: its bits and whether any part was a bare `*` or `?`.
fn field(text: &str, bounds: &Bounds) -> Result<(u64, bool), CronError> {
    let mut bits = 0;
    let mut star = false;
    for part in text.split(',') {
        let (part_bits, part_star) = range(part, bounds)?;
        bits |= part_bits;
        star |= part_star;
    }
    Ok((bits, star))
}

fn range(expr: &str, bounds: &Bounds) -> Result<(u64, bool), CronError> {
    let fail = |message: String| Err(CronError::Field(message));
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let single = low_and_high.len() == 1;
    let (start, mut end, mut star) = if matches!(low_and_high[0], "*" | "?") {
        (bounds.min, bounds.max, true)
    } else {
        let start = value(low_and_high[0], bounds)?;
        let end = match low_and_high.len() {
            1 => start,
            2 => value(low_and_high[1], bounds)?,
            _ => return fail(format!("too many hyphens: {expr}")),
        };
        (start, end, false)
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = number(range_and_step[1])?;
            // "N/step" means "N-max/step".
            if single {
                end = bounds.max;
            }
            if step > 1 {
                star = false;
            }
            step
        }
        _ => return fail(format!("too many slashes: {expr}")),
    };
    if start < bounds.min {
        return fail(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            bounds.min
        ));
    }
    if end > bounds.max {
        return fail(format!(
            "end of range ({end}) above maximum ({}): {expr}",
            bounds.max
        ));
    }
    if start > end {
        return fail(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return fail(format!("step of range should be a positive number: {expr}"));
    }
    let bits = (start..=end)
        .step_by(step as usize)
        .fold(0u64, |bits, v| bits | 1 << v);
    Ok((bits, star))
}

fn value(text: &str, bounds: &Bounds) -> Result<u32, CronError> {
    let lower = text.to_ascii_lowercase();
    match bounds.names.iter().position(|name| *name == lower) {
        Some(index) => Ok(u32::try_from(index).unwrap_or(0) + bounds.min),
        None => number(text),
    }
}

fn number(text: &str) -> Result<u32, CronError> {
    let parsed: i64 = text.parse().map_err(|_| {
        CronError::Field(format!(
            "failed to parse int from {text}: strconv.Atoi: parsing {text:?}: invalid syntax"
        ))
    })?;
    u32::try_from(parsed)
        .map_err(|_| CronError::Field(format!("negative number ({parsed}) not allowed: {text}")))
}

impl Fields {
    fn day_matches(&self, date: Date) -> bool {
        let dom = self.dom & 1 << date.day() != 0;
        let dow = self.dow & 1 << date.weekday().to_sunday_zero_offset() != 0;
        if self.dom_star || self.dow_star {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// robfig's search over civil time: month, then day, hour and minute, wrapping to the next
    /// year when a field rolls over; seconds are always zero for five-field specs.
    fn next_civil(&self, start: DateTime) -> Option<DateTime> {
        let limit = start.year() + 5;
        let mut t = start;
        if t.second() != 0 {
            t = at(t.date(), t.hour(), t.minute()).checked_add(1.minute()).ok()?;
        }
        while t.year() <= limit {
            if self.month & 1 << t.month() == 0 {
                t = at(t.date().first_of_month(), 0, 0).checked_add(1.month()).ok()?;
            } else if !self.day_matches(t.date()) {
                t = at(t.date(), 0, 0).checked_add(1.day()).ok()?;
            } else if self.hour & 1 << t.hour() == 0 {
                t = at(t.date(), t.hour(), 0).checked_add(1.hour()).ok()?;
            } else if self.minute & 1 << t.minute() == 0 {
                t = t.checked_add(1.minute()).ok()?;
            } else {
                return Some(t);
            }
        }
        None
    }
}

fn at(date: Date, hour: i8, minute: i8) -> DateTime {
    date.to_datetime(Time::new(hour, minute, 0, 0).unwrap_or(Time::midnight()))
}

#[cfg(test)]
mod tests;
