//! cert-manager's `validateCertificateRenewal`: the policy, and each window's duration, time
//! zone and cron syntax.

use super::durations::duration_field;
use super::{FieldError, Value};
use crate::api::certmanager::{CertificateSpec, RenewalWindow};
use crate::certificates::go::json_string;
use crate::certificates::renewal::cron::{Schedule, load_location};

pub(super) fn renewal(spec: &CertificateSpec, el: &mut Vec<FieldError>) {
    let Some(renewal) = &spec.renewal else { return };
    match renewal.policy.as_str() {
        "RenewBefore" => {}
        "Disabled" => {
            if !renewal.windows.is_empty() {
                el.push(FieldError::forbidden(
                    "spec.renewal.windows",
                    "windows cannot be set when `renewal.policy` is set to Disabled",
                ));
            }
            return;
        }
        other => el.push(FieldError::not_supported(
            "spec.renewal.policy",
            Value::Json(json_string(other)),
            &["Disabled", "RenewBefore"],
        )),
    }
    for (i, window) in renewal.windows.iter().enumerate() {
        window_errors(window, &format!("spec.renewal.windows[{i}]"), el);
    }
}

fn window_errors(window: &RenewalWindow, path: &str, el: &mut Vec<FieldError>) {
    let duration_path = format!("{path}.windowDuration");
    if window.window_duration.is_empty() {
        let msg = "windowDuration must be specified and should be greater than 0";
        el.push(FieldError::required(duration_path, msg));
    } else {
        duration_field(&duration_path, &window.window_duration, el);
    }
    if !window.timezone.is_empty() && load_location(&window.timezone).is_err() {
        el.push(FieldError::invalid(
            format!("{path}.timezone"),
            Value::Str(window.timezone.clone()),
            "invalid value for timezone. timezone must be IANA compliant",
        ));
    }
    if let Err(e) = Schedule::for_window(&window.cron, &window.timezone) {
        let e = format!("failed to parse cron spec '{}': {e}", window.cron);
        el.push(FieldError::invalid(
            format!("{path}.cron"),
            Value::Str(window.cron.clone()),
            format!("invalid cron syntax: {e}. cron needs to follow: cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow"),
        ));
    }
}
