//! The agent's public values: its configuration, the durable image a host commits, and what
//! it hands out (transmits, dispatches, notices).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::command::{Command, EffectMode};
use crate::crypto::{Hash, PublicKey};
use crate::error::{Code, Error, Result};
use crate::id::Id;
use crate::lease::LeaseId;
use crate::limits::Limits;
use crate::opaque::Opaque;
use crate::receipt::Receipt;
use crate::replica::{CheckpointRecord, ReplicaImage, WriteSet};
use crate::snapshot::SnapshotRef;
use crate::work::WorkState;

#[cfg(doc)]
use super::Agent;

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
    /// Whether this agent disposes of the Group's terminal events (`expand`, SPEC §5):
    /// it is told of each pending trigger ([`Notice::Plan`]) and claims nothing while one is
    /// outstanding.
    pub planner: bool,
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
            planner: false,
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
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::canonical::some"
    )]
    pub work: Option<Id>,
    /// Ownership epoch.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::canonical::some"
    )]
    pub epoch: Option<u64>,
    /// Lease.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::canonical::some"
    )]
    pub lease: Option<LeaseId>,
    /// Effect operation.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::canonical::some"
    )]
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
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::canonical::some"
    )]
    pub dispatched_at: Option<u64>,
    /// Whether it happened, once known.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::canonical::some"
    )]
    pub happened: Option<bool>,
    /// Observed outcome (`null` is an outcome).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::canonical::some"
    )]
    pub outcome: Option<Opaque>,
    /// Observed external receipt (`null` is a receipt).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::canonical::some"
    )]
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

/// The fields of [`OutboxChange::Remove`].
struct OutboxRemove {
    base: Id,
}

// An agent image read field by field, each part by a reader of its own (the replica's image
// by `crate::replica`'s); an unknown key checked and skipped, as their derives do. An outbox
// entry's command is read by the command's own decoding (its `Deserialize`), which is the
// command's, here as wherever a signed command is read.
crate::canonical::decode_struct! {
    AgentImage [ignore_unknown] { replica, outbox, effects, meta, serial }
    AgentMeta [ignore_unknown] { session, next_action }
    OutboxEntry [ignore_unknown] {
        base, rebases, command with read_command, binding, made_at, offline,
    }
    OutboxRemove [ignore_unknown] { base }
    Binding [ignore_unknown] { work if is_some, epoch if is_some, lease if is_some, op if is_some }
    EffectEntry [ignore_unknown] {
        key, work, epoch, lease, op, mode, irreversible, high_risk, target, status, dispatches,
        dispatched_at if is_some, happened if is_some, outcome if is_some, receipt if is_some,
    }
}

/// An outbox entry's signed command, read through its `Deserialize` on the same decoder.
fn read_command(
    de: &mut crate::canonical::Decoder<'_>,
) -> std::result::Result<Command, crate::canonical::CanonError> {
    Command::deserialize(de)
}

/// The variant names of [`OutboxChange`], as its derive names them.
const OUTBOX_CHANGES: &[&str] = &["put", "remove"];

impl<'de> crate::canonical::Decode<'de> for OutboxChange {
    /// An internally tagged enum, read as a projection row is: its `type` found first, then
    /// the variant's entries read in place.
    fn decode(
        de: &mut crate::canonical::Decoder<'de>,
    ) -> std::result::Result<OutboxChange, crate::canonical::CanonError> {
        use crate::canonical::DecodeFields;
        de.tagged(&"an outbox change", "type", None, |name, t| match name {
            "put" => OutboxEntry::decode_fields(t.entries()?).map(OutboxChange::Put),
            "remove" => OutboxRemove::decode_fields(t.entries()?)
                .map(|r| OutboxChange::Remove { base: r.base }),
            other => Err(crate::canonical::unknown_variant(other, OUTBOX_CHANGES)),
        })
    }
}

impl AgentImage {
    /// Reads an image from its canonical CBOR, refusing any other encoding, by readers of its
    /// own (its `Decode`, below; the replica's rows by theirs, `crate::replica`'s `read`): what
    /// `canonical::from_slice(bytes, Strictness::Canonical)` gives through serde's derive,
    /// which a test holds them to. Not generic, so it is built once, in this crate
    /// (docs/decisions.md, "Decoding the core's types outside the core").
    pub fn from_canonical(
        bytes: &[u8],
    ) -> std::result::Result<AgentImage, crate::canonical::CanonError> {
        crate::canonical::read_whole(bytes)
    }

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
    /// A terminal event awaits this planner's disposition: ask the rule, then call
    /// [`Agent::dispose`] with its answer (an empty list is the empty disposition).
    Plan {
        /// Seq of the terminal event (the trigger).
        trigger: u64,
        /// Its work item.
        work: Id,
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
