//! Replicas (SPEC §7): rebuild a Group's state from events delivered at least once, in any
//! order, and say after every apply exactly what a host must make durable.
//!
//! [`Replica::offer`] answers each delivered event with an [`Offer`], in this order of checks:
//!
//! 1. the event belongs to another group, or its `payload_hash` or `id` do not verify →
//!    `Rejected` (`LOG_CORRUPT`): it is never applied and never kept;
//! 2. `seq ≤ cursor` → `Duplicate` (but a *different* event at a seq whose id the replica
//!    remembers is `Rejected`: two events cannot share a seq);
//! 3. the same event is already buffered → `Duplicate`;
//! 4. `seq > cursor + 1` → `Buffered` in a bounded buffer (over `max_buffered_events` →
//!    `Rejected` with `MALFORMED` naming the limit; deliver the gap first);
//! 5. `seq = cursor + 1` → applied through [`GroupState::apply`] (which checks seq, `prev`
//!    and every reference, and changes nothing on failure), then the buffer is drained.
//!
//! The cursor is `state.seq`: it only moves by applying the next contiguous event, so it
//! never passes a gap. Each `Applied` answer carries ONE [`WriteSet`] — the processed event
//! IDs, projection rows, queue changes and checkpoint records, and the new cursor, in the
//! order of the safe local apply cycle — that a host commits in one transaction. Folding
//! committed write sets into a [`ReplicaImage`] and rebuilding from it gives the same state,
//! byte for byte ([`Replica::from_image`]); that is how a host reopens.
//!
//! [`run_lines`] is the pure core of `mwp replica FILE` (SPEC §11).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::agent::{AgentMeta, EffectEntry, OutboxChange};
use crate::crypto::{Hash, PublicKey};
use crate::error::{Code, Error, Result};
use crate::event::{Event, EventKind};
use crate::head::{ForkProof, SignedHead};
use crate::id::Id;
use crate::id_map::{Arc, IdMap};
use crate::limits::Limits;
use crate::opaque::{self, Opaque};
use crate::snapshot::Snapshot;
use crate::state::{Approval, EvidenceNote, Expansion, GroupState, Member, StoredReceipt};
use crate::work::{WorkItem, WorkItems, WorkState};

mod read;

/// How many recent event IDs a replica remembers to tell a redelivered event from a
/// different event claiming an applied seq.
pub const RECENT_IDS: usize = 1024;

/// The answer to [`Replica::offer`].
#[derive(Debug, Clone, PartialEq)]
pub enum Offer {
    /// Already applied (`seq ≤ cursor`) or already buffered: nothing to do.
    Duplicate,
    /// Early: kept in memory until the gap before it is filled. Nothing to persist.
    Buffered,
    /// Applied, with every buffered event it unblocked.
    Applied {
        /// Highest contiguous seq applied: the new cursor.
        cursor: u64,
        /// What the host commits, whole, before acknowledging `cursor`.
        write_set: WriteSet,
        /// Buffered events that turned out not to chain and were dropped (they will be
        /// delivered again); empty in the ordinary case.
        dropped: Vec<Error>,
    },
    /// Not applied and not kept.
    Rejected(Error),
}

impl Offer {
    /// `applied`, `duplicate`, `buffered` or `rejected`.
    pub fn name(&self) -> &'static str {
        match self {
            Offer::Duplicate => "duplicate",
            Offer::Buffered => "buffered",
            Offer::Applied { .. } => "applied",
            Offer::Rejected(_) => "rejected",
        }
    }
}

/// One processed event: a row of the processed-event table (the inbox).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedEvent {
    /// Its seq.
    pub seq: u64,
    /// Its id.
    pub id: Hash,
}

/// The scalar fields of a Group state (everything but its maps).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupHeader {
    /// Organization.
    pub org: Id,
    /// Group.
    pub group: Id,
    /// Mission.
    pub mission: Id,
    /// Title, as a hash.
    pub title: crate::work::OpaqueRef,
    /// Key that signs ticks and snapshots.
    pub authority_key: PublicKey,
    /// Seq of the last event applied.
    pub seq: u64,
    /// Id of the last event applied.
    pub head: Hash,
    /// Revision of aggregate `group`.
    pub revision: u64,
    /// Revision of aggregate `members`.
    pub members_revision: u64,
    /// Whether archived.
    pub archived: bool,
}

impl GroupHeader {
    /// The header of a state.
    pub fn of(s: &GroupState) -> GroupHeader {
        GroupHeader {
            org: s.org.clone(),
            group: s.group.clone(),
            mission: s.mission.clone(),
            title: s.title,
            authority_key: s.authority_key,
            seq: s.seq,
            head: s.head,
            revision: s.revision,
            members_revision: s.members_revision,
            archived: s.archived,
        }
    }
}

/// One row of the Group projection. Rows are only ever written (upserted), never deleted:
/// nothing in a Group state is removed once recorded. [`Row::key`] is the row's identity in
/// a key-value store.
///
/// The variants a projection holds many of (receipts, work items, terminal events) are small
/// and the rest are boxed: a restore writes a row per receipt, and a vector of 280-byte rows
/// spent more time faulting in fresh pages than building them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Row {
    /// The scalar fields.
    Header(Box<GroupHeader>),
    /// A member.
    Member {
        /// Actor.
        actor: Id,
        /// The member as the state holds it.
        member: Box<Member>,
    },
    /// A work item.
    Work {
        /// Work item ID.
        work: Id,
        /// The item as the state holds it (shared with the state).
        item: Arc<WorkItem>,
    },
    /// An approval.
    Approval {
        /// Approval ID.
        approval: Id,
        /// As the state holds it.
        value: Box<Approval>,
    },
    /// A receipt of the idempotency index.
    Receipt {
        /// Sender.
        actor: Id,
        /// Action ID.
        action: Id,
        /// As the state holds it (shared with the state).
        receipt: Arc<StoredReceipt>,
    },
    /// A terminal work event (a valid `expand` trigger).
    Terminal {
        /// Its seq.
        seq: u64,
        /// Its work item.
        work: Id,
    },
    /// A recorded expansion.
    Expansion {
        /// Trigger seq.
        trigger: u64,
        /// The disposition.
        expansion: Box<Expansion>,
    },
    /// A redacted seq.
    Redacted {
        /// The seq whose opaque values were erased.
        seq: u64,
    },
    /// A late result recorded as evidence.
    Evidence {
        /// Position in the evidence list, from 0.
        index: u64,
        /// The note.
        note: Box<EvidenceNote>,
    },
}

