//! The Group state: everything an authority decides from, rebuilt from the log alone.
//!
//! [`GroupState::apply`] is the one place an event changes state. The authority applies the
//! events it accepts with it, replay applies the log with it, and replicas apply what they
//! receive with it — so every participant reaches the same canonical state and the same
//! [`GroupState::hash`]. Opaque values are kept only as hashes.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::canonical;
use crate::chain::{Break, Position};
use crate::command::{Needs, Role};
use crate::crypto::{Hash, PreparedKey, PublicKey, Signature};
use crate::error::{Error, Result};
use crate::event::{Event, EventKind, Revocation};
use crate::id::Id;
use crate::id_map::IdMap;
use crate::lease::{LeaseEnd, PastLease};
use crate::opaque::{self, Opaque};
use crate::receipt::{Disposition, Receipt};
use crate::work::{Effect, EffectStatus, OpaqueRef, WorkItem, WorkItems, WorkState};

/// A member of the group.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Member {
    /// Role.
    pub role: Role,
    /// Registered key (kept after removal, to check late signatures).
    pub key: PublicKey,
    /// Current session epoch.
    pub session: u64,
    /// Whether the member was removed.
    pub removed: bool,
    /// `key`, decoded on first use.
    #[serde(skip)]
    prepared: Cache<Option<PreparedKey>>,
}

impl Member {
    fn new(role: Role, key: PublicKey, session: u64) -> Self {
        Member {
            role,
            key,
            session,
            removed: false,
            prepared: Cache::default(),
        }
    }

    /// The registered key decoded, once per member (`None` if it is not a curve point): for
    /// a host that checks signatures outside its lock.
    pub fn prepared_key(&self) -> Option<&PreparedKey> {
        self.prepared.0.get_or_init(|| self.key.prepare()).as_ref()
    }

    /// Whether `sig` over `message` verifies under the member's registered key (as
    /// [`PublicKey::verify`], without decoding the key every time).
    pub fn verify(&self, message: &[u8], sig: &Signature) -> bool {
        self.prepared_key().is_some_and(|k| k.verify(message, sig))
    }
}

/// A value computed from the state on first use. A cache, not state: serde skips it and any
/// two compare equal, so it never shows in a state's encoding, hash or equality.
#[derive(Clone)]
pub(crate) struct Cache<T>(std::sync::OnceLock<T>);

impl<T> Default for Cache<T> {
    fn default() -> Self {
        Cache(std::sync::OnceLock::new())
    }
}

impl<T> PartialEq for Cache<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl<T> Eq for Cache<T> {}

impl<T> std::fmt::Debug for Cache<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cache")
    }
}

/// When a `tick` would expire `w`'s lease: its start window while it is only leased, else
/// its end.
fn lease_deadline(w: &WorkItem) -> Option<u64> {
    let l = w.lease.as_ref()?;
    Some(match w.state {
        WorkState::Leased => l.start_by.min(l.expires_at),
        _ => l.expires_at,
    })
}

/// Where an approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    /// Not decided.
    Pending,
    /// Granted.
    Granted,
    /// Denied.
    Denied,
}

/// An approval request.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Approval {
    /// Work item it names.
    pub work: Id,
    /// Who asked.
    pub requested_by: Id,
    /// Reason, as a hash.
    pub reason: OpaqueRef,
    /// Where it stands.
    pub state: ApprovalState,
    /// Aggregate revision.
    pub revision: u64,
}

/// A receipt as the state stores it (the group and the key are implied).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredReceipt {
    /// Seq.
    pub seq: u64,
    /// Event id.
    pub event_id: Hash,
    /// Content hash.
    pub content_hash: Hash,
    /// Aggregate.
    pub aggregate: compact_str::CompactString,
    /// Revision after.
    pub revision: u64,
    /// Applied or evidence.
    pub disposition: Disposition,
    /// Acceptance time.
    pub at: u64,
}

/// The disposition recorded for an `expand` trigger.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Expansion {
    /// Hash of the canonical CBOR of the `work` list.
    pub work_hash: Hash,
    /// Sender of the recorded expansion.
    pub actor: Id,
    /// Its action ID (its receipt answers duplicates).
    pub action: Id,
}

/// A late result recorded as evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceNote {
    /// Seq of the evidence event.
    pub seq: u64,
    /// Work item.
    pub work: Id,
    /// Sender.
    pub actor: Id,
}

/// One actor's receipts, by action: looked up on every command, so keyed by hash
/// ([`IdMap`]); encoded in canonical order like any other map.
pub type Receipts = IdMap<StoredReceipt>;

