//! The authority as the server and the CLI see it: a store that decides commands durably.
//!
//! Every implementation (memory, file, PostgreSQL) answers the same way: a receipt is
//! returned only after its event is durable; replay past the online window answers
//! `CURSOR_TOO_OLD` with a snapshot reference.

use mwp_core::{Code, Command, Decision, Error, Event, Id, PublicKey, Receipt, Result};

/// A durable authority over many Groups.
pub trait AuthorityService: Send + Sync {
    /// Decides `cmd` at `now_ms`; an `Accepted` decision is durable when this returns.
    fn submit(&self, cmd: &Command, now_ms: u64) -> Result<Decision>;

    /// Events of `group` with seq > `after`, at most `limit`, in seq order (empty at the end).
    /// `CURSOR_TOO_OLD` (with a snapshot reference) when `after` is older than the online
    /// window; `NOT_FOUND` for an unknown group.
    fn events(&self, group: &Id, after: u64, limit: usize) -> Result<Vec<Event>>;

    /// The receipt for (actor, action), if any.
    fn receipt(&self, group: &Id, actor: &Id, action: &Id) -> Result<Option<Receipt>>;

    /// Canonical CBOR of the latest signed snapshot of `group`, taking one if none exists.
    fn latest_snapshot(&self, group: &Id) -> Result<Vec<u8>>;

    /// Groups this authority holds.
    fn groups(&self) -> Result<Vec<Id>>;

    /// Seq of the last event of `group` (0 if unknown).
    fn head_seq(&self, group: &Id) -> Result<u64>;

    /// The earliest lease deadline across groups, for the tick loop: (group, time).
    fn next_deadline(&self) -> Result<Option<(Id, u64)>>;

    /// The authority's public key (signs ticks and snapshots).
    fn authority_key(&self) -> PublicKey;

    /// Signs `cmd` with the authority's secret key: the server's tick loop sends `tick`
    /// commands as `@authority` with it. A store that holds no secret key answers `STORAGE`.
    fn sign_as_authority(&self, cmd: &mut Command) -> Result<()> {
        let _ = cmd;
        Err(Error::new(
            Code::Storage,
            "this store holds no authority secret key and cannot sign ticks",
        ))
    }
}