impl Row {
    /// The row's key: `header`, `member/<actor>`, `work/<id>`, `approval/<id>`,
    /// `receipt/<actor>/<action>`, `terminal/<seq>`, `expansion/<seq>`, `redacted/<seq>`,
    /// `evidence/<index>`. IDs never contain `/`.
    pub fn key(&self) -> String {
        match self {
            Row::Header(_) => "header".to_owned(),
            Row::Member { actor, .. } => format!("member/{actor}"),
            Row::Work { work, .. } => format!("work/{work}"),
            Row::Approval { approval, .. } => format!("approval/{approval}"),
            Row::Receipt { actor, action, .. } => format!("receipt/{actor}/{action}"),
            Row::Terminal { seq, .. } => format!("terminal/{seq}"),
            Row::Expansion { trigger, .. } => format!("expansion/{trigger}"),
            Row::Redacted { seq } => format!("redacted/{seq}"),
            Row::Evidence { index, .. } => format!("evidence/{index}"),
        }
    }
}

/// A work item on the agent's local queue: queued, every dependency succeeded, attempts
/// left. It is on the frontier at `now` when `not_before ≤ now` and its deadline has not
/// passed (SPEC §5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueEntry {
    /// Work item.
    pub work: Id,
    /// Not claimable before this time.
    pub not_before: u64,
    /// Not claimable from this time on.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::canonical::some"
    )]
    pub deadline_at: Option<u64>,
}

impl QueueEntry {
    /// Whether the item is on the frontier at `now_ms`.
    pub fn ready_at(&self, now_ms: u64) -> bool {
        self.not_before <= now_ms && self.deadline_at.is_none_or(|d| now_ms < d)
    }
}

/// A change to the local work queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum QueueChange {
    /// The item is (still) queued, with these times.
    Put(QueueEntry),
    /// The item left the queue.
    Remove {
        /// Work item.
        work: Id,
    },
}

/// The latest checkpoint of a work item, with its value (the state keeps only its hash), so
/// a new owner can resume from it. A redacted checkpoint carries the redaction marker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointRecord {
    /// Work item.
    pub work: Id,
    /// Seq of the event that recorded it.
    pub seq: u64,
    /// The opaque checkpoint data.
    pub data: Opaque,
}

/// Everything one local transaction makes durable, in the order of the safe local apply
/// cycle (seed "Projection transaction"): processed event IDs, then projection rows and
/// queue changes, then checkpoint and outbox intents and the effect journal, then the new
/// cursor. A host commits a write set whole (one IndexedDB readwrite transaction, one file
/// append with fsync) or not at all; [`ReplicaImage::commit`] and
/// [`crate::agent::AgentImage::commit`] are the reference of what committing means.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WriteSet {
    /// Group.
    pub group: Option<Id>,
    /// Position in the agent's sequence of write sets (1, 2, …); 0 from a bare replica.
    pub serial: u64,
    /// A snapshot restore: drop every projection row, queue entry, checkpoint and processed
    /// ID before writing what follows (outbox, journal and meta are kept).
    pub reset: bool,
    /// Events applied, in seq order (the processed-event table).
    pub applied: Vec<AppliedEvent>,
    /// Projection rows to upsert, in order (a later row with the same key wins).
    pub projection: Vec<Row>,
    /// Local work queue changes, in order.
    pub queue: Vec<QueueChange>,
    /// Checkpoint records to upsert (latest per work item).
    pub checkpoints: Vec<CheckpointRecord>,
    /// Outbox intents: commands to keep until their receipt is known.
    pub outbox: Vec<OutboxChange>,
    /// Effect journal entries to upsert.
    pub effects: Vec<EffectEntry>,
    /// The agent's own counters, when they changed.
    pub meta: Option<AgentMeta>,
    /// The durable cursor after this write set.
    pub cursor: u64,
}

impl WriteSet {
    /// Reads a write set from its canonical CBOR, refusing any other encoding, by readers of
    /// its own (the `read` module): what `canonical::from_slice(bytes, Strictness::Canonical)` gives
    /// through serde's derive, which a test holds them to. Not generic, so it is built once, in
    /// this crate (docs/decisions.md, "Decoding the core's types outside the core").
    pub fn from_canonical(
        bytes: &[u8],
    ) -> std::result::Result<WriteSet, crate::canonical::CanonError> {
        crate::canonical::read_whole(bytes)
    }

    /// Whether committing it would change nothing but the serial.
    pub fn is_empty(&self) -> bool {
        !self.reset
            && self.applied.is_empty()
            && self.projection.is_empty()
            && self.queue.is_empty()
            && self.checkpoints.is_empty()
            && self.outbox.is_empty()
            && self.effects.is_empty()
            && self.meta.is_none()
    }

    /// Appends `next` (a later write set) to this one, so both commit as one.
    pub fn merge(&mut self, next: WriteSet) {
        if next.reset {
            self.reset = true;
            self.applied.clear();
            self.projection.clear();
            self.queue.clear();
            self.checkpoints.clear();
        }
        if next.group.is_some() {
            self.group = next.group;
        }
        self.applied.extend(next.applied);
        self.projection.extend(next.projection);
        self.queue.extend(next.queue);
        self.checkpoints.extend(next.checkpoints);
        self.outbox.extend(next.outbox);
        self.effects.extend(next.effects);
        if next.meta.is_some() {
            self.meta = next.meta;
        }
        self.cursor = next.cursor;
    }
}

/// What a host holds for a replica after committing write sets: the projection rows, the
/// queue, the checkpoints, the recent processed IDs and the durable cursor. The reference
/// model of a replica store; [`Replica::from_image`] reopens from it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplicaImage {
    /// Projection rows by [`Row::key`].
    pub rows: BTreeMap<String, Row>,
    /// Local work queue.
    pub queue: BTreeMap<Id, QueueEntry>,
    /// Latest checkpoint per work item.
    pub checkpoints: BTreeMap<Id, CheckpointRecord>,
    /// The most recent processed event IDs (at most [`RECENT_IDS`]), oldest first.
    pub recent: VecDeque<AppliedEvent>,
    /// The durable cursor: what an ACK carries.
    pub cursor: u64,
}

