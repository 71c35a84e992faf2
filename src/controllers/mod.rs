//! Reconcilers, one file per controller.
