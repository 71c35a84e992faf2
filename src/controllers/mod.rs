//! The controllers, in three layers with one rule: `kit` <- `signing` <- each controller <-
//! `run`. The [`kit`] uses nothing else here; [`signing`] uses the kit; a controller
//! ([`issuer`], [`certificaterequest`], [`csr`], the standalone [`certificate`] controllers) uses
//! the kit and signing, never another controller; [`run`] composes them all. A test in
//! `tests/repo_hygiene.rs` holds the rule.
//!
//! Every controller has the same shape (see ARCHITECTURE.md): observe (caches, one Secret),
//! decide (a pure function in its `decide` module returning a whole plan) and act (the kit's
//! one executor: one server-side apply of status under the controller's own field manager, an
//! Event, the requeue it returns).

pub mod certificate;
pub mod certificaterequest;
pub mod csr;
pub mod issuer;
pub mod kit;
mod run;
pub mod signing;

pub use self::kit::scope::Scope;
pub use self::kit::{Config, CsrSettings, Error, Shared};
pub use self::run::{Contexts, RunError, run};
pub use self::signing::Recheck;
pub use crate::clock::{Clock, system_clock};
