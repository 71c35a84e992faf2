//! What the Certificate controllers' tables share: reading a plan's status document back.

use serde_json::Value;

use crate::api::certmanager::{Certificate, CertificateCondition, CertificateStatus};
use crate::controllers::kit::plan::{FullPlan, Plan, Write};

/// The condition of `type_` a plan's status apply carries, as (status, reason, message).
pub fn applied_condition<W>(plan: &Plan<W>, type_: &str) -> Option<(String, String, String)> {
    let conditions = plan
        .status
        .as_ref()?
        .get("status")?
        .get("conditions")?
        .as_array()?;
    let c: CertificateCondition = conditions
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
        .and_then(|c| serde_json::from_value(c.clone()).ok())?;
    Some((c.status, c.reason, c.message))
}

/// A plan's event as (type, reason, note).
pub fn event<W>(plan: &Plan<W>) -> Option<(String, String, String)> {
    plan.event
        .as_ref()
        .map(|e| (format!("{:?}", e.type_), e.reason.to_string(), e.note.clone()))
}

/// `crt` with `status` set by `f`.
pub fn with_status(mut crt: Certificate, f: impl FnOnce(&mut CertificateStatus)) -> Certificate {
    f(crt.status.get_or_insert_with(CertificateStatus::default));
    crt
}

/// `crt` with the condition `type_` = `status` (reason, since `at`).
pub fn with_condition(crt: Certificate, type_: &str, status: &str, reason: &str, at: &str) -> Certificate {
    with_status(crt, |s| {
        s.conditions.retain(|c| c.type_ != type_);
        s.conditions.push(CertificateCondition {
            type_: type_.to_string(),
            status: status.to_string(),
            reason: reason.to_string(),
            last_transition_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                crate::certificates::fixtures::at(at),
            )),
            ..CertificateCondition::default()
        });
    })
}

/// The names a plan deletes, in order.
pub fn deleted<W>(plan: &FullPlan<W>) -> Vec<&str> {
    plan.writes()
        .filter_map(|w| match w {
            Write::Delete { object, .. } => Some(object.name.as_str()),
            _ => None,
        })
        .collect()
}

/// Renewal windows that open only at 10:00 on June 1st, for two hours: the tables' case of a
/// renewal time the windows cannot place (`WindowError`).
pub fn unplaceable_renewal() -> crate::api::certmanager::Renewal {
    crate::api::certmanager::Renewal {
        windows: vec![crate::api::certmanager::RenewalWindow {
            cron: "0 10 1 6 *".to_string(),
            window_duration: "2h".to_string(),
            ..Default::default()
        }],
        policy: "RenewBefore".to_string(),
        ..Default::default()
    }
}
