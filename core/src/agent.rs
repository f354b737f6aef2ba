//! The agent driver (SPEC §7): an agent's local bookkeeping for one Group, sans-IO.
//!
//! Like quinn-proto's `Connection`, an [`Agent`] does no IO and reads no clock. Its methods
//! come in four kinds:
//!
//! * **`handle_*`** — inputs, each carrying `now_ms`: events delivered
//!   ([`Agent::handle_events`]), answers to commands ([`Agent::handle_answer`]) and receipt
//!   look-ups ([`Agent::handle_lookup`]), replay errors and snapshots
//!   ([`Agent::handle_fetch_error`], [`Agent::handle_snapshot`]), connectivity
//!   ([`Agent::handle_connectivity`]), timers ([`Agent::handle_timeout`]), observed effect
//!   outcomes ([`Agent::handle_effect_outcome`]) and durable commits
//!   ([`Agent::handle_committed`]). A crash is no input at all: the host drops the agent and
//!   calls [`Agent::restore`] with what it had committed — the ordinary path, no recovery
//!   routine.
//! * **application commands** — what the program doing the work decides: [`Agent::submit`],
//!   [`Agent::fail`], [`Agent::checkpoint`], [`Agent::charge`], [`Agent::intend_effect`],
//!   [`Agent::resolve_effect`], [`Agent::replace_session`]. Claims, starts and renewals are
//!   made by the driver itself.
//! * **`poll_*`** — outputs: [`Agent::poll_write_set`] (persist it whole, then call
//!   [`Agent::handle_committed`]), [`Agent::poll_transmit`] (commands and requests for the
//!   authority), [`Agent::poll_dispatch`] (effects to perform), [`Agent::poll_notice`] (news
//!   for the application) and [`Agent::poll_timeout`] (the next deadline).
//! * getters.
//!
//! The host's loop, written out:
//!
//! ```text
//! loop {
//!     feed inputs: agent.handle_events(now, events) / handle_answer / handle_timeout …
//!     while let Some(ws) = agent.poll_write_set() { store.commit(&ws)?; agent.handle_committed(now, ws.serial); }
//!     while let Some(t) = agent.poll_transmit() { send(t) }
//!     while let Some(d) = agent.poll_dispatch() { perform(d) }   // outcome → handle_effect_outcome
//!     while let Some(n) = agent.poll_notice() { app.notice(n) }
//!     sleep until agent.poll_timeout(), an input, or a message
//! }
//! ```
//!
//! **Durability before consequences.** `poll_transmit` and `poll_dispatch` return nothing
//! while a write set is staged or handed out but not yet committed: a command is in the
//! durable outbox before it is sent, an effect's dispatch is in the durable journal before it
//! happens, and an applied outcome is durable before the work it unblocks is claimed.
//!
//! **Effects.** The journal records each effect: `requested` (the `intend_effect` command is
//! in the outbox), `intended` (accepted: its receipt or event arrived — only now may it be
//! dispatched), `dispatched` (recorded durably before the dispatch is handed out),
//! `observed` (the outcome is known; `settle_effect` carries it), `settled`. An effect whose
//! outcome does not come back within `effect_timeout_ms`, or that was dispatched before a
//! restart, is uncertain: a repeatable one (`read_only`, `keyed`) is dispatched again with
//! the same key; an `undeclared` one is surfaced ([`Notice::Uncertain`]) and never
//! dispatched again until [`Agent::resolve_effect`] says what happened.
//!
//! **Bounded outage** (MWP-WRK-020..022). While the link is down the driver makes no claim,
//! no start and no renewal, and dispatches only read-only, reversible effects of low-risk
//! work. Running work may go on for `grace_ms`; after that it is suspended
//! ([`Notice::Suspended`]) and application commands are refused. Commands made offline wait
//! in the outbox with their binding (work, epoch, lease, op). When the link comes back (and
//! after every restart) each outbox entry is reconciled first by looking up its receipt; if
//! it did not land it is rebased on the current session and fencing fields, given the action
//! ID `<action>~<n>` if its content changed, re-signed and sent.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::accept::effect_key;
use crate::command::{
    Body, Charge, Checkpoint, ClaimWork, Command, EffectMode, Fail, IntendEffect, ReconcileEffect,
    RenewLease, ReplaceSession, Risk, SettleEffect, StartWork, Submit,
};
use crate::crypto::{Hash, PublicKey, SecretKey};
use crate::error::{Code, Error, Result};
use crate::event::Event;
use crate::id::Id;
use crate::lease::{Lease, LeaseEnd, LeaseId};
use crate::limits::Limits;
use crate::opaque::Opaque;
use crate::receipt::{Disposition, Receipt};
use crate::replica::{CheckpointRecord, Offer, Replica, ReplicaImage, Row, WriteSet};
use crate::snapshot::SnapshotRef;
use crate::state::{ApprovalState, GroupState};
use crate::work::{EffectStatus, WorkState};

/// How an agent behaves: who it is and its time budgets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Organization.
    pub org: Id,
    /// Group.
    pub group: Id,
    /// This agent's actor ID.
    pub actor: Id,
    /// The authority key trusted for snapshots.
    pub authority_key: PublicKey,
    /// Most leases held (or being claimed) at once; 0 never claims.
    pub capacity: usize,
    /// Lease length asked for by claims and renewals.
    pub lease_ms: u64,
    /// Start window asked for by claims.
    pub start_within_ms: u64,
    /// Renew a lease when this little time is left.
    pub renew_margin_ms: u64,
    /// How long running work may go on while the authority is unreachable.
    pub grace_ms: u64,
    /// Resend an unanswered command (or look-up) after this long.
    pub resend_ms: u64,
    /// Ask for new events at least this often while connected.
    pub sync_ms: u64,
    /// A dispatched effect without an outcome after this long is uncertain.
    pub effect_timeout_ms: u64,
    /// Limits (the replica's buffer among them).
    pub limits: Limits,
}

impl Config {
    /// A configuration with default time budgets (lease 30 s, start within 5 s, renew 10 s
    /// before expiry, grace 20 s, resend after 2 s, sync every 5 s, effect timeout 10 s,
    /// capacity 1).
    pub fn new(org: Id, group: Id, actor: Id, authority_key: PublicKey) -> Config {
        Config {
            org,
            group,
            actor,
            authority_key,
            capacity: 1,
            lease_ms: 30_000,
            start_within_ms: 5_000,
            renew_margin_ms: 10_000,
            grace_ms: 20_000,
            resend_ms: 2_000,
            sync_ms: 5_000,
            effect_timeout_ms: 10_000,
            limits: Limits::default(),
        }
    }
}

/// The agent's own durable counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentMeta {
    /// Current session epoch.
    pub session: u64,
    /// Number of the next action ID (`a-<n>`).
    pub next_action: u64,
}

impl Default for AgentMeta {
    fn default() -> Self {
        AgentMeta {
            session: 1,
            next_action: 1,
        }
    }
}

/// What an offline command is bound to, kept across rebases (MWP-WRK-021).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// Work item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<Id>,
    /// Ownership epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    /// Lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<LeaseId>,
    /// Effect operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<Id>,
}

/// A command kept until its receipt is known.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutboxEntry {
    /// The action ID it was first made with (its key in the outbox).
    pub base: Id,
    /// How many times it was rebased with changed content (`<base>~<n>`).
    pub rebases: u32,
    /// The signed command as last sent.
    pub command: Command,
    /// What it is bound to.
    pub binding: Binding,
    /// When it was made.
    pub made_at: u64,
    /// Whether it was made while the authority was unreachable.
    pub offline: bool,
}

/// A change to the outbox.
#[allow(clippy::large_enum_variant)] // a transient value; boxing buys nothing
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutboxChange {
    /// Add or replace the entry with this base.
    Put(OutboxEntry),
    /// The entry's outcome is known: drop it.
    Remove {
        /// Its base action ID.
        base: Id,
    },
}

/// Where an effect stands in the agent's journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JournalStatus {
    /// `intend_effect` is in the outbox; not known to be accepted.
    Requested,
    /// The intent is accepted; the effect may be dispatched.
    Intended,
    /// Dispatched (durably recorded first); no outcome yet.
    Dispatched,
    /// Dispatched, and nobody knows whether it happened.
    Uncertain,
    /// The outcome is known; `settle_effect` or `reconcile_effect` carries it.
    Observed,
    /// Closed: settled, reconciled, abandoned with its lease, or never accepted.
    Closed,
}