impl ReplicaImage {
    /// Commits the projection part of a write set. Applied events must continue the cursor
    /// (or follow a reset); anything else is `STORAGE` and changes nothing.
    pub fn commit(&mut self, ws: &WriteSet) -> Result<()> {
        let base = if ws.reset { None } else { Some(self.cursor) };
        if let (Some(base), Some(first)) = (base, ws.applied.first()) {
            if first.seq != base + 1 {
                return Err(Error::new(
                    Code::Storage,
                    format!(
                        "write set applies seq {} but the durable cursor is {base}; commit write sets in order",
                        first.seq
                    ),
                ));
            }
        }
        if ws.applied.windows(2).any(|w| w[1].seq != w[0].seq + 1) {
            return Err(Error::new(
                Code::Storage,
                "write set applies events with a gap",
            ));
        }
        if ws.reset {
            self.rows.clear();
            self.queue.clear();
            self.checkpoints.clear();
            self.recent.clear();
        }
        for a in &ws.applied {
            if self.recent.len() == RECENT_IDS {
                self.recent.pop_front();
            }
            self.recent.push_back(*a);
        }
        for row in &ws.projection {
            self.rows.insert(row.key(), row.clone());
        }
        for q in &ws.queue {
            match q {
                QueueChange::Put(e) => {
                    self.queue.insert(e.work.clone(), e.clone());
                }
                QueueChange::Remove { work } => {
                    self.queue.remove(work);
                }
            }
        }
        for c in &ws.checkpoints {
            self.checkpoints.insert(c.work.clone(), c.clone());
        }
        self.cursor = ws.cursor;
        Ok(())
    }

    /// The Group state the rows describe (`None` before genesis).
    pub fn state(&self) -> Result<Option<GroupState>> {
        let Some(Row::Header(h)) = self.rows.get("header") else {
            if self.rows.is_empty() {
                return Ok(None);
            }
            return Err(Error::corrupt("projection has rows but no header row"));
        };
        let mut s = GroupState {
            org: h.org.clone(),
            group: h.group.clone(),
            mission: h.mission.clone(),
            title: h.title,
            authority_key: h.authority_key,
            seq: h.seq,
            head: h.head,
            revision: h.revision,
            members_revision: h.members_revision,
            archived: h.archived,
            members: BTreeMap::new(),
            work: WorkItems::new(),
            approvals: BTreeMap::new(),
            receipts: BTreeMap::new(),
            terminal: BTreeMap::new(),
            expansions: BTreeMap::new(),
            redacted: BTreeSet::new(),
            evidence: Vec::new(),
            deadlines: Default::default(),
        };
        let mut evidence = BTreeMap::new();
        for row in self.rows.values() {
            match row {
                Row::Header(_) => {}
                Row::Member { actor, member } => {
                    s.members.insert(actor.clone(), Member::clone(member));
                }
                Row::Work { work, item } => {
                    s.work.insert_shared(work.clone(), Arc::clone(item));
                }
                Row::Approval { approval, value } => {
                    s.approvals.insert(approval.clone(), Approval::clone(value));
                }
                Row::Receipt {
                    actor,
                    action,
                    receipt,
                } => {
                    s.receipts
                        .entry(actor.clone())
                        .or_default()
                        .insert_shared(action.clone(), Arc::clone(receipt));
                }
                Row::Terminal { seq, work } => {
                    s.terminal.insert(*seq, work.clone());
                }
                Row::Expansion { trigger, expansion } => {
                    s.expansions.insert(*trigger, Expansion::clone(expansion));
                }
                Row::Redacted { seq } => {
                    s.redacted.insert(*seq);
                }
                Row::Evidence { index, note } => {
                    evidence.insert(*index, EvidenceNote::clone(note));
                }
            }
        }
        for (i, (index, note)) in evidence.into_iter().enumerate() {
            if index != i as u64 {
                return Err(Error::corrupt(format!("evidence row {i} is missing")));
            }
            s.evidence.push(note);
        }
        if s.seq != self.cursor {
            return Err(Error::corrupt(format!(
                "projection is at seq {} but the durable cursor is {}",
                s.seq, self.cursor
            )));
        }
        Ok(Some(s))
    }
}

/// One Group's replica: the state, the cursor, recent processed IDs, the early-event buffer
/// and the local work queue.
#[derive(Debug, Clone)]
pub struct Replica {
    group: Id,
    state: Option<GroupState>,
    buffer: BTreeMap<u64, Event>,
    recent: VecDeque<AppliedEvent>,
    queue: BTreeMap<Id, QueueEntry>,
    dependents: IdMap<Vec<Id>>,
    limits: Limits,
    /// Highest seq a signed head or snapshot vouches for; events past it are provisional.
    verified_through: u64,
    /// The latest signed head that verified against the chain.
    verified_head: Option<SignedHead>,
    /// The highest signed head ahead of the cursor, checked when its seq is applied.
    pending_head: Option<SignedHead>,
}

/// The answer to [`Replica::offer_head`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadOffer {
    /// The head names an applied event and its id: every event up to it is verified.
    Verified {
        /// The replica's verified seq now.
        through: u64,
    },
    /// The head is ahead of the cursor: it is checked when its seq is applied.
    Ahead {
        /// The replica's verified seq (unchanged).
        through: u64,
    },
    /// The head is older than the ids the replica remembers and below what is verified:
    /// nothing to check.
    Stale {
        /// The replica's verified seq (unchanged).
        through: u64,
    },
}

impl HeadOffer {
    /// The replica's verified seq after the offer.
    pub fn through(&self) -> u64 {
        match self {
            HeadOffer::Verified { through }
            | HeadOffer::Ahead { through }
            | HeadOffer::Stale { through } => *through,
        }
    }
}

impl Replica {
    /// An empty replica of `group`.
    pub fn new(group: Id) -> Self {
        Replica::with_limits(group, Limits::default())
    }

    /// An empty replica with the given limits.
    pub fn with_limits(group: Id, limits: Limits) -> Self {
        Replica {
            group,
            state: None,
            buffer: BTreeMap::new(),
            recent: VecDeque::new(),
            queue: BTreeMap::new(),
            dependents: IdMap::new(),
            limits,
            verified_through: 0,
            verified_head: None,
            pending_head: None,
        }
    }

    /// A replica resumed from a state (restored from a snapshot or a local projection).
    pub fn from_state(state: GroupState) -> Self {
        let mut r = Replica::new(state.group.clone());
        r.install(state);
        r
    }

    /// Reopens from what a host committed. The queue is recomputed from the state and must
    /// agree with the stored one (`LOG_CORRUPT` otherwise).
    pub fn from_image(group: Id, image: &ReplicaImage, limits: Limits) -> Result<Self> {
        let mut r = Replica::with_limits(group, limits);
        if let Some(state) = image.state()? {
            if state.group != r.group {
                return Err(Error::corrupt(format!(
                    "stored projection is of group {}, not {}",
                    state.group, r.group
                )));
            }
            r.install(state);
        }
        if r.queue != image.queue {
            return Err(Error::corrupt(
                "stored work queue disagrees with the stored projection",
            ));
        }
        r.recent = image.recent.clone();
        Ok(r)
    }

