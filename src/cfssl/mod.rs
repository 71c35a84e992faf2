//! The CFSSL `multirootca` client: `authsign` with HMAC tokens, `info`, a credential-checking
//! health probe, ordered failover across URLs, TLS with per-issuer trust, timeouts and a cap on
//! answer size. Errors are classified here, once, for the controllers (see [`Class`]).

mod allow;
mod answer;
mod auth;
mod client;
mod endpoints;
mod error;
mod failover;
pub mod wire;

pub use allow::{AllowList, AllowListError, CaHost, HostPolicy, Trust, trust};
pub use answer::parse_answer;
pub use auth::{AuthKey, KeyError};
pub use client::{Client, ClientConfig, Health, Info, MAX_CA_BUNDLE, Signed};
pub use endpoints::{Endpoints, EndpointsError, UrlProblem, redact, redact_list};
pub use error::{
    Attempt, BoxError, Call, CallError, Class, Error, Failure, IssuerFault, MalformedAnswer, NoCertificate,
    classify_refusal,
};
pub use failover::Failover;

/// Path of the authenticated signing endpoint, relative to a base URL.
pub const AUTHSIGN_PATH: &str = "api/v1/cfssl/authsign";
/// Path of the signer information endpoint, relative to a base URL.
pub const INFO_PATH: &str = "api/v1/cfssl/info";
