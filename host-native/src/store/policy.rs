//! Authority rules that do not depend on where events are stored, shared by the file store
//! and any other store (PostgreSQL): the online replay window, the snapshot cadence, the
//! authority's own `tick` commands and the `open_group` key check.

use mwp_core::command::{Body, Tick};
use mwp_core::snapshot::SnapshotRef;
use mwp_core::{
    Code, Command, Error, Event, EventKind, GroupState, Hash, Id, PublicKey, Result, SecretKey,
};

/// Which replay requests are still served from the log.
///
/// Events after `min(head - online_events, latest snapshot seq)` are served; an older cursor
/// answers `CURSOR_TOO_OLD` with a reference to the latest signed snapshot. Events after the
/// latest snapshot are always served, so a client that restores it can always resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OnlineWindow {
    /// How many of the latest events are always served; `None` serves the whole log.
    pub online_events: Option<u64>,
}

impl OnlineWindow {
    /// Whether a request for events after `after` must be answered from a snapshot, given the
    /// head seq and the latest snapshot's seq (if any is needed, the caller fetches or takes
    /// one and calls [`OnlineWindow::check`]).
    pub fn needs_snapshot(&self, after: u64, head: u64) -> bool {
        self.online_events
            .is_some_and(|w| after < head.saturating_sub(w))
    }

    /// `Ok` if events after `after` are served; else `CURSOR_TOO_OLD` pointing at `snapshot`.
    pub fn check(&self, after: u64, head: u64, snapshot: &SnapshotRef) -> Result<()> {
        if !self.needs_snapshot(after, head) || after >= snapshot.seq {
            return Ok(());
        }
        let oldest = head
            .saturating_sub(self.online_events.unwrap_or(head))
            .min(snapshot.seq);
        Err(snapshot.cursor_too_old(after, oldest))
    }
}

/// When the authority writes a signed snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotCadence {
    /// Every this many events (`None`: only on archive and on request).
    pub every: Option<u64>,
}

impl Default for SnapshotCadence {
    fn default() -> Self {
        SnapshotCadence {
            every: Some(100_000),
        }
    }
}

impl SnapshotCadence {
    /// Whether the state right after `event` must be snapshotted: every `every` events, and
    /// always after `group_archived` (the signed final snapshot, SPEC §5).
    pub fn due(&self, event: &Event) -> bool {
        matches!(event.kind, EventKind::GroupArchived(_))
            || self.every.is_some_and(|n| n > 0 && event.seq % n == 0)
    }
}

/// The reference a `CURSOR_TOO_OLD` answer carries for the snapshot of `group` at `seq`.
/// `location` is where `mwp serve` serves the latest snapshot.
pub fn snapshot_ref(group: &Id, seq: u64, state_hash: Hash) -> SnapshotRef {
    SnapshotRef {
        seq,
        hash: state_hash,
        location: format!("/v1/groups/{group}/snapshots/latest"),
    }
}

/// The `tick` the authority sends when a lease deadline has passed: signed with the authority
/// key, action `tick.<next seq>` (unique, since each accepted tick moves the seq).
pub fn tick_command(state: &GroupState, key: &SecretKey) -> Result<Command> {
    let action = Id::new(format!("tick.{}", state.seq + 1))
        .map_err(|e| Error::malformed(format!("tick action id: {e}")))?;
    Command::signed(
        state.org.clone(),
        state.group.clone(),
        Id::authority(),
        action,
        1,
        None,
        Body::Tick(Tick {}),
        key,
    )
}

/// An `open_group` must name this authority's key as `authority_key`, since this authority
/// signs the group's ticks and snapshots (SPEC §11).
pub fn check_open_group(cmd: &Command, key: &PublicKey) -> Result<()> {
    if let Body::OpenGroup(g) = &cmd.body {
        if &g.authority_key != key {
            return Err(Error::new(
                Code::NotPermitted,
                format!(
                    "open_group names authority_key {}, but this authority signs with {key}; name {key}",
                    g.authority_key
                ),
            )
            .with("authority_key", key.to_hex()));
        }
    }
    Ok(())
}

/// The earliest deadline among groups: what the tick loop sleeps until.
pub fn earliest<'a>(
    deadlines: impl IntoIterator<Item = (&'a Id, Option<u64>)>,
) -> Option<(Id, u64)> {
    deadlines
        .into_iter()
        .filter_map(|(g, d)| Some((g, d?)))
        .min_by_key(|(_, d)| *d)
        .map(|(g, d)| (g.clone(), d))
}
