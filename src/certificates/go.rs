//! The few Go standard-library behaviours the messages depend on: `time.ParseDuration`,
//! `time.Duration.String`, `time.Time.String`, `time.RFC1123`, `%v` of a string slice,
//! `strconv.Quote`, `strconv.Atoi` and `json.Marshal` of a string.

use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// A UTC time as Go's `time.Time.String` prints it: `2006-01-02 15:04:05 +0000 UTC`, with the
/// fraction of a second only when there is one.
pub fn time_string(at: Timestamp) -> String {
    let nanos = at.subsec_nanosecond();
    let fraction = if nanos == 0 {
        String::new()
    } else {
        format!(".{nanos:09}").trim_end_matches('0').to_string()
    };
    format!("{}{fraction} +0000 UTC", at.strftime("%Y-%m-%d %H:%M:%S"))
}

/// A UTC time as Go's `time.RFC1123` formats it: `Mon, 02 Jan 2006 15:04:05 UTC`.
pub fn rfc1123(at: Timestamp) -> String {
    at.strftime("%a, %d %b %Y %H:%M:%S UTC").to_string()
}

/// A list as Go's `%v` prints a `[]string`: `[a b c]`.
pub fn list<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> String {
    let items: Vec<S> = items.into_iter().collect();
    let words: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    format!("[{}]", words.join(" "))
}

/// Why a Go duration string does not parse; `Display` is Go's error text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GoDurationError {
    #[error("time: invalid duration {}", time_quote(.0))]
    Invalid(String),
    #[error("time: missing unit in duration {}", time_quote(.0))]
    MissingUnit(String),
    #[error("time: unknown unit {} in duration {}", time_quote(.unit), time_quote(.text))]
    UnknownUnit { unit: String, text: String },
}

const MAX: u64 = 1 << 63;

fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => 1,
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    })
}

/// A Go duration string (`1h30m`, `-1.5s`, `90s`, `0`) exactly as Go's `time.ParseDuration`
/// reads it, with Go's errors. Signed: Go durations may be negative (`renewBefore: -5m` is
/// valid syntax that validation then refuses).
pub fn parse_go_duration(text: &str) -> Result<SignedDuration, GoDurationError> {
    let invalid = || GoDurationError::Invalid(text.to_string());
    let (neg, mut s) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if s == "0" {
        return Ok(SignedDuration::ZERO);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        let (value, rest) = one_term(s, text)?;
        s = rest;
        total = total
            .checked_add(value)
            .filter(|t| *t <= MAX)
            .ok_or_else(invalid)?;
    }
    let nanos = if neg {
        0i64.wrapping_sub_unsigned(total)
    } else {
        i64::try_from(total).map_err(|_| invalid())?
    };
    Ok(SignedDuration::from_nanos(nanos))
}

/// One `[0-9]*(\.[0-9]*)?unit` term of a duration: its nanoseconds and the rest of the text.
fn one_term<'a>(s: &'a str, text: &str) -> Result<(u64, &'a str), GoDurationError> {
    let invalid = || GoDurationError::Invalid(text.to_string());
    let first = s.as_bytes()[0];
    if !(first == b'.' || first.is_ascii_digit()) {
        return Err(invalid());
    }
    let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
    let mut whole: u64 = 0;
    for c in s[..int_len].bytes() {
        if whole > MAX / 10 {
            return Err(invalid());
        }
        whole = whole * 10 + u64::from(c - b'0');
        if whole > MAX {
            return Err(invalid());
        }
    }
    let mut rest = &s[int_len..];
    let (mut frac, mut scale, mut has_frac) = (0u64, 1f64, false);
    if let Some(after_dot) = rest.strip_prefix('.') {
        let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
        let mut overflow = false;
        for c in after_dot[..frac_len].bytes() {
            if overflow || frac > (MAX - 1) / 10 {
                overflow = true;
                continue;
            }
            frac = frac * 10 + u64::from(c - b'0');
            scale *= 10.0;
        }
        has_frac = frac_len > 0;
        rest = &after_dot[frac_len..];
    }
    if int_len == 0 && !has_frac {
        return Err(invalid());
    }
    let unit_len = rest
        .find(|c: char| c == '.' || c.is_ascii_digit())
        .unwrap_or(rest.len());
    if unit_len == 0 {
        return Err(GoDurationError::MissingUnit(text.to_string()));
    }
    let unit = &rest[..unit_len];
    let nanos = unit_nanos(unit).ok_or_else(|| GoDurationError::UnknownUnit {
        unit: unit.to_string(),
        text: text.to_string(),
    })?;
    if whole > MAX / nanos {
        return Err(invalid());
    }
    let mut value = whole * nanos;
    if frac > 0 {
        value += fraction_nanos(frac, nanos, scale);
        if value > MAX {
            return Err(invalid());
        }
    }
    Ok((value, &rest[unit_len..]))
}