/// The state of one Group. A streamed snapshot reads its fields one by one
/// (`GroupState::read_streamed`): a field added here is added there too.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GroupState {
    /// Organization.
    pub org: Id,
    /// Group.
    pub group: Id,
    /// Mission.
    pub mission: Id,
    /// Title, as a hash.
    pub title: OpaqueRef,
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
    /// Members by actor.
    pub members: BTreeMap<Id, Member>,
    /// Work items by ID. Changed by `apply` only, once [`GroupState::next_deadline`] has been
    /// asked: that keeps an index of their leases.
    pub work: WorkItems,
    /// Approvals by ID.
    pub approvals: BTreeMap<Id, Approval>,
    /// Receipts by actor, then action (the receipt index).
    #[serde(deserialize_with = "crate::receipt_index::deserialize")]
    pub receipts: BTreeMap<Id, Receipts>,
    /// Terminal events (valid `expand` triggers): seq → work item.
    pub terminal: BTreeMap<u64, Id>,
    /// Recorded dispositions by trigger seq.
    pub expansions: BTreeMap<u64, Expansion>,
    /// Seqs whose opaque values were redacted.
    pub redacted: BTreeSet<u64>,
    /// Late results recorded as evidence.
    pub evidence: Vec<EvidenceNote>,
    /// The lease deadline of every work item that holds one, in order: what
    /// [`GroupState::next_deadline`] reads, so that it need not visit every work item. Built
    /// from `work` on first use, then kept up to date by `apply`.
    #[serde(skip)]
    pub(crate) deadlines: Cache<BTreeSet<(u64, Id)>>,
}

// What a snapshot holds is handed to the canonical encoder in canonical key order
// (`canonical::encode_struct!`); JSON gets the fields in the order declared above.
canonical::encode_struct! {
    Member { role, key, session, removed; skip prepared }
    Approval { work, requested_by, reason, state, revision }
    StoredReceipt { seq, event_id, content_hash, aggregate, revision, disposition, at }
    Expansion { work_hash, actor, action }
    GroupState {
        org, group, mission, title, authority_key, seq, head, revision, members_revision,
        archived, members with canonical::ById, work, approvals with canonical::ById,
        receipts with canonical::ById, terminal with canonical::BySeq,
        expansions with canonical::BySeq, redacted, evidence;
        skip deadlines
    }
}

fn opaque_ref(seq: u64, value: &Opaque) -> Result<OpaqueRef> {
    Ok(OpaqueRef {
        seq,
        hash: opaque::hash(value)?,
    })
}

fn corrupt(event: &Event, what: impl std::fmt::Display) -> Error {
    Error::corrupt(format!("event seq {} does not apply: {what}", event.seq)).with("seq", event.seq)
}

/// The receipt index of a state, read as its field's `deserialize_with` reads it, by the
/// index's own readers.
fn receipt_index(
    de: &mut canonical::Decoder<'_>,
) -> std::result::Result<BTreeMap<Id, Receipts>, canonical::CanonError> {
    crate::receipt_index::decode(de)
}

// A state held whole is read by a reader of its own rather than serde's derive: the work items
// by theirs ([`WorkItems`]'s `Decode`), the receipt index by its own ([`crate::receipt_index`]),
// the members, approvals, expansions and evidence by theirs (above). It accepts, refuses and
// decodes what the derive does on the same decoder (a test holds the two together on the
// states of every transcript, damaged): keys in canonical order, an unknown key checked and
// skipped, a missing one refused by name.
// The parts of a state, read by readers of their own. `StoredReceipt`'s derive denies unknown
// fields, so its reader refuses them; the others' derives skip them, as their readers do.
canonical::decode_struct! {
    Member [ignore_unknown] { role, key, session, removed; skip prepared }
    Approval [ignore_unknown] { work, requested_by, reason, state, revision }
    StoredReceipt { seq, event_id, content_hash, aggregate, revision, disposition, at }
    Expansion [ignore_unknown] { work_hash, actor, action }
    EvidenceNote [ignore_unknown] { seq, work, actor }
}

canonical::decode_struct! {
    GroupState [ignore_unknown] {
        org, group, mission, title, authority_key, seq, head, revision, members_revision,
        archived, members, work, approvals, receipts with receipt_index, terminal, expansions,
        redacted, evidence;
        skip deadlines
    }
}

impl GroupState {
    /// Reads a state from its canonical CBOR, refusing any other encoding, by the state's own
    /// reader (its `Decode`, below): what `canonical::from_slice(bytes,
    /// Strictness::Canonical)` gives through serde's derive, which a test holds it to. Not
    /// generic, so it is built once, in this crate (docs/decisions.md, "Decoding the core's
    /// types outside the core").
    pub fn from_canonical(bytes: &[u8]) -> std::result::Result<GroupState, canonical::CanonError> {
        canonical::read_whole(bytes)
    }

