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