    /// Replaces the state and rebuilds the queue and the dependency index from it.
    fn install(&mut self, state: GroupState) {
        self.dependents.clear();
        for (id, w) in &state.work {
            for a in &w.after {
                self.dependents.get_or_default(a.clone()).push(id.clone());
            }
        }
        self.queue = state
            .work
            .keys()
            .filter_map(|w| eligible(&state, w))
            .map(|e| (e.work.clone(), e))
            .collect();
        self.recent.clear();
        self.recent.push_back(AppliedEvent {
            seq: state.seq,
            id: state.head,
        });
        let cursor = state.seq;
        let head = state.head;
        self.state = Some(state);
        self.buffer.retain(|seq, _| *seq > cursor);
        // A pending head the new state reaches is checked against it, or let go.
        if let Some(p) = self.pending_head.take_if(|p| p.seq <= cursor) {
            if p.seq == cursor && p.id == head {
                self.vouch(&p);
            }
        }
    }

    /// The write set that replaces a host's projection with the current state, followed by
    /// any buffered events the restore made contiguous.
    fn reset_write_set(&mut self) -> WriteSet {
        let mut ws = WriteSet {
            group: Some(self.group.clone()),
            reset: true,
            cursor: self.cursor(),
            ..WriteSet::default()
        };
        if let Some(s) = &self.state {
            ws.applied.push(AppliedEvent {
                seq: s.seq,
                id: s.head,
            });
            all_rows(s, &mut ws.projection);
        }
        ws.queue = self.queue.values().cloned().map(QueueChange::Put).collect();
        // Dropped buffered events will be delivered again; nothing else to report.
        let _dropped = self.drain(&mut ws);
        ws.cursor = self.cursor();
        ws
    }

    /// Applies buffered events while they continue the cursor. A buffered event that does
    /// not apply is dropped (the true one will be delivered again) and returned.
    fn drain(&mut self, ws: &mut WriteSet) -> Vec<Error> {
        let mut dropped = Vec::new();
        while let Some(next) = self.buffer.remove(&(self.cursor() + 1)) {
            if let Err(e) = self.apply_one(&next, ws) {
                dropped.push(e);
                break;
            }
        }
        dropped
    }

    /// Restores from a decoded snapshot after validating it (SPEC §8, in order: schema,
    /// state hash, signature against `trusted`, org and group, `seq ≥ requested_cursor`).
    /// On error nothing changes. Replay then resumes strictly after the snapshot's seq.
    pub fn restore(
        &mut self,
        snapshot: &Snapshot,
        trusted: &PublicKey,
        org: &Id,
        requested_cursor: u64,
    ) -> Result<WriteSet> {
        let state = snapshot.verify(trusted, org, &self.group, requested_cursor)?;
        self.check_restore_point(state)?;
        self.install(state.clone());
        self.verified_through = self.verified_through.max(snapshot.seq);
        Ok(self.reset_write_set())
    }

    /// Restores from a snapshot's stored bytes (the fast path: the state is decoded once and
    /// hashed from the bytes, never re-encoded). Same checks and guarantees as
    /// [`Replica::restore`].
    pub fn restore_bytes(
        &mut self,
        bytes: &[u8],
        trusted: &PublicKey,
        org: &Id,
        requested_cursor: u64,
    ) -> Result<WriteSet> {
        let snap = Snapshot::verify_bytes(bytes, trusted, org, &self.group, requested_cursor)?;
        self.check_restore_point(&snap.state)?;
        self.verified_through = self.verified_through.max(snap.seq);
        self.install(snap.state);
        Ok(self.reset_write_set())
    }

    /// A snapshot at a seq this replica already applied must be of the same chain.
    fn check_restore_point(&self, state: &GroupState) -> Result<()> {
        if state.seq < self.cursor() {
            return Err(Error::new(
                Code::SnapshotInvalid,
                format!(
                    "snapshot rejected: seq {} is older than this replica's cursor {}",
                    state.seq,
                    self.cursor()
                ),
            )
            .with("check", "seq"));
        }
        if state.seq == self.cursor() && state.head != self.head() {
            return Err(Error::new(
                Code::SnapshotInvalid,
                format!(
                    "snapshot rejected: its chain head at seq {} is {}, but this replica applied {}",
                    state.seq,
                    state.head,
                    self.head()
                ),
            )
            .with("check", "seq"));
        }
        Ok(())
    }

