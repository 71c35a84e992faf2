//! CFSSL errors for the decide tables.

use crate::cfssl::{Attempt, Call, Class, Error, Failure};

pub fn refused(message: &str, class: Class) -> Error {
    Attempt::new(Call::AuthSign, "http://ca", "l").failed(Failure::Refused {
        status: 400,
        code: 1,
        message: message.into(),
        class,
    })
}

pub fn unreachable(call: Call) -> Error {
    Attempt::new(call, "http://ca", "l").failed(Failure::Unreachable("connection refused".into()))
}

pub fn tls(cause: &str) -> Error {
    Attempt::new(Call::Info, "https://ca", "l").failed(Failure::Tls(cause.into()))
}

/// A signer over what `shared` holds.
pub fn signer(shared: &crate::controllers::kit::Shared) -> std::sync::Arc<super::Signer> {
    std::sync::Arc::new(super::Signer::new(
        shared.client.clone(),
        &shared.config,
        shared.clock.clone(),
        shared.metrics.clone(),
    ))
}

/// Strategies for the property tests of the signing controllers' decisions.
pub mod strategies {
    use proptest::prelude::*;

    use crate::api::ReadyReason;
    use crate::controllers::signing::Outcome;
    use crate::controllers::signing::Readiness;
    use crate::controllers::signing::once::Held;
    use crate::pki::Chain;

    pub fn chain() -> impl Strategy<Value = Chain> {
        (".{0,20}", proptest::option::of(".{0,20}")).prop_map(|(certificates, ca)| Chain { certificates, ca })
    }

    pub fn readiness() -> impl Strategy<Value = Readiness> {
        prop_oneof![
            Just(Readiness::Missing),
            Just(Readiness::Unchecked),
            Just(Readiness::Outdated),
            Just(Readiness::Ready),
            (".{0,20}", ".{0,40}").prop_map(|(reason, message)| Readiness::NotReady { reason, message }),
        ]
    }

    pub fn held() -> impl Strategy<Value = Held> {
        prop_oneof![
            Just(Held::Nothing),
            Just(Held::InFlight),
            Just(Held::Saved),
            chain().prop_map(Held::Unsaved),
        ]
    }

    pub fn outcome() -> impl Strategy<Value = Outcome> {
        prop_oneof![
            chain().prop_map(Outcome::Issued),
            ".{0,40}".prop_map(Outcome::Failed),
            ".{0,40}".prop_map(Outcome::Retry),
            (".{0,40}", proptest::sample::select(ReadyReason::ALL.to_vec()))
                .prop_map(|(message, reason)| Outcome::IssuerFault { message, reason }),
        ]
    }
}
