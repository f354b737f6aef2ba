//! Every SQL statement the store runs, prepared once per connection.

use postgres::{Client, Statement};

use mwp_core::authority::MAX_PAGE_BYTES;
use mwp_core::log_format::MAX_RECORD_LEN;
use mwp_core::Result;

use super::storage;

/// The columns an event row's `bytes` are read as: its length, then the bytes themselves
/// only when they are at most [`MAX_RECORD_LEN`] long (NULL otherwise), so that a row
/// another process made longer than any event is refused without being fetched
/// (`authority::event_bytes`).
pub(super) fn event_bytes(column: &str) -> String {
    format!(
        "octet_length({column}), \
         CASE WHEN octet_length({column}) <= {MAX_RECORD_LEN} THEN {column} END"
    )
}

/// A page of event rows: `$1` group, `$2` after (rows with seq > `$2`), `$3` up to (the
/// head row's seq), `$4` at most this many rows, `$5` the seq after which rows count toward
/// the page's bytes → (seq, length, bytes). The bytes are fetched as [`event_bytes`] fetches
/// them, and only while the counted rows before hold fewer than
/// [`MAX_PAGE_BYTES`]: the rows past that come as (seq, length, NULL), so a page of the
/// largest events never holds more than about `MAX_PAGE_BYTES` in either process. Which rows
/// a page takes is decided by the core's rule (`authority::page_rows`), on their lengths.
pub(super) fn events_page() -> String {
    format!(
        "SELECT seq, octet_length(bytes),
           CASE WHEN octet_length(bytes) <= {MAX_RECORD_LEN} AND taken < {MAX_PAGE_BYTES}
                THEN bytes END
         FROM (SELECT seq, bytes,
                 coalesce(sum(octet_length(bytes)) FILTER (WHERE seq > $5)
                            OVER (ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
                          0) AS taken
               FROM mwp_events WHERE group_id = $1 AND seq > $2 AND seq <= $3
               ORDER BY seq LIMIT $4) page
         ORDER BY seq"
    )
}

/// The prepared statements of one connection.
#[derive(Clone)]
pub(crate) struct Statements {
    /// `$1` lock key: serialises accepts of one group until the transaction ends.
    pub lock: Statement,
    /// `$1` group → (seq, head, the highest seq of its event rows): the head row (NULLs when
    /// there is none) and, read with it, whether any event row lies past it.
    pub head: Statement,
    /// `$1` group → the head row (seq, head), the event row at its seq (length, bytes: see
    /// `event_bytes`), the seq and manifest of its audit row when the plain history was
    /// removed, and the highest seq of its event rows: what a head is checked against
    /// before it is answered (`PostgresAuthority::checked_head`).
    pub head_checked: Statement,
    /// `$1` group → (seq, final seq, final state hash, manifest, head, the highest seq of its
    /// event rows): the head row (NULLs when there is none) and, when the Group's plain
    /// history was removed once sealed, its final snapshot and the signed manifest that says
    /// so (NULLs otherwise); one row always, as [`Statements::head`].
    pub head_sealed: Statement,
    /// `$1` group → (whether the removal of the plain history is unfinished); no row when
    /// the Group was not sealed.
    pub audit_pending: Statement,
    /// A page of event rows ([`events_page`]).
    pub events_page: Statement,
    /// `$1` group → the head row (seq, head, org) and, NULLs when there is none, the latest
    /// snapshot at or below it (seq, state_hash, bytes) with the bytes of the event row at
    /// its seq (length, bytes), and the version of the snapshot row (`xmin`, `ctid`): what a
    /// snapshot row is checked against ([`super::snapshot::checked`]) and what the verdict
    /// kept on its bytes is keyed by ([`super::snapshot::Verdicts`]).
    pub snapshot: Statement,
    /// Advances the head by one (or creates it at seq 1) and inserts the event and receipt
    /// rows → (1), or writes nothing → (0) when someone else moved the head.
    pub append: Statement,
    /// `$1` group, `$2` seq → (length, bytes), row-locked.
    pub event_for_update: Statement,
    /// `$1` group, `$2` seq, `$3` new bytes: the redacted form.
    pub rewrite_event: Statement,
    /// Stores a snapshot unless one at that seq or later exists, and then removes the group's
    /// older ones.
    pub insert_snapshot: Statement,
    /// `$1` group, `$2` the next deadline of its state: the head row's, when it says another.
    pub put_deadline: Statement,
    /// All group IDs, sorted.
    pub groups: Statement,
    /// The earliest (group, next_deadline).
    pub next_deadline: Statement,
    /// `$1` groups to skip (text[]) → the earliest (group, next_deadline) of the others.
    pub next_deadline_except: Statement,
}

impl Statements {
    /// Prepares every statement on `client` (its search path already set).
    pub(crate) fn prepare(client: &mut Client) -> Result<Statements> {
        let mut p = |sql: &str| {
            client
                .prepare(sql)
                .map_err(|e| storage("preparing statements (is the schema migrated?)", &e))
        };
        Ok(Statements {
            lock: p("SELECT pg_advisory_xact_lock($1)")?,
            // One row always, the head row's columns NULL when there is none: event rows
            // without a head row are damage too. One statement, so one snapshot of both.
            head: p("SELECT g.seq, g.head, m.last
                 FROM (SELECT max(seq) AS last FROM mwp_events WHERE group_id = $1) m
                 LEFT JOIN mwp_groups g ON g.group_id = $1")?,
            head_checked: p(&format!(
                "SELECT g.seq, g.head, {}, a.seq, a.manifest, m.last
                 FROM (SELECT max(seq) AS last FROM mwp_events WHERE group_id = $1) m
                 LEFT JOIN mwp_groups g ON g.group_id = $1
                 LEFT JOIN mwp_events e ON e.group_id = g.group_id AND e.seq = g.seq
                 LEFT JOIN mwp_audit a ON a.group_id = g.group_id AND a.plain_removed",
                event_bytes("e.bytes")
            ))?,
            head_sealed: p(
                "SELECT g.seq, a.seq, s.state_hash, a.manifest, g.head, m.last
                 FROM (SELECT max(seq) AS last FROM mwp_events WHERE group_id = $1) m
                 LEFT JOIN mwp_groups g ON g.group_id = $1
                 LEFT JOIN mwp_audit a ON a.group_id = g.group_id AND a.plain_removed
                 LEFT JOIN mwp_snapshots s ON s.group_id = a.group_id AND s.seq = a.seq",
            )?,
            audit_pending: p("SELECT remove_plain AND NOT plain_removed FROM mwp_audit
                 WHERE group_id = $1")?,
            events_page: p(&events_page())?,
            // A row past the head row is never read: no event it could cover is committed.
            snapshot: p(&format!(
                "SELECT g.seq, g.head, g.org, s.seq, s.state_hash, s.bytes, {},
                   s.xmin::text, s.ctid::text
                 FROM mwp_groups g
                 LEFT JOIN LATERAL (SELECT seq, state_hash, bytes, xmin, ctid FROM mwp_snapshots
                     WHERE group_id = g.group_id AND seq <= g.seq
                     ORDER BY seq DESC LIMIT 1) s ON true
                 LEFT JOIN mwp_events e ON e.group_id = g.group_id AND e.seq = s.seq
                 WHERE g.group_id = $1",
                event_bytes("e.bytes")
            ))?,
            // One round trip for the three rows of an accept. Each insert feeds the next,
            // so when the head did not advance (another writer moved it) nothing is written
            // and the count is 0. Foreign keys are checked at the end of the statement, when
            // every row is in.
            append: p("WITH advanced AS (
                   INSERT INTO mwp_groups (group_id, org, seq, head, next_deadline, archived)
                   VALUES ($1, $2, $3, $4, $5, $6)
                   ON CONFLICT (group_id) DO UPDATE SET seq = EXCLUDED.seq,
                     head = EXCLUDED.head, next_deadline = EXCLUDED.next_deadline,
                     archived = EXCLUDED.archived
                   WHERE mwp_groups.seq = EXCLUDED.seq - 1
                   RETURNING 1),
                 event AS (
                   INSERT INTO mwp_events (group_id, seq, id, kind, bytes)
                   SELECT $1, $3, $4, $7::text, $8::bytea FROM advanced RETURNING 1),
                 receipt AS (
                   INSERT INTO mwp_receipts (group_id, actor, action, seq, bytes)
                   SELECT $1, $9::text, $10::text, $3, $11::bytea FROM event RETURNING 1)
                 SELECT count(*) FROM receipt")?,
            event_for_update: p(&format!(
                "SELECT {} FROM mwp_events WHERE group_id = $1 AND seq = $2 FOR UPDATE",
                event_bytes("bytes")
            ))?,
            rewrite_event: p("UPDATE mwp_events SET bytes = $3, redacted = true
                 WHERE group_id = $1 AND seq = $2")?,
            // The older snapshots of the group go in the same statement: reads use only the
            // latest at or below the head, and keeping every one made the stored bytes grow
            // with the square of the log (docs/postgres.md, "Snapshots"). A snapshot older
            // than one already stored (a periodic one stored after its commit) is not kept;
            // a row past the head row, which no read takes, does not keep it out.
            insert_snapshot: p("WITH stored AS (
                   INSERT INTO mwp_snapshots (group_id, seq, state_hash, bytes)
                   SELECT $1::text, $2::bigint, $3::text, $4::bytea
                   WHERE NOT EXISTS (SELECT 1 FROM mwp_snapshots
                                     WHERE group_id = $1 AND seq >= $2
                                       AND seq <= (SELECT seq FROM mwp_groups
                                                   WHERE group_id = $1))
                   RETURNING 1)
                 DELETE FROM mwp_snapshots
                 WHERE group_id = $1 AND seq < $2 AND EXISTS (SELECT 1 FROM stored)")?,
            put_deadline: p("UPDATE mwp_groups SET next_deadline = $2
                 WHERE group_id = $1 AND next_deadline IS DISTINCT FROM $2")?,
            groups: p("SELECT group_id FROM mwp_groups ORDER BY group_id")?,
            next_deadline: p("SELECT group_id, next_deadline FROM mwp_groups
                 WHERE next_deadline IS NOT NULL ORDER BY next_deadline, group_id LIMIT 1")?,
            next_deadline_except: p("SELECT group_id, next_deadline FROM mwp_groups
                 WHERE next_deadline IS NOT NULL AND NOT (group_id = ANY($1::text[]))
                 ORDER BY next_deadline, group_id LIMIT 1")?,
        })
    }
}
