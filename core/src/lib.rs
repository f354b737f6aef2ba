//! mwp-core: the deterministic core of mwp.
//!
//! This crate holds every rule of mwp and does **no IO, reads no clock and uses no
//! randomness**: time enters only as an argument (`now_ms`), and the same bytes in give the
//! same bytes out on every target. Hosts (files, IndexedDB, PostgreSQL) store what it decides.
//!
//! The authority's loop, written out:
//!
//! ```
//! use mwp_core::{accept, Decision, GroupState, Limits};
//! # fn run(state: &mut Option<GroupState>, cmd: &mwp_core::Command, now_ms: u64) -> mwp_core::Result<()> {
//! match accept(state.as_ref(), cmd, now_ms, &Limits::default())? {
//!     Decision::Accepted(event) => {
//!         // 1. make `event.to_cbor()?` durable (append to the log, sync);
//!         // 2. apply it, exactly as replay and every replica will:
//!         GroupState::apply_to(state, &event)?;
//!         // 3. hand out the receipt.
//!         let _receipt = event.receipt();
//!     }
//!     Decision::Duplicate(_original_receipt) => {}
//! }
//! # Ok(()) }
//! ```
//!
//! Where to look: [`accept()`] decides a Command (check order of SPEC §3, rules of §5);
//! [`GroupState::apply`] is the one place an event changes state; [`canonical`] is the one
//! encoding everything hashed or signed goes through.
#![forbid(unsafe_code)]

pub mod accept;
pub mod agent;
pub mod canonical;
pub mod command;
pub mod crypto;
pub mod error;
pub mod event;
pub mod id;
pub mod id_map;
pub mod lease;
pub mod limits;
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

pub use accept::{accept, Decision};
pub use command::{Body, Command};
pub use crypto::{Hash, KeyFault, PreparedKey, PublicKey, SecretKey, Signature};
pub use error::{Code, Error, Result};
pub use event::{Event, EventKind};
pub use id::Id;
pub use limits::Limits;
pub use receipt::{Disposition, Receipt};
pub use state::GroupState;
pub use work::WorkState;