/// One effect in the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectEntry {
    /// Stable effect key `hex(sha256([mission, work, epoch, op]))`.
    pub key: Hash,
    /// Work item.
    pub work: Id,
    /// Ownership epoch.
    pub epoch: u64,
    /// Lease it was intended under.
    pub lease: LeaseId,
    /// Operation ID.
    pub op: Id,
    /// Repeatability.
    pub mode: EffectMode,
    /// Cannot be undone.
    pub irreversible: bool,
    /// Of high-risk work.
    pub high_risk: bool,
    /// Opaque target.
    pub target: Opaque,
    /// Where it stands.
    pub status: JournalStatus,
    /// Times dispatched.
    pub dispatches: u32,
    /// Time of the last dispatch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatched_at: Option<u64>,
    /// Whether it happened, once known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub happened: Option<bool>,
    /// Observed outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Opaque>,
    /// Observed external receipt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<Opaque>,
}

impl EffectEntry {
    /// Whether dispatching it again cannot do harm (`read_only` or `keyed`).
    pub fn repeatable(&self) -> bool {
        self.mode != EffectMode::Undeclared
    }
}

/// What a host holds for an agent: the replica's projection plus the outbox, the effect
/// journal and the counters. [`Agent::restore`] reopens from it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentImage {
    /// Projection, queue, checkpoints, cursor.
    pub replica: ReplicaImage,
    /// Outbox by base action ID.
    pub outbox: BTreeMap<Id, OutboxEntry>,
    /// Effect journal by key.
    pub effects: BTreeMap<Hash, EffectEntry>,
    /// Counters.
    pub meta: AgentMeta,
    /// Serial of the last committed write set.
    pub serial: u64,
}

impl AgentImage {
    /// Commits a write set: serials must follow each other (`STORAGE` otherwise, and
    /// nothing changes).
    pub fn commit(&mut self, ws: &WriteSet) -> Result<()> {
        if ws.serial != self.serial + 1 {
            return Err(Error::new(
                Code::Storage,
                format!(
                    "write set {} does not follow the last committed one ({})",
                    ws.serial, self.serial
                ),
            ));
        }
        self.replica.commit(ws)?;
        for o in &ws.outbox {
            match o {
                OutboxChange::Put(e) => {
                    self.outbox.insert(e.base.clone(), e.clone());
                }
                OutboxChange::Remove { base } => {
                    self.outbox.remove(base);
                }
            }
        }
        for e in &ws.effects {
            self.effects.insert(e.key, e.clone());
        }
        if let Some(m) = ws.meta {
            self.meta = m;
        }
        self.serial = ws.serial;
        Ok(())
    }
}

/// Something to send to the authority (or the replay source).
#[allow(clippy::large_enum_variant)] // a transient value; boxing buys nothing
#[derive(Debug, Clone, PartialEq)]
pub enum Transmit {
    /// A signed command; answer with [`Agent::handle_answer`].
    Command(Command),
    /// Ask for events with seq > `after`; deliver them with [`Agent::handle_events`], a
    /// replay error with [`Agent::handle_fetch_error`].
    FetchEvents {
        /// The cursor.
        after: u64,
    },
    /// Ask for the receipt of (this agent, `action`); answer with [`Agent::handle_lookup`].
    LookupReceipt {
        /// Action ID.
        action: Id,
    },
    /// Fetch a snapshot; deliver its bytes with [`Agent::handle_snapshot`].
    FetchSnapshot(SnapshotRef),
    /// The highest contiguous durable cursor (MWP-WRK-030).
    Ack {
        /// Cursor.
        cursor: u64,
    },
}

/// An effect to perform now. Report what happened with [`Agent::handle_effect_outcome`].
#[derive(Debug, Clone, PartialEq)]
pub struct Dispatch {
    /// Stable key: pass it to the target as its idempotency key.
    pub key: Hash,
    /// Work item.
    pub work: Id,
    /// Operation.
    pub op: Id,
    /// Repeatability.
    pub mode: EffectMode,
    /// Cannot be undone.
    pub irreversible: bool,
    /// Opaque target.
    pub target: Opaque,
    /// 1 for the first dispatch, more for a repeatable effect sent again.
    pub attempt: u32,
}

/// News for the application.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// Run this work under this lease (again, after a restart: `resumed`).
    Run {
        /// Work item.
        work: Id,
        /// Lease.
        lease: LeaseId,
        /// Ownership epoch.
        epoch: u64,
        /// Latest checkpoint known locally, if any.
        checkpoint: Option<CheckpointRecord>,
        /// Whether it was started by an earlier run of this agent.
        resumed: bool,
    },
    /// The lease was released by this agent's own checkpoint, block, submit or fail.
    Released {
        /// Work item.
        work: Id,
        /// Lease.
        lease: LeaseId,
        /// The item's state after.
        state: WorkState,
    },
    /// The lease was revoked or expired (or its time passed locally): stop the work.
    LeaseLost {
        /// Work item.
        work: Id,
        /// Lease.
        lease: LeaseId,
        /// `revoked`, `expired`, `expired_locally` or `session_replaced`.
        reason: &'static str,
    },
    /// The authority has been unreachable longer than `grace_ms`: pause this work.
    Suspended {
        /// Work item.
        work: Id,
    },
    /// An undeclared effect's outcome is unknown: find out, then call
    /// [`Agent::resolve_effect`]. It will not be dispatched again until then.
    Uncertain {
        /// Effect key.
        key: Hash,
        /// Work item.
        work: Id,
        /// Operation.
        op: Id,
    },
    /// A command was accepted as evidence only (its lease was stale).
    Evidence {
        /// Action ID.
        action: Id,
        /// The receipt.
        receipt: Receipt,
    },
    /// A command was rejected.
    Rejected {
        /// Action ID.
        action: Id,
        /// Its body type.
        command: &'static str,
        /// The error.
        error: Error,
    },
    /// A buffered command could not be rebased (its lease is gone) and was dropped.
    Dropped {
        /// Action ID.
        action: Id,
        /// Why.
        reason: String,
    },
    /// A delivered event or snapshot did not verify.
    Corrupt(Error),
}

/// Volatile state of an outbox entry in this incarnation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flight {
    /// Not sent by this incarnation.
    Unsent,
    /// Sent at this time; no answer yet.
    Sent(u64),
    /// Waiting to be reconciled by a receipt look-up (asked at this time, if asked).
    Lookup(Option<u64>),
}

/// Connectivity as the host last reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    Up,
    /// Down since this time (unknown until the first input after a restart).
    Down(Option<u64>),
}

/// The agent driver for one (actor, Group). See the module doc.
#[derive(Debug)]
pub struct Agent {
    config: Config,
    key: SecretKey,
    replica: Replica,
    checkpoints: BTreeMap<Id, CheckpointRecord>,
    outbox: BTreeMap<Id, OutboxEntry>,
    effects: BTreeMap<Hash, EffectEntry>,
    meta: AgentMeta,

    // Volatile.
    link: Link,
    flight: BTreeMap<Id, Flight>,
    staged: WriteSet,
    flushed: u64,
    committed: u64,
    /// Cursor of each handed-out write set not yet committed.
    flushed_cursors: BTreeMap<u64, u64>,
    acked: u64,
    durable_cursor: u64,
    transmits: VecDeque<Transmit>,
    dispatches: VecDeque<Dispatch>,
    notices: VecDeque<Notice>,
    /// Leases this incarnation knows it holds: work → lease.
    held: BTreeMap<Id, Lease>,
    /// Leases announced with `Run`.
    announced: BTreeSet<LeaseId>,
    /// Leases started by this incarnation.
    started_here: BTreeSet<LeaseId>,
    /// Leases whose time passed locally.
    expired_locally: BTreeSet<LeaseId>,
    /// Leases suspended by the grace period.
    suspended: BTreeSet<LeaseId>,
    /// Claims answered with a receipt at this seq: not claimed again before the cursor
    /// reaches it.
    claimed_at: BTreeMap<Id, u64>,
    /// Refused claims: not claimed again before the item's revision reaches the first
    /// number or the time reaches the second.
    claim_wait: BTreeMap<Id, (u64, u64)>,
    /// Works whose bookkeeping must be rechecked.
    dirty: BTreeSet<Id>,
    /// Uncertain effects already surfaced.
    surfaced: BTreeSet<Hash>,
    want_sync: bool,
    last_fetch: Option<u64>,
    /// A snapshot being fetched, and when it was last asked for.
    snapshot_pending: Option<(SnapshotRef, u64)>,
}

fn refuse(code: Code, message: impl Into<String>) -> Error {
    Error::new(code, message)
}

