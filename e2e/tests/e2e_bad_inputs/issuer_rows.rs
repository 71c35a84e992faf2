//! Rows for the credential Secret and the Issuer spec.
