//! Snapshot rows read back from `mwp_snapshots`, checked on every read as rows another
//! process may have written must be (docs/decisions.md, "Commands decided together on
//! PostgreSQL"): a snapshot is served, referred to or restored only once it holds.

use mwp_core::chain::Position;
use mwp_core::snapshot::Snapshot;
use mwp_core::{Code, Error, Hash, Id, PublicKey, Result};

use super::authority::{column, corrupt, event_bytes, to_u64, verified_event};

/// The head row of a group, as a snapshot row is checked against it.
pub(super) struct Head {
    /// Its seq.
    pub seq: u64,
    /// The id of the event at its seq.
    pub hash: Hash,
    /// The group's Organization.
    pub org: Id,
}

impl Head {
    /// The head row in columns 0–2 (seq, head, org) of a row of `group`.
    pub(super) fn read(row: &postgres::Row, group: &Id) -> Result<Head> {
        let seq = to_u64(column(row, 0, group, "mwp_groups.seq")?, group, "seq")?;
        let hash = Hash::from_hex(column::<&str>(row, 1, group, "mwp_groups.head")?)
            .map_err(|e| corrupt(group, format!("head is not a hash: {e}")))?;
        let org: &str = column(row, 2, group, "mwp_groups.org")?;
        let org = Id::new(org).map_err(|e| corrupt(group, format!("org {org:?}: {e}")))?;
        Ok(Head { seq, hash, org })
    }
}

/// A snapshot row of `group` as statement `snapshot` reads it: columns 3–7 (seq,
/// state_hash, bytes, and the length and bytes of the event row at that seq), `None` when
/// the group has no snapshot at or below its head row. An event row longer than any event is
/// `LOG_CORRUPT` ([`super::authority::event_bytes`]).
pub(super) fn row_of<'a>(row: &'a postgres::Row, group: &Id) -> Result<Option<Row<'a>>> {
    let Some(seq) = column::<Option<i64>>(row, 3, group, "mwp_snapshots.seq")? else {
        return Ok(None);
    };
    let seq = to_u64(seq, group, "snapshot seq")?;
    let at =
        |what: &str, e: &dyn std::fmt::Display| invalid(group, seq, format!("column {what}: {e}"));
    Ok(Some(Row {
        seq,
        state_hash: row
            .try_get(4)
            .map_err(|e| at("mwp_snapshots.state_hash", &e))?,
        bytes: row.try_get(5).map_err(|e| at("mwp_snapshots.bytes", &e))?,
        event: event_bytes(row, 6, group, seq)?,
    }))
}

/// A snapshot row and the event row at its seq, as read.
pub(super) struct Row<'a> {
    /// Its seq column.
    pub seq: u64,
    /// Its state_hash column.
    pub state_hash: &'a str,
    /// Its bytes: what is served.
    pub bytes: &'a [u8],
    /// The bytes of the event row at its seq (`None` when there is none: a sealed Group's
    /// plain history was removed).
    pub event: Option<&'a [u8]>,
}

/// `SNAPSHOT_INVALID` naming `group` and the snapshot row's `seq`.
fn invalid(group: &Id, seq: u64, what: impl std::fmt::Display) -> Error {
    Error::new(
        Code::SnapshotInvalid,
        format!("group {group} in PostgreSQL: the snapshot row at seq {seq} {what}"),
    )
    .with("seq", seq)
}

/// The snapshot `row` holds, once it is shown to be one of `group`'s own at its seq: its bytes
/// verify (schema, state hash, signature under `key`, the head row's Organization and
/// `group`); they hold the seq and the state hash its columns say; it is not past the head
/// row; and its chain head is the id of the event at its seq (the verified event row, and the
/// head row when it is at the head). Anything else is `SNAPSHOT_INVALID` naming the group and
/// the row's seq, `LOG_CORRUPT` when the event row at its seq is itself damaged: never a
/// snapshot of another group, another history or another seq served as this one.
pub(super) fn checked(group: &Id, key: &PublicKey, head: &Head, row: &Row<'_>) -> Result<Snapshot> {
    let seq = row.seq;
    if seq > head.seq {
        return Err(invalid(
            group,
            seq,
            format!("is past the head row at seq {}", head.seq),
        ));
    }
    let snap = Snapshot::verify_bytes(row.bytes, key, &head.org, group, 0)
        .map_err(|e| invalid(group, seq, format!("does not verify: {}", e.message)))?;
    if snap.seq != seq {
        return Err(invalid(group, seq, format!("holds seq {}", snap.seq)));
    }
    if snap.state_hash.to_hex() != row.state_hash {
        return Err(invalid(
            group,
            seq,
            format!(
                "says state hash {:?}, its bytes {}",
                row.state_hash, snap.state_hash
            ),
        ));
    }
    // The chain head is the id of the event at its seq, as the head row and the event row
    // there say it (the core's rule; the wording is this store's).
    let at = Position::from_snapshot(&snap);
    if seq == head.seq {
        at.check_last(&head.hash).map_err(|e| {
            invalid(
                group,
                seq,
                format!("has chain head {}, the head row {}", e.expected, e.received),
            )
        })?;
    }
    match &row.event {
        Some(bytes) => {
            let event = verified_event(group, seq, bytes)?;
            at.check_last(&event.id).map_err(|e| {
                invalid(
                    group,
                    seq,
                    format!(
                        "has chain head {}, the event at its seq is {}",
                        e.expected, e.received
                    ),
                )
            })?;
        }
        None if seq < head.seq => {
            return Err(invalid(
                group,
                seq,
                format!(
                    "has no event row at its seq, below the head row at seq {}",
                    head.seq
                ),
            ));
        }
        None => {}
    }
    Ok(snap)
}
