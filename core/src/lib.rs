//! mwp-core: the deterministic core of mwp.
#![forbid(unsafe_code)]

pub mod canonical;
