//! The bad-input catalogue: each row is one bad input given to the real manager binary and the
//! outcome a user sees (the resource that shows it, its condition's reason and message, retried
//! or failed, whether the CA saw a request), and no row leaks secret material into a condition,
//! an Event or a log line. Each table prints its figures (`rows`, `passed`) for the README.
//!
//! - `issuer_rows`: the credential Secret and the Issuer spec (outcomes on the Issuer).
//! - `request_rows`: what the CA answers and the CertificateRequest itself (outcomes on the
//!   request).

mod issuer_rows;
mod request_rows;
