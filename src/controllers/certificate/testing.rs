//! What the Certificate controllers' tables share: reading a plan's status document back.

use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use kube::client::Body;
use serde_json::Value;

use super::{CertificateContext, Settings};
use crate::controllers::kit::Shared;
use crate::csi::testing::ApiHandle;

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

/// A Certificate controllers' context whose API is scripted request by request (tower-test),
/// at a fixed clock.
pub fn scripted() -> (Arc<CertificateContext>, ApiHandle) {
    scripted_with_secrets(Vec::new())
}

/// [`scripted`], with `secrets` in the Secret store.
pub fn scripted_with_secrets(
    secrets: Vec<k8s_openapi::api::core::v1::Secret>,
) -> (Arc<CertificateContext>, ApiHandle) {
    scripted_with(secrets, Vec::new())
}

/// [`scripted`], with `secrets` in the Secret store and `requests` in the request store (and
/// their indexes).
pub fn scripted_with(
    secrets: Vec<k8s_openapi::api::core::v1::Secret>,
    requests: Vec<crate::api::certmanager::CertificateRequest>,
) -> (Arc<CertificateContext>, ApiHandle) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let now = "2026-11-27T12:00:00Z".parse().unwrap();
    let shared = Arc::new(Shared {
        client: kube::Client::new(service, "default"),
        config: crate::controllers::kit::Config::new("cfssl-system"),
        clock: crate::clock::fixed_clock(now),
        metrics: Arc::default(),
        status_schemas: crate::controllers::kit::status::schema::StatusSchemas::default(),
        crypto: crate::crypto_pool::CryptoPool::new(2),
    });
    let settings = Settings {
        approve_own_requests: true,
        minimum_backoff: Duration::from_secs(1),
        maximum_backoff: Duration::from_secs(60),
        cert_manager_lease_namespace: "cert-manager".into(),
        owner_reference: false,
        copied_annotation_prefixes: Vec::new(),
        renewal_jitter: crate::certificates::renewal::Jitter::default(),
    };
    let stores = (
        kube::runtime::reflector::store().0,
        filled(requests),
        filled(secrets),
    );
    (
        Arc::new(CertificateContext::new(shared, settings, stores)),
        handle,
    )
}

/// A store holding `objects`.
pub fn filled<K>(objects: Vec<K>) -> kube::runtime::reflector::Store<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    let (store, mut writer) = kube::runtime::reflector::store();
    for object in objects {
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(object));
    }
    store
}