/// The nanoseconds of a fraction `frac / scale` of `nanos`, in floating point as Go computes
/// them (both operands are far below 2^53 in practice; the result is truncated as Go truncates).
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_precision_loss
)]
fn fraction_nanos(frac: u64, nanos: u64, scale: f64) -> u64 {
    (frac as f64 * (nanos as f64 / scale)) as u64
}

/// Go's `time.Duration.String()` of `nanos`: `1h0m0s`, `5m0s`, `1.5s`, `300ms`, `0s`.
pub fn format_go_duration(nanos: i64) -> String {
    let neg = nanos < 0;
    let u = nanos.unsigned_abs();
    let body = if u == 0 {
        "0s".to_string()
    } else if u < 1_000 {
        format!("{u}ns")
    } else if u < 1_000_000 {
        format!("{}\u{b5}s", fraction(u, 3))
    } else if u < 1_000_000_000 {
        format!("{}ms", fraction(u, 6))
    } else {
        let secs = fraction(u % 60_000_000_000, 9);
        let minutes = u / 60_000_000_000;
        if minutes == 0 {
            format!("{secs}s")
        } else if minutes < 60 {
            format!("{minutes}m{secs}s")
        } else {
            format!("{}h{}m{secs}s", minutes / 60, minutes % 60)
        }
    };
    if neg { format!("-{body}") } else { body }
}

/// `value / 10^digits` with its fractional part, trailing zeros (and a bare point) dropped.
fn fraction(value: u64, digits: u32) -> String {
    let unit = 10u64.pow(digits);
    let (whole, frac) = (value / unit, value % unit);
    if frac == 0 {
        return whole.to_string();
    }
    let frac = format!("{frac:0width$}", width = digits as usize);
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

/// The `time` package's own quoting in its errors: ASCII as is (with `"` and `\` escaped),
/// everything else as `\x` bytes.
fn time_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        if c.is_ascii() && c >= ' ' {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for byte in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("\\x{byte:02x}"));
            }
        }
    }
    out.push('"');
    out
}

/// Go's `strconv.Quote` (`%q`) for valid UTF-8: printable characters as they are.
pub fn strconv_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if !is_go_printable(c) && (c as u32) < 0x10000 => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if !is_go_printable(c) => out.push_str(&format!("\\U{:08x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An approximation of Go's `strconv.IsPrint` without Unicode tables: control characters,
/// spaces other than U+0020, and the common invisible format characters are not printable.
fn is_go_printable(c: char) -> bool {
    let invisible = matches!(
        c,
        '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{feff}' | '\u{e0001}'..='\u{e007f}'
    );
    !(c.is_control() || (c.is_whitespace() && c != ' ') || invisible)
}

/// Go's `json.Marshal` of a string: as JSON, with `<`, `>`, `&`, U+2028 and U+2029 escaped.
pub fn json_string(s: &str) -> String {
    let json = serde_json::Value::String(s.to_string()).to_string();
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// Go's `json.Marshal` of a `[]string`, `null` when nil (our empty lists).
pub fn json_strings(list: &[String]) -> String {
    if list.is_empty() {
        return "null".to_string();
    }
    let items: Vec<String> = list.iter().map(|s| json_string(s)).collect();
    format!("[{}]", items.join(","))
}

/// Whether Go's `strconv.Atoi` accepts `s`: an optional sign and decimal digits that fit an
/// `int` (64 bits).
pub fn atoi_ok(s: &str) -> bool {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && s.parse::<i64>().is_ok()
}
