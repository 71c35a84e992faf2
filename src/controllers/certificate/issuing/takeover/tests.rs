use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, Time};
use serde_json::json;

use super::*;
use crate::certificates::fixtures::{self, at};
use crate::controllers::certificate::status::document;
use crate::controllers::certificate::testing::with_status;
use crate::controllers::kit::plan::{Next, Plan};

const OURS: &str = "cfssl-issuer-issuing";
const CM: &str = "cert-manager-certificates-issuing";

/// What the status apply records.
#[derive(Clone, Copy)]
enum Status {
    None,
    Failure,
    Success,
}

struct Row {
    name: &'static str,
    /// The Secret's managedFields as (manager, operation); `None`: no Secret.
    managers: Option<&'static [(&'static str, &'static str)]>,
    writes_secret: bool,
    status: Status,
    crt_has_failures: bool,
    want: Takeover,
}

fn rows() -> Vec<Row> {
    let released = || Takeover {
        release: vec![CM],
        clear_failures: false,
    };
    vec![
        Row {
            name: "cert-manager's Secret, this plan applies it: released",
            managers: Some(&[(CM, "Apply")]),
            writes_secret: true,
            status: Status::None,
            crt_has_failures: false,
            want: released(),
        },
        Row {
            name: "cert-manager's Secret, not applied by us yet: kept, or its data would go",
            managers: Some(&[(CM, "Apply")]),
            writes_secret: false,
            status: Status::None,
            crt_has_failures: false,
            want: Takeover::default(),
        },
        Row {
            name: "both applied it, no write now: released",
            managers: Some(&[(OURS, "Apply"), (CM, "Apply")]),
            writes_secret: false,
            status: Status::None,
            crt_has_failures: false,
            want: released(),
        },
        Row {
            name: "cert-manager updated it (no apply entry): nothing to release",
            managers: Some(&[(OURS, "Apply"), (CM, "Update")]),
            writes_secret: true,
            status: Status::None,
            crt_has_failures: false,
            want: Takeover::default(),
        },
        Row {
            name: "ours alone",
            managers: Some(&[(OURS, "Apply"), ("kubectl", "Apply")]),
            writes_secret: true,
            status: Status::None,
            crt_has_failures: false,
            want: Takeover::default(),
        },
        Row {
            name: "no Secret",
            managers: None,
            writes_secret: false,
            status: Status::None,
            crt_has_failures: false,
            want: Takeover::default(),
        },
        Row {
            name: "success after a recorded failure: cleared",
            managers: Some(&[(OURS, "Apply")]),
            writes_secret: true,
            status: Status::Success,
            crt_has_failures: true,
            want: Takeover {
                release: vec![],
                clear_failures: true,
            },
        },
        Row {
            name: "success, no failure recorded: nothing to clear",
            managers: Some(&[(OURS, "Apply")]),
            writes_secret: true,
            status: Status::Success,
            crt_has_failures: false,
            want: Takeover::default(),
        },
        Row {
            name: "a failure counted: the record is the point",
            managers: Some(&[(OURS, "Apply")]),
            writes_secret: false,
            status: Status::Failure,
            crt_has_failures: true,
            want: Takeover::default(),
        },
        Row {
            name: "no status write (a repair): nothing to clear",
            managers: Some(&[(OURS, "Apply")]),
            writes_secret: true,
            status: Status::None,
            crt_has_failures: true,
            want: Takeover::default(),
        },
        Row {
            name: "success on cert-manager's Secret after its failure: both",
            managers: Some(&[(CM, "Apply")]),
            writes_secret: true,
            status: Status::Success,
            crt_has_failures: true,
            want: Takeover {
                release: vec![CM],
                clear_failures: true,
            },
        },
    ]
}

fn secret(managers: &[(&str, &str)]) -> Secret {
    let mut secret = Secret::default();
    secret.metadata.name = Some("web-tls".into());
    secret.metadata.managed_fields = Some(
        managers
            .iter()
            .map(|(manager, operation)| ManagedFieldsEntry {
                manager: Some((*manager).into()),
                operation: Some((*operation).into()),
                ..ManagedFieldsEntry::default()
            })
            .collect(),
    );
    secret
}

fn plan(row: &Row, secret: Option<&Secret>) -> FullPlan<()> {
    let status = match row.status {
        Status::None => None,
        Status::Failure => Some(document(json!({
            "revision": 1, "lastFailureTime": "2026-02-01T00:00:00Z", "failedIssuanceAttempts": 2,
        }))),
        Status::Success => Some(document(json!({ "revision": 2 }))),
    };
    let plan = Plan {
        status,
        event: None,
        next: Next::AwaitChange,
    };
    let writes = secret
        .filter(|_| row.writes_secret)
        .map(|s| vec![Write::apply(s)])
        .unwrap_or_default();
    plan.preceded_by(writes)
}

#[test]
fn what_is_taken_over_from_cert_manager() {
    for row in rows() {
        let secret = row.managers.map(secret);
        let crt = with_status(fixtures::certificate("web", fixtures::spec()), |s| {
            s.revision = Some(1);
            if row.crt_has_failures {
                s.last_failure_time = Some(Time(at("2026-02-01T00:00:00Z")));
                s.failed_issuance_attempts = Some(1);
            }
        });
        let plan = plan(&row, secret.as_ref());
        assert_eq!(
            decide(&crt, secret.as_ref(), OURS, &plan),
            row.want,
            "{}",
            row.name
        );
    }
}