    /// Reads a state from a streamed snapshot (see [`crate::snapshot`]): the map of its
    /// eighteen fields, keys in canonical order (shorter first, then bytewise), each read by
    /// its type's decoder, except the work items and the receipt index, which are read entry
    /// by entry ([`WorkItems::read_streamed`], [`crate::receipt_index::read_streamed`]). It
    /// accepts what the derived decoder accepts from the same canonical bytes and decodes the
    /// same state; a map with other keys is refused naming the key expected.
    pub(crate) fn read_streamed<R: std::io::Read>(
        de: &mut canonical::StreamDecoder<R>,
    ) -> std::result::Result<GroupState, canonical::CanonError> {
        de.map_of(18)?;
        let p = &mut Vec::new();
        let org = de.field("org", p)?;
        let seq = de.field("seq", p)?;
        let head = de.field("head", p)?;
        de.key("work", p)?;
        let work = WorkItems::read_streamed(de)?;
        let group = de.field("group", p)?;
        let title = de.field("title", p)?;
        let members = de.field("members", p)?;
        let mission = de.field("mission", p)?;
        let archived = de.field("archived", p)?;
        let evidence = de.field("evidence", p)?;
        de.key("receipts", p)?;
        let receipts = crate::receipt_index::read_streamed(de)?;
        let redacted = de.field("redacted", p)?;
        let revision = de.field("revision", p)?;
        let terminal = de.field("terminal", p)?;
        let approvals = de.field("approvals", p)?;
        let expansions = de.field("expansions", p)?;
        let authority_key = de.field("authority_key", p)?;
        let members_revision = de.field("members_revision", p)?;
        de.leave();
        Ok(GroupState {
            org,
            group,
            mission,
            title,
            authority_key,
            seq,
            head,
            revision,
            members_revision,
            archived,
            members,
            work,
            approvals,
            receipts,
            terminal,
            expansions,
            redacted,
            evidence,
            deadlines: Cache::default(),
        })
    }

    /// The state after the genesis event.
    pub fn genesis(event: &Event) -> Result<GroupState> {
        let EventKind::GroupOpened(g) = &event.kind else {
            return Err(corrupt(event, "the first event must be group_opened"));
        };
        if Position::START.check(&event.group, event).is_err() {
            return Err(corrupt(
                event,
                "group_opened must be seq 1 with a zero prev",
            ));
        }
        if event.aggregate != "group" || event.revision != 1 {
            return Err(corrupt(
                event,
                "group_opened must be aggregate group at revision 1",
            ));
        }
        let members = g
            .members
            .iter()
            .map(|m| (m.actor.clone(), Member::new(m.role, m.key, 1)))
            .collect();
        let mut state = GroupState {
            org: g.org.clone(),
            group: event.group.clone(),
            mission: g.mission.clone(),
            title: opaque_ref(1, &g.title)?,
            authority_key: g.authority_key,
            seq: 1,
            head: event.id,
            revision: 1,
            members_revision: 1,
            archived: false,
            members,
            work: WorkItems::new(),
            approvals: BTreeMap::new(),
            receipts: BTreeMap::new(),
            terminal: BTreeMap::new(),
            expansions: BTreeMap::new(),
            redacted: BTreeSet::new(),
            evidence: Vec::new(),
            deadlines: Cache::default(),
        };
        state.record_receipt(event);
        Ok(state)
    }

    /// Applies the genesis event to no state, or any later event to this state.
    pub fn apply_to(state: &mut Option<GroupState>, event: &Event) -> Result<()> {
        match state {
            None => {
                *state = Some(GroupState::genesis(event)?);
                Ok(())
            }
            Some(s) => s.apply(event),
        }
    }

    /// Applies an event read back from the stored log of `group`: as [`GroupState::apply_to`],
    /// and the first event must belong to `group`, the group whose log holds it (later events
    /// are held to it by [`GroupState::apply`]). A log stored under another group's name is
    /// `LOG_CORRUPT`, never opened as that group.
    pub fn apply_stored_to(
        state: &mut Option<GroupState>,
        group: &Id,
        event: &Event,
    ) -> Result<()> {
        if state.is_none() && &event.group != group {
            return Err(corrupt(
                event,
                format!("it belongs to group {}, not {group}", event.group),
            ));
        }
        GroupState::apply_to(state, event)
    }

    /// SHA-256 of the canonical CBOR of the whole state, receipts included.
    pub fn hash(&self) -> Result<Hash> {
        Ok(Hash(canonical::hash(self)?))
    }

    /// Canonical CBOR of the whole state.
    pub fn to_cbor(&self) -> Result<Vec<u8>> {
        Ok(canonical::to_vec(self)?)
    }

    /// Current revision of an aggregate (0 if it does not exist).
    pub fn revision_of(&self, aggregate: &str) -> u64 {
        match aggregate {
            "group" => self.revision,
            "members" => self.members_revision,
            _ => {
                if let Some(w) = aggregate.strip_prefix("work:") {
                    self.work.get(w).map_or(0, |w| w.revision)
                } else if let Some(a) = aggregate.strip_prefix("approval:") {
                    self.approvals.get(a).map_or(0, |a| a.revision)
                } else {
                    0
                }
            }
        }
    }

    /// The receipt recorded for (actor, action).
    pub fn receipt(&self, actor: &str, action: &str) -> Option<Receipt> {
        let (actor_id, by_action) = self.receipts.get_key_value(actor)?;
        let (action_id, r) = by_action.get_key_value(action)?;
        Some(Receipt {
            group: self.group.clone(),
            seq: r.seq,
            event_id: r.event_id,
            actor: actor_id.clone(),
            action: action_id.clone(),
            content_hash: r.content_hash,
            aggregate: r.aggregate.clone(),
            revision: r.revision,
            disposition: r.disposition,
            at: r.at,
        })
    }

    /// The earliest time a `tick` would expire something, if any lease is outstanding.
    ///
    /// The first call reads every work item; later ones read an index that `apply` keeps.
    pub fn next_deadline(&self) -> Option<u64> {
        self.deadlines
            .0
            .get_or_init(|| {
                self.work
                    .iter()
                    .filter_map(|(id, w)| Some((lease_deadline(w)?, id.clone())))
                    .collect()
            })
            .first()
            .map(|(at, _)| *at)
    }

