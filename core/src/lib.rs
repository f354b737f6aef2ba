//! mwp-core, the deterministic core of mwp: it does **no IO, reads no clock, draws no
//! randomness and spawns no threads** by default; the `parallel` feature lets a host opt into
//! hashing large snapshots on a second thread.
//!
//! This crate holds every rule of mwp. Time enters only as an argument (`now_ms`), every call
//! runs on the caller's thread (unless the host turns `parallel` on, as the native host does;
//! it has no effect on WebAssembly), and the same bytes in give the same bytes out on every
//! target. Hosts (files, IndexedDB, PostgreSQL) store what it decides.
//!
//! The authority's loop, written out: a host holds one [`authority::Authority`] driver per
//! Group, hands it each Command with the time, and persists what it is told to.
//!
//! ```
//! use mwp_core::authority::{Authority, Step};
//! # fn run(driver: &mut Authority, cmd: &mwp_core::Command, now_ms: u64) -> mwp_core::Result<()> {
//! match driver.handle_command(cmd, now_ms)? {
//!     Step::Accepted(commit) => {
//!         // 1. make `commit.bytes` durable (append to the log, sync); if that fails, drop
//!         //    the driver and rebuild it from storage;
//!         // 2. erase `commit.erase`, store `commit.snapshot` (signed with `sign()`);
//!         // 3. hand out the receipt.
//!         let _receipt = commit.receipt();
//!     }
//!     Step::Duplicate(_original_receipt) => {}
//!     Step::Rejected(rejection) => {
//!         // An expected answer, mapped by `rejection.code` alone.
//!         let _ = rejection.code;
//!     }
//! }
//! // By itself: the tick that expires due leases, named once, in the driver.
//! if let Some(tick) = driver.poll_tick(now_ms)? {
//!     let _ = driver.handle_command(&tick, now_ms)?;
//! }
//! # Ok(()) }
//! ```
//!
//! Where to look: [`accept()`] decides a Command (check order of SPEC §3, rules of §5);
//! [`authority`] is what an authority does around it (ticks, snapshot cadence, the online
//! window);
//! [`GroupState::apply`] is the one place an event changes state; [`effect`] names effects
//! and says how an unsettled one ends; [`canonical`] is the one encoding everything hashed or
//! signed goes through.
#![forbid(unsafe_code)]

pub mod accept;
pub mod agent;
pub mod audit;
pub mod authority;
pub mod canonical;
pub mod chain;
pub mod command;
pub mod crypto;
pub mod effect;
pub mod error;
pub mod event;
pub mod export;
pub mod head;
pub mod id;
pub mod id_map;
pub mod lease;
pub mod limits;
pub mod log_format;
pub mod memory;
pub mod opaque;
pub mod receipt;
mod receipt_index;
pub mod replica;
pub mod signed_read;
pub mod snapshot;
pub mod state;
pub mod transcript;
pub mod work;

// The integration tests' helpers (a recording transcript host, the transcripts, their
// events), shared with the unit tests: they name the crate `mwp_core`, as a test crate does.
#[cfg(test)]
extern crate self as mwp_core;
#[cfg(test)]
#[allow(dead_code)] // the unit tests read some of them
#[path = "../tests/common/mod.rs"]
pub(crate) mod test_common;

pub use accept::{accept, Decision};
pub use command::{Body, Command};
pub use crypto::{Hash, KeyFault, PreparedKey, PublicKey, SecretKey, Signature};
pub use error::{Code, Error, Rejection, Result};
pub use event::{Event, EventKind};
pub use id::Id;
pub use limits::Limits;
pub use receipt::{Disposition, Receipt};
pub use state::GroupState;
pub use work::WorkState;
