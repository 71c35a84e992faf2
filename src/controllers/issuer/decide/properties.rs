//! `plan` never panics, whatever the issuer's generation, its previous `Ready` condition, the
//! verdict of the check, the schema and the clock say.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;

use super::{Retry, Verdict, plan};
use crate::api::{Condition, Issuer, IssuerSpec, IssuerStatus, ReadyReason};
use crate::controllers::kit::status::schema::ObservedGeneration;

fn reason() -> impl Strategy<Value = ReadyReason> {
    proptest::sample::select(ReadyReason::ALL.to_vec())
}

fn schema() -> impl Strategy<Value = ObservedGeneration> {
    proptest::sample::select(vec![
        ObservedGeneration::Declared,
        ObservedGeneration::NotDeclared,
        ObservedGeneration::Unreadable,
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn plan_never_panics(
        generation in proptest::option::of(any::<i64>()),
        previous in proptest::option::of((reason(), ".{0,40}", 0i64..4_000_000_000, proptest::option::of(any::<i64>()))),
        verdict in (any::<bool>(), reason(), ".{0,80}", any::<bool>(), any::<bool>()),
        schema in schema(),
        now in 0i64..4_000_000_000,
        interval in 0u64..1_000_000,
    ) {
        let mut issuer = Issuer::new("ca", IssuerSpec::default());
        issuer.metadata.namespace = Some("apps".into());
        issuer.metadata.generation = generation;
        issuer.status = previous.map(|(reason, message, at, observed)| IssuerStatus {
            conditions: vec![Condition::ready(reason, &message, Timestamp::new(at, 0).unwrap(), observed)],
        });
        let (ready, reason, message, backoff, insecure) = verdict;
        let verdict = Verdict {
            ready,
            reason,
            message,
            retry: if backoff { Retry::Backoff } else { Retry::Interval },
            insecure,
        };
        let now = Timestamp::new(now, 0).unwrap();
        let _ = plan(&issuer, &verdict, schema, now, Duration::from_secs(interval));
    }
}
