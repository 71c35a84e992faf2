//! cert-manager's `ValidateDuration`: lifetime and renewal point of a Certificate.

use super::{FieldError, Value};
use crate::api::certmanager::CertificateSpec;
use crate::certificates::go::{format_go_duration, parse_go_duration};

const MIN_DURATION_NS: i64 = 3_600_000_000_000;
const DEFAULT_DURATION_NS: i64 = 90 * 24 * MIN_DURATION_NS;
const MIN_RENEW_BEFORE_NS: i64 = 300_000_000_000;

/// A duration field's nanoseconds, or its parse error. A value Go cannot decode never reaches
/// cert-manager's rules (the webhook refuses to decode the object); it is reported here on its
/// field with Go's `time.ParseDuration` error.
pub(super) fn duration_field(field: &str, text: &str, el: &mut Vec<FieldError>) -> Option<i64> {
    match parse_go_duration(text) {
        Ok(d) => Some(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)),
        Err(e) => {
            el.push(FieldError::invalid(
                field,
                Value::Str(text.to_string()),
                e.to_string(),
            ));
            None
        }
    }
}

/// cert-manager's `ValidateDuration`, except `renewBeforePercentage`: cert-manager checks the
/// complement `duration * (100 - pct) / 100` (a bug fixed upstream later); this checks the
/// renewBefore the percentage really gives, `duration * pct / 100`, against `[5m, duration)`,
/// with cert-manager's messages. cert-manager skips these rules when neither `duration` nor
/// `renewBefore` is set; a percentage alone is checked here too, against the default 90 days.
pub(super) fn durations(spec: &CertificateSpec, el: &mut Vec<FieldError>) {
    let duration = match &spec.duration {
        None => Some(DEFAULT_DURATION_NS),
        Some(text) => duration_field("spec.duration", text, el),
    };
    let renew_before = match &spec.renew_before {
        None => None,
        Some(text) => match duration_field("spec.renewBefore", text, el) {
            Some(ns) => Some(ns),
            None => return,
        },
    };
    let Some(duration) = duration else { return };
    if duration < MIN_DURATION_NS {
        let msg = format!(
            "certificate duration must be greater than {}",
            format_go_duration(MIN_DURATION_NS)
        );
        el.push(FieldError::invalid("spec.duration", Value::Int(duration), msg));
    }
    let pct = spec.renew_before_percentage;
    if let (Some(rb), Some(pct)) = (renew_before, pct) {
        let msg = "renewBefore and renewBeforePercentage are mutually exclusive and cannot both be set";
        el.push(FieldError::invalid("spec.renewBefore", Value::Int(rb), msg));
        el.push(FieldError::invalid(
            "spec.renewBeforePercentage",
            Value::Int(pct.into()),
            msg,
        ));
    }
    if let Some(rb) = renew_before {
        if rb < MIN_RENEW_BEFORE_NS {
            let msg = format!(
                "certificate renewBefore must be greater than {}",
                format_go_duration(MIN_RENEW_BEFORE_NS)
            );
            el.push(FieldError::invalid("spec.renewBefore", Value::Int(rb), msg));
        }
        if rb >= duration {
            let msg = format!(
                "certificate duration {} must be greater than renewBefore {}",
                format_go_duration(duration),
                format_go_duration(rb)
            );
            el.push(FieldError::invalid("spec.renewBefore", Value::Int(rb), msg));
        }
    }
    if let Some(pct) = pct {
        percentage(duration, pct, el);
    }
}

/// The renewBefore `pct` percent of `duration` gives must lie in `[5m, duration)`.
fn percentage(duration: i64, pct: i32, el: &mut Vec<FieldError>) {
    let effective = percent_of(duration, pct);
    let value = Value::Int(pct.into());
    if effective < MIN_RENEW_BEFORE_NS {
        let msg = format!(
            "certificate renewBeforePercentage must result in a renewBefore greater than {}",
            format_go_duration(MIN_RENEW_BEFORE_NS)
        );
        el.push(FieldError::invalid(
            "spec.renewBeforePercentage",
            value.clone(),
            msg,
        ));
    }
    if effective >= duration {
        let msg = "certificate renewBeforePercentage must result in a renewBefore less than duration";
        el.push(FieldError::invalid("spec.renewBeforePercentage", value, msg));
    }
}

/// `pct` percent of `nanos`, in floating point as cert-manager computes it (no overflow for
/// long durations; the result truncated toward zero, saturating).
#[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
fn percent_of(nanos: i64, pct: i32) -> i64 {
    (nanos as f64 * f64::from(pct) / 100.0) as i64
}