    /// The group.
    pub fn group(&self) -> &Id {
        &self.group
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Highest contiguous seq applied: what an ACK carries once durable.
    pub fn cursor(&self) -> u64 {
        self.state.as_ref().map_or(0, |s| s.seq)
    }

    /// Id of the event at the cursor.
    pub fn head(&self) -> Hash {
        self.state.as_ref().map_or(Hash::ZERO, |s| s.head)
    }

    /// The state, once the genesis event is applied.
    pub fn state(&self) -> Option<&GroupState> {
        self.state.as_ref()
    }

    /// Hash of the state (all zeros before genesis).
    pub fn state_hash(&self) -> Result<Hash> {
        match &self.state {
            Some(s) => s.hash(),
            None => Ok(Hash::ZERO),
        }
    }

    /// Highest seq a verified signed head (or a restored signed snapshot) vouches for. Every
    /// applied event past it is provisional (SPEC §8a).
    pub fn verified_through(&self) -> u64 {
        self.verified_through
    }

    /// Whether the applied event `seq` is provisional: applied, but past every verified head.
    pub fn is_provisional(&self, seq: u64) -> bool {
        seq > self.verified_through
    }

    /// The latest signed head that verified against this replica's chain.
    pub fn verified_head(&self) -> Option<&SignedHead> {
        self.verified_head.as_ref()
    }

    /// Offers a signed head (SPEC §8a). It must verify under `trusted`, the authority key the
    /// caller pins (`HEAD_INVALID` naming the check otherwise; also for another org than the
    /// replica's). A head at an applied seq whose id the replica remembers is checked now;
    /// a head ahead of the cursor is kept (the highest one) and checked when its seq is
    /// applied: an event there with another id is refused. A head whose id differs from the
    /// chain's is `FORK`, with the heads as evidence (`heads`, and `proof` when the two heads
    /// name one seq). On error nothing changes.
    pub fn offer_head(&mut self, head: &SignedHead, trusted: &PublicKey) -> Result<HeadOffer> {
        head.verify(trusted, &self.group)?;
        if let Some(s) = &self.state {
            if head.org != s.org {
                return Err(Error::new(
                    Code::HeadInvalid,
                    format!("head rejected: it is of org {}, not {}", head.org, s.org),
                )
                .with("check", "org"));
            }
        }
        let through = self.verified_through;
        if head.seq > self.cursor() {
            if self.pending_head.as_ref().is_none_or(|p| p.seq < head.seq) {
                self.pending_head = Some(head.clone());
            } else if let Some(p) = &self.pending_head {
                if p.seq == head.seq && p.id != head.id {
                    return Err(self.fork(head, p.id, *trusted));
                }
            }
            return Ok(HeadOffer::Ahead { through });
        }
        let Some(ours) = self.recent_id(head.seq) else {
            return Ok(HeadOffer::Stale { through });
        };
        if ours != head.id {
            return Err(self.fork(head, ours, *trusted));
        }
        self.vouch(head);
        Ok(HeadOffer::Verified {
            through: self.verified_through,
        })
    }

    /// Records a head that matched the chain.
    fn vouch(&mut self, head: &SignedHead) {
        if head.seq >= self.verified_through {
            self.verified_through = head.seq;
        }
        if self
            .verified_head
            .as_ref()
            .is_none_or(|v| v.seq <= head.seq)
        {
            self.verified_head = Some(head.clone());
        }
        if self
            .pending_head
            .as_ref()
            .is_some_and(|p| p.seq <= head.seq)
        {
            self.pending_head = None;
        }
    }

    /// The `FORK` error for `head`, which names `chain_id` another id.
    fn fork(&self, head: &SignedHead, chain_id: Hash, trusted: PublicKey) -> Error {
        let mut heads = vec![serde_json::to_value(head).unwrap_or_default()];
        let mut err = Error::new(
            Code::Fork,
            format!(
                "signed head for seq {} names id {}, but the chain has {chain_id} there",
                head.seq, head.id
            ),
        )
        .with("seq", head.seq)
        .with("chain_id", chain_id.to_hex())
        .with("verified_through", self.verified_through);
        let other = [self.verified_head.as_ref(), self.pending_head.as_ref()]
            .into_iter()
            .flatten()
            .find(|h| h.seq == head.seq && h.id == chain_id);
        if let Some(other) = other {
            heads.push(serde_json::to_value(other).unwrap_or_default());
            if let Ok(bytes) = ForkProof::of_heads(trusted, other.clone(), head.clone()).to_cbor() {
                err = err.with("proof", const_hex::encode(bytes));
            }
        } else if let Some(v) = &self.verified_head {
            heads.push(serde_json::to_value(v).unwrap_or_default());
        }
        if head.seq > self.verified_through {
            err.message.push_str(
                "; the events past the last verified head are not the authority's: \
                 rebuild from a verified point",
            );
        }
        err.with("heads", heads)
    }

    /// Number of early events waiting.
    pub fn buffered(&self) -> usize {
        self.buffer.len()
    }

    /// Lowest seq waiting in the buffer.
    pub fn first_buffered(&self) -> Option<u64> {
        self.buffer.keys().next().copied()
    }

    /// The local work queue.
    pub fn queue(&self) -> &BTreeMap<Id, QueueEntry> {
        &self.queue
    }

    /// The frontier at `now_ms`: queue entries ready now. Equals
    /// [`GroupState::frontier`] without scanning every work item.
    pub fn frontier(&self, now_ms: u64) -> impl Iterator<Item = &QueueEntry> {
        self.queue.values().filter(move |e| e.ready_at(now_ms))
    }

    /// Decodes stored or received canonical CBOR and offers it. Bytes that do not decode
    /// are `Rejected` (`LOG_CORRUPT`).
    pub fn offer_bytes(&mut self, bytes: &[u8]) -> Offer {
        self.offer_bytes_with(bytes, |_| {})
    }

    /// [`Replica::offer_bytes`], showing the decoded event to `seen` before it is offered:
    /// what a host that stores the bytes of the events it applies learns of each (its seq,
    /// id and kind) without decoding it again. `seen` is not called when the bytes do not
    /// decode or their payload hash or id do not verify (then the answer is `Rejected`, and
    /// its error carries the event's `seq` when the bytes decoded but did not verify).
    pub fn offer_bytes_with(&mut self, bytes: &[u8], seen: impl FnOnce(&Event)) -> Offer {
        // Verified where the bytes lie (`Event::from_cbor_verified`), which is what `offer`
        // would check next.
        match Event::from_cbor_verified(bytes) {
            Ok(e) => {
                seen(&e);
                self.offer_checked(e, true)
            }
            Err(e) => Offer::Rejected(e),
        }
    }

    /// Offers one delivered event (see the module doc for the order of checks).
    pub fn offer(&mut self, event: Event) -> Offer {
        self.offer_checked(event, false)
    }

    /// [`Replica::offer`], skipping the payload-hash and id check when `verified`.
    fn offer_checked(&mut self, event: Event, verified: bool) -> Offer {
        if event.group != self.group {
            return Offer::Rejected(
                Error::corrupt(format!(
                    "event seq {} belongs to group {}, not {}",
                    event.seq, event.group, self.group
                ))
                .with("seq", event.seq),
            );
        }
        if event.seq == 0 {
            return Offer::Rejected(Error::corrupt(
                "event seq 0 does not exist; seqs start at 1",
            ));
        }
        if !verified {
            if let Err(e) = event.verify() {
                return Offer::Rejected(e);
            }
        }
        let cursor = self.cursor();
        if event.seq <= cursor {
            if let Some(known) = self.recent_id(event.seq) {
                if known != event.id {
                    return Offer::Rejected(
                        Error::corrupt(format!(
                            "event seq {} has id {}, but the event applied at that seq is {known}",
                            event.seq, event.id
                        ))
                        .with("seq", event.seq),
                    );
                }
            }
            return Offer::Duplicate;
        }
        if let Some(b) = self.buffer.get(&event.seq) {
            if b.id == event.id {
                return Offer::Duplicate;
            }
            return Offer::Rejected(
                Error::corrupt(format!(
                    "a different event with seq {} is already buffered; the chain will decide",
                    event.seq
                ))
                .with("seq", event.seq),
            );
        }
        if event.seq > cursor + 1 {
            if self.buffer.len() >= self.limits.max_buffered_events {
                return Offer::Rejected(
                    Error::malformed(format!(
                        "buffer holds {} early events, the limit; deliver seq {} first",
                        self.buffer.len(),
                        cursor + 1
                    ))
                    .with("limit", self.limits.max_buffered_events),
                );
            }
            self.buffer.insert(event.seq, event);
            return Offer::Buffered;
        }
        let mut ws = WriteSet {
            group: Some(self.group.clone()),
            ..WriteSet::default()
        };
        if let Err(e) = self.apply_one(&event, &mut ws) {
            return Offer::Rejected(e);
        }
        let dropped = self.drain(&mut ws);
        ws.cursor = self.cursor();
        Offer::Applied {
            cursor: ws.cursor,
            write_set: ws,
            dropped,
        }
    }

    /// The `FORK` error for an event arriving at a pending head's seq with another id: the
    /// event is refused, the source's history is not the one the authority signed.
    fn fork_at_apply(&self, head: &SignedHead, id: Hash) -> Error {
        let mut heads = vec![serde_json::to_value(head).unwrap_or_default()];
        if let Some(v) = &self.verified_head {
            heads.push(serde_json::to_value(v).unwrap_or_default());
        }
        Error::new(
            Code::Fork,
            format!(
                "event seq {} has id {id}, but the authority's signed head names {} there; \
                 the event is refused (events past seq {} are not verified)",
                head.seq, head.id, self.verified_through
            ),
        )
        .with("seq", head.seq)
        .with("chain_id", id.to_hex())
        .with("verified_through", self.verified_through)
        .with("heads", heads)
    }

    fn recent_id(&self, seq: u64) -> Option<Hash> {
        let first = self.recent.front()?.seq;
        let i = usize::try_from(seq.checked_sub(first)?).ok()?;
        self.recent.get(i).filter(|a| a.seq == seq).map(|a| a.id)
    }

    /// Applies the next contiguous event and records what changed in `ws`. On error
    /// nothing changed.
    fn apply_one(&mut self, event: &Event, ws: &mut WriteSet) -> Result<()> {
        let pending = self.pending_head.take_if(|p| p.seq == event.seq);
        if let Some(p) = &pending {
            if p.id != event.id {
                let err = self.fork_at_apply(p, event.id);
                self.pending_head = pending;
                return Err(err);
            }
        }
        if let Err(e) = GroupState::apply_to(&mut self.state, event) {
            self.pending_head = self.pending_head.take().or(pending);
            return Err(e);
        }
        if let Some(p) = &pending {
            self.vouch(p);
        }
        let state = self
            .state
            .as_ref()
            .expect("apply_to leaves a state on success");
        if self.recent.len() >= RECENT_IDS {
            self.recent.pop_front();
        }
        let applied = AppliedEvent {
            seq: event.seq,
            id: event.id,
        };
        self.recent.push_back(applied);
        ws.applied.push(applied);

        let mut works: Vec<&Id> = Vec::new();
        touched(state, event, &mut ws.projection, &mut works);
        for w in &works {
            if let Some(item) = state.work.get_shared(*w) {
                ws.projection.push(Row::Work {
                    work: (*w).clone(),
                    item: Arc::clone(item),
                });
            }
        }

        // The per-Group queue: every touched item and, if its state changed, its dependents.
        let mut check: BTreeSet<Id> = BTreeSet::new();
        for w in &works {
            check.insert((*w).clone());
            if let Some(item) = state.work.get(*w) {
                for a in &item.after {
                    // A created item joins its dependencies' dependents.
                    if matches!(
                        event.kind,
                        EventKind::WorkCreated(_) | EventKind::WorkExpanded(_)
                    ) {
                        self.dependents.get_or_default(a.clone()).push((*w).clone());
                    }
                }
                if item.state == WorkState::Succeeded {
                    if let Some(deps) = self.dependents.get(*w) {
                        check.extend(deps.iter().cloned());
                    }
                }
            }
        }
        for w in check {
            let entry = eligible(state, &w);
            match (self.queue.get(&w), entry) {
                (old, Some(e)) if old != Some(&e) => {
                    self.queue.insert(w, e.clone());
                    ws.queue.push(QueueChange::Put(e));
                }
                (Some(_), None) => {
                    self.queue.remove(&w);
                    ws.queue.push(QueueChange::Remove { work: w });
                }
                _ => {}
            }
        }

        checkpoints(state, event, &mut ws.checkpoints);
        ws.cursor = state.seq;
        Ok(())
    }
}

/// The queue entry of `work`, if it is queued with every dependency succeeded and attempts
/// left (the time conditions of the frontier are kept in the entry).
fn eligible(state: &GroupState, work: &Id) -> Option<QueueEntry> {
    let w = state.work.get(work)?;
    let ok = w.state == WorkState::Queued
        && w.attempts < w.contract.max_attempts
        && w.after.iter().all(|a| {
            state
                .work
                .get(a)
                .is_some_and(|d| d.state == WorkState::Succeeded)
        });
    ok.then(|| QueueEntry {
        work: work.clone(),
        not_before: w.not_before,
        deadline_at: w.contract.deadline_at,
    })
}

/// The rows an applied event changed (work items are returned in `works`, to be written
/// once), read from the state after it.
fn touched<'a>(state: &GroupState, event: &'a Event, rows: &mut Vec<Row>, works: &mut Vec<&'a Id>) {
    rows.push(Row::Header(Box::new(GroupHeader::of(state))));
    if let Some(r) = state
        .receipts
        .get(&event.actor)
        .and_then(|m| m.get_shared(&event.action))
    {
        rows.push(Row::Receipt {
            actor: event.actor.clone(),
            action: event.action.clone(),
            receipt: Arc::clone(r),
        });
    }
    let member = |actor: &Id, rows: &mut Vec<Row>| {
        if let Some(m) = state.members.get(actor) {
            rows.push(Row::Member {
                actor: actor.clone(),
                member: Box::new(m.clone()),
            });
        }
    };
    match &event.kind {
        EventKind::GroupOpened(g) => {
            for m in &g.members {
                member(&m.actor, rows);
            }
        }
        EventKind::MemberAdded(m) => member(&m.actor, rows),
        EventKind::RoleChanged(m) => member(&m.actor, rows),
        EventKind::MemberRemoved(m) => {
            member(&m.actor, rows);
            works.extend(m.revoked.iter().map(|r| &r.work));
        }
        EventKind::SessionReplaced(s) => {
            member(&event.actor, rows);
            works.extend(s.revoked.iter().map(|r| &r.work));
        }
        EventKind::LeasesExpired(e) => works.extend(e.expired.iter().map(|r| &r.work)),
        EventKind::WorkCreated(c) => works.push(&c.work),
        EventKind::WorkExpanded(x) => {
            works.extend(x.work.iter().map(|w| &w.work));
            if let Some(e) = state.expansions.get(&x.trigger) {
                rows.push(Row::Expansion {
                    trigger: x.trigger,
                    expansion: Box::new(e.clone()),
                });
            }
        }
        EventKind::WorkClaimed(c) => works.push(&c.work),
        EventKind::WorkStarted(s) => works.push(&s.work),
        EventKind::LeaseRenewed(s) => works.push(&s.work),
        EventKind::WorkCheckpointed(s) => works.push(&s.work),
        EventKind::WorkBlocked(s) => works.push(&s.work),
        EventKind::BlockResolved(s) => works.push(&s.work),
        EventKind::WorkSucceeded(s) => works.push(&s.work),
        EventKind::WorkFailed(s) => works.push(&s.work),
        EventKind::WorkCancelled(s) => works.push(&s.work),
        EventKind::WorkReassigned(s) => works.push(&s.work),
        EventKind::EffectIntended(s) => works.push(&s.work),
        EventKind::EffectSettled(s) => works.push(&s.work),
        EventKind::EffectReconciled(s) => works.push(&s.work),
        EventKind::WorkCharged(s) => works.push(&s.work),
        EventKind::ApprovalRequested(a) => approval(state, &a.approval, rows),
        EventKind::ApprovalDecided(a) => approval(state, &a.approval, rows),
        EventKind::EventRedacted(r) => rows.push(Row::Redacted { seq: r.seq }),
        EventKind::GroupArchived(_) => {}
        EventKind::EvidenceRecorded(_) => {
            if let Some((i, note)) = state.evidence.iter().enumerate().next_back() {
                rows.push(Row::Evidence {
                    index: i as u64,
                    note: Box::new(note.clone()),
                });
            }
        }
    }
    if let Some(w) = state.terminal.get(&event.seq) {
        rows.push(Row::Terminal {
            seq: event.seq,
            work: w.clone(),
        });
    }
}

