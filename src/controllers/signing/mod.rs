//! What both signing controllers (CertificateRequests, Kubernetes CSRs) share, and the issuer
//! controllers' access to the CA: the [`signer`] (credentials, CFSSL clients, timed calls), the
//! classification of a CA answer ([`outcome`]), each issuer's issuance budget ([`budget`]), the issuers an object names and their
//! readiness ([`issuers`]), the sign-once guard ([`once`]) with the rest of what is kept per
//! object ([`ledger`]), and the one [`pipeline`] both signing controllers adapt.
//!
//! It uses the kit and nothing of the controllers.

pub mod budget;
pub mod issuers;
pub mod ledger;
pub mod once;
pub mod outcome;
pub mod pipeline;
pub mod signer;
#[cfg(test)]
pub(crate) mod testing;

pub use self::issuers::{IssuerName, Issuers, Readiness};
pub use self::outcome::{Outcome, blame};
pub use self::pipeline::{Adapter, BudgetWait, Core, Decision, Work};
pub use self::signer::Signer;

/// A request to check an issuer again now, sent by a signing controller when the CA blames the
/// issuer.
pub type Recheck = IssuerName;
