//! The kit every controller is built from: settings ([`config`]), what all of them share
//! ([`shared`]), the plan and its one executor ([`plan`]) with the object writes a plan can
//! carry ([`write`]), status applies and the schema knowledge ([`status`]), Events
//! ([`events`]), per-object backoff ([`backoff`]), the shared watches ([`wiring`]) and the
//! indexes kept beside their stores ([`index`]), whole copies beside a store of summaries
//! ([`recent`]), the times objects are looked at again ([`later`]) and the line of triggers
//! in front of a scheduler ([`funnel`]), both kept compactly, the Secret metadata feed
//! ([`secrets`]), object sizes ([`size`]), tenants' fair shares of the reconcile slots
//! ([`shares`]), the served namespaces and their watches ([`scope`]) and the issuance
//! budget's rate ([`rate`]). The pool expensive crypto runs on is `crate::crypto_pool` (the
//! CSI plugin uses it too). It uses nothing else of `controllers`.

pub mod backoff;
pub mod config;
pub mod error;
pub mod events;
pub mod funnel;
pub mod index;
pub mod later;
pub mod plan;
pub mod rate;
pub mod recent;
pub mod scope;
pub mod secrets;
pub mod shared;
pub mod shares;
pub mod size;
pub mod status;
#[cfg(test)]
pub(crate) mod testing;
pub mod wiring;
pub mod write;

pub use self::config::{Config, CsrSettings, StandaloneSettings};
pub use self::error::Error;
pub use self::shared::Shared;
