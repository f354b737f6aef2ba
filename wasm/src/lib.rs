//! mwp-wasm: the WebAssembly face of [`mwp_core`].
//!
//! This crate is thin glue. Every rule lives in `mwp-core`; here are only conversions between
//! JavaScript values and core types, one small error type per export (turned into a JS
//! `Error` whose `name` says which export failed and whose `code` is the spec's), the agent
//! driver ([`agent`]), the IndexedDB stores for browsers ([`idb_store`], [`idb_authority`],
//! [`idb_agent`]), the state-only group the Node/Deno file store drives ([`store_group`]),
//! the file store's byte layout it frames and scans its files with ([`log_format`]), and
//! the sealing of an archived group's audit log with the `mwp-audit` crate ([`audit`]).
//!
//! What crosses the boundary, and how:
//! * protocol data that volume matters for — events, snapshots, logs — crosses as canonical
//!   CBOR in `Uint8Array`s; many events at once cross as one **frame batch** (see [`frames`]);
//! * data a caller reads or writes by hand — commands, receipts, decoded events, the state —
//!   crosses as plain JS objects in the spec's JSON form, read by a bounded walk that answers
//!   `MALFORMED` for anything JSON has no form for, and written as JSON text that `JSON.parse`
//!   reads (`codec`).
//!
//! Like the core, nothing here reads a clock: `nowMs` is an argument of every call that needs
//! the time. The only randomness is the audit encryption's ([`audit`], age's file and
//! ephemeral keys, from `crypto.getRandomValues`).
//!
//! Features: `full` (the default) is all of the above. `viewer` alone builds the replica-only
//! module a page needs to verify and replay a history: [`replica`], [`head`] (signed heads, the
//! static export reader), [`snapshot`], [`codec`], [`frames`] and [`error`]. `dashboard` is
//! the viewer and the IndexedDB replica ([`idb_store`]): the module the dashboard embedded in
//! `mwp` ships.
#![forbid(unsafe_code)]

#[cfg(feature = "full")]
pub mod agent;
#[cfg(feature = "full")]
pub mod agent_journal;
#[cfg(feature = "full")]
pub mod audit;
#[cfg(feature = "full")]
pub mod authority;
pub mod chain;
pub mod codec;
pub mod error;
pub mod frames;
pub mod head;
#[cfg(feature = "full")]
pub mod idb_agent;
#[cfg(feature = "full")]
pub mod idb_authority;
#[cfg(feature = "dashboard")]
pub mod idb_store;
#[cfg(feature = "full")]
pub mod log_format;
pub mod replica;
pub mod snapshot;
#[cfg(feature = "full")]
pub mod store_group;
#[cfg(feature = "full")]
pub mod transcript;
#[cfg(feature = "full")]
pub mod vectors;

#[cfg(feature = "full")]
pub use agent::{Agent, AgentImage};
#[cfg(feature = "full")]
pub use audit::AuditSealer;
#[cfg(feature = "full")]
pub use authority::Authority;
pub use head::StaticReader;
pub use replica::Replica;
#[cfg(feature = "full")]
pub use store_group::StoreGroup;