fn approval(state: &GroupState, id: &Id, rows: &mut Vec<Row>) {
    if let Some(a) = state.approvals.get(id) {
        rows.push(Row::Approval {
            approval: id.clone(),
            value: Box::new(a.clone()),
        });
    }
}

/// Every row of a state (a snapshot restore writes them all).
/// What decides most comparisons of identifiers in canonical key order (length, then bytes),
/// as one integer: the length (at most 128) and the first 15 bytes.
fn sort_key(id: &Id) -> u128 {
    let b = id.as_str().as_bytes();
    let mut key = [0u8; 16];
    key[0] = u8::try_from(b.len()).unwrap_or(u8::MAX);
    let n = b.len().min(15);
    key[1..=n].copy_from_slice(&b[..n]);
    u128::from_be_bytes(key)
}

fn all_rows(s: &GroupState, rows: &mut Vec<Row>) {
    rows.push(Row::Header(Box::new(GroupHeader::of(s))));
    for (actor, member) in &s.members {
        rows.push(Row::Member {
            actor: actor.clone(),
            member: Box::new(member.clone()),
        });
    }
    for (work, item) in s.work.iter_shared() {
        rows.push(Row::Work {
            work: work.clone(),
            item: Arc::clone(item),
        });
    }
    for (approval, value) in &s.approvals {
        rows.push(Row::Approval {
            approval: approval.clone(),
            value: Box::new(value.clone()),
        });
    }
    for (actor, by_action) in &s.receipts {
        // In canonical key order (length, then bytes: the order a snapshot lists them in), so
        // that a restore writes the same rows on every host whatever order its table holds
        // them in. One integer decides most comparisons, and the receipts are then visited in
        // about the order they were decoded and allocated in.
        let mut sorted: Vec<(u128, &Id, &Arc<StoredReceipt>)> = by_action
            .iter_shared()
            .map(|(action, receipt)| (sort_key(action), action, receipt))
            .collect();
        // Equal keys mean equal lengths: the bytes decide.
        sorted.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.as_str().cmp(b.1.as_str())));
        rows.extend(sorted.into_iter().map(|(_, action, receipt)| Row::Receipt {
            actor: actor.clone(),
            action: action.clone(),
            receipt: Arc::clone(receipt),
        }));
    }
    for (seq, work) in &s.terminal {
        rows.push(Row::Terminal {
            seq: *seq,
            work: work.clone(),
        });
    }
    for (trigger, expansion) in &s.expansions {
        rows.push(Row::Expansion {
            trigger: *trigger,
            expansion: Box::new(expansion.clone()),
        });
    }
    for seq in &s.redacted {
        rows.push(Row::Redacted { seq: *seq });
    }
    for (i, note) in s.evidence.iter().enumerate() {
        rows.push(Row::Evidence {
            index: i as u64,
            note: Box::new(note.clone()),
        });
    }
}