    /// The work items whose lease `event` may start, move or end, with their deadlines now:
    /// the item it is about, and those whose leases it revokes.
    fn lease_changes(&self, event: &Event) -> Vec<(Id, Option<u64>)> {
        let revoked: &[Revocation] = match &event.kind {
            EventKind::MemberRemoved(m) => &m.revoked,
            EventKind::SessionReplaced(s) => &s.revoked,
            EventKind::LeasesExpired(e) => &e.expired,
            _ => &[],
        };
        let about = event.aggregate.strip_prefix("work:");
        about
            .into_iter()
            .chain(revoked.iter().map(|r| r.work.as_str()))
            .filter_map(|work| self.work.get_key_value(work))
            .map(|(id, w)| (id.clone(), lease_deadline(w)))
            .collect()
    }

    /// Work items a worker may claim at `now_ms`: queued, dependencies succeeded, backoff
    /// over, deadline not passed, attempts left.
    pub fn frontier(&self, now_ms: u64) -> Vec<&Id> {
        self.work
            .iter()
            .filter(|(_, w)| {
                w.state == WorkState::Queued
                    && w.not_before <= now_ms
                    && w.contract.deadline_at.is_none_or(|d| now_ms < d)
                    && w.attempts < w.contract.max_attempts
                    && w.after.iter().all(|a| {
                        self.work
                            .get(a)
                            .is_some_and(|d| d.state == WorkState::Succeeded)
                    })
            })
            .map(|(id, _)| id)
            .collect()
    }

    fn record_receipt(&mut self, event: &Event) {
        let stored = StoredReceipt {
            seq: event.seq,
            event_id: event.id,
            content_hash: event.content_hash,
            aggregate: event.aggregate.clone(),
            revision: event.revision,
            disposition: event.disposition(),
            at: event.at,
        };
        // Look up before inserting: most actors have receipts already, so no key is cloned.
        match self.receipts.get_mut(event.actor.as_str()) {
            Some(by_action) => {
                by_action.insert(event.action.clone(), stored);
            }
            None => {
                let mut by_action = Receipts::default();
                by_action.insert(event.action.clone(), stored);
                self.receipts.insert(event.actor.clone(), by_action);
            }
        }
    }

    /// Applies one event. Everything is checked before anything changes: on error the state
    /// is exactly as it was.
    pub fn apply(&mut self, event: &Event) -> Result<()> {
        if let Err(b) = Position::at(self.seq, self.head).check(&self.group, event) {
            return Err(match b {
                Break::Group => corrupt(event, format_args!("it belongs to group {}", event.group)),
                Break::Seq { expected, .. } => {
                    corrupt(event, format_args!("expected seq {expected}"))
                }
                Break::Prev { .. } => {
                    corrupt(event, "its prev is not the id of the event before it")
                }
            });
        }
        if self
            .receipts
            .get(&event.actor)
            .is_some_and(|m| m.contains_key(&event.action))
        {
            return Err(corrupt(event, "its (actor, action) already has a receipt"));
        }
        let expected = self.revision_of(&event.aggregate) + 1;
        if event.revision != expected {
            return Err(corrupt(
                event,
                format!(
                    "revision {} of {} should be {expected}",
                    event.revision, event.aggregate
                ),
            ));
        }
        self.check(event)?;
        let changes = match self.deadlines.0.get() {
            Some(_) => self.lease_changes(event),
            None => Vec::new(),
        };
        self.mutate(event)?;
        if let Some(index) = self.deadlines.0.get_mut() {
            for (id, before) in changes {
                let after = self.work.get(&id).and_then(lease_deadline);
                if before != after {
                    if let Some(at) = before {
                        index.remove(&(at, id.clone()));
                    }
                    if let Some(at) = after {
                        index.insert((at, id));
                    }
                }
            }
        }
        self.seq = event.seq;
        self.head = event.id;
        self.record_receipt(event);
        Ok(())
    }

    fn item(&self, event: &Event, work: &Id) -> Result<&WorkItem> {
        self.work
            .get(work)
            .ok_or_else(|| corrupt(event, format!("work {work} does not exist")))
    }

    fn check_revocations(&self, event: &Event, revoked: &[Revocation]) -> Result<()> {
        for r in revoked {
            let w = self.item(event, &r.work)?;
            if w.lease.as_ref().map(|l| l.id) != Some(r.lease) {
                return Err(corrupt(
                    event,
                    format!("lease {} is not current on {}", r.lease, r.work),
                ));
            }
        }
        Ok(())
    }