impl Agent {
    /// A fresh agent (nothing committed yet).
    pub fn new(config: Config, key: SecretKey) -> Result<Agent> {
        Agent::restore(config, key, &AgentImage::default())
    }

    /// Reopens from what the host committed. Outbox entries are reconciled by receipt
    /// look-up once connected; effects dispatched before the restart are uncertain.
    pub fn restore(config: Config, key: SecretKey, image: &AgentImage) -> Result<Agent> {
        let replica =
            Replica::from_image(config.group.clone(), &image.replica, config.limits.clone())?;
        let flight = image
            .outbox
            .keys()
            .map(|b| (b.clone(), Flight::Lookup(None)))
            .collect();
        let mut agent = Agent {
            checkpoints: image.replica.checkpoints.clone(),
            outbox: image.outbox.clone(),
            effects: image.effects.clone(),
            meta: image.meta,
            link: Link::Down(None),
            flight,
            staged: WriteSet::default(),
            flushed: image.serial,
            committed: image.serial,
            flushed_cursors: BTreeMap::new(),
            acked: 0,
            durable_cursor: image.replica.cursor,
            transmits: VecDeque::new(),
            dispatches: VecDeque::new(),
            notices: VecDeque::new(),
            held: BTreeMap::new(),
            announced: BTreeSet::new(),
            started_here: BTreeSet::new(),
            expired_locally: BTreeSet::new(),
            suspended: BTreeSet::new(),
            claimed_at: BTreeMap::new(),
            claim_wait: BTreeMap::new(),
            dirty: BTreeSet::new(),
            surfaced: BTreeSet::new(),
            want_sync: true,
            last_fetch: None,
            snapshot_pending: None,
            replica,
            config,
            key,
        };
        // An effect dispatched before the restart may or may not have happened.
        let keys: Vec<Hash> = agent
            .effects
            .iter()
            .filter(|(_, e)| e.status == JournalStatus::Dispatched)
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            agent.set_status(&k, JournalStatus::Uncertain);
        }
        agent.mark_all_dirty();
        Ok(agent)
    }

    // ----- getters -----

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The replica.
    pub fn replica(&self) -> &Replica {
        &self.replica
    }

    /// The current session epoch.
    pub fn session(&self) -> u64 {
        self.meta.session
    }

    /// The outbox.
    pub fn outbox(&self) -> &BTreeMap<Id, OutboxEntry> {
        &self.outbox
    }

    /// The effect journal.
    pub fn effects(&self) -> &BTreeMap<Hash, EffectEntry> {
        &self.effects
    }

    /// Leases this agent holds (work → lease), as of its replica.
    pub fn leases(&self) -> &BTreeMap<Id, Lease> {
        &self.held
    }

    /// Whether the host last reported the authority reachable.
    pub fn online(&self) -> bool {
        self.link == Link::Up
    }

    /// The cursor made durable by committed write sets: what an ACK carries.
    pub fn durable_cursor(&self) -> u64 {
        self.durable_cursor
    }

    /// Whether a write set is staged or handed out and not yet committed.
    pub fn uncommitted(&self) -> bool {
        !self.staged.is_empty() || self.flushed != self.committed
    }

    // ----- settings -----

    /// Changes how many leases the driver holds (or claims) at once: 0 pauses claiming,
    /// more resumes it. Leases already held are kept. It takes effect at the next input
    /// (call [`Agent::handle_timeout`] to act on it now).
    pub fn set_capacity(&mut self, capacity: usize) {
        self.config.capacity = capacity;
    }

    /// Changes the lease length asked for by the next claims and renewals (leases already
    /// held keep their expiry until renewed).
    pub fn set_lease_ms(&mut self, lease_ms: u64) {
        self.config.lease_ms = lease_ms;
    }

    // ----- poll_* -----

    /// The next write set to persist whole; then call [`Agent::handle_committed`].
    pub fn poll_write_set(&mut self) -> Option<WriteSet> {
        if self.staged.is_empty() {
            return None;
        }
        let mut ws = std::mem::take(&mut self.staged);
        self.flushed += 1;
        ws.serial = self.flushed;
        ws.group = Some(self.config.group.clone());
        ws.cursor = self.replica.cursor();
        self.flushed_cursors.insert(ws.serial, ws.cursor);
        Some(ws)
    }

    /// The next message for the authority. Nothing while a write set is not committed.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        if let Some(Transmit::Ack { .. }) = self.transmits.front() {
            return self.transmits.pop_front();
        }
        if self.uncommitted() {
            return None;
        }
        self.transmits.pop_front()
    }

    /// The next effect to perform. Nothing while a write set is not committed.
    pub fn poll_dispatch(&mut self) -> Option<Dispatch> {
        if self.uncommitted() {
            return None;
        }
        self.dispatches.pop_front()
    }

    /// The next notice for the application.
    pub fn poll_notice(&mut self) -> Option<Notice> {
        self.notices.pop_front()
    }

    /// When [`Agent::handle_timeout`] should be called next (a time ≤ now means now).
    pub fn poll_timeout(&self) -> Option<u64> {
        let mut next: Option<u64> = None;
        let mut at = |t: u64| next = Some(next.map_or(t, |n| n.min(t)));
        let online = self.link == Link::Up;
        if let Link::Down(Some(since)) = self.link {
            if !self.held.is_empty() {
                at(since.saturating_add(self.config.grace_ms));
            }
        }
        for l in self.held.values() {
            if !self.expired_locally.contains(&l.id) {
                at(l.expires_at);
                if online {
                    at(l.expires_at.saturating_sub(self.config.renew_margin_ms));
                }
            }
        }
        for e in self.effects.values() {
            if let (JournalStatus::Dispatched, Some(t)) = (e.status, e.dispatched_at) {
                at(t.saturating_add(self.config.effect_timeout_ms));
            }
        }
        if online {
            for f in self.flight.values() {
                match f {
                    Flight::Sent(t) | Flight::Lookup(Some(t)) => {
                        at(t.saturating_add(self.config.resend_ms))
                    }
                    Flight::Unsent | Flight::Lookup(None) => {}
                }
            }
            match &self.snapshot_pending {
                Some((_, asked)) => at(asked.saturating_add(self.config.resend_ms)),
                None => at(self
                    .last_fetch
                    .map_or(0, |t| t.saturating_add(self.config.sync_ms))),
            }
            if self.claim_slots() > 0 {
                for (_, until) in self.claim_wait.values() {
                    at(*until);
                }
                if let Some(t) = self.replica.queue().values().map(|e| e.not_before).min() {
                    at(t);
                }
            }
        }
        next
    }

    // ----- handle_* -----

    /// Events delivered (any order, repeats allowed).
    pub fn handle_events(&mut self, now_ms: u64, events: impl IntoIterator<Item = Event>) {
        self.touch(now_ms);
        for event in events {
            match self.replica.offer(event) {
                Offer::Applied {
                    write_set, dropped, ..
                } => {
                    self.absorb(write_set);
                    for e in dropped {
                        self.notices.push_back(Notice::Corrupt(e));
                        self.want_sync = true;
                    }
                }
                Offer::Buffered => self.want_sync = true,
                Offer::Duplicate => {}
                Offer::Rejected(e) => {
                    self.notices.push_back(Notice::Corrupt(e));
                    self.want_sync = true;
                }
            }
        }
        self.drive(now_ms);
    }

    /// The answer to a command this agent sent: its receipt (also for a Duplicate) or the
    /// error. An answer for an action the outbox no longer holds is ignored.
    pub fn handle_answer(&mut self, now_ms: u64, action: &Id, answer: Result<Receipt, Error>) {
        self.touch(now_ms);
        if let Some(base) = self.base_of(action) {
            match answer {
                Ok(receipt) => self.landed(&base, receipt),
                Err(error) => self.rejected(now_ms, &base, error),
            }
        }
        self.drive(now_ms);
    }

    /// The answer to a receipt look-up: `Some` means the command landed; `None` that it did
    /// not (it is then rebased and sent).
    pub fn handle_lookup(&mut self, now_ms: u64, action: &Id, receipt: Option<Receipt>) {
        self.touch(now_ms);
        if let Some(base) = self.base_of(action) {
            if matches!(self.flight.get(&base), Some(Flight::Lookup(_))) {
                match receipt {
                    Some(r) => self.landed(&base, r),
                    None => self.rebase_when_current(now_ms, &base),
                }
            }
        }
        self.drive(now_ms);
    }

    /// A replay request failed. `CURSOR_TOO_OLD` makes the agent fetch the snapshot it
    /// names.
    pub fn handle_fetch_error(&mut self, now_ms: u64, error: &Error) {
        self.touch(now_ms);
        if let Some(r) = SnapshotRef::from_error(error) {
            if r.seq >= self.replica.cursor() && self.snapshot_pending.is_none() {
                self.snapshot_pending = Some((r.clone(), now_ms));
                self.transmits.push_back(Transmit::FetchSnapshot(r));
            }
        }
        self.drive(now_ms);
    }

    /// A fetched snapshot. It is validated against the configured authority key, org and
    /// group, and must not be older than the cursor; on failure nothing changes
    /// ([`Notice::Corrupt`]). A snapshot nobody asked for any more (a repeated delivery, or
    /// the replica caught up past it meanwhile) is ignored.
    pub fn handle_snapshot(&mut self, now_ms: u64, bytes: &[u8]) {
        self.touch(now_ms);
        let cursor = self.replica.cursor();
        match self.snapshot_pending.take() {
            Some((r, _)) if r.seq >= cursor => {}
            _ => {
                self.want_sync = true;
                self.drive(now_ms);
                return;
            }
        }
        match self.replica.restore_bytes(
            bytes,
            &self.config.authority_key,
            &self.config.org,
            cursor,
        ) {
            Ok(ws) => {
                self.checkpoints.clear();
                self.absorb(ws);
                self.mark_all_dirty();
                self.want_sync = true;
                self.last_fetch = None;
            }
            Err(e) => self.notices.push_back(Notice::Corrupt(e)),
        }
        self.drive(now_ms);
    }

    /// The host's view of the link to the authority changed.
    pub fn handle_connectivity(&mut self, now_ms: u64, up: bool) {
        match (self.link, up) {
            (Link::Up, false) => self.link = Link::Down(Some(now_ms)),
            (Link::Down(_), true) => {
                self.link = Link::Up;
                // Suspended work may go on: announce it again.
                let suspended: Vec<LeaseId> =
                    std::mem::take(&mut self.suspended).into_iter().collect();
                for id in suspended {
                    self.announced.remove(&id);
                    if let Some(l) = self.held.values().find(|l| l.id == id) {
                        self.dirty.insert(l.work.clone());
                    }
                }
                // Reconcile every outbox entry before anything else is sent.
                for (base, f) in self.flight.iter_mut() {
                    if self.outbox.contains_key(base) {
                        *f = Flight::Lookup(None);
                    }
                }
                self.want_sync = true;
                self.last_fetch = None;
            }
            _ => {}
        }
        self.drive(now_ms);
    }

    /// A timer set by [`Agent::poll_timeout`] fired (early or late calls are harmless).
    pub fn handle_timeout(&mut self, now_ms: u64) {
        self.touch(now_ms);
        self.drive(now_ms);
    }

    /// The outcome of a dispatched effect was observed. `receipt` is the target's own
    /// receipt, recorded by `settle_effect`.
    pub fn handle_effect_outcome(
        &mut self,
        now_ms: u64,
        key: &Hash,
        outcome: Opaque,
        receipt: Opaque,
    ) {
        self.touch(now_ms);
        if let Some(e) = self.effects.get(key) {
            if matches!(
                e.status,
                JournalStatus::Dispatched | JournalStatus::Uncertain
            ) {
                let mut e = e.clone();
                e.status = JournalStatus::Observed;
                e.happened = Some(true);
                e.outcome = Some(outcome);
                e.receipt = Some(receipt);
                self.dirty.insert(e.work.clone());
                self.put_effect(e);
            }
        }
        self.drive(now_ms);
    }

    /// The host committed write set `serial` (and every one before it).
    pub fn handle_committed(&mut self, now_ms: u64, serial: u64) {
        if serial > self.committed && serial <= self.flushed {
            self.committed = serial;
            let done: Vec<u64> = self
                .flushed_cursors
                .range(..=serial)
                .map(|(s, _)| *s)
                .collect();
            for s in done {
                if let Some(c) = self.flushed_cursors.remove(&s) {
                    self.durable_cursor = self.durable_cursor.max(c);
                }
            }
            if self.durable_cursor > self.acked && self.link == Link::Up {
                self.acked = self.durable_cursor;
                self.transmits.push_front(Transmit::Ack {
                    cursor: self.durable_cursor,
                });
            }
        }
        self.drive(now_ms);
    }

    // ----- application commands -----

    /// Submits the result of running work under the held lease. If the authority has
    /// already expired or revoked that lease, the result is recorded as evidence
    /// ([`Notice::Evidence`]); once the driver has seen the lease lost, `FENCED`.
    pub fn submit(&mut self, now_ms: u64, work: &Id, result: Opaque) -> Result<Id> {
        self.touch(now_ms);
        let lease = self.result_lease(now_ms, work)?;
        self.no_open_effects(work, lease.epoch)?;
        let body = Body::Submit(Submit {
            work: work.clone(),
            lease: lease.id,
            result,
        });
        let action = self.make(now_ms, body, None, binding(&lease, None))?;
        self.drive(now_ms);
        Ok(action)
    }

    /// Reports a failure of running work.
    pub fn fail(&mut self, now_ms: u64, work: &Id, error: Opaque, retryable: bool) -> Result<Id> {
        self.touch(now_ms);
        let lease = self.result_lease(now_ms, work)?;
        self.no_open_effects(work, lease.epoch)?;
        let body = Body::Fail(Fail {
            work: work.clone(),
            lease: lease.id,
            error,
            retryable,
        });
        let action = self.make(now_ms, body, None, binding(&lease, None))?;
        self.drive(now_ms);
        Ok(action)
    }

    /// Records progress and releases the lease.
    pub fn checkpoint(&mut self, now_ms: u64, work: &Id, data: Opaque) -> Result<Id> {
        self.touch(now_ms);
        let lease = self.running_lease(now_ms, work)?;
        self.no_open_effects(work, lease.epoch)?;
        let body = Body::Checkpoint(Checkpoint {
            work: work.clone(),
            lease: lease.id,
            data,
        });
        let action = self.make(now_ms, body, None, binding(&lease, None))?;
        self.drive(now_ms);
        Ok(action)
    }

    /// Charges cost, with optional checkpoint data.
    pub fn charge(
        &mut self,
        now_ms: u64,
        work: &Id,
        cost: u64,
        data: Option<Opaque>,
    ) -> Result<Id> {
        self.touch(now_ms);
        let lease = self.running_lease(now_ms, work)?;
        let body = Body::Charge(Charge {
            work: work.clone(),
            lease: lease.id,
            cost,
            data,
        });
        let action = self.make(now_ms, body, None, binding(&lease, None))?;
        self.drive(now_ms);
        Ok(action)
    }

    /// Records the intent of an effect; it is dispatched ([`Agent::poll_dispatch`]) only
    /// once the intent is accepted. Returns the effect key. While the authority is
    /// unreachable only read-only, reversible effects of low-risk work may be intended.
    pub fn intend_effect(
        &mut self,
        now_ms: u64,
        work: &Id,
        op: &Id,
        mode: EffectMode,
        irreversible: bool,
        target: Opaque,
    ) -> Result<Hash> {
        self.touch(now_ms);
        let lease = self.running_lease(now_ms, work)?;
        let (mission, high_risk) = {
            let s = self.state()?;
            let w = s.work.get(work).ok_or_else(|| not_found(work))?;
            (s.mission.clone(), w.contract.risk == Risk::High)
        };
        if self.link != Link::Up && (mode != EffectMode::ReadOnly || irreversible || high_risk) {
            return Err(refuse(
                Code::InvalidState,
                format!(
                    "the authority is unreachable: only read-only, reversible effects of low-risk work may be intended offline, not {op}"
                ),
            )
            .with("reason", "offline"));
        }
        let key = effect_key(&mission, work, lease.epoch, op);
        if self.effects.contains_key(&key) {
            return Err(refuse(
                Code::AlreadyExists,
                format!(
                    "effect {op} was already intended under epoch {} (key {key})",
                    lease.epoch
                ),
            )
            .with("key", key.to_hex()));
        }
        let body = Body::IntendEffect(IntendEffect {
            work: work.clone(),
            lease: lease.id,
            op: op.clone(),
            mode,
            irreversible,
            target: target.clone(),
        });
        self.make(now_ms, body, None, binding(&lease, Some(op.clone())))?;
        self.put_effect(EffectEntry {
            key,
            work: work.clone(),
            epoch: lease.epoch,
            lease: lease.id,
            op: op.clone(),
            mode,
            irreversible,
            high_risk,
            target,
            status: JournalStatus::Requested,
            dispatches: 0,
            dispatched_at: None,
            happened: None,
            outcome: None,
            receipt: None,
        });
        self.drive(now_ms);
        Ok(key)
    }

    /// Says what happened to an uncertain effect, found out from its target. If the lease
    /// is still held: `happened` settles it; not happened makes it dispatchable again (no
    /// longer blind). If the authority already marked it unknown: `reconcile_effect`.
    pub fn resolve_effect(
        &mut self,
        now_ms: u64,
        key: &Hash,
        happened: bool,
        receipt: Opaque,
    ) -> Result<()> {
        self.touch(now_ms);
        let Some(mut e) = self.effects.get(key).cloned() else {
            return Err(refuse(
                Code::NotFound,
                format!("no effect with key {key} in the journal"),
            ));
        };
        if !matches!(
            e.status,
            JournalStatus::Uncertain | JournalStatus::Dispatched
        ) {
            return Err(refuse(
                Code::InvalidState,
                format!("effect {key} is not uncertain; nothing to resolve"),
            ));
        }
        let authority = self.authority_status(&e);
        match (authority, happened) {
            (Some(EffectStatus::Intended), false) => {
                e.status = JournalStatus::Intended;
                e.dispatched_at = None;
            }
            _ => {
                e.status = JournalStatus::Observed;
                e.happened = Some(happened);
                e.outcome = Some(json!({ "happened": happened }));
                e.receipt = Some(receipt);
            }
        }
        self.surfaced.remove(key);
        let work = e.work.clone();
        self.put_effect(e);
        self.dirty.insert(work);
        self.drive(now_ms);
        Ok(())
    }

    /// Starts a new session epoch: every lease of the old one is revoked when it lands, and
    /// commands waiting in the outbox are rebased onto the new one.
    pub fn replace_session(&mut self, now_ms: u64) -> Result<Id> {
        self.touch(now_ms);
        self.meta.session += 1;
        let body = Body::ReplaceSession(ReplaceSession {});
        let action = match self.make(now_ms, body, None, Binding::default()) {
            Ok(a) => a,
            Err(e) => {
                self.meta.session -= 1;
                return Err(e);
            }
        };
        self.staged.meta = Some(self.meta);
        self.mark_all_dirty();
        self.drive(now_ms);
        Ok(action)
    }

    // ----- internals -----

    fn state(&self) -> Result<&GroupState> {
        self.replica.state().ok_or_else(|| {
            refuse(
                Code::NotFound,
                format!(
                    "group {} is not known to this replica yet",
                    self.config.group
                ),
            )
        })
    }

    fn touch(&mut self, now_ms: u64) {
        if self.link == Link::Down(None) {
            self.link = Link::Down(Some(now_ms));
        }
    }

    fn mark_all_dirty(&mut self) {
        if let Some(s) = self.replica.state() {
            self.dirty.extend(s.work.keys().cloned());
        }
        self.dirty.extend(self.held.keys().cloned());
        self.dirty
            .extend(self.effects.values().map(|e| e.work.clone()));
    }

    fn absorb(&mut self, ws: WriteSet) {
        for row in &ws.projection {
            if let Row::Work { work, .. } = row {
                self.dirty.insert(work.clone());
            }
            if let Row::Member { actor, .. } = row {
                if actor == &self.config.actor {
                    self.mark_all_dirty();
                }
            }
        }
        for c in &ws.checkpoints {
            self.checkpoints.insert(c.work.clone(), c.clone());
        }
        self.staged.merge(ws);
    }

    fn put_effect(&mut self, e: EffectEntry) {
        self.staged.effects.push(e.clone());
        self.effects.insert(e.key, e);
    }

    fn set_status(&mut self, key: &Hash, status: JournalStatus) {
        if let Some(mut e) = self.effects.get(key).cloned() {
            if e.status != status {
                e.status = status;
                self.put_effect(e);
            }
        }
    }

    fn put_outbox(&mut self, e: OutboxEntry) {
        self.staged.outbox.push(OutboxChange::Put(e.clone()));
        self.outbox.insert(e.base.clone(), e);
    }

    fn remove_outbox(&mut self, base: &Id) -> Option<OutboxEntry> {
        self.flight.remove(base);
        let e = self.outbox.remove(base)?;
        self.staged
            .outbox
            .push(OutboxChange::Remove { base: base.clone() });
        Some(e)
    }

    fn base_of(&self, action: &Id) -> Option<Id> {
        self.outbox
            .iter()
            .find(|(_, e)| &e.command.action == action)
            .map(|(b, _)| b.clone())
    }

    /// Makes, signs and puts a command in the outbox; on error nothing changed.
    fn make(
        &mut self,
        now_ms: u64,
        body: Body,
        expect: Option<u64>,
        binding: Binding,
    ) -> Result<Id> {
        let action = Id::new(format!("a-{}", self.meta.next_action))
            .map_err(|e| Error::malformed(e.to_string()))?;
        let cmd = Command::signed(
            self.config.org.clone(),
            self.config.group.clone(),
            self.config.actor.clone(),
            action.clone(),
            self.meta.session,
            expect,
            body,
            &self.key,
        )?;
        cmd.check(&self.config.limits)?;
        self.meta.next_action += 1;
        self.staged.meta = Some(self.meta);
        self.flight.insert(action.clone(), Flight::Unsent);
        self.put_outbox(OutboxEntry {
            base: action.clone(),
            rebases: 0,
            command: cmd,
            binding,
            made_at: now_ms,
            offline: self.link != Link::Up,
        });
        Ok(action)
    }

    /// The lease this agent holds on running `work`, usable now.
    fn running_lease(&self, now_ms: u64, work: &Id) -> Result<Lease> {
        let lease =
            self.held.get(work).cloned().ok_or_else(|| {
                refuse(Code::Fenced, format!("this agent holds no lease on {work}"))
            })?;
        let s = self.state()?;
        if s.work.get(work).map(|w| w.state) != Some(WorkState::Running) {
            return Err(refuse(
                Code::InvalidState,
                format!("work {work} is not running"),
            ));
        }
        if now_ms >= lease.expires_at || self.expired_locally.contains(&lease.id) {
            return Err(refuse(
                Code::LeaseExpired,
                format!(
                    "lease {} on {work} expired at {}",
                    lease.id, lease.expires_at
                ),
            ));
        }
        self.within_grace(now_ms, &lease)?;
        Ok(lease)
    }

    /// The lease a result is reported under: the one held on `work`. Once the driver has
    /// seen that lease revoked or expired it no longer holds it, and a result is refused
    /// (`FENCED`); a result sent before the loss was known lands as evidence.
    fn result_lease(&self, now_ms: u64, work: &Id) -> Result<Lease> {
        if let Some(l) = self.held.get(work) {
            self.within_grace(now_ms, l)?;
            let s = self.state()?;
            if s.work.get(work).map(|w| w.state) != Some(WorkState::Running) {
                return Err(refuse(
                    Code::InvalidState,
                    format!("work {work} is not running"),
                ));
            }
            return Ok(l.clone());
        }
        Err(refuse(
            Code::Fenced,
            format!("this agent holds no lease on {work}"),
        ))
    }

    fn within_grace(&self, now_ms: u64, lease: &Lease) -> Result<()> {
        if let Link::Down(since) = self.link {
            let since = since.unwrap_or(now_ms);
            if now_ms >= since.saturating_add(self.config.grace_ms)
                || self.suspended.contains(&lease.id)
            {
                return Err(refuse(
                    Code::InvalidState,
                    format!(
                        "the authority has been unreachable since {since}, longer than the grace period of {} ms; work on {} is suspended",
                        self.config.grace_ms, lease.work
                    ),
                )
                .with("reason", "grace_period_over"));
            }
        }
        Ok(())
    }

    fn no_open_effects(&self, work: &Id, epoch: u64) -> Result<()> {
        if let Some(e) = self
            .effects
            .values()
            .find(|e| &e.work == work && e.epoch == epoch && e.status != JournalStatus::Closed)
        {
            return Err(refuse(
                Code::EffectUnsettled,
                format!(
                    "effect {} (key {}) on {work} is not settled yet",
                    e.op, e.key
                ),
            )
            .with("key", e.key.to_hex()));
        }
        Ok(())
    }

    fn authority_status(&self, e: &EffectEntry) -> Option<EffectStatus> {
        self.replica
            .state()?
            .work
            .get(&e.work)?
            .effects
            .get(&e.key)
            .map(|x| x.status)
    }

    /// A receipt for an outbox entry: it landed.
    fn landed(&mut self, base: &Id, receipt: Receipt) {
        let Some(entry) = self.remove_outbox(base) else {
            return;
        };
        if receipt.seq > self.replica.cursor() {
            self.want_sync = true;
        }
        if receipt.disposition == Disposition::Evidence {
            self.notices.push_back(Notice::Evidence {
                action: receipt.action.clone(),
                receipt: receipt.clone(),
            });
        }
        match &entry.command.body {
            Body::ClaimWork(c) => {
                self.claimed_at.insert(c.work.clone(), receipt.seq);
            }
            Body::StartWork(s) => {
                self.started_here.insert(s.lease);
            }
            Body::IntendEffect(i) => {
                if let Some(k) = self.effect_key_of(&i.work, entry.binding.epoch, &i.op) {
                    if self.effects.get(&k).map(|e| e.status) == Some(JournalStatus::Requested) {
                        self.set_status(&k, JournalStatus::Intended);
                    }
                }
            }
            Body::SettleEffect(s) => {
                if let Some(k) = self.effect_key_of(&s.work, entry.binding.epoch, &s.op) {
                    self.set_status(&k, JournalStatus::Closed);
                }
            }
            Body::ReconcileEffect(r) => self.set_status(&r.key, JournalStatus::Closed),
            _ => {}
        }
        if let Some(w) = entry.command.body.work() {
            self.dirty.insert(w.clone());
        }
    }

    fn effect_key_of(&self, work: &Id, epoch: Option<u64>, op: &Id) -> Option<Hash> {
        let mission = &self.replica.state()?.mission;
        Some(effect_key(mission, work, epoch?, op))
    }

    /// An error for an outbox entry.
    fn rejected(&mut self, now_ms: u64, base: &Id, error: Error) {
        match error.code {
            // The authority could not decide: keep it and try again.
            Code::Storage => {
                self.flight.insert(base.clone(), Flight::Sent(now_ms));
                return;
            }
            // Made under an older session than ours: rebase onto the current one (a
            // Duplicate would have been answered before the session check, so it did not
            // land).
            Code::WrongSession
                if self
                    .outbox
                    .get(base)
                    .is_some_and(|e| e.command.session < self.meta.session) =>
            {
                self.flight
                    .insert(base.clone(), Flight::Lookup(Some(now_ms)));
                self.rebase_when_current(now_ms, base);
                return;
            }
            Code::WrongSession if !self.session_current() => {
                // Our replace_session has not landed yet: wait for it.
                self.flight.insert(base.clone(), Flight::Sent(now_ms));
                return;
            }
            _ => {}
        }
        let Some(entry) = self.remove_outbox(base) else {
            return;
        };
        if let Body::IntendEffect(i) = &entry.command.body {
            if let Some(k) = self.effect_key_of(&i.work, entry.binding.epoch, &i.op) {
                if self.effects.get(&k).map(|e| e.status) == Some(JournalStatus::Requested) {
                    self.set_status(&k, JournalStatus::Closed);
                }
            }
        }
        if let Body::ClaimWork(c) = &entry.command.body {
            // The replica was behind (or the clocks differ): wait for it to catch up before
            // claiming this item again, instead of repeating the same stale claim.
            let used = entry.command.expect.unwrap_or(0);
            let current = error
                .details
                .get("current")
                .and_then(|v| v.as_u64())
                .unwrap_or(0);
            let until = match error.details.get("not_before").and_then(|v| v.as_u64()) {
                Some(t) => (0, t),
                None => (
                    current.max(used + 1),
                    now_ms.saturating_add(self.config.sync_ms),
                ),
            };
            self.claim_wait.insert(c.work.clone(), until);
        }
        if matches!(
            error.code,
            Code::RevisionMismatch | Code::Fenced | Code::LeaseExpired
        ) {
            self.want_sync = true;
        }
        if let Some(w) = entry.command.body.work() {
            self.dirty.insert(w.clone());
        }
        self.notices.push_back(Notice::Rejected {
            action: entry.command.action.clone(),
            command: entry.command.body.type_name(),
            error,
        });
    }

    /// Whether the authority (as far as the replica knows) has this agent at its current
    /// session.
    fn session_current(&self) -> bool {
        self.replica
            .state()
            .and_then(|s| s.members.get(&self.config.actor))
            .is_some_and(|m| m.session == self.meta.session)
    }

    /// Rebases an entry known not to have landed — but a content change (a new session)
    /// only once the new session is current at the authority, so the old command can no
    /// longer land beside the rebased one; until then it is looked up again later.
    fn rebase_when_current(&mut self, now_ms: u64, base: &Id) {
        let stale = self
            .outbox
            .get(base)
            .is_some_and(|e| e.command.session != self.meta.session);
        let replacing = self
            .outbox
            .get(base)
            .is_some_and(|e| matches!(e.command.body, Body::ReplaceSession(_)));
        if stale && !replacing && !self.session_current() {
            self.flight
                .insert(base.clone(), Flight::Lookup(Some(now_ms)));
            return;
        }
        self.rebase(base);
    }

    /// Rebases an outbox entry that did not land on the current session and fencing
    /// fields; a changed content gets the action `<base>~<n>`; then it is re-signed.
    fn rebase(&mut self, base: &Id) {
        let Some(mut entry) = self.outbox.get(base).cloned() else {
            return;
        };
        let drop = |this: &mut Self, entry: &OutboxEntry, reason: String| {
            this.remove_outbox(&entry.base);
            if let Body::IntendEffect(i) = &entry.command.body {
                if let Some(k) = this.effect_key_of(&i.work, entry.binding.epoch, &i.op) {
                    this.set_status(&k, JournalStatus::Closed);
                }
            }
            this.notices.push_back(Notice::Dropped {
                action: entry.command.action.clone(),
                reason,
            });
        };
        let mut cmd = entry.command.clone();
        let old = match cmd.content_bytes() {
            Ok(b) => b,
            Err(e) => return drop(self, &entry, e.to_string()),
        };
        cmd.session = self.meta.session;
        match &cmd.body {
            // Claims and renewals are remade from fresh state by the driver.
            Body::ClaimWork(_) | Body::RenewLease(_) | Body::StartWork(_) => {
                return drop(
                    self,
                    &entry,
                    "claims, starts and renewals are remade, not rebased".into(),
                );
            }
            Body::ReplaceSession(_) => {}
            body => {
                if let (Some(work), Some(lease)) = (body.work(), body.lease()) {
                    let current = self.held.get(work).is_some_and(|l| &l.id == lease);
                    let late_result = matches!(body, Body::Submit(_) | Body::Fail(_));
                    if !current && !late_result {
                        return drop(
                            self,
                            &entry,
                            format!("lease {lease} on {work} is no longer held"),
                        );
                    }
                }
            }
        }
        let changed = cmd.content_bytes().map_or(true, |b| b != old);
        if changed {
            entry.rebases += 1;
            match Id::new(format!("{}~{}", entry.base, entry.rebases)) {
                Ok(a) => cmd.action = a,
                Err(e) => return drop(self, &entry, e.to_string()),
            }
        }
        if let Err(e) = cmd.sign(&self.key) {
            return drop(self, &entry, e.to_string());
        }
        entry.command = cmd;
        self.flight.insert(entry.base.clone(), Flight::Unsent);
        self.put_outbox(entry);
    }

    /// Whether `work` is held, being claimed, claimed with its event not applied yet, or
    /// recently refused.
    fn claim_blocked(&self, now_ms: u64, work: &Id) -> bool {
        let waiting = self.claim_wait.get(work).is_some_and(|(rev, until)| {
            now_ms < *until
                && (*rev == 0
                    || self
                        .replica
                        .state()
                        .is_some_and(|s| s.revision_of(&format!("work:{work}")) < *rev))
        });
        waiting
            || self.held.contains_key(work)
            || self
                .claimed_at
                .get(work)
                .is_some_and(|s| *s > self.replica.cursor())
            || self
                .outbox
                .values()
                .any(|o| matches!(&o.command.body, Body::ClaimWork(c) if &c.work == work))
    }

    fn claim_slots(&self) -> usize {
        let claiming = self
            .outbox
            .values()
            .filter(|e| matches!(e.command.body, Body::ClaimWork(_)))
            .count();
        let pending = self
            .claimed_at
            .iter()
            .filter(|(w, s)| **s > self.replica.cursor() && !self.held.contains_key(*w))
            .count();
        self.config
            .capacity
            .saturating_sub(self.held.len() + claiming + pending)
    }

    /// Brings the local bookkeeping up to date with the replica and decides what to do.
    fn drive(&mut self, now_ms: u64) {
        self.sync_leases(now_ms);
        self.sync_effects(now_ms);
        self.grace(now_ms);
        self.plan_effects(now_ms);
        if self.link == Link::Up {
            self.plan_leases(now_ms);
            self.plan_claims(now_ms);
            self.plan_sends(now_ms);
            self.plan_sync(now_ms);
        }
    }

    /// Level-triggered: which leases this agent holds, as of its replica.
    fn sync_leases(&mut self, now_ms: u64) {
        let dirty = std::mem::take(&mut self.dirty);
        let Some(state) = self.replica.state() else {
            self.dirty = dirty;
            return;
        };
        let me = &self.config.actor;
        let session = self.meta.session;
        let mut gained = Vec::new();
        let mut lost = Vec::new();
        for work in &dirty {
            let item = state.work.get(work);
            let now_held = item.and_then(|w| {
                w.lease
                    .as_ref()
                    .filter(|l| &l.holder == me && l.session == session)
            });
            match (self.held.get(work), now_held) {
                (Some(old), Some(new)) if old.id == new.id => {
                    if old != new {
                        gained.push(new.clone());
                    }
                }
                (old, new) => {
                    if let Some(old) = old {
                        let end = item
                            .and_then(|w| w.past_leases.iter().rev().find(|p| p.id == old.id))
                            .map(|p| p.end);
                        let to = item.map_or(WorkState::Queued, |w| w.state);
                        lost.push((old.clone(), end, to));
                    }
                    if let Some(new) = new {
                        gained.push(new.clone());
                    }
                }
            }
        }
        let running: BTreeSet<Id> = dirty
            .iter()
            .filter(|w| state.work.get(*w).map(|i| i.state) == Some(WorkState::Running))
            .cloned()
            .collect();
        for (old, end, to) in lost {
            self.held.remove(&old.work);
            self.claimed_at.remove(&old.work);
            let notice = match end {
                Some(LeaseEnd::Released) => Notice::Released {
                    work: old.work.clone(),
                    lease: old.id,
                    state: to,
                },
                Some(LeaseEnd::Expired) => Notice::LeaseLost {
                    work: old.work.clone(),
                    lease: old.id,
                    reason: "expired",
                },
                Some(LeaseEnd::Revoked) => Notice::LeaseLost {
                    work: old.work.clone(),
                    lease: old.id,
                    reason: "revoked",
                },
                None => Notice::LeaseLost {
                    work: old.work.clone(),
                    lease: old.id,
                    reason: "session_replaced",
                },
            };
            if !self.expired_locally.contains(&old.id) || matches!(notice, Notice::Released { .. })
            {
                self.notices.push_back(notice);
            }
            self.expired_locally.remove(&old.id);
            self.announced.remove(&old.id);
        }
        for l in gained {
            self.claimed_at.remove(&l.work);
            self.claim_wait.remove(&l.work);
            self.held.insert(l.work.clone(), l);
        }
        // Leases whose time passed locally: stop before the authority says so.
        let expired: Vec<Lease> = self
            .held
            .values()
            .filter(|l| now_ms >= l.expires_at && !self.expired_locally.contains(&l.id))
            .cloned()
            .collect();
        for l in expired {
            self.expired_locally.insert(l.id);
            self.announced.remove(&l.id);
            self.notices.push_back(Notice::LeaseLost {
                work: l.work.clone(),
                lease: l.id,
                reason: "expired_locally",
            });
        }
        for work in running {
            let Some(l) = self.held.get(&work) else {
                continue;
            };
            if self.announced.contains(&l.id) || self.expired_locally.contains(&l.id) {
                continue;
            }
            self.announced.insert(l.id);
            self.notices.push_back(Notice::Run {
                work: work.clone(),
                lease: l.id,
                epoch: l.epoch,
                checkpoint: self.checkpoints.get(&work).cloned(),
                resumed: !self.started_here.contains(&l.id),
            });
        }
    }

    /// Level-triggered: the journal against the authority's view of each effect.
    fn sync_effects(&mut self, now_ms: u64) {
        let open: Vec<EffectEntry> = self
            .effects
            .values()
            .filter(|e| e.status != JournalStatus::Closed)
            .cloned()
            .collect();
        for e in open {
            let authority = self.authority_status(&e);
            let intent_queued = self.outbox.values().any(|o| {
                matches!(&o.command.body, Body::IntendEffect(i) if i.work == e.work && i.op == e.op)
                    && o.binding.epoch == Some(e.epoch)
            });
            match (authority, e.status) {
                (Some(EffectStatus::Intended), JournalStatus::Requested) => {
                    self.set_status(&e.key, JournalStatus::Intended)
                }
                (Some(EffectStatus::Settled | EffectStatus::Reconciled), _) => {
                    self.set_status(&e.key, JournalStatus::Closed)
                }
                // The lease ended with a repeatable effect unsettled: nothing to settle.
                (Some(EffectStatus::Abandoned), _) => {
                    self.set_status(&e.key, JournalStatus::Closed)
                }
                // The lease ended with an undeclared effect unsettled.
                (Some(EffectStatus::Unknown), JournalStatus::Observed) => {
                    self.ensure_reconcile(now_ms, &e)
                }
                (
                    Some(EffectStatus::Unknown),
                    JournalStatus::Requested | JournalStatus::Intended,
                ) => {
                    // Never dispatched by us: it did not happen.
                    let mut e = e.clone();
                    e.status = JournalStatus::Observed;
                    e.happened = Some(false);
                    e.outcome = Some(json!({"happened": false}));
                    e.receipt = Some(json!({"dispatched": false}));
                    self.put_effect(e.clone());
                    self.ensure_reconcile(now_ms, &e);
                }
                (
                    Some(EffectStatus::Unknown),
                    JournalStatus::Dispatched | JournalStatus::Uncertain,
                ) => {
                    if e.status == JournalStatus::Dispatched {
                        self.set_status(&e.key, JournalStatus::Uncertain);
                    }
                    self.surface(&e);
                }
                (Some(EffectStatus::Intended), JournalStatus::Observed) => {
                    self.ensure_settle(now_ms, &e)
                }
                // The intent never landed, is no longer queued, and its epoch is over.
                (None, JournalStatus::Requested)
                    if !intent_queued
                        && self
                            .replica
                            .state()
                            .and_then(|s| s.work.get(&e.work))
                            .is_some_and(|w| w.epoch > e.epoch || w.state.is_terminal()) =>
                {
                    self.set_status(&e.key, JournalStatus::Closed)
                }
                _ => {}
            }
        }
    }

    fn surface(&mut self, e: &EffectEntry) {
        if e.mode == EffectMode::Undeclared && self.surfaced.insert(e.key) {
            self.notices.push_back(Notice::Uncertain {
                key: e.key,
                work: e.work.clone(),
                op: e.op.clone(),
            });
        }
    }

    fn queued_for(&self, pred: impl Fn(&Body) -> bool) -> bool {
        self.outbox.values().any(|o| pred(&o.command.body))
    }

    fn ensure_settle(&mut self, now_ms: u64, e: &EffectEntry) {
        if self.queued_for(|b| matches!(b, Body::SettleEffect(s) if s.work == e.work && s.op == e.op && s.lease == e.lease)) {
            return;
        }
        let Some(lease) = self.held.get(&e.work).filter(|l| l.id == e.lease).cloned() else {
            return;
        };
        let body = Body::SettleEffect(SettleEffect {
            work: e.work.clone(),
            lease: lease.id,
            op: e.op.clone(),
            outcome: e.outcome.clone().unwrap_or(json!({"happened": true})),
            receipt: e.receipt.clone().unwrap_or(serde_json::Value::Null),
        });
        if let Err(err) = self.make(now_ms, body, None, binding(&lease, Some(e.op.clone()))) {
            self.notices.push_back(Notice::Corrupt(err));
        }
    }

    fn ensure_reconcile(&mut self, now_ms: u64, e: &EffectEntry) {
        if self.queued_for(|b| matches!(b, Body::ReconcileEffect(r) if r.key == e.key)) {
            return;
        }
        let body = Body::ReconcileEffect(ReconcileEffect {
            work: e.work.clone(),
            key: e.key,
            happened: e.happened.unwrap_or(true),
            receipt: e.receipt.clone().unwrap_or(serde_json::Value::Null),
        });
        let b = Binding {
            work: Some(e.work.clone()),
            epoch: Some(e.epoch),
            lease: None,
            op: Some(e.op.clone()),
        };
        if let Err(err) = self.make(now_ms, body, None, b) {
            self.notices.push_back(Notice::Corrupt(err));
        }
    }

    /// Suspends running work once the grace period is over.
    fn grace(&mut self, now_ms: u64) {
        let Link::Down(Some(since)) = self.link else {
            return;
        };
        if now_ms < since.saturating_add(self.config.grace_ms) {
            return;
        }
        let leases: Vec<Lease> = self.held.values().cloned().collect();
        for l in leases {
            if self.suspended.insert(l.id) {
                self.notices.push_back(Notice::Suspended { work: l.work });
            }
        }
    }

    /// Whether the effect may be dispatched now.
    fn may_dispatch(&self, now_ms: u64, e: &EffectEntry) -> bool {
        let Some(l) = self.held.get(&e.work) else {
            return false;
        };
        if l.id != e.lease
            || now_ms >= l.expires_at
            || self.expired_locally.contains(&l.id)
            || self.suspended.contains(&l.id)
            || self.authority_status(e) != Some(EffectStatus::Intended)
        {
            return false;
        }
        match self.link {
            Link::Up => true,
            Link::Down(since) => {
                e.mode == EffectMode::ReadOnly
                    && !e.irreversible
                    && !e.high_risk
                    && now_ms < since.unwrap_or(now_ms).saturating_add(self.config.grace_ms)
            }
        }
    }

    fn plan_effects(&mut self, now_ms: u64) {
        let open: Vec<EffectEntry> = self
            .effects
            .values()
            .filter(|e| {
                matches!(
                    e.status,
                    JournalStatus::Intended | JournalStatus::Dispatched | JournalStatus::Uncertain
                )
            })
            .cloned()
            .collect();
        for mut e in open {
            let timed_out = e.status == JournalStatus::Dispatched
                && e.dispatched_at
                    .is_some_and(|t| now_ms >= t.saturating_add(self.config.effect_timeout_ms));
            if timed_out {
                e.status = JournalStatus::Uncertain;
                self.put_effect(e.clone());
                self.surface(&e);
            }
            if e.status == JournalStatus::Uncertain {
                self.surface(&e);
            }
            let go = match e.status {
                JournalStatus::Intended => true,
                // A repeatable effect whose outcome is unknown is simply sent again.
                JournalStatus::Uncertain => e.repeatable(),
                _ => false,
            };
            if go && self.may_dispatch(now_ms, &e) {
                e.status = JournalStatus::Dispatched;
                e.dispatches += 1;
                e.dispatched_at = Some(now_ms);
                self.dispatches.push_back(Dispatch {
                    key: e.key,
                    work: e.work.clone(),
                    op: e.op.clone(),
                    mode: e.mode,
                    irreversible: e.irreversible,
                    target: e.target.clone(),
                    attempt: e.dispatches,
                });
                self.put_effect(e);
            }
        }
    }

    fn plan_leases(&mut self, now_ms: u64) {
        let Some(state) = self.replica.state() else {
            return;
        };
        let mut todo = Vec::new();
        for (work, l) in &self.held {
            if self.expired_locally.contains(&l.id) {
                continue;
            }
            let Some(item) = state.work.get(work) else {
                continue;
            };
            let pending =
                |pred: &dyn Fn(&Body) -> bool| self.outbox.values().any(|o| pred(&o.command.body));
            match item.state {
                // A start that landed before its event arrived is not sent again.
                WorkState::Leased
                    if now_ms < l.start_by
                        && !self.started_here.contains(&l.id)
                        && !pending(&|b| matches!(b, Body::StartWork(s) if s.lease == l.id)) =>
                {
                    let approved = item.contract.risk == Risk::Low
                        || state
                            .approvals
                            .values()
                            .any(|a| &a.work == work && a.state == ApprovalState::Granted);
                    if approved {
                        todo.push((
                            Body::StartWork(StartWork {
                                work: work.clone(),
                                lease: l.id,
                            }),
                            None,
                            l.clone(),
                        ));
                    }
                }
                WorkState::Running
                    if l.expires_at.saturating_sub(self.config.renew_margin_ms) <= now_ms
                        && !pending(&|b| matches!(b, Body::RenewLease(r) if r.lease == l.id)) =>
                {
                    todo.push((
                        Body::RenewLease(RenewLease {
                            work: work.clone(),
                            lease: l.id,
                            lease_ms: self.config.lease_ms,
                        }),
                        Some(item.revision),
                        l.clone(),
                    ));
                }
                _ => {}
            }
        }
        for (body, expect, lease) in todo {
            if let Err(e) = self.make(now_ms, body, expect, binding(&lease, None)) {
                self.notices.push_back(Notice::Corrupt(e));
            }
        }
    }

    fn plan_claims(&mut self, now_ms: u64) {
        self.claim_wait.retain(|_, (_, until)| now_ms < *until);
        let mut slots = self.claim_slots();
        if slots == 0 || self.snapshot_pending.is_some() {
            return;
        }
        let Some(state) = self.replica.state() else {
            return;
        };
        if state.archived
            || state
                .members
                .get(&self.config.actor)
                .is_none_or(|m| m.removed || m.session != self.meta.session)
        {
            return;
        }
        let me = self.config.actor.as_str();
        let mut candidates: Vec<([u8; 32], Id, u64)> = self
            .replica
            .frontier(now_ms)
            .filter(|e| !self.claim_blocked(now_ms, &e.work))
            .filter_map(|e| {
                let w = state.work.get(&e.work)?;
                let approved = w.contract.risk == Risk::Low
                    || state
                        .approvals
                        .values()
                        .any(|a| a.work == e.work && a.state == ApprovalState::Granted);
                approved.then(|| {
                    let order = crate::canonical::sha256(format!("{me}/{}", e.work).as_bytes());
                    (order, e.work.clone(), w.revision)
                })
            })
            .collect();
        candidates.sort();
        for (_, work, revision) in candidates {
            if slots == 0 {
                break;
            }
            let body = Body::ClaimWork(ClaimWork {
                work: work.clone(),
                lease_ms: self.config.lease_ms,
                start_within_ms: self.config.start_within_ms,
            });
            let b = Binding {
                work: Some(work.clone()),
                ..Binding::default()
            };
            match self.make(now_ms, body, Some(revision), b) {
                Ok(_) => slots -= 1,
                Err(e) => self.notices.push_back(Notice::Corrupt(e)),
            }
        }
    }

    fn plan_sends(&mut self, now_ms: u64) {
        let resend = self.config.resend_ms;
        let mut out = Vec::new();
        for (base, entry) in &self.outbox {
            let f = self.flight.get(base).copied().unwrap_or(Flight::Unsent);
            let next = match f {
                Flight::Unsent => Some((
                    Transmit::Command(entry.command.clone()),
                    Flight::Sent(now_ms),
                )),
                Flight::Sent(t) if now_ms >= t.saturating_add(resend) => Some((
                    Transmit::Command(entry.command.clone()),
                    Flight::Sent(now_ms),
                )),
                Flight::Lookup(None) => Some((
                    Transmit::LookupReceipt {
                        action: entry.command.action.clone(),
                    },
                    Flight::Lookup(Some(now_ms)),
                )),
                Flight::Lookup(Some(t)) if now_ms >= t.saturating_add(resend) => Some((
                    Transmit::LookupReceipt {
                        action: entry.command.action.clone(),
                    },
                    Flight::Lookup(Some(now_ms)),
                )),
                _ => None,
            };
            if let Some((t, f)) = next {
                out.push((base.clone(), t, f));
            }
        }
        for (base, t, f) in out {
            self.flight.insert(base, f);
            self.transmits.push_back(t);
        }
    }

    fn plan_sync(&mut self, now_ms: u64) {
        if let Some((r, asked)) = &self.snapshot_pending {
            // The snapshot (or the request) may have been lost: ask again.
            if now_ms >= asked.saturating_add(self.config.resend_ms) {
                let r = r.clone();
                self.snapshot_pending = Some((r.clone(), now_ms));
                self.transmits.push_back(Transmit::FetchSnapshot(r));
            }
            return;
        }
        let due = self
            .last_fetch
            .is_none_or(|t| now_ms >= t.saturating_add(self.config.sync_ms));
        let soon = self.last_fetch.is_none_or(|t| {
            now_ms >= t.saturating_add(self.config.resend_ms.min(self.config.sync_ms))
        });
        if due || (self.want_sync && soon) {
            self.want_sync = false;
            self.last_fetch = Some(now_ms);
            self.transmits.push_back(Transmit::FetchEvents {
                after: self.replica.cursor(),
            });
        }
    }
}

fn binding(lease: &Lease, op: Option<Id>) -> Binding {
    Binding {
        work: Some(lease.work.clone()),
        epoch: Some(lease.epoch),
        lease: Some(lease.id),
        op,
    }
}

fn not_found(work: &Id) -> Error {
    refuse(Code::NotFound, format!("work {work} does not exist"))
}
