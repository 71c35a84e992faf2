//! CFSSL errors for the decide tables.

use crate::cfssl::{Call, Class, Error};

pub fn refused(message: &str, class: Class) -> Error {
    Error::Refused {
        call: Call::AuthSign,
        url: "http://ca".into(),
        label: "l".into(),
        status: 400,
        code: 1,
        message: message.into(),
        class,
    }
}

pub fn unreachable(call: Call) -> Error {
    Error::Unreachable {
        call,
        url: "http://ca".into(),
        label: "l".into(),
        source: "connection refused".into(),
    }
}

pub fn tls(cause: &str) -> Error {
    Error::Tls {
        call: Call::Info,
        url: "https://ca".into(),
        label: "l".into(),
        source: cause.into(),
    }
}