    /// Checks that an event's references hold, so that [`GroupState::mutate`] cannot fail.
    fn check(&self, event: &Event) -> Result<()> {
        // `prefix` + `id` is the expected aggregate; compared without building it.
        let agg = |prefix: &str, id: &str| {
            if event.aggregate.strip_prefix(prefix) == Some(id) {
                Ok(())
            } else {
                Err(corrupt(event, format!("aggregate should be {prefix}{id}")))
            }
        };
        let lease_is = |work: &Id, lease| -> Result<()> {
            let w = self.item(event, work)?;
            if w.lease.as_ref().map(|l| l.id) != Some(lease) {
                return Err(corrupt(
                    event,
                    format!("lease {lease} is not current on {work}"),
                ));
            }
            agg("work:", work.as_str())
        };
        match &event.kind {
            EventKind::GroupOpened(_) => Err(corrupt(event, "the group is already open")),
            EventKind::MemberAdded(_) | EventKind::RoleChanged(_) => agg("members", ""),
            EventKind::MemberRemoved(m) => {
                if !self.members.contains_key(&m.actor) {
                    return Err(corrupt(event, format!("member {} does not exist", m.actor)));
                }
                self.check_revocations(event, &m.revoked)?;
                agg("members", "")
            }
            EventKind::SessionReplaced(s) => {
                if !self.members.contains_key(&event.actor) {
                    return Err(corrupt(event, "the sender is not a member"));
                }
                self.check_revocations(event, &s.revoked)?;
                agg("group", "")
            }
            EventKind::LeasesExpired(e) => {
                self.check_revocations(event, &e.expired)?;
                agg("group", "")
            }
            EventKind::WorkCreated(c) => {
                if self.work.contains_key(&c.work) {
                    return Err(corrupt(event, format!("work {} exists already", c.work)));
                }
                agg("work:", c.work.as_str())
            }
            EventKind::WorkExpanded(x) => {
                if x.work.iter().any(|w| self.work.contains_key(&w.work)) {
                    return Err(corrupt(event, "an expanded work item exists already"));
                }
                agg("group", "")
            }
            EventKind::WorkClaimed(c) => {
                self.item(event, &c.work)?;
                agg("work:", c.work.as_str())
            }
            EventKind::WorkStarted(s) => lease_is(&s.work, s.lease),
            EventKind::LeaseRenewed(s) => lease_is(&s.work, s.lease),
            EventKind::WorkCheckpointed(s) => lease_is(&s.work, s.lease),
            EventKind::WorkBlocked(s) => lease_is(&s.work, s.lease),
            EventKind::WorkSucceeded(s) => lease_is(&s.work, s.lease),
            EventKind::WorkFailed(s) => lease_is(&s.work, s.lease),
            EventKind::EffectIntended(s) => lease_is(&s.work, s.lease),
            EventKind::WorkCharged(s) => lease_is(&s.work, s.lease),
            EventKind::EffectSettled(s) => {
                lease_is(&s.work, s.lease)?;
                if !self.item(event, &s.work)?.effects.contains_key(&s.key) {
                    return Err(corrupt(
                        event,
                        format!("effect {} was never intended", s.key),
                    ));
                }
                Ok(())
            }
            EventKind::EffectReconciled(s) => {
                if !self.item(event, &s.work)?.effects.contains_key(&s.key) {
                    return Err(corrupt(
                        event,
                        format!("effect {} was never intended", s.key),
                    ));
                }
                agg("work:", s.work.as_str())
            }
            EventKind::BlockResolved(s) => {
                self.item(event, &s.work)?;
                agg("work:", s.work.as_str())
            }
            EventKind::WorkCancelled(s) => {
                self.item(event, &s.work)?;
                agg("work:", s.work.as_str())
            }
            EventKind::WorkReassigned(s) => {
                self.check_revocations(event, std::slice::from_ref(&s.revoked))?;
                agg("work:", s.work.as_str())
            }
            EventKind::ApprovalRequested(a) => {
                if self.approvals.contains_key(&a.approval) {
                    return Err(corrupt(event, format!("approval {} exists", a.approval)));
                }
                agg("approval:", a.approval.as_str())
            }
            EventKind::ApprovalDecided(a) => {
                if !self.approvals.contains_key(&a.approval) {
                    return Err(corrupt(
                        event,
                        format!("approval {} does not exist", a.approval),
                    ));
                }
                agg("approval:", a.approval.as_str())
            }
            EventKind::EventRedacted(_) | EventKind::GroupArchived(_) => agg("group", ""),
            EventKind::EvidenceRecorded(e) => {
                self.item(event, &e.work)?;
                agg("group", "")
            }
        }
    }

    /// Ends the current lease of `work` with `end`, moving the item to `to`.
    fn end_lease(&mut self, work: &Id, end: LeaseEnd, to: WorkState) {
        if let Some(w) = self.work.get_mut(work) {
            if let Some(l) = w.lease.take() {
                w.past_leases.push(PastLease {
                    id: l.id,
                    holder: l.holder,
                    epoch: l.epoch,
                    end,
                });
            }
            if matches!(end, LeaseEnd::Revoked | LeaseEnd::Expired) {
                let epoch = w.epoch;
                for e in w.effects.values_mut() {
                    if e.epoch == epoch && e.status == EffectStatus::Intended {
                        e.status = crate::effect::status_at_lease_end(e.mode);
                    }
                }
            }
            w.state = to;
        }
    }

    fn revoke_all(&mut self, revoked: &[Revocation], end: LeaseEnd) {
        for r in revoked {
            self.end_lease(&r.work, end, r.to);
            self.bump_work(&r.work);
        }
    }

    fn bump_work(&mut self, work: &Id) {
        if let Some(w) = self.work.get_mut(work) {
            w.revision += 1;
        }
    }

