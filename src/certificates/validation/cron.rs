//! Syntax checks of a renewal window: robfig/cron's standard parser (minute, hour, day of month,
//! month, day of week, or a descriptor) with its errors, and Go's `time.LoadLocation`.

use std::path::Path;

/// The directories Go's `time.LoadLocation` reads zone files from (after `$ZONEINFO`).
const ZONE_DIRS: &[&str] = &[
    "/usr/share/zoneinfo/",
    "/usr/share/lib/zoneinfo/",
    "/usr/lib/locale/TZ/",
    "/etc/zoneinfo/",
];

/// Go's `time.LoadLocation` error for `name`, `None` when it loads: `""`, `UTC` and `Local`
/// always do; other names must be a TZif file in the system's zone database (cert-manager
/// bundles none, so it sees the same database).
pub fn load_location_error(name: &str) -> Option<String> {
    if name.is_empty() || name == "UTC" || name == "Local" {
        return None;
    }
    if name.contains("..") || name.starts_with('/') || name.starts_with('\\') {
        return Some("time: invalid location name".to_string());
    }
    let env = std::env::var("ZONEINFO").ok().map(|dir| format!("{dir}/"));
    let found = env
        .iter()
        .map(String::as_str)
        .chain(ZONE_DIRS.iter().copied())
        .any(|dir| is_tzif(&Path::new(dir).join(name)));
    if found {
        None
    } else {
        Some(format!("unknown time zone {name}"))
    }
}

fn is_tzif(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == b"TZif"
}

struct Bounds {
    min: u64,
    max: u64,
    names: &'static [(&'static str, u64)],
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
const DOM: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
};
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
};
const DOW: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &[
        ("sun", 0),
        ("mon", 1),
        ("tue", 2),
        ("wed", 3),
        ("thu", 4),
        ("fri", 5),
        ("sat", 6),
    ],
};

/// cert-manager's `CronParse` error for `cron` in `time_zone`, `None` when it parses.
pub fn cron_error(cron: &str, time_zone: &str) -> Option<String> {
    let spec = if time_zone.is_empty() {
        cron.to_string()
    } else {
        format!("CRON_TZ={time_zone} {cron}")
    };
    parse(&spec)
        .err()
        .map(|e| format!("failed to parse cron spec '{cron}': {e}"))
}

/// robfig/cron's `Parse` with the standard fields plus descriptors.
fn parse(spec: &str) -> Result<(), String> {
    if spec.is_empty() {
        return Err("empty spec string".to_string());
    }
    let mut spec = spec;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        let eq = spec.find('=').unwrap_or(0);
        // Go slices to the first space; with none, its slice panics, which the API server's
        // recovery reports as an internal error: refuse it plainly here.
        let space = spec
            .find(' ')
            .filter(|i| *i > eq)
            .ok_or("provided bad location: no space after the time zone")?;
        let zone = &spec[eq + 1..space];
        if let Some(e) = load_location_error(zone) {
            return Err(format!("provided bad location {zone}: {e}"));
        }
        spec = spec[space..].trim();
    }
    if spec.starts_with('@') {
        return descriptor(spec);
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    for (field, bounds) in fields.iter().zip([&MINUTES, &HOURS, &DOM, &MONTHS, &DOW]) {
        for expr in field.split(',').filter(|e| !e.is_empty()) {
            range(expr, bounds)?;
        }
    }
    Ok(())
}

fn descriptor(spec: &str) -> Result<(), String> {
    match spec {
        "@yearly" | "@annually" | "@monthly" | "@weekly" | "@daily" | "@midnight" | "@hourly" => Ok(()),
        _ => match spec.strip_prefix("@every ") {
            Some(duration) => super::go::parse_go_duration(duration)
                .map(|_| ())
                .map_err(|e| format!("failed to parse duration {spec}: {e}")),
            None => Err(format!("unrecognized descriptor: {spec}")),
        },
    }
}

fn range(expr: &str, r: &Bounds) -> Result<(), String> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let (start, mut end) = if low_and_high[0] == "*" || low_and_high[0] == "?" {
        (r.min, r.max)
    } else {
        let start = int_or_name(low_and_high[0], r)?;
        match low_and_high.len() {
            1 => (start, start),
            2 => (start, int_or_name(low_and_high[1], r)?),
            _ => return Err(format!("too many hyphens: {expr}")),
        }
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = must_parse_int(range_and_step[1])?;
            if low_and_high.len() == 1 {
                end = r.max;
            }
            step
        }
        _ => return Err(format!("too many slashes: {expr}")),
    };
    if start < r.min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            r.min
        ));
    }
    if end > r.max {
        return Err(format!("end of range ({end}) above maximum ({}): {expr}", r.max));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    Ok(())
}

fn int_or_name(expr: &str, r: &Bounds) -> Result<u64, String> {
    let lower = expr.to_lowercase();
    match r.names.iter().find(|(name, _)| *name == lower) {
        Some((_, value)) => Ok(*value),
        None => must_parse_int(expr),
    }
}

/// robfig's `mustParseInt`, with Go's `strconv.Atoi` error inside its message.
fn must_parse_int(expr: &str) -> Result<u64, String> {
    let num: i64 = match expr.parse::<i64>() {
        Ok(n) if super::go::atoi_ok(expr) => n,
        _ => {
            let digits = expr.strip_prefix(['+', '-']).unwrap_or(expr);
            let reason = if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                "value out of range"
            } else {
                "invalid syntax"
            };
            let quoted = super::go::strconv_quote(expr);
            return Err(format!(
                "failed to parse int from {expr}: strconv.Atoi: parsing {quoted}: {reason}"
            ));
        }
    };
    if num < 0 {
        return Err(format!("negative number ({num}) not allowed: {expr}"));
    }
    Ok(num.unsigned_abs())
}