/// Checkpoint records an applied event creates: the data of a checkpoint, block or charge,
/// and the redaction marker for a latest checkpoint whose event was redacted.
fn checkpoints(state: &GroupState, event: &Event, out: &mut Vec<CheckpointRecord>) {
    let mut put = |work: &Id, data: &Opaque| {
        out.push(CheckpointRecord {
            work: work.clone(),
            seq: event.seq,
            data: data.clone(),
        })
    };
    match &event.kind {
        EventKind::WorkCheckpointed(c) => put(&c.work, &c.data),
        EventKind::WorkBlocked(b) => put(&b.work, &b.data),
        EventKind::WorkCharged(c) => {
            if let Some(d) = &c.data {
                put(&c.work, d);
            }
        }
        EventKind::EventRedacted(r) => {
            for (work, item) in &state.work {
                if let Some(c) = item.checkpoint.filter(|c| c.seq == r.seq) {
                    out.push(CheckpointRecord {
                        work: work.clone(),
                        seq: c.seq,
                        data: opaque::redaction_marker(c.hash),
                    });
                }
            }
        }
        _ => {}
    }
}

/// The core of `mwp replica FILE` (SPEC §11): offers each non-blank line (an event in its
/// JSON form, in the order given) to a fresh replica of the group named by the first event
/// that parses, and returns one line per offer —
/// `{"offer": N, "seq": S, "result": "applied"|"duplicate"|"buffered"|"rejected", "cursor": C}`
/// (a rejected line also carries `"error"`; a line that is not an event has `"seq": null`) —
/// then `{"cursor": C, "state_hash": H}`, H being the state hash at seq C.
/// Signed heads are refused here (no key to check them): see [`run_lines_with`].
pub fn run_lines(text: &str) -> Vec<Value> {
    run_lines_with(text, None)
}