    fn create_work(
        &mut self,
        seq: u64,
        work: &Id,
        contract: &crate::command::Contract,
        after: &[Id],
        spec: &Opaque,
    ) -> Result<()> {
        self.work.insert(
            work.clone(),
            WorkItem {
                contract: contract.clone(),
                after: after.into(),
                spec: opaque_ref(seq, spec)?,
                state: WorkState::Queued,
                revision: 1,
                epoch: 0,
                attempts: 0,
                not_before: 0,
                spent: 0,
                lease: None,
                past_leases: Vec::new(),
                checkpoint: None,
                needs: None,
                outcome: None,
                effects: BTreeMap::new(),
            },
        );
        Ok(())
    }

    /// Changes the state; every reference was checked by [`GroupState::check`].
    fn mutate(&mut self, event: &Event) -> Result<()> {
        let seq = event.seq;
        // Hash the opaque value first, so that nothing below can fail half-way.
        let stored = opaque_value(&event.kind)
            .map(|v| opaque_ref(seq, v))
            .transpose()?;
        let next_ref = || stored.expect("the kinds that store a value have one");
        match &event.kind {
            EventKind::GroupOpened(_) => {}
            EventKind::MemberAdded(m) => {
                let session = self.members.get(&m.actor).map_or(1, |old| old.session);
                self.members
                    .insert(m.actor.clone(), Member::new(m.role, m.key, session));
                self.members_revision += 1;
            }
            EventKind::MemberRemoved(m) => {
                self.revoke_all(&m.revoked, LeaseEnd::Revoked);
                if let Some(member) = self.members.get_mut(&m.actor) {
                    member.removed = true;
                }
                self.members_revision += 1;
            }
            EventKind::RoleChanged(c) => {
                if let Some(member) = self.members.get_mut(&c.actor) {
                    member.role = c.role;
                }
                self.members_revision += 1;
            }
            EventKind::SessionReplaced(s) => {
                self.revoke_all(&s.revoked, LeaseEnd::Revoked);
                if let Some(member) = self.members.get_mut(&event.actor) {
                    member.session = s.session;
                }
                self.revision += 1;
            }
            EventKind::LeasesExpired(e) => {
                self.revoke_all(&e.expired, LeaseEnd::Expired);
                self.revision += 1;
            }
            EventKind::WorkCreated(c) => {
                self.create_work(seq, &c.work, &c.contract, &c.after, &c.spec)?;
            }
            EventKind::WorkExpanded(x) => {
                let work_hash = expansion_hash(&x.work)?;
                for w in &x.work {
                    self.create_work(seq, &w.work, &w.contract, &w.after, &w.spec)?;
                }
                self.expansions.insert(
                    x.trigger,
                    Expansion {
                        work_hash,
                        actor: event.actor.clone(),
                        action: event.action.clone(),
                    },
                );
                self.revision += 1;
            }
            EventKind::WorkClaimed(c) => {
                let w = self.work.get_mut(&c.work).expect("checked");
                w.epoch = c.lease.epoch;
                w.lease = Some(c.lease.clone());
                w.state = WorkState::Leased;
                w.revision += 1;
            }
            EventKind::WorkStarted(s) => {
                let w = self.work.get_mut(&s.work).expect("checked");
                w.state = WorkState::Running;
                w.revision += 1;
            }
            EventKind::LeaseRenewed(r) => {
                let w = self.work.get_mut(&r.work).expect("checked");
                if let Some(l) = w.lease.as_mut() {
                    l.expires_at = r.expires_at;
                }
                w.revision += 1;
            }
            EventKind::WorkCheckpointed(c) => {
                let data = next_ref();
                self.end_lease(&c.work, LeaseEnd::Released, WorkState::Queued);
                let w = self.work.get_mut(&c.work).expect("checked");
                w.checkpoint = Some(data);
                w.revision += 1;
            }
            EventKind::WorkBlocked(b) => {
                let data = next_ref();
                self.end_lease(&b.work, LeaseEnd::Released, WorkState::Blocked);
                let w = self.work.get_mut(&b.work).expect("checked");
                w.checkpoint = Some(data);
                w.needs = Some(Needs::clone(&b.needs));
                w.revision += 1;
            }
            EventKind::BlockResolved(r) => {
                let w = self.work.get_mut(&r.work).expect("checked");
                w.needs = None;
                w.state = WorkState::Queued;
                w.revision += 1;
            }
            EventKind::WorkSucceeded(s) => {
                let result = next_ref();
                self.end_lease(&s.work, LeaseEnd::Released, WorkState::Succeeded);
                let w = self.work.get_mut(&s.work).expect("checked");
                w.outcome = Some(result);
                w.revision += 1;
                self.terminal.insert(seq, s.work.clone());
            }
            EventKind::WorkFailed(f) => {
                let error = next_ref();
                self.end_lease(&f.work, LeaseEnd::Released, f.to);
                let w = self.work.get_mut(&f.work).expect("checked");
                w.outcome = Some(error);
                w.attempts = f.attempt;
                if let Some(nb) = f.not_before {
                    w.not_before = nb;
                }
                w.revision += 1;
                if f.to.is_terminal() {
                    self.terminal.insert(seq, f.work.clone());
                }
            }
            EventKind::WorkCancelled(c) => {
                self.end_lease(&c.work, LeaseEnd::Revoked, WorkState::Cancelled);
                let w = self.work.get_mut(&c.work).expect("checked");
                w.revision += 1;
                self.terminal.insert(seq, c.work.clone());
            }
            EventKind::WorkReassigned(r) => {
                self.end_lease(&r.work, LeaseEnd::Revoked, r.revoked.to);
                self.bump_work(&r.work);
            }
            EventKind::EffectIntended(e) => {
                let target = next_ref();
                let w = self.work.get_mut(&e.work).expect("checked");
                w.effects.insert(
                    e.key,
                    Effect {
                        op: e.op.clone(),
                        epoch: w.epoch,
                        mode: e.mode,
                        irreversible: e.irreversible,
                        target,
                        status: EffectStatus::Intended,
                        happened: None,
                        receipt: None,
                    },
                );
                w.revision += 1;
            }
            EventKind::EffectSettled(s) => {
                let receipt = next_ref();
                let w = self.work.get_mut(&s.work).expect("checked");
                if let Some(e) = w.effects.get_mut(&s.key) {
                    e.status = EffectStatus::Settled;
                    e.receipt = Some(receipt);
                }
                w.revision += 1;
            }
            EventKind::EffectReconciled(r) => {
                let receipt = next_ref();
                let w = self.work.get_mut(&r.work).expect("checked");
                if let Some(e) = w.effects.get_mut(&r.key) {
                    e.status = EffectStatus::Reconciled;
                    e.happened = Some(r.happened);
                    e.receipt = Some(receipt);
                }
                if let Some(to) = r.to {
                    w.state = to;
                }
                w.revision += 1;
            }
            EventKind::WorkCharged(c) => {
                let data = c.data.as_ref().map(|_| next_ref());
                let w = self.work.get_mut(&c.work).expect("checked");
                w.spent = c.spent;
                if data.is_some() {
                    w.checkpoint = data;
                }
                w.revision += 1;
            }
            EventKind::ApprovalRequested(a) => {
                let reason = next_ref();
                self.approvals.insert(
                    a.approval.clone(),
                    Approval {
                        work: a.work.clone(),
                        requested_by: event.actor.clone(),
                        reason,
                        state: ApprovalState::Pending,
                        revision: 1,
                    },
                );
            }
            EventKind::ApprovalDecided(d) => {
                let a = self.approvals.get_mut(&d.approval).expect("checked");
                a.state = if d.grant {
                    ApprovalState::Granted
                } else {
                    ApprovalState::Denied
                };
                a.revision += 1;
            }
            EventKind::EventRedacted(r) => {
                self.redacted.insert(r.seq);
                self.revision += 1;
            }
            EventKind::GroupArchived(_) => {
                self.archived = true;
                self.revision += 1;
            }
            EventKind::EvidenceRecorded(e) => {
                self.evidence.push(EvidenceNote {
                    seq,
                    work: e.work.clone(),
                    actor: event.actor.clone(),
                });
                self.revision += 1;
            }
        }
        Ok(())
    }
}

