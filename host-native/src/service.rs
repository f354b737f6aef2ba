//! The authority as the server and the CLI see it: a store that decides commands durably.
//!
//! Every implementation (memory, file, PostgreSQL) answers the same way: a receipt is
//! returned only after its event is durable; replay past the online window answers
//! `CURSOR_TOO_OLD` with a snapshot reference.

use mwp_core::head::SignedHead;
use mwp_core::state::Member;
use mwp_core::{Command, Decision, Event, Id, PublicKey, Receipt, Result};

/// The answer of [`AuthorityService::submit_staged`]: the decision, once it may be answered.
pub type Staged = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Decision>> + Send>>;

/// A durable authority over many Groups.
pub trait AuthorityService: Send + Sync {
    /// Decides `cmd` at `now_ms`; an `Accepted` decision is durable when this returns.
    fn submit(&self, cmd: &Command, now_ms: u64) -> Result<Decision>;

    /// Decides `cmd` at `now_ms` on the calling thread and returns the answer to await, which
    /// is ready once an `Accepted` decision is durable, as [`AuthorityService::submit`]'s is:
    /// an async caller waits for the group commit without holding a thread. `None` when this
    /// store has no such path for `cmd` (the caller runs `submit` on a blocking thread).
    /// Dropping the answer unanswered does not undo the decision. Within a tokio runtime
    /// the store's remaining work runs on its blocking pool; outside one, on a thread of its
    /// own or on the calling thread before this returns.
    fn submit_staged(&self, cmd: &Command, now_ms: u64) -> Option<Staged> {
        let _ = (cmd, now_ms);
        None
    }

    /// Events of `group` with seq > `after`, at most `limit`, in seq order (empty at the end).
    /// `CURSOR_TOO_OLD` (with a snapshot reference) when `after` is older than the online
    /// window; `NOT_FOUND` for an unknown group.
    fn events(&self, group: &Id, after: u64, limit: usize) -> Result<Vec<Event>>;

    /// The receipt for (actor, action), if any.
    fn receipt(&self, group: &Id, actor: &Id, action: &Id) -> Result<Option<Receipt>>;

    /// Canonical CBOR of the latest signed snapshot of `group`, taking one if none exists.
    fn latest_snapshot(&self, group: &Id) -> Result<Vec<u8>>;

    /// The latest signed snapshot of `group` as the store holds it, canonical CBOR, without
    /// taking one: `Ok(None)` when none is stored (what `mwp verify --data` checks, so that a
    /// snapshot signed on the spot never stands in for a stored one). A stored snapshot that
    /// cannot be read whole is `SNAPSHOT_INVALID` naming it; its signature and state are the
    /// caller's to check. The default answers [`AuthorityService::latest_snapshot`], for a
    /// service that keeps what it takes (memory).
    fn stored_snapshot(&self, group: &Id) -> Result<Option<Vec<u8>>> {
        self.latest_snapshot(group).map(Some)
    }

    /// Groups this authority holds.
    fn groups(&self) -> Result<Vec<Id>>;

    /// Seq of the last event of `group` (0 if unknown).
    fn head_seq(&self, group: &Id) -> Result<u64>;

    /// The earliest lease deadline across groups, for the tick loop: (group, time).
    fn next_deadline(&self) -> Result<Option<(Id, u64)>>;

    /// The earliest lease deadline among groups not in `skip`: what the tick loop asks while
    /// it backs off groups whose tick failed. The default asks
    /// [`AuthorityService::next_deadline`] and answers `None` when that names a skipped group
    /// (a service that can look past it should).
    fn next_deadline_except(&self, skip: &[Id]) -> Result<Option<(Id, u64)>> {
        Ok(self.next_deadline()?.filter(|(g, _)| !skip.contains(g)))
    }

    /// The member `actor` of `group` (removed members included, marked so), for checking a
    /// member-signed read (docs/http.md); `Ok(None)` when the group or the member is unknown.
    /// The default, for a service that cannot look members up, is `NOT_PERMITTED`.
    fn member(&self, group: &Id, actor: &Id) -> Result<Option<Member>> {
        let _ = actor;
        Err(mwp_core::Error::new(
            mwp_core::Code::NotPermitted,
            format!("this authority service cannot look up the members of group {group}"),
        ))
    }

    /// The signed manifest of `group`'s sealed audit log (SPEC §6a), kept after the plain
    /// history is removed and after the artifact expires; `Ok(None)` when the group was not
    /// sealed (the default, for a service that seals nothing).
    fn audit_manifest(&self, group: &Id) -> Result<Option<mwp_core::audit::Manifest>> {
        let _ = group;
        Ok(None)
    }

    /// The authority's public key (signs ticks and snapshots).
    fn authority_key(&self) -> PublicKey;

    /// Submits a `tick` for `group` at `now_ms`, signed with the authority's secret key (which
    /// only the service holds): what the tick loop calls when [`AuthorityService::next_deadline`]
    /// has passed. `Ok(None)` when nothing is due (`NOT_YET`) or the group is archived. The
    /// default, for a service that cannot sign, is `NOT_PERMITTED`.
    fn tick(&self, group: &Id, now_ms: u64) -> Result<Option<Decision>> {
        let _ = now_ms;
        Err(mwp_core::Error::new(
            mwp_core::Code::NotPermitted,
            format!("this authority service cannot sign ticks for group {group}"),
        ))
    }

    /// Signs the current head of `group` at `now_ms` with the authority's secret key
    /// (SPEC §8a): the seq and id of its last durable event, read under the group's lock.
    /// `NOT_FOUND` for an unknown group. Whether a head is due is the caller's business
    /// ([`mwp_core::head::head_due`]; the server's `heads` module). The default, for a service
    /// that cannot sign, is `NOT_PERMITTED`.
    fn sign_head(&self, group: &Id, now_ms: u64) -> Result<SignedHead> {
        let _ = now_ms;
        Err(mwp_core::Error::new(
            mwp_core::Code::NotPermitted,
            format!("this authority service cannot sign heads for group {group}"),
        ))
    }
}

/// What `service`'s authority does by itself in `group` at `now_ms`: each tick its driver
/// sends ([`AuthorityService::tick`]) until none is due, with its decision. The transcript
/// `advance` op runs this on every host.
pub fn advance(
    service: &(impl AuthorityService + ?Sized),
    group: &Id,
    now_ms: u64,
) -> Result<Vec<Decision>> {
    let mut done = Vec::new();
    while let Some(decision) = service.tick(group, now_ms)? {
        let accepted = matches!(decision, Decision::Accepted(_));
        done.push(decision);
        if !accepted {
            break;
        }
    }
    Ok(done)
}