/// Whether a line is a signed head (an object whose `schema` is `mwp.head.v1`) rather than
/// an event: decided on the JSON, without trusting anything in it.
fn is_head_line(line: &str) -> bool {
    line.contains(crate::head::SCHEMA)
        && serde_json::from_str::<Value>(line)
            .ok()
            .and_then(|v| v.get("schema").and_then(Value::as_str).map(str::to_owned))
            .is_some_and(|s| s == crate::head::SCHEMA)
}

/// [`run_lines`] with signed heads: a line whose `schema` is `mwp.head.v1` is offered with
/// [`Replica::offer_head`] under `trusted` (the key given with `--authority-key`) and
/// answered `{"offer": N, "head": SEQ, "result": "verified"|"ahead"|"stale"|"rejected",
/// "verified_through": V}` (plus `"error"` when rejected; a head without a key is rejected).
/// When a key is given or a head line was seen, the final line also carries
/// `"verified_through"`; otherwise the output is exactly [`run_lines`]'s.
pub fn run_lines_with(text: &str, trusted: Option<&PublicKey>) -> Vec<Value> {
    let mut lines = LineReplica::new(trusted);
    let mut out: Vec<Value> = text.lines().filter_map(|l| lines.offer_line(l)).collect();
    out.push(lines.finish());
    out
}

/// [`run_lines_with`] a line at a time, for a reader that streams its input: each non-blank
/// line is answered as it is offered ([`LineReplica::offer_line`]), and
/// [`LineReplica::finish`] gives the closing line. A rejected line changes nothing: in
/// particular, the replica's group is named only by an event the replica did not reject (or
/// a head that verified), so a forged line of another group put first cannot shut out the
/// events after it.
#[derive(Debug)]
pub struct LineReplica {
    replica: Option<Replica>,
    trusted: Option<PublicKey>,
    /// Non-blank lines offered so far.
    offered: u64,
    heads_seen: bool,
}

impl LineReplica {
    /// A fresh replica for `mwp replica`, checking signed heads under `trusted`.
    pub fn new(trusted: Option<&PublicKey>) -> Self {
        LineReplica {
            replica: None,
            trusted: trusted.cloned(),
            offered: 0,
            heads_seen: false,
        }
    }

    /// Answers one line of input: `None` for a blank line (not counted), else its answer.
    pub fn offer_line(&mut self, line: &str) -> Option<Value> {
        if line.trim().is_empty() {
            return None;
        }
        self.offered += 1;
        let n = self.offered;
        if is_head_line(line) {
            return Some(self.offer_head_line(n, line));
        }
        Some(match serde_json::from_str::<Event>(line) {
            Ok(event) => {
                let seq = event.seq;
                let mut fresh = None;
                let replica = match self.replica.as_mut() {
                    Some(r) => r,
                    None => fresh.insert(Replica::new(event.group.clone())),
                };
                let offer = replica.offer(event);
                let mut v = json!({
                    "offer": n, "seq": seq, "result": offer.name(), "cursor": replica.cursor(),
                });
                match offer {
                    Offer::Rejected(e) => v["error"] = json!(e),
                    // Only an event the replica took names its group.
                    _ => {
                        if let Some(fresh) = fresh {
                            self.replica = Some(fresh);
                        }
                    }
                }
                v
            }
            Err(e) => self.not_an_event(Error::malformed(format!(
                "line {n} is not an event: {}",
                crate::canonical::text_refusal(line.as_bytes(), &e)
            ))),
        })
    }

    /// Answers a non-blank line that could not be read as text (`why` says what was wrong):
    /// `rejected` with `seq: null`, as a line that is not an event; it changes nothing.
    pub fn offer_unreadable(&mut self, why: &str) -> Value {
        self.offered += 1;
        let n = self.offered;
        self.not_an_event(Error::malformed(format!("line {n} is not an event: {why}")))
    }

    fn not_an_event(&self, error: Error) -> Value {
        json!({
            "offer": self.offered, "seq": null, "result": "rejected",
            "cursor": self.replica.as_ref().map_or(0, Replica::cursor), "error": error,
        })
    }

    fn offer_head_line(&mut self, n: u64, line: &str) -> Value {
        self.heads_seen = true;
        let head = SignedHead::from_json(line);
        let seq = head.as_ref().map_or(Value::Null, |h| json!(h.seq));
        let answer = match (head, self.trusted.as_ref()) {
            (Err(e), _) => Err(e),
            (Ok(_), None) => Err(Error::new(
                Code::HeadInvalid,
                format!(
                    "line {n} is a signed head, and no authority key was given to check it \
                     (--authority-key HEX)"
                ),
            )
            .with("check", "key")),
            (Ok(h), Some(key)) => match self.replica.as_mut() {
                Some(r) => r.offer_head(&h, key),
                // Before any event, only a head that verifies names the replica's group:
                // a rejected line changes nothing.
                None => {
                    let mut fresh = Replica::new(h.group.clone());
                    let answer = fresh.offer_head(&h, key);
                    if answer.is_ok() {
                        self.replica = Some(fresh);
                    }
                    answer
                }
            },
        };
        let through = self.replica.as_ref().map_or(0, Replica::verified_through);
        let mut v = json!({"offer": n, "head": seq, "verified_through": through});
        match answer {
            Ok(HeadOffer::Verified { .. }) => v["result"] = json!("verified"),
            Ok(HeadOffer::Ahead { .. }) => v["result"] = json!("ahead"),
            Ok(HeadOffer::Stale { .. }) => v["result"] = json!("stale"),
            Err(e) => {
                v["result"] = json!("rejected");
                v["error"] = json!(e);
            }
        }
        v
    }

    /// The closing line: `{"cursor": C, "state_hash": H}` (H the state hash at seq C), with
    /// `"verified_through"` when a key was given or a head line was seen.
    pub fn finish(&self) -> Value {
        let (cursor, hash) = match &self.replica {
            Some(r) => (r.cursor(), r.state_hash()),
            None => (0, Ok(Hash::ZERO)),
        };
        let mut last = match hash {
            Ok(h) => json!({"cursor": cursor, "state_hash": h}),
            Err(e) => json!({"cursor": cursor, "error": e}),
        };
        if self.trusted.is_some() || self.heads_seen {
            last["verified_through"] =
                json!(self.replica.as_ref().map_or(0, Replica::verified_through));
        }
        last
    }
}