/// The hash an `expand` disposition is recorded and compared by: the canonical CBOR of its
/// work list with each `spec` replaced by its opaque hash, so redacting the event (SPEC §6)
/// leaves it unchanged.
pub fn expansion_hash(work: &[crate::command::NewWork]) -> Result<Hash> {
    let mut list = work.to_vec();
    for item in &mut list {
        item.spec = Opaque::text(&opaque::hash(&item.spec)?.to_hex());
    }
    Ok(Hash(canonical::hash(&list)?))
}

/// The opaque value an event kind records in state (at most one), as `mutate` consumes it.
fn opaque_value(kind: &EventKind) -> Option<&Opaque> {
    match kind {
        EventKind::WorkCheckpointed(c) => Some(&c.data),
        EventKind::WorkBlocked(b) => Some(&b.data),
        EventKind::WorkSucceeded(s) => Some(&s.result),
        EventKind::WorkFailed(f) => Some(&f.error),
        EventKind::EffectIntended(e) => Some(&e.target),
        EventKind::EffectSettled(s) => Some(&s.receipt),
        EventKind::EffectReconciled(r) => Some(&r.receipt),
        EventKind::WorkCharged(c) => c.data.as_ref(),
        EventKind::ApprovalRequested(a) => Some(&a.reason),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_common::{self, agrees_with_derive, run, transcripts, Agreement, Recorder};

    /// States every transcript passes through: every fifth, and each group's last.
    fn transcript_states() -> Vec<GroupState> {
        test_common::transcript_states(5)
    }

    /// What serde's derive reads from canonical bytes, the reference for the state's reader.
    fn by_derive(bytes: &[u8]) -> Option<GroupState> {
        canonical::from_slice(bytes, canonical::Strictness::Canonical).ok()
    }

    /// The state's reader gives what the derive gives, on the states the transcripts pass
    /// through, each third byte of them changed four ways and every seventh cut. Nothing in a
    /// state is an internally tagged enum, so the derive reads it in place and takes nothing
    /// the reader refuses.
    #[test]
    fn the_states_reader_reads_what_the_derive_reads() {
        let states = transcript_states();
        assert!(states.len() > 20, "{} states", states.len());
        let mut counts = Agreement::default();
        for state in &states {
            agrees_with_derive(state, GroupState::from_canonical, &mut counts);
        }
        assert_eq!(counts.stricter, 0, "{counts:?}");
        assert!(
            counts.accepted > 1000 && counts.refused > 1000,
            "{counts:?}"
        );
    }

    /// Reads `value`'s encoding, each byte changed to every value and every cut, and its
    /// encoding with an unknown key, by `T`'s reader and by its derive (which must take the
    /// latter only where it skips unknown fields, `skips`).
    fn part_reads_as_its_derive<T>(value: &T, skips: bool)
    where
        T: for<'de> canonical::Decode<'de> + serde::de::DeserializeOwned + Serialize,
        T: PartialEq + std::fmt::Debug,
    {
        let bytes = canonical::to_vec(value).expect("encodes");
        let (accepted, refused) = canonical::every_byte_reads_as_the_derive::<T>(&bytes, false);
        assert!(accepted > 0 && refused > 0, "{value:?}");
        let extended = canonical::with_unknown_key(&bytes);
        assert_eq!(
            canonical::read_whole::<T>(&extended).ok().as_ref(),
            skips.then_some(value)
        );
        canonical::every_byte_reads_as_the_derive::<T>(&extended, false);
    }

    /// The parts of a state are read by their own readers as by their derives: a member, an
    /// approval, a stored receipt, an expansion and an evidence note of the transcripts'
    /// states, each byte changed to every value and every cut, and with an unknown key, which
    /// a stored receipt refuses (its derive denies unknown fields) and the others skip.
    #[test]
    fn the_parts_of_a_state_are_read_as_their_derives_read_them() {
        let states = transcript_states();
        let member = states.iter().find_map(|s| s.members.values().next());
        let approval = states.iter().find_map(|s| s.approvals.values().next());
        let receipt = states
            .iter()
            .find_map(|s| s.receipts.values().find_map(|r| r.values().next()));
        let expansion = states.iter().find_map(|s| s.expansions.values().next());
        let note = states.iter().find_map(|s| s.evidence.first());
        part_reads_as_its_derive(member.expect("a member"), true);
        part_reads_as_its_derive(approval.expect("an approval"), true);
        part_reads_as_its_derive(receipt.expect("a receipt"), false);
        part_reads_as_its_derive(expansion.expect("an expansion"), true);
        part_reads_as_its_derive(note.expect("an evidence note"), true);
    }

    /// A key that is none of the state's fields is checked and skipped, as the derive does;
    /// a field left out is refused by name.
    #[test]
    fn the_states_reader_skips_unknown_keys_and_names_missing_ones() {
        let state = transcript_states().pop().expect("a state");
        use ciborium::Value;
        let value = canonical::decode(
            &state.to_cbor().expect("encodes"),
            canonical::Strictness::Canonical,
        )
        .expect("decodes");
        let Value::Map(mut map) = value else {
            panic!("a map")
        };
        map.push((
            Value::Text("zz".into()),
            Value::Array(vec![Value::from(1), Value::Null]),
        ));
        let bytes = canonical::encode_value(&Value::Map(map.clone())).expect("encodes");
        assert_eq!(GroupState::from_canonical(&bytes).as_ref(), Ok(&state));
        assert_eq!(by_derive(&bytes).as_ref(), Some(&state));
        map.retain(|(k, _)| k.as_text() != Some("mission"));
        let bytes = canonical::encode_value(&Value::Map(map)).expect("encodes");
        let err = GroupState::from_canonical(&bytes).expect_err("missing");
        assert!(err.reason.contains("missing field `mission`"), "{err}");
        assert!(by_derive(&bytes).is_none());
    }

    /// The maps keyed by seq write their keys as decimal text for JSON (and for JavaScript,
    /// which takes text keys only): the JSON form is what `serde_json` made of integer keys,
    /// and it reads back as the same state.
    #[test]
    fn maps_keyed_by_seq_have_text_keys_in_json() {
        let (_, text) = transcripts()
            .into_iter()
            .find(|(name, _)| name == "expand.jsonl")
            .expect("the expand transcript");
        let mut host = Recorder::default();
        run(&mut host, &text);
        let group = host.events.last().expect("events").group.clone();
        let state = crate::transcript::Host::state(&host, &group).expect("a state");
        assert!(!state.terminal.is_empty() && !state.expansions.is_empty());
        let json = serde_json::to_value(&state).expect("JSON");
        assert_eq!(
            json["terminal"],
            serde_json::to_value(&state.terminal).expect("JSON")
        );
        assert_eq!(
            json["expansions"],
            serde_json::to_value(&state.expansions).expect("JSON")
        );
        let seq = state.terminal.keys().next().expect("a key").to_string();
        assert!(json["terminal"].get(&seq).is_some(), "{}", json["terminal"]);
        let back: GroupState = serde_json::from_value(json).expect("reads back");
        assert_eq!(
            back.to_cbor().expect("encodes"),
            state.to_cbor().expect("encodes")
        );
    }
}
