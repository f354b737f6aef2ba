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
    let version = match (
        row.try_get::<_, Option<&str>>(8),
        row.try_get::<_, Option<&str>>(9),
    ) {
        (Ok(Some(xmin)), Ok(Some(ctid))) => Some(format!("{xmin} {ctid}")),
        // Nothing to key a verdict by: the row is verified on every read.
        _ => None,
    };
    Ok(Some(Row {
        seq,
        version,
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
    /// The version of the row: its `xmin` (the transaction that wrote this version of it) and
    /// its `ctid` (where that version lies), `None` when they could not be read. Any
    /// `UPDATE`, or a `DELETE` and `INSERT`, of the row makes another version.
    pub version: Option<String>,
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
/// snapshot of another group, another history or another seq served as this one. The
/// verdict on its bytes is kept in `verdicts` (for [`checked_ref`]).
pub(super) fn checked(
    group: &Id,
    key: &PublicKey,
    head: &Head,
    row: &Row<'_>,
    verdicts: &Verdicts,
) -> Result<Snapshot> {
    past_head(group, head, row)?;
    let snap = verify(group, key, head, row, verdicts)?;
    check_rows(group, head, row, &Verdict::of(&snap))?;
    Ok(snap)
}

/// The snapshot `row`'s bytes hold, verified (schema, state hash, signature under `key`, the
/// head row's Organization and `group`), its verdict kept in `verdicts`.
fn verify(
    group: &Id,
    key: &PublicKey,
    head: &Head,
    row: &Row<'_>,
    verdicts: &Verdicts,
) -> Result<Snapshot> {
    verdicts
        .verified
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let snap = Snapshot::verify_bytes(row.bytes, key, &head.org, group, 0)
        .map_err(|e| invalid(group, row.seq, format!("does not verify: {}", e.message)))?;
    verdicts.put(group, row, &Verdict::of(&snap));
    Ok(snap)
}

/// [`checked`], answering what a snapshot served or referred to needs (its seq and state
/// hash) without decoding or verifying its bytes again when `verdicts` holds the verdict on
/// this very version of the row: every other check (past the head row, the columns, the
/// chain head against the event row and the head row as they are now) is made on every read.
pub(super) fn checked_ref(
    group: &Id,
    key: &PublicKey,
    head: &Head,
    row: &Row<'_>,
    verdicts: &Verdicts,
) -> Result<Verdict> {
    past_head(group, head, row)?;
    let verdict = match verdicts.get(group, row).filter(|v| v.org == head.org) {
        Some(verdict) => verdict,
        None => Verdict::of(&verify(group, key, head, row, verdicts)?),
    };
    check_rows(group, head, row, &verdict)?;
    Ok(verdict)
}

/// `SNAPSHOT_INVALID` for a snapshot row past the head row: no event it could cover is
/// committed.
fn past_head(group: &Id, head: &Head, row: &Row<'_>) -> Result<()> {
    if row.seq > head.seq {
        return Err(invalid(
            group,
            row.seq,
            format!("is past the head row at seq {}", head.seq),
        ));
    }
    Ok(())
}

/// What a snapshot's verified bytes say checked against the rows around it: the seq and the
/// state hash of its columns, and its chain head against the head row (at the head) and the
/// event row at its seq.
fn check_rows(group: &Id, head: &Head, row: &Row<'_>, snap: &Verdict) -> Result<()> {
    let seq = row.seq;
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
    // (The snapshot's `Position::from_snapshot`, from what its bytes were verified to hold.)
    let at = Position::at(snap.seq, snap.chain_head);
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
    Ok(())
}

/// What a snapshot row's bytes were verified to hold, against the authority key and the
/// group (all [`checked`] learns from the bytes themselves): kept per version of the row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Verdict {
    /// The snapshot's seq.
    pub seq: u64,
    /// Its state hash.
    pub state_hash: Hash,
    /// Its chain head.
    pub chain_head: Hash,
    /// The Organization it was verified under (the head row's then).
    pub org: Id,
}

impl Verdict {
    fn of(snap: &Snapshot) -> Verdict {
        Verdict {
            seq: snap.seq,
            state_hash: snap.state_hash,
            chain_head: snap.chain_head,
            org: snap.org.clone(),
        }
    }
}

/// Most verdicts kept ([`Verdicts`]): one per group, the groups read most recently.
pub(super) const MAX_VERDICTS: usize = 4096;

/// Most bytes the kept verdicts take, counted as [`Verdicts::cost`] counts them.
pub(super) const MAX_VERDICT_BYTES: usize = 1 << 20;

/// The verdicts on the snapshot rows this process verified: one per group (a group is read
/// from its latest snapshot only), keyed by the version of the row
/// ([`Row::version`]), so that a row another process rewrote (a new version) is verified
/// again, and a snapshot served or referred to again is not decoded, hashed and
/// signature-checked again (about 3 ms per MiB). Only verdicts on rows that verified are kept,
/// and only for groups whose head row exists; at most [`MAX_VERDICTS`] entries and
/// [`MAX_VERDICT_BYTES`], the least recently used going first.
#[derive(Default)]
pub(super) struct Verdicts {
    kept: std::sync::Mutex<Kept>,
    /// Snapshot rows verified (decoded, hashed, signature checked) since the store opened.
    pub verified: std::sync::atomic::AtomicU64,
}

#[derive(Default)]
struct Kept {
    by_group: std::collections::HashMap<Id, Entry>,
    bytes: usize,
    clock: u64,
}

struct Entry {
    version: String,
    verdict: Verdict,
    used: u64,
}

impl Verdicts {
    /// The verdict kept for this version of `group`'s snapshot row.
    fn get(&self, group: &Id, row: &Row<'_>) -> Option<Verdict> {
        let version = row.version.as_deref()?;
        let mut kept = self.lock();
        kept.clock += 1;
        let now = kept.clock;
        let entry = kept.by_group.get_mut(group)?;
        if entry.version != version || entry.verdict.seq != row.seq {
            return None;
        }
        entry.used = now;
        Some(entry.verdict.clone())
    }

    /// Keeps `verdict` for this version of `group`'s snapshot row, in place of the group's
    /// earlier one, evicting the least recently used while over either bound.
    fn put(&self, group: &Id, row: &Row<'_>, verdict: &Verdict) {
        let Some(version) = row.version.as_deref() else {
            return;
        };
        let cost = Self::cost(group, version, verdict);
        if cost > MAX_VERDICT_BYTES {
            return;
        }
        let mut kept = self.lock();
        kept.clock += 1;
        let used = kept.clock;
        let entry = Entry {
            version: version.to_owned(),
            verdict: verdict.clone(),
            used,
        };
        if let Some(old) = kept.by_group.insert(group.clone(), entry) {
            kept.bytes -= Self::cost(group, &old.version, &old.verdict);
        }
        kept.bytes += cost;
        while kept.by_group.len() > MAX_VERDICTS || kept.bytes > MAX_VERDICT_BYTES {
            let Some(oldest) = kept
                .by_group
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(g, _)| g.clone())
            else {
                break;
            };
            if let Some(gone) = kept.by_group.remove(&oldest) {
                kept.bytes -= Self::cost(&oldest, &gone.version, &gone.verdict);
            }
        }
    }

    /// The bytes an entry is counted as: its strings and a fixed allowance for the rest.
    fn cost(group: &Id, version: &str, verdict: &Verdict) -> usize {
        group.as_str().len() + version.len() + verdict.org.as_str().len() + 128
    }

    /// How many verdicts are kept, and the bytes they are counted as.
    #[cfg(test)]
    fn size(&self) -> (usize, usize) {
        let kept = self.lock();
        (kept.by_group.len(), kept.bytes)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        // A verdict is written whole under the lock: a poisoned one holds no half entry.
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(seq: u64, version: &str) -> Row<'static> {
        Row {
            seq,
            version: Some(version.to_owned()),
            state_hash: "",
            bytes: b"",
            event: None,
        }
    }

    fn verdict(seq: u64) -> Verdict {
        Verdict {
            seq,
            state_hash: Hash([1; 32]),
            chain_head: Hash([2; 32]),
            org: Id::new("acme").expect("id"),
        }
    }

    fn id(s: &str) -> Id {
        Id::new(s).expect("id")
    }

    #[test]
    fn a_verdict_holds_for_its_version_of_the_row_only() {
        let verdicts = Verdicts::default();
        let g = id("g1");
        verdicts.put(&g, &row(4, "100 (0,1)"), &verdict(4));
        assert_eq!(verdicts.get(&g, &row(4, "100 (0,1)")), Some(verdict(4)));
        // Rewritten (another transaction, another place), moved to another seq, or of
        // another group: verified again.
        assert_eq!(verdicts.get(&g, &row(4, "101 (0,2)")), None);
        assert_eq!(verdicts.get(&g, &row(5, "100 (0,1)")), None);
        assert_eq!(verdicts.get(&id("g2"), &row(4, "100 (0,1)")), None);
        // A row whose version could not be read is never taken for a kept one.
        let unversioned = Row {
            version: None,
            ..row(4, "")
        };
        assert_eq!(verdicts.get(&g, &unversioned), None);
        verdicts.put(&g, &unversioned, &verdict(4));
        // One verdict per group: the later replaces the earlier.
        verdicts.put(&g, &row(9, "200 (0,3)"), &verdict(9));
        assert_eq!(verdicts.get(&g, &row(4, "100 (0,1)")), None);
        assert_eq!(verdicts.size().0, 1);
    }

    #[test]
    fn verdicts_are_bounded_in_entries_and_bytes_the_least_recently_used_going_first() {
        let verdicts = Verdicts::default();
        for i in 0..MAX_VERDICTS + 100 {
            verdicts.put(&id(&format!("g{i}")), &row(1, "1 (0,1)"), &verdict(1));
            // g0 is read after every insert: it stays.
            assert!(verdicts.get(&id("g0"), &row(1, "1 (0,1)")).is_some(), "{i}");
        }
        let (entries, bytes) = verdicts.size();
        assert_eq!(entries, MAX_VERDICTS);
        assert!(bytes <= MAX_VERDICT_BYTES);
        assert!(verdicts.get(&id("g1"), &row(1, "1 (0,1)")).is_none());
        let last = format!("g{}", MAX_VERDICTS + 99);
        assert!(verdicts.get(&id(&last), &row(1, "1 (0,1)")).is_some());

        // Long group IDs: the byte bound comes first.
        let long = Verdicts::default();
        for i in 0..MAX_VERDICTS {
            let g = format!("{i:0>128}");
            long.put(
                &id(&g),
                &row(1, "4294967295 (4294967295,65535)"),
                &verdict(1),
            );
        }
        let (entries, bytes) = long.size();
        assert!(entries < MAX_VERDICTS, "{entries}");
        assert!(bytes <= MAX_VERDICT_BYTES, "{bytes}");
        assert!(bytes > MAX_VERDICT_BYTES - 400, "{bytes}");
    }
}
