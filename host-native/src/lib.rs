//! mwp-host: the native host of mwp — durable storage, the `mwp` command-line tool, and the
//! HTTP authority server with its dashboard.
#![forbid(unsafe_code)]

pub mod agent_host;
pub mod cli;
pub mod memory_service;
pub mod redact;
pub mod regular_file;
pub mod server;
pub mod service;
pub mod store;

#[cfg(feature = "postgres")]
pub mod postgres;
