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
//!
//! **Where things are.** This file holds the driver's state, its constructors and getters,
//! and `drive`, the level-triggered pass every input ends with. The rest is split by
//! concern: `types.rs` (the configuration, the durable image and the values handed to the
//! host), `handle.rs` (inputs), `commands.rs` (application commands), `poll.rs` (outputs),
//! `outbox.rs` (making, sending, reconciling and rebasing commands; syncing events),
//! `effects.rs` (the effect journal), `leases.rs` (leases held, claims, starts, renewals
//! and the grace period) and `planner.rs` (dispositions of terminal events: `expand`).

mod commands;
mod effects;
mod handle;
mod leases;
mod outbox;
mod planner;
mod poll;
mod types;

pub use types::{
    AgentImage, AgentMeta, Binding, Config, Dispatch, EffectEntry, JournalStatus, Notice,
    OutboxChange, OutboxEntry, Transmit,
};

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::crypto::{Hash, SecretKey};
use crate::error::{Code, Error, Result};
use crate::id::Id;
use crate::lease::{Lease, LeaseId};
use crate::replica::{CheckpointRecord, Replica, Row, WriteSet};
use crate::snapshot::SnapshotRef;
use crate::state::GroupState;

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
    /// Triggers surfaced to the planner by this incarnation.
    asked: BTreeSet<u64>,
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
            asked: BTreeSet::new(),
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

    /// Brings the local bookkeeping up to date with the replica and decides what to do.
    fn drive(&mut self, now_ms: u64) {
        self.sync_leases(now_ms);
        self.sync_effects(now_ms);
        self.grace(now_ms);
        self.plan_effects(now_ms);
        self.plan_dispositions();
        if self.link == Link::Up {
            self.plan_leases(now_ms);
            if !self.dispositions_outstanding() {
                self.plan_claims(now_ms);
            }
            self.plan_sends(now_ms);
            self.plan_sync(now_ms);
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

/// The binding of a command bound to no lease.
fn binding_none() -> Binding {
    Binding::default()
}

fn not_found(work: &Id) -> Error {
    refuse(Code::NotFound, format!("work {work} does not exist"))
}
