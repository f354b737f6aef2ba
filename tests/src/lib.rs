//! Shared helpers for the conformance tests.

pub mod fixtures;
pub mod sim;
