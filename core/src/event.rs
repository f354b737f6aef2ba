//! Events: the immutable, hash-chained facts an authority appends (SPEC §3).
//!
//! An event's `id` is the SHA-256 of the canonical CBOR of its header (every field but
//! `kind`); the header holds `payload_hash`, which commits to `kind` with each opaque value
//! replaced by its own hash. Erasing opaque values (§6) therefore leaves the id, the payload
//! hash and the `prev` chain verifiable.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::canonical;
use crate::command::{
    AddMember, Archive, Block, ChangeRole, Checkpoint, CreateWork, DecideApproval, EffectMode,
    Expand, MemberSpec, Redact, RequestApproval, ResolveBlock, StartWork, Submit,
};
use crate::crypto::Hash;
use crate::crypto::PublicKey;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::lease::{Lease, LeaseId};
use crate::opaque::{self, Opaque};
use crate::work::WorkState;

/// Field names whose values are opaque and committed through their own hashes.
pub const OPAQUE_FIELDS: [&str; 9] = [
    "title",
    "spec",
    "result",
    "data",
    "error",
    "reason",
    "resolution",
    "receipt",
    "target",
];

// A kind's map holds each opaque field at most once, and the readers note where each lies.
const _: () = assert!(OPAQUE_FIELDS.len() < canonical::KeySpans::MAX);

/// Whether `key` (a key's text) is one of [`OPAQUE_FIELDS`]: a match the compiler turns into a
/// switch on the length and a few comparisons (a test holds it to the list).
fn is_opaque_field(key: &[u8]) -> bool {
    matches!(
        key,
        b"title"
            | b"spec"
            | b"result"
            | b"data"
            | b"error"
            | b"reason"
            | b"resolution"
            | b"receipt"
            | b"target"
    )
}

/// An accepted, immutable fact.
///
/// Its `Deserialize` is [`Event::from_serde`]'s reader, not serde's derive: every serde source
/// (JSON text, a `serde_json::Value`, a JavaScript value) is written into canonical CBOR and
/// read by the readers of stored events, so the JSON form has one reader on every surface.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// SHA-256 of the canonical CBOR of every other field but `kind`.
    pub id: Hash,
    /// Group.
    pub group: Id,
    /// Position in the group's log, from 1, without gaps.
    pub seq: u64,
    /// Authority time of acceptance.
    pub at: u64,
    /// Sender of the command.
    pub actor: Id,
    /// Its action ID.
    pub action: Id,
    /// Content hash of the command.
    pub content_hash: Hash,
    /// Aggregate the event belongs to: `group`, `members`, `work:ID`, `approval:ID`.
    pub aggregate: compact_str::CompactString,
    /// That aggregate's revision after this event.
    pub revision: u64,
    /// Id of event `seq - 1`, or all zeros for the first.
    pub prev: Hash,
    /// Hash of `kind` with opaque values replaced by their hashes.
    pub payload_hash: Hash,
    /// What happened.
    pub kind: EventKind,
}

/// An event read from any self-describing serde data (JSON text, a `serde_json::Value`, a
/// JavaScript value): the data is written into canonical CBOR as it is read
/// (`canonical::canonical_from`), then read by the readers of stored events, so it accepts
/// what [`Event::from_cbor`] accepts and gives the same event. Whatever holds events (a page of
/// `GET /v1/groups/{group}/events`, a fork proof, a line of `mwp replica`) reads them by it. A
/// refusal is the source's error or the readers' reason ([`Event::from_serde`] words it).
impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: serde::Deserializer<'de>>(data: D) -> std::result::Result<Event, D::Error> {
        let bytes = canonical::canonical_from(data)?;
        decode_event(&bytes)
            .map(|(event, _)| event)
            .map_err(|e| serde::de::Error::custom(header_mismatch(&bytes).unwrap_or(e.reason)))
    }
}

/// The twelve fields of an event, as they are declared.
const FIELDS: [&str; 12] = [
    "id",
    "group",
    "seq",
    "at",
    "actor",
    "action",
    "content_hash",
    "aggregate",
    "revision",
    "prev",
    "payload_hash",
    "kind",
];

/// Why a map the readers refused is not an event's, named, when its keys are not the twelve
/// fields (the readers take the header positionally and can only say `expected a map of 12
/// entries`): the first key that is none of them, else the first field left out.
fn header_mismatch(bytes: &[u8]) -> Option<String> {
    let mut r = Cbor { bytes, pos: 0 };
    let mut keys = Vec::new();
    for _ in 0..r.map_head().ok()? {
        let (3, len) = r.head().ok()? else {
            return None;
        };
        let end = r.pos.checked_add(usize::try_from(len).ok()?)?;
        let key = std::str::from_utf8(bytes.get(r.pos..end)?).ok()?;
        r.pos = end;
        if !FIELDS.contains(&key) {
            return Some(format!("unknown field `{key}`"));
        }
        keys.push(key);
        r.skip().ok()?;
    }
    let missing = FIELDS.iter().find(|f| !keys.contains(f))?;
    Some(format!("missing field `{missing}`"))
}

/// The header that `id` covers (its generic encoding, the reference for `compute_id`).
#[cfg(test)]
#[derive(Serialize)]
struct Header<'a> {
    group: &'a Id,
    seq: u64,
    at: u64,
    actor: &'a Id,
    action: &'a Id,
    content_hash: &'a Hash,
    aggregate: &'a str,
    revision: u64,
    prev: &'a Hash,
    payload_hash: &'a Hash,
}

/// A lease taken away, and where its work item went.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(Deserialize), serde(deny_unknown_fields))]
pub struct Revocation {
    /// Work item.
    pub work: Id,
    /// The lease that ended.
    pub lease: LeaseId,
    /// State the item entered: `queued`, or `waiting` on an unknown effect.
    pub to: WorkState,
}

/// Which late command an evidence event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceOf {
    /// A late `submit`.
    Submit,
    /// A late `fail`.
    Fail,
}

/// `group_opened`: the genesis event. Carries the envelope's `org` besides the body.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(test, derive(Deserialize), serde(deny_unknown_fields))]
pub struct GroupOpened {
    /// Organization.
    pub org: Id,
    /// Mission ID.
    pub mission: Id,
    /// Opaque title.
    pub title: Opaque,
    /// Initial members.
    pub members: Vec<MemberSpec>,
    /// Key that signs ticks and snapshots.
    pub authority_key: PublicKey,
}

/// `work_claimed`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(test, derive(Deserialize), serde(deny_unknown_fields))]
pub struct WorkClaimed {
    /// Work item.
    pub work: Id,
    /// Requested lease length.
    pub lease_ms: u64,
    /// Requested start window.
    pub start_within_ms: u64,
    /// The lease granted.
    pub lease: Lease,
    /// Seq of the latest checkpoint, handed to the new owner.
    #[cfg_attr(test, serde(default))]
    pub checkpoint: Option<u64>,
}

/// `lease_renewed`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(test, derive(Deserialize), serde(deny_unknown_fields))]
pub struct LeaseRenewed {
    /// Work item.
    pub work: Id,
    /// Lease.
    pub lease: LeaseId,
    /// Requested length.
    pub lease_ms: u64,
    /// New expiry.
    pub expires_at: u64,
}

/// `work_failed`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(test, derive(Deserialize), serde(deny_unknown_fields))]
pub struct WorkFailed {
    /// Work item.
    pub work: Id,
    /// Lease.
    pub lease: LeaseId,
    /// Opaque error.
    pub error: Opaque,
    /// As reported.
    pub retryable: bool,
    /// Attempts used, this one included.
    pub attempt: u32,
    /// `queued` (retry) or `failed`.
    pub to: WorkState,
    /// Earliest retry time, when re-queued.
    #[cfg_attr(test, serde(default))]
    pub not_before: Option<u64>,
}

/// `work_cancelled`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(test, derive(Deserialize), serde(deny_unknown_fields))]
pub struct WorkCancelled {
    /// Work item.
    pub work: Id,
    /// Opaque reason.
    pub reason: Opaque,
    /// The lease revoked, if one was held.
    #[cfg_attr(test, serde(default))]
    pub revoked: Option<LeaseId>,
}

/// `work_reassigned`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(test, derive(Deserialize), serde(deny_unknown_fields))]
pub struct WorkReassigned {
    /// Work item.
    pub work: Id,
    /// Opaque reason.
    pub reason: Opaque,
    /// The lease revoked and where the item went.
    pub revoked: Revocation,
}

/// `member_removed`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(test, derive(Deserialize), serde(deny_unknown_fields))]
pub struct MemberRemoved {
    /// Member removed.
    pub actor: Id,
    /// Leases it held, revoked.
    pub revoked: Vec<Revocation>,
}

/// `session_replaced`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(test, derive(Deserialize), serde(deny_unknown_fields))]
pub struct SessionReplaced {
    /// New session epoch.
    pub session: u64,
    /// Leases of older sessions, revoked.
    pub revoked: Vec<Revocation>,
}

/// `effect_intended`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(test, derive(Deserialize), serde(deny_unknown_fields))]
pub struct EffectIntended {
    /// Work item.
    pub work: Id,
    /// Lease.
    pub lease: LeaseId,
    /// Operation ID.
    pub op: Id,
    /// Repeatability.
    pub mode: EffectMode,
    /// Cannot be undone.
    pub irreversible: bool,
    /// Opaque target.
    pub target: Opaque,
    /// Stable effect key: `hex(sha256(canonical CBOR [mission, work, epoch, op]))`.
    pub key: Hash,
}

/// `effect_settled`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(test, derive(Deserialize), serde(deny_unknown_fields))]
pub struct EffectSettled {
    /// Work item.
    pub work: Id,
    /// Lease.
    pub lease: LeaseId,
    /// Operation ID.
    pub op: Id,
    /// Outcome.
    pub outcome: Opaque,
    /// Opaque external receipt.
    pub receipt: Opaque,
    /// Effect key.
    pub key: Hash,
}

/// `effect_reconciled`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(test, derive(Deserialize), serde(deny_unknown_fields))]
pub struct EffectReconciled {
    /// Work item.
    pub work: Id,
    /// Effect key.
    pub key: Hash,
    /// Whether it happened.
    pub happened: bool,
    /// Opaque external receipt.
    pub receipt: Opaque,
    /// `queued` once no unknown effect is left.
    #[cfg_attr(test, serde(default))]
    pub to: Option<WorkState>,
}

/// `work_charged`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(test, derive(Deserialize), serde(deny_unknown_fields))]
pub struct WorkCharged {
    /// Work item.
    pub work: Id,
    /// Lease.
    pub lease: LeaseId,
    /// Cost added.
    pub cost: u64,
    /// Optional opaque checkpoint (a `null` one included).
    #[cfg_attr(test, serde(default, deserialize_with = "crate::canonical::some"))]
    pub data: Option<Opaque>,
    /// Total spent after this charge.
    pub spent: u64,
}

/// `leases_expired`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(test, derive(Deserialize), serde(deny_unknown_fields))]
pub struct LeasesExpired {
    /// Leases expired, and where their items went.
    pub expired: Vec<Revocation>,
}

/// `evidence_recorded`: a late `submit` or `fail` under a stale lease.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(test, derive(Deserialize), serde(deny_unknown_fields))]
pub struct EvidenceRecorded {
    /// Which command it was.
    pub of: EvidenceOf,
    /// Work item.
    pub work: Id,
    /// The stale lease.
    pub lease: LeaseId,
    /// Result, for a late `submit` (a `null` one included).
    #[cfg_attr(test, serde(default, deserialize_with = "crate::canonical::some"))]
    pub result: Option<Opaque>,
    /// Error, for a late `fail` (a `null` one included).
    #[cfg_attr(test, serde(default, deserialize_with = "crate::canonical::some"))]
    pub error: Option<Opaque>,
    /// Retryable flag, for a late `fail`.
    #[cfg_attr(test, serde(default))]
    pub retryable: Option<bool>,
}

// Each kind written and read by its fields: handed to the canonical encoder in canonical key
// order, with its `type` entry when an `EventKind` writes it (JSON gets the declared order after
// `type`, as serde's derive wrote it), and read by the hand-written readers.
canonical::codec_struct! {
    Revocation { work, lease, to }
    GroupOpened { org, mission, title, members, authority_key }
    WorkClaimed { work, lease_ms, start_within_ms, lease, checkpoint if is_some }
    LeaseRenewed { work, lease, lease_ms, expires_at }
    WorkFailed { work, lease, error, retryable, attempt, to, not_before if is_some }
    WorkCancelled { work, reason, revoked if is_some }
    WorkReassigned { work, reason, revoked }
    MemberRemoved { actor, revoked }
    SessionReplaced { session, revoked }
    EffectIntended { work, lease, op, mode, irreversible, target, key }
    EffectSettled { work, lease, op, outcome, receipt, key }
    EffectReconciled { work, key, happened, receipt, to if is_some }
    WorkCharged { work, lease, cost, data if is_some, spent }
    LeasesExpired { expired }
    EvidenceRecorded { of, work, lease, result if is_some, error if is_some, retryable if is_some }
}

/// What an event records; `type` is its tag. Every kind carries the command's fields.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    test,
    derive(Deserialize),
    serde(tag = "type", rename_all = "snake_case")
)]
#[allow(missing_docs)]
pub enum EventKind {
    GroupOpened(GroupOpened),
    MemberAdded(AddMember),
    MemberRemoved(MemberRemoved),
    RoleChanged(ChangeRole),
    SessionReplaced(SessionReplaced),
    WorkCreated(CreateWork),
    WorkClaimed(WorkClaimed),
    WorkStarted(StartWork),
    LeaseRenewed(LeaseRenewed),
    WorkCheckpointed(Checkpoint),
    WorkBlocked(Block),
    BlockResolved(ResolveBlock),
    WorkSucceeded(Submit),
    WorkFailed(WorkFailed),
    WorkCancelled(WorkCancelled),
    WorkReassigned(WorkReassigned),
    EffectIntended(EffectIntended),
    EffectSettled(EffectSettled),
    EffectReconciled(EffectReconciled),
    WorkCharged(WorkCharged),
    ApprovalRequested(RequestApproval),
    ApprovalDecided(DecideApproval),
    WorkExpanded(Expand),
    EventRedacted(Redact),
    GroupArchived(Archive),
    LeasesExpired(LeasesExpired),
    EvidenceRecorded(EvidenceRecorded),
}

impl EventKind {
    /// Whether this kind is terminal for a work item (a valid `expand` trigger).
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            EventKind::WorkSucceeded(_)
                | EventKind::WorkCancelled(_)
                | EventKind::WorkFailed(WorkFailed {
                    to: WorkState::Failed,
                    ..
                })
        )
    }

    /// The opaque values the kind commits to through their hashes (SPEC §3, §6;
    /// docs/decisions.md "Events"): its fields named in [`OPAQUE_FIELDS`] and `work[*].spec` of
    /// `work_expanded`. A test holds the list to those names on the JSON form of every kind.
    pub fn opaque_values_mut(&mut self) -> Vec<&mut Opaque> {
        use EventKind as K;
        match self {
            K::GroupOpened(k) => vec![&mut k.title],
            K::WorkCreated(k) => vec![&mut k.spec],
            K::WorkCheckpointed(k) => vec![&mut k.data],
            K::WorkBlocked(k) => vec![&mut k.data],
            K::BlockResolved(k) => vec![&mut k.resolution],
            K::WorkSucceeded(k) => vec![&mut k.result],
            K::WorkFailed(k) => vec![&mut k.error],
            K::WorkCancelled(k) => vec![&mut k.reason],
            K::WorkReassigned(k) => vec![&mut k.reason],
            K::EffectIntended(k) => vec![&mut k.target],
            K::EffectSettled(k) => vec![&mut k.receipt],
            K::EffectReconciled(k) => vec![&mut k.receipt],
            K::WorkCharged(k) => k.data.iter_mut().collect(),
            K::ApprovalRequested(k) => vec![&mut k.reason],
            K::WorkExpanded(k) => k.work.iter_mut().map(|w| &mut w.spec).collect(),
            K::EventRedacted(k) => vec![&mut k.reason],
            K::GroupArchived(k) => vec![&mut k.reason],
            K::EvidenceRecorded(k) => k.result.iter_mut().chain(k.error.iter_mut()).collect(),
            K::MemberAdded(_)
            | K::MemberRemoved(_)
            | K::RoleChanged(_)
            | K::SessionReplaced(_)
            | K::WorkClaimed(_)
            | K::WorkStarted(_)
            | K::LeaseRenewed(_)
            | K::ApprovalDecided(_)
            | K::LeasesExpired(_) => vec![],
        }
    }
}

/// Computes the payload hash of an event kind (SPEC §3): SHA-256 of the canonical CBOR of
/// `kind` with each opaque value replaced by the hex SHA-256 of its own canonical CBOR (or by
/// the hash a redaction marker carries).
///
/// Canonical CBOR nests: the encoding of a map holds the canonical encoding of each value, and
/// replacing values keeps the key order. So the kind is encoded once and each opaque value's
/// byte range is swapped for its hash text (a test holds this to the rule on the JSON form).
pub fn payload_hash(kind: &EventKind) -> Result<Hash> {
    payload_hash_encoded(&canonical::to_vec(kind)?)
}

/// [`payload_hash`] of a kind given as its canonical CBOR.
///
/// The bytes go to SHA-256 as they lie, in runs between opaque values; each opaque value is
/// replaced by the text of its hash (no copy of the kind is made).
fn payload_hash_encoded(bytes: &[u8]) -> Result<Hash> {
    let mut out = Sha256::new();
    // Start of the run of bytes not yet hashed.
    let mut run = 0;
    let swap = |out: &mut Sha256, run: &mut usize, value: std::ops::Range<usize>| {
        out.update(&bytes[*run..value.start]);
        put_opaque_hash(out, &bytes[value.clone()]);
        *run = value.end;
    };
    let mut r = Cbor { bytes, pos: 0 };
    let pairs = r.map_head()?;
    // Keys come in canonical order: "type" (like every 4-letter key) before "work".
    let mut expanded = false;
    for _ in 0..pairs {
        let key = r.text()?;
        let value = r.skip()?;
        let name = &bytes[key.start + 1..key.end];
        if OPAQUE_FIELDS.iter().any(|f| f.as_bytes() == name) {
            swap(&mut out, &mut run, value);
        } else if name == b"type" {
            expanded = bytes[value] == *b"\x6dwork_expanded";
        } else if expanded && name == b"work" {
            // `work: [{…, "spec": opaque, …}, …]`
            let mut items = Cbor {
                bytes,
                pos: value.start,
            };
            let n = items.array_head()?;
            for _ in 0..n {
                let fields = items.map_head()?;
                for _ in 0..fields {
                    let k = items.text()?;
                    let v = items.skip()?;
                    if &bytes[k.start + 1..k.end] == b"spec" {
                        swap(&mut out, &mut run, v);
                    }
                }
            }
        }
    }
    out.update(&bytes[run..r.pos]);
    Ok(Hash(out.finalize().into()))
}

/// [`payload_hash`] of a kind whose canonical CBOR is `bytes[kind]` and whose opaque values
/// lie at `opaque` (offsets in `bytes`, in increasing order), as a reader found them: the same
/// bytes go to SHA-256 as in [`payload_hash_encoded`], without walking the kind again.
fn payload_hash_at(
    bytes: &[u8],
    kind: std::ops::Range<usize>,
    opaque: impl Iterator<Item = std::ops::Range<usize>>,
) -> Hash {
    let mut out = Sha256::new();
    let mut run = kind.start;
    for value in opaque {
        out.update(&bytes[run..value.start]);
        put_opaque_hash(&mut out, &bytes[value.clone()]);
        run = value.end;
    }
    out.update(&bytes[run..kind.end]);
    Hash(out.finalize().into())
}

/// Hashes the text that stands for an opaque value: the hash its redaction marker carries,
/// or the SHA-256 of its canonical CBOR (as [`opaque::hash`]).
fn put_opaque_hash(out: &mut Sha256, encoded: &[u8]) {
    match opaque::marker_hash_text(encoded) {
        Some(text) => out.update(text),
        None => out.update(hash_text(&canonical::sha256(encoded))),
    }
}

/// A reader over canonical CBOR this crate encoded: just enough to find value boundaries.
struct Cbor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Cbor<'_> {
    fn fail(&self) -> Error {
        Error::malformed(format!(
            "event kind encoding is cut short at byte {}",
            self.pos
        ))
    }

    fn byte(&mut self) -> Result<u8> {
        let b = *self.bytes.get(self.pos).ok_or_else(|| self.fail())?;
        self.pos += 1;
        Ok(b)
    }

    /// (major type, argument).
    fn head(&mut self) -> Result<(u8, u64)> {
        let first = self.byte()?;
        let width = match first & 0x1f {
            n @ 0..=23 => return Ok((first >> 5, u64::from(n))),
            24 => 1,
            25 => 2,
            26 => 4,
            27 => 8,
            _ => return Err(self.fail()),
        };
        let mut arg = 0u64;
        for _ in 0..width {
            arg = (arg << 8) | u64::from(self.byte()?);
        }
        Ok((first >> 5, arg))
    }

    fn map_head(&mut self) -> Result<u64> {
        match self.head()? {
            (5, n) => Ok(n),
            _ => Err(self.fail()),
        }
    }

    fn array_head(&mut self) -> Result<u64> {
        match self.head()? {
            (4, n) => Ok(n),
            _ => Err(self.fail()),
        }
    }

    /// A text string; returns its whole encoding's range.
    fn text(&mut self) -> Result<std::ops::Range<usize>> {
        let start = self.pos;
        match self.head()? {
            (3, _) => {
                self.pos = start;
                self.skip()
            }
            _ => Err(self.fail()),
        }
    }

    /// Skips one data item; returns its range.
    fn skip(&mut self) -> Result<std::ops::Range<usize>> {
        let start = self.pos;
        let mut pending: u64 = 1;
        while pending > 0 {
            pending -= 1;
            let (major, arg) = self.head()?;
            match major {
                2 | 3 => {
                    let len = usize::try_from(arg).map_err(|_| self.fail())?;
                    self.pos = self
                        .pos
                        .checked_add(len)
                        .filter(|end| *end <= self.bytes.len())
                        .ok_or_else(|| self.fail())?;
                }
                4 => pending = pending.saturating_add(arg),
                5 => pending = pending.saturating_add(arg.saturating_mul(2)),
                _ => {}
            }
        }
        Ok(start..self.pos)
    }
}

impl Event {
    /// Builds an event, computing `payload_hash` and `id`.
    #[allow(clippy::too_many_arguments)]
    pub fn seal(
        group: Id,
        seq: u64,
        at: u64,
        actor: Id,
        action: Id,
        content_hash: Hash,
        aggregate: impl Into<compact_str::CompactString>,
        revision: u64,
        prev: Hash,
        kind: EventKind,
    ) -> Result<Event> {
        let payload_hash = payload_hash(&kind)?;
        let mut event = Event {
            id: Hash::ZERO,
            group,
            seq,
            at,
            actor,
            action,
            content_hash,
            aggregate: aggregate.into(),
            revision,
            prev,
            payload_hash,
            kind,
        };
        event.id = event.compute_id()?;
        Ok(event)
    }

    /// SHA-256 of the canonical CBOR of the header.
    ///
    /// The header's shape never changes, so its canonical CBOR is written here directly, keys
    /// in canonical order (shorter first, then bytewise); a test holds it equal to
    /// `canonical::to_vec` of the header.
    pub fn compute_id(&self) -> Result<Hash> {
        // A map head, `at` and `seq` with their values, then the rest of the header.
        let mut out = Vec::with_capacity(1 + 3 + 9 + 4 + 9 + self.header_from_prev_len());
        out.push(0xa0 | 10); // a map of 10 pairs
        put_text(&mut out, "at");
        put_head(&mut out, 0, self.at);
        put_text(&mut out, "seq");
        put_head(&mut out, 0, self.seq);
        self.put_header_from_prev(&mut out);
        Ok(Hash(canonical::sha256(&out)))
    }

    /// The header's entries from `prev` on, the last eight in canonical key order: what
    /// [`Event::compute_id`] and [`Event::to_cbor`] both end with.
    fn put_header_from_prev(&self, out: &mut Vec<u8>) {
        put_text(out, "prev");
        put_hash(out, &self.prev);
        put_text(out, "actor");
        put_text(out, self.actor.as_str());
        put_text(out, "group");
        put_text(out, self.group.as_str());
        put_text(out, "action");
        put_text(out, self.action.as_str());
        put_text(out, "revision");
        put_head(out, 0, self.revision);
        put_text(out, "aggregate");
        put_text(out, &self.aggregate);
        put_text(out, "content_hash");
        put_hash(out, &self.content_hash);
        put_text(out, "payload_hash");
        put_hash(out, &self.payload_hash);
    }

    /// How many bytes [`Event::put_header_from_prev`] writes, so that the buffers it writes
    /// into are sized once.
    fn header_from_prev_len(&self) -> usize {
        const HASH: usize = 66;
        let text = |n: usize| head_len(n as u64) + n;
        text(4)
            + HASH
            + text(5)
            + text(self.actor.as_str().len())
            + text(5)
            + text(self.group.as_str().len())
            + text(6)
            + text(self.action.as_str().len())
            + text(8)
            + head_len(self.revision)
            + text(9)
            + text(self.aggregate.len())
            + text(12)
            + HASH
            + text(12)
            + HASH
    }

    /// `compute_id` through the generic canonical encoder: the reference for the test.
    #[cfg(test)]
    fn compute_id_generic(&self) -> Result<Hash> {
        Ok(Hash(canonical::hash(&Header {
            group: &self.group,
            seq: self.seq,
            at: self.at,
            actor: &self.actor,
            action: &self.action,
            content_hash: &self.content_hash,
            aggregate: &self.aggregate,
            revision: self.revision,
            prev: &self.prev,
            payload_hash: &self.payload_hash,
        })?))
    }

    /// Checks `payload_hash` and `id`; `LOG_CORRUPT` names the first that fails.
    pub fn verify(&self) -> Result<()> {
        if payload_hash(&self.kind)? != self.payload_hash {
            return Err(self.payload_mismatch());
        }
        if self.compute_id()? != self.id {
            return Err(self.id_mismatch());
        }
        Ok(())
    }

    /// Replaces every opaque value with `{"$redacted": "<its hash>"}` (SPEC §6). Ids, the
    /// payload hash and the chain are unchanged.
    pub fn redact(&mut self) -> Result<()> {
        for value in self.kind.opaque_values_mut() {
            *value = opaque::redaction_marker(opaque::hash(value)?);
        }
        Ok(())
    }

    /// Canonical CBOR of the whole event: the stored form.
    ///
    /// The twelve entries are written in canonical key order (shorter first, then bytewise),
    /// as [`Event::compute_id`] writes the header, and only `kind` goes through the generic
    /// encoder, straight into the same buffer; a test holds the bytes equal to
    /// `canonical::to_vec` of the event on every kind.
    pub fn to_cbor(&self) -> Result<Vec<u8>> {
        // The kind's size is known only once it is written; the rest of the header is then
        // reserved exactly, so that a stored event is not left with doubled capacity.
        let tail = self.header_from_prev_len();
        let mut out = Vec::with_capacity(512 + self.aggregate.len());
        out.push(0xa0 | 12); // a map of 12 pairs
        put_text(&mut out, "at");
        put_head(&mut out, 0, self.at);
        put_text(&mut out, "id");
        put_hash(&mut out, &self.id);
        put_text(&mut out, "seq");
        put_head(&mut out, 0, self.seq);
        put_text(&mut out, "kind");
        let mut out = canonical::append(out, &self.kind)?;
        out.reserve_exact(tail);
        self.put_header_from_prev(&mut out);
        Ok(out)
    }

    /// Decodes a stored event; bytes that are not canonical are `LOG_CORRUPT`.
    ///
    /// The hot path of every replay: the twelve fields are read in their canonical order
    /// straight from the bytes, and `kind` is read by its `type` without buffering its content
    /// (what serde's derive does for an internally tagged enum), by readers generated from each
    /// kind's field list, which word why they refuse. They accept and give exactly what serde's
    /// derive reads from the same decoder, field by field (tests hold the two equal on every
    /// kind and on damaged bytes); the derive of the kinds is not built outside the tests.
    pub fn from_cbor(bytes: &[u8]) -> Result<Event> {
        decode_event(bytes)
            .map(|(event, _)| event)
            .map_err(|e| Error::corrupt(format!("stored event does not decode: {e}")))
    }

    /// Reads an event from its JSON form handed over as any self-describing serde data (a
    /// JavaScript value, JSON text): `Event`'s `Deserialize`, which reads it by the readers of
    /// stored events. Decoding checks nothing else ([`Event::verify`] does). A refusal is
    /// `MALFORMED`, worded `event: ` and what was wrong.
    pub fn from_serde<'de, D: serde::Deserializer<'de>>(data: D) -> Result<Event> {
        Event::deserialize(data).map_err(|e| Error::malformed(format!("event: {e}")))
    }

    /// Decodes a stored event and checks it as [`Event::verify`] does, hashing the stored
    /// bytes where they lie instead of encoding the event again.
    ///
    /// Decoding accepts only the canonical encoding of the event it gives, so the stored
    /// `kind` value is the canonical encoding of `kind`, and the stored entries other than
    /// `id` and `kind`, in their stored order, are the entries of the canonical header: the
    /// payload hash and the id are computed over those bytes (a test holds this equal to
    /// `from_cbor` followed by `verify` on every kind, and on tampered bytes).
    pub fn from_cbor_verified(bytes: &[u8]) -> Result<Event> {
        let (event, spans) = decode_event(bytes)
            .map_err(|e| Error::corrupt(format!("stored event does not decode: {e}")))?;
        // The readers noted where the kind's opaque values lie, except inside the items of
        // `work_expanded`: then the kind is walked again to find them.
        let payload_hash = match (&event.kind, spans.opaque.spans()) {
            (EventKind::WorkExpanded(_), _) | (_, None) => {
                payload_hash_encoded(&bytes[spans.kind])?
            }
            (_, Some(opaque)) => payload_hash_at(bytes, spans.kind, opaque),
        };
        if payload_hash != event.payload_hash {
            return Err(event.payload_mismatch());
        }
        let mut header = Sha256::new();
        header.update([0xa0 | 10]); // a map of 10 pairs
        for span in spans.header {
            header.update(&bytes[span]);
        }
        if Hash(header.finalize().into()) != event.id {
            return Err(event.id_mismatch());
        }
        Ok(event)
    }

    fn payload_mismatch(&self) -> Error {
        Error::corrupt(format!(
            "event {} (seq {}): payload hash does not match its kind",
            self.id, self.seq
        ))
        .with("seq", self.seq)
    }

    fn id_mismatch(&self) -> Error {
        Error::corrupt(format!(
            "event seq {}: id {} does not match its header",
            self.seq, self.id
        ))
        .with("seq", self.seq)
    }

    /// The receipt disposition this event gives: `evidence` for a late result, else
    /// `applied`.
    pub fn disposition(&self) -> crate::receipt::Disposition {
        match self.kind {
            EventKind::EvidenceRecorded(_) => crate::receipt::Disposition::Evidence,
            _ => crate::receipt::Disposition::Applied,
        }
    }

    /// The receipt this event gives its sender.
    pub fn receipt(&self) -> crate::receipt::Receipt {
        crate::receipt::Receipt::of(self)
    }
}

/// Where the parts of a stored event lie in its bytes.
struct Spans {
    /// The `at` and `seq` entries, and everything from the `prev` entry to the end: the
    /// header's entries, in the header's canonical order, without `id` and `kind`.
    header: [std::ops::Range<usize>; 3],
    /// The value of `kind`.
    kind: std::ops::Range<usize>,
    /// Where the values of the kind's entries keyed by [`OPAQUE_FIELDS`] lie, if the
    /// hand-written readers read it.
    opaque: canonical::KeySpans,
}

/// Reads the `kind` map of a variant: the name of its `type`, and the rest of the map.
type VariantReader =
    fn(&str, canonical::Tagged<'_, '_>) -> std::result::Result<EventKind, canonical::CanonError>;

/// Reads a stored event; see [`Event::from_cbor`].
///
/// `kind` is read by the hand-written readers ([`EventKind::read_variant`]), which accept what
/// serde's derive (`EventKind::decode_variant`, built for the tests only) accepts. A leaf
/// they refuse (an integer, a text, a hash, an opaque value) is read again by its own derive,
/// which words why; a struct's refusal names the field (`unknown field`, `missing field`),
/// and every error the offset where it was found.
fn decode_event(bytes: &[u8]) -> std::result::Result<(Event, Spans), canonical::CanonError> {
    decode_event_at(bytes, 0)
}

/// Reads an event that sits `depth` arrays and maps deep in a larger item (the events of a
/// fork proof) as [`decode_event`] reads a stored one: it accepts, refuses and gives what
/// serde's derive does for an event at that depth, nesting limit included.
pub(crate) fn decode_nested_event(
    bytes: &[u8],
    depth: usize,
) -> std::result::Result<Event, canonical::CanonError> {
    decode_event_at(bytes, depth).map(|(event, _)| event)
}

/// [`decode_event`], `depth` deep.
fn decode_event_at(
    bytes: &[u8],
    depth: usize,
) -> std::result::Result<(Event, Spans), canonical::CanonError> {
    decode_event_with::<true>(bytes, depth, EventKind::read_variant)
}

/// Reads a stored event `depth` deep, its kind with `variant`, and its header with the
/// hand-written readers ([`canonical::Decode`]) if `READERS`, else through serde's derive.
fn decode_event_with<const READERS: bool>(
    bytes: &[u8],
    depth: usize,
    variant: VariantReader,
) -> std::result::Result<(Event, Spans), canonical::CanonError> {
    let mut f = canonical::Fields::nested(bytes, 12, depth)?;
    macro_rules! field {
        ($name:literal) => {
            if READERS {
                f.read($name)?
            } else {
                f.field($name)?
            }
        };
    }
    // Keys in canonical order: shorter first, then bytewise.
    let at_entry = f.pos();
    let at = field!("at");
    let at_end = f.pos();
    let id = field!("id");
    let seq_entry = f.pos();
    let seq = field!("seq");
    let seq_end = f.pos();
    // The key "kind" is five bytes: a text head and four letters.
    let kind_start = f.pos() + 5;
    let mut opaque = canonical::KeySpans::new(is_opaque_field);
    let kind = f.tagged("kind", "type", READERS.then_some(&mut opaque), variant)?;
    let kind_end = f.pos();
    let prev = field!("prev");
    let actor = field!("actor");
    let group = field!("group");
    let action = field!("action");
    let revision = field!("revision");
    let aggregate = field!("aggregate");
    let content_hash = field!("content_hash");
    let payload_hash = field!("payload_hash");
    f.finish()?;
    let event = Event {
        id,
        group,
        seq,
        at,
        actor,
        action,
        content_hash,
        aggregate,
        revision,
        prev,
        payload_hash,
        kind,
    };
    let spans = Spans {
        header: [at_entry..at_end, seq_entry..seq_end, kind_end..bytes.len()],
        kind: kind_start..kind_end,
        opaque,
    };
    Ok((event, spans))
}

/// Maps each `type` text to its variant: `decode_variant` reads the variant's fields through
/// its derived `Deserialize`, `read_variant` through its hand-written reader.
macro_rules! variants {
    ($($variant:ident = $tag:literal,)*) => {
        /// What serde's derive writes for the internally tagged enum, the `type` entry in
        /// canonical key order among the fields for the canonical encoder
        /// (`canonical::EncodeFields`).
        impl Serialize for EventKind {
            fn serialize<S: serde::Serializer>(
                &self,
                serializer: S,
            ) -> std::result::Result<S::Ok, S::Error> {
                match self {
                    $( EventKind::$variant(k) => {
                        canonical::EncodeFields::encode_fields(k, Some($tag), serializer)
                    } )*
                }
            }
        }

        impl EventKind {
            /// Every kind's `type`, in the order of the variants.
            pub const TYPES: &'static [&'static str] = &[$($tag),*];

            /// This kind's `type`, as its JSON form and its canonical CBOR name it.
            pub fn type_name(&self) -> &'static str {
                match self {
                    $( EventKind::$variant(_) => $tag, )*
                }
            }

            /// Reads the variant named `name` from a kind map whose `type` entry is left out,
            /// through serde's derive: the reference the readers are held to.
            #[cfg(test)]
            fn decode_variant(
                name: &str,
                de: canonical::Tagged<'_, '_>,
            ) -> std::result::Result<EventKind, canonical::CanonError> {
                match name {
                    $( $tag => Ok(EventKind::$variant(Deserialize::deserialize(de)?)), )*
                    other => Err(serde::de::Error::custom(format!("unknown event type {other:?}"))),
                }
            }

            /// Reads the variant named `name` as `EventKind::decode_variant` does, through
            /// the hand-written readers ([`canonical::DecodeFields`]): it accepts exactly what
            /// that accepts and gives the same value; a refusal says why.
            fn read_variant(
                name: &str,
                de: canonical::Tagged<'_, '_>,
            ) -> std::result::Result<EventKind, canonical::CanonError> {
                match name {
                    $( $tag => Ok(EventKind::$variant(
                        canonical::DecodeFields::decode_fields(de.entries()?)?,
                    )), )*
                    other => Err(canonical::refused(&format!("unknown event type {other:?}"), 0)),
                }
            }
        }
    };
}

variants! {
    GroupOpened = "group_opened",
    MemberAdded = "member_added",
    MemberRemoved = "member_removed",
    RoleChanged = "role_changed",
    SessionReplaced = "session_replaced",
    WorkCreated = "work_created",
    WorkClaimed = "work_claimed",
    WorkStarted = "work_started",
    LeaseRenewed = "lease_renewed",
    WorkCheckpointed = "work_checkpointed",
    WorkBlocked = "work_blocked",
    BlockResolved = "block_resolved",
    WorkSucceeded = "work_succeeded",
    WorkFailed = "work_failed",
    WorkCancelled = "work_cancelled",
    WorkReassigned = "work_reassigned",
    EffectIntended = "effect_intended",
    EffectSettled = "effect_settled",
    EffectReconciled = "effect_reconciled",
    WorkCharged = "work_charged",
    ApprovalRequested = "approval_requested",
    ApprovalDecided = "approval_decided",
    WorkExpanded = "work_expanded",
    EventRedacted = "event_redacted",
    GroupArchived = "group_archived",
    LeasesExpired = "leases_expired",
    EvidenceRecorded = "evidence_recorded",
}

/// The length of [`put_head`]'s head for `arg`.
fn head_len(arg: u64) -> usize {
    match arg {
        0..=23 => 1,
        24..=0xff => 2,
        0x100..=0xffff => 3,
        0x1_0000..=0xffff_ffff => 5,
        _ => 9,
    }
}

/// A CBOR head in shortest form (RFC 8949 §4.2.1).
fn put_head(out: &mut Vec<u8>, major: u8, arg: u64) {
    let m = major << 5;
    match arg {
        0..=23 => out.push(m | arg as u8),
        24..=0xff => out.extend_from_slice(&[m | 24, arg as u8]),
        0x100..=0xffff => {
            out.push(m | 25);
            out.extend_from_slice(&(arg as u16).to_be_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            out.push(m | 26);
            out.extend_from_slice(&(arg as u32).to_be_bytes());
        }
        _ => {
            out.push(m | 27);
            out.extend_from_slice(&arg.to_be_bytes());
        }
    }
}

fn put_text(out: &mut Vec<u8>, s: &str) {
    put_head(out, 3, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// A hash as the text of its 64 lowercase hex digits.
fn put_hash(out: &mut Vec<u8>, h: &Hash) {
    out.extend_from_slice(&hash_text(&h.0));
}

/// A hash as the canonical CBOR of the text of its 64 lowercase hex digits.
fn hash_text(h: &[u8; 32]) -> [u8; 66] {
    let mut text = [0u8; 66];
    text[..2].copy_from_slice(&[0x78, 64]);
    const_hex::encode_to_slice(h, &mut text[2..]).expect("64 bytes hold 32 bytes in hex");
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    fn id() -> impl Strategy<Value = Id> {
        "[a-z0-9.@~-]{1,128}".prop_map(|s| Id::new(s).expect("valid"))
    }

    use crate::test_common::transcript_events;

    /// Applies `f` to every opaque value of an event kind in its JSON form.
    pub(super) fn map_opaque(
        kind: &mut Value,
        f: &mut dyn FnMut(&Value) -> Result<Value>,
    ) -> Result<()> {
        let Some(map) = kind.as_object_mut() else {
            return Err(Error::corrupt("event kind is not a map"));
        };
        let expanded = map.get("type").and_then(Value::as_str) == Some("work_expanded");
        for (key, value) in map.iter_mut() {
            if OPAQUE_FIELDS.contains(&key.as_str()) {
                *value = f(value)?;
            } else if expanded && key == "work" {
                for item in value.as_array_mut().into_iter().flatten() {
                    if let Some(spec) = item.get_mut("spec") {
                        *spec = f(spec)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The typed list of a kind's opaque values is the rule on its JSON form: every value
    /// under a name of [`OPAQUE_FIELDS`] and every `work[*].spec` of `work_expanded`, and
    /// redacting through it gives what redacting the JSON form gives.
    #[test]
    fn opaque_values_are_the_named_fields() {
        let mut seen = std::collections::BTreeSet::new();
        for e in transcript_events() {
            let mut kind = e.kind.clone();
            let listed: Vec<Value> = kind
                .opaque_values_mut()
                .iter()
                .map(|v| v.to_json())
                .collect();
            let mut found = Vec::new();
            let mut json = serde_json::to_value(&e.kind).expect("JSON");
            map_opaque(&mut json, &mut |v| {
                found.push(v.clone());
                Ok(v.clone())
            })
            .expect("maps");
            assert_eq!(listed.len(), found.len(), "{:?}", e.kind);
            for v in &found {
                assert!(listed.contains(v), "{v} of {:?}", e.kind);
            }
            let mut json = serde_json::to_value(&e.kind).expect("JSON");
            map_opaque(&mut json, &mut |v| {
                Ok(opaque::redaction_marker(opaque::hash(&Opaque::from(v))?).to_json())
            })
            .expect("maps");
            let mut redacted = e.clone();
            redacted.redact().expect("redacts");
            assert_eq!(serde_json::to_value(&redacted.kind).expect("JSON"), json);
            redacted.verify().expect("a redacted event still verifies");
            if !found.is_empty() {
                seen.insert(kind_type(&e.kind));
            }
        }
        // Every kind with an opaque value.
        assert_eq!(seen.len(), 18, "{seen:?}");
    }

    /// Every kind reaches the canonical encoder with its entries, `type` among them, in
    /// canonical key order, its opaque values as the canonical bytes they hold: the encoder
    /// puts nothing in order. The JSON form has `type` first, the one `type_name` gives, and
    /// reads back as the same kind.
    #[test]
    fn kinds_reach_the_encoder_in_canonical_order() {
        let mut types = std::collections::BTreeSet::new();
        for e in transcript_events() {
            let json = serde_json::to_value(&e.kind).expect("JSON");
            let first = json.as_object().expect("a map").keys().next().cloned();
            assert_eq!(first.as_deref(), Some("type"));
            let back: EventKind = serde_json::from_value(json).expect("reads back");
            assert_eq!(back, e.kind);
            assert_eq!(canonical::reorders(&e.kind), Ok(0), "{:?}", e.kind);
            assert_eq!(e.kind.type_name(), kind_type(&e.kind));
            types.insert(kind_type(&e.kind));
        }
        // Every kind.
        assert_eq!(types.len(), 27, "{types:?}");
    }

    /// The buffers are sized by the bytes the header's tail takes, exactly.
    #[test]
    fn the_header_tail_length_is_exact() {
        for e in transcript_events() {
            let mut out = Vec::new();
            e.put_header_from_prev(&mut out);
            assert_eq!(e.header_from_prev_len(), out.len());
        }
        for arg in [
            0,
            23,
            24,
            255,
            256,
            65_535,
            65_536,
            u32::MAX as u64,
            u64::MAX,
        ] {
            let mut out = Vec::new();
            put_head(&mut out, 0, arg);
            assert_eq!(head_len(arg), out.len(), "{arg}");
        }
    }

    /// The `type` of a kind, as its JSON form names it.
    fn kind_type(kind: &EventKind) -> String {
        serde_json::to_value(kind).expect("JSON")["type"]
            .as_str()
            .expect("a type")
            .to_string()
    }

    /// The event the hand-written readers give, or `None` where they refuse.
    fn by_readers(bytes: &[u8]) -> Option<Event> {
        decode_event_with::<true>(bytes, 0, EventKind::read_variant)
            .ok()
            .map(|(e, _)| e)
    }

    /// The event serde's derive gives, or its error.
    fn by_derive(bytes: &[u8]) -> std::result::Result<Event, canonical::CanonError> {
        decode_event_with::<false>(bytes, 0, EventKind::decode_variant).map(|(e, _)| e)
    }

    /// The readers accept exactly what the derive accepts, and give the same event; where
    /// they refuse, their error says why, at an offset inside the bytes.
    fn readers_agree(bytes: &[u8]) -> std::result::Result<(), TestCaseError> {
        let derived = by_derive(bytes);
        prop_assert_eq!(by_readers(bytes), derived.as_ref().ok().cloned());
        match decode_event(bytes) {
            Ok((e, _)) => prop_assert_eq!(Ok(e), derived),
            Err(e) => {
                prop_assert!(derived.is_err());
                prop_assert!(!e.reason.is_empty() && e.offset <= bytes.len(), "{e:?}");
            }
        }
        Ok(())
    }

    /// The readers take every stored event of every kind themselves (the derive is only
    /// the way for what they refuse), and give what the derive gives.
    #[test]
    fn readers_read_every_kind_as_the_derive_does() {
        let events = transcript_events();
        let mut kinds = std::collections::HashSet::new();
        for e in events {
            let bytes = e.to_cbor().expect("encodes");
            assert_eq!(bytes, canonical::to_vec(e).expect("encodes"), "{e:?}");
            assert_eq!(by_readers(&bytes).as_ref(), Some(e), "{e:?}");
            assert_eq!(by_derive(&bytes).as_ref(), Ok(e));
            kinds.insert(std::mem::discriminant(&e.kind));
        }
        assert_eq!(kinds.len(), 27, "every event kind is covered");
    }

    /// The match is the list.
    #[test]
    fn is_opaque_field_is_the_list() {
        for name in OPAQUE_FIELDS {
            assert!(is_opaque_field(name.as_bytes()), "{name}");
            assert!(!is_opaque_field(&name.as_bytes()[1..]), "{name}");
            assert!(!is_opaque_field(format!("{name}s").as_bytes()), "{name}");
        }
        for other in ["type", "work", "outcome", "lease", "", "titlf"] {
            assert!(!is_opaque_field(other.as_bytes()), "{other}");
        }
    }

    /// The readers note where every opaque value of the kind lies (but inside the items of
    /// `work_expanded`, which are walked again), and hashing the kind with those values
    /// swapped is the payload hash the walk computes.
    #[test]
    fn readers_note_where_the_opaque_values_lie() {
        let mut noted = 0;
        for e in transcript_events() {
            let bytes = e.to_cbor().expect("encodes");
            let (read, spans) = decode_event_with::<true>(&bytes, 0, EventKind::read_variant)
                .expect("the readers read every kind");
            assert_eq!(&read, e);
            let kind = &bytes[spans.kind.clone()];
            let walked = payload_hash_encoded(kind).expect("hashes");
            assert_eq!(walked, e.payload_hash);
            let found: Vec<_> = spans.opaque.spans().expect("read whole").collect();
            let json = serde_json::to_value(&e.kind).expect("JSON");
            let keys = json
                .as_object()
                .expect("a map")
                .keys()
                .filter(|k| OPAQUE_FIELDS.contains(&k.as_str()))
                .count();
            assert_eq!(found.len(), keys, "{e:?}");
            noted += keys;
            // The specs inside the items of `work_expanded` are not noted.
            if !matches!(e.kind, EventKind::WorkExpanded(_)) {
                assert_eq!(
                    payload_hash_at(&bytes, spans.kind.clone(), found.into_iter()),
                    walked,
                    "{e:?}"
                );
            }
            assert_eq!(Event::from_cbor_verified(&bytes).as_ref(), Ok(e));
            // The derive notes nothing: the kind is walked.
            let (_, derived) = decode_event_with::<false>(&bytes, 0, EventKind::decode_variant)
                .expect("the derive reads every kind");
            assert!(derived.opaque.spans().is_none());
        }
        assert!(noted > 0);
    }

    /// The readers take what the derive takes: a lease with a field it does not know (its
    /// derive ignores unknown fields), checked and skipped.
    #[test]
    fn the_readers_take_what_the_derive_takes() {
        let e = transcript_events()
            .iter()
            .find(|e| matches!(e.kind, EventKind::WorkClaimed(_)))
            .expect("a claim");
        let mut json = serde_json::to_value(e).expect("JSON");
        assert_eq!(
            canonical::to_vec(&json).expect("encodes"),
            e.to_cbor().expect("encodes"),
            "the JSON form encodes to the stored bytes"
        );
        json["kind"]["lease"]["unknown"] = serde_json::json!([1, {"a": null}]);
        let bytes = canonical::to_vec(&json).expect("encodes");
        assert_eq!(by_readers(&bytes).as_ref(), Some(e));
        assert_eq!(by_derive(&bytes).as_ref(), Ok(e));
        assert_eq!(Event::from_cbor(&bytes).as_ref(), Ok(e));
        // The unknown entry is checked as the derive checks it: a key that is not UTF-8, or
        // a value that is not canonical, is refused by both.
        for (from, to) in [
            (&b"\x67unknown"[..], &b"\x67unkno\xffn"[..]),
            (b"\x61a\xf6", b"\x61a\xf7"),
        ] {
            let mut bad = bytes.clone();
            let at = bad
                .windows(from.len())
                .position(|w| w == from)
                .expect("there");
            bad[at..at + to.len()].copy_from_slice(to);
            assert_eq!(by_readers(&bad), None);
            assert!(by_derive(&bad).is_err());
        }
        // An unknown field where the derive denies them: refused by both, and named.
        json["kind"]["unknown"] = serde_json::json!(1);
        let bytes = canonical::to_vec(&json).expect("encodes");
        assert_eq!(by_readers(&bytes), None);
        assert!(by_derive(&bytes).is_err());
        let err = Event::from_cbor(&bytes).expect_err("unknown field");
        assert!(err.message.contains("unknown field `unknown`"), "{err}");
        // A field left out, and a `type` no kind has: refused by both, and named.
        let mut json = serde_json::to_value(e).expect("JSON");
        json["kind"]
            .as_object_mut()
            .expect("a map")
            .remove("lease_ms");
        let bytes = canonical::to_vec(&json).expect("encodes");
        assert!(by_derive(&bytes).is_err());
        let err = Event::from_cbor(&bytes).expect_err("missing field");
        assert!(err.message.contains("missing field `lease_ms`"), "{err}");
        json["kind"]["type"] = serde_json::json!("work_clamed");
        let bytes = canonical::to_vec(&json).expect("encodes");
        assert!(by_derive(&bytes).is_err());
        let err = Event::from_cbor(&bytes).expect_err("unknown type");
        assert!(
            err.message.contains("unknown event type \"work_clamed\""),
            "{err}"
        );
    }

    /// The JSON form, handed over as serde data (a `serde_json::Value`, JSON text), is read
    /// by the readers of stored events and gives the same event; what they refuse is
    /// `MALFORMED`, and named. `Event`'s `Deserialize` is the same reader: whatever holds
    /// events in JSON (a page of events, a line of `mwp replica`) reads them by it.
    #[test]
    fn the_json_form_is_read_by_the_readers() {
        for e in transcript_events() {
            let json = serde_json::to_value(e).expect("JSON");
            assert_eq!(Event::from_serde(&json).as_ref(), Ok(e));
            let text = serde_json::to_string(e).expect("JSON");
            let mut de = serde_json::Deserializer::from_str(&text);
            assert_eq!(Event::from_serde(&mut de).as_ref(), Ok(e));
            assert_eq!(serde_json::from_str::<Event>(&text).ok().as_ref(), Some(e));
            assert_eq!(serde_json::from_value::<Event>(json).ok().as_ref(), Some(e));
        }
        let page = serde_json::json!({"events": transcript_events()});
        let events: Vec<Event> = serde_json::from_value(page["events"].clone()).expect("events");
        assert_eq!(&events, transcript_events());
        let e = transcript_events()
            .iter()
            .find(|e| matches!(e.kind, EventKind::WorkClaimed(_)))
            .expect("a claim");
        let json = serde_json::to_value(e).expect("JSON");
        let refused = |json: &Value, what: &str| {
            let err = Event::from_serde(json).expect_err(what);
            assert_eq!(err.code, crate::error::Code::Malformed, "{err}");
            assert!(err.message.starts_with("event: "), "{err}");
            assert!(err.message.contains(what), "{err}");
            // The same refusal through `Deserialize`, from a value and from JSON text (which
            // adds where in the text it stopped).
            let via_value = serde_json::from_value::<Event>(json.clone()).expect_err(what);
            assert_eq!(format!("event: {via_value}"), err.message);
            let text = serde_json::to_string(json).expect("JSON");
            let via_text = serde_json::from_str::<Event>(&text).expect_err(what);
            // serde_json's own limit of 128 levels stops deep JSON text first.
            let words = format!("event: {via_text}");
            assert!(
                words.starts_with(&err.message) || words.contains("recursion limit exceeded"),
                "{via_text}"
            );
        };
        let mut bad = json.clone();
        bad["kind"]
            .as_object_mut()
            .expect("a map")
            .remove("lease_ms");
        refused(&bad, "missing field `lease_ms`");
        // The header's fields are named too (the readers take them by position).
        for field in FIELDS {
            let mut bad = json.clone();
            bad.as_object_mut().expect("a map").remove(field);
            refused(&bad, &format!("missing field `{field}`"));
        }
        let mut bad = json.clone();
        bad["a_field_whose_name_is_long"] = serde_json::json!(1);
        refused(&bad, "unknown field `a_field_whose_name_is_long`");
        let mut bad = json.clone();
        bad["extra"] = serde_json::json!(1);
        bad.as_object_mut().expect("a map").remove("seq");
        refused(&bad, "unknown field `extra`");
        let mut bad = json.clone();
        bad["kind"]["unknown"] = serde_json::json!(1);
        refused(&bad, "unknown field `unknown`");
        let mut bad = json.clone();
        bad["seq"] = serde_json::json!(1.5);
        refused(&bad, "floats are not allowed");
        // An integer beyond u64 or i64 is named as the readers of JSON text name one (the
        // parse hands it over as a float); one in range but below a field's range is named
        // by the field's reader, as a stored event's is.
        for (field, n) in [
            ("seq", "18446744073709551616"),
            ("at", "-18446744073709551616"),
        ] {
            let mut bad = json.clone();
            bad[field] = serde_json::from_str(n).expect("a number");
            refused(
                &bad,
                &format!("integer out of range: {n} is not from -2^63 to 2^64 − 1"),
            );
        }
        let mut bad = json.clone();
        bad["seq"] = serde_json::json!(-1);
        refused(&bad, "invalid value: integer `-1`, expected u64");
        let mut bad = json.clone();
        bad["kind"]["type"] = serde_json::json!("work_clamed");
        refused(&bad, "unknown event type \"work_clamed\"");
        let mut deep = serde_json::json!(0);
        for _ in 0..canonical::MAX_DEPTH {
            deep = serde_json::json!([deep]);
        }
        let mut bad = json.clone();
        bad["kind"]["lease"]["unknown"] = deep;
        refused(&bad, "nested deeper than");
        // A key given twice in JSON text.
        let text = serde_json::to_string(e).expect("JSON");
        let twice = text.replacen("\"seq\":", "\"seq\":1,\"seq\":", 1);
        let err = Event::from_serde(&mut serde_json::Deserializer::from_str(&twice))
            .expect_err("a repeated key");
        assert_eq!(err.code, crate::error::Code::Malformed, "{err}");
        assert!(err.message.contains("duplicate map key `seq`"), "{err}");
    }

    /// An integer beyond -2^63 ..= 2^64 − 1 in JSON text is named as the text writes it and
    /// where, by every reader of JSON text: a line of `mwp replica`, a signed head. The parse
    /// hands `-9223372036854775809` over as the float -2^63, which is in range: naming the
    /// float would name a number the text does not hold.
    #[test]
    fn an_integer_out_of_range_in_json_text_is_named_as_written() {
        let text = serde_json::to_string(&transcript_events()[0]).expect("JSON");
        let head = crate::head::SignedHead::sign(
            &crate::Id::new("o").expect("id"),
            &crate::Id::new("g").expect("id"),
            3,
            crate::Hash([7; 32]),
            10,
            &crate::SecretKey::for_transcript("@authority"),
        )
        .expect("signs");
        let head = serde_json::to_string(&head).expect("JSON");
        for n in [
            "-9223372036854775809",
            "-9223372036854775900",
            "18446744073709551617",
            "100000000000000000000000000000000000000000",
        ] {
            let want = format!("integer out of range: {n} is not from -2^63 to 2^64 − 1");
            let edited = text.replacen("\"seq\":1,", &format!("\"seq\":{n},"), 1);
            assert_ne!(edited, text);
            let at = edited.find(n).expect("written") + 1;
            let answer = crate::replica::LineReplica::new(None)
                .offer_line(&edited)
                .expect("an answer");
            assert_eq!(
                answer["error"]["message"],
                format!("line 1 is not an event: {want} at line 1 column {at}"),
                "{answer}"
            );
            let edited = head.replacen("\"seq\":3,", &format!("\"seq\":{n},"), 1);
            assert_ne!(edited, head);
            let at = edited.find(n).expect("written") + 1;
            let e = crate::head::SignedHead::from_json(&edited).expect_err("out of range");
            assert_eq!(
                e.message,
                format!("head rejected: {want} at line 1 column {at}"),
                "{e}"
            );
        }
    }

    /// The integer named as written is the one the parse refused, where it refused it: a
    /// float the parse refused as beyond the range (`2e19`) is not named by another integer
    /// out of range later in the text, at another place.
    #[test]
    fn an_integer_out_of_range_is_named_where_the_parse_refused_it() {
        let text = serde_json::to_string(&transcript_events()[0]).expect("JSON");
        let at = serde_json::to_value(&transcript_events()[0]).expect("value")["at"].clone();
        let edited = text.replacen("\"seq\":1,", "\"seq\":2e19,", 1).replacen(
            &format!("\"at\":{at},"),
            "\"at\":18446744073709551617,",
            1,
        );
        assert!(edited.contains("2e19") && edited.contains("18446744073709551617"));
        let answer = crate::replica::LineReplica::new(None)
            .offer_line(&edited)
            .expect("an answer");
        let message = answer["error"]["message"].as_str().expect("a message");
        assert!(!message.contains("18446744073709551617"), "{message}");
        let column = edited.find("2e19").expect("written") + 4;
        assert!(
            message.ends_with(&format!("at line 1 column {column}")),
            "{message}"
        );
    }

    /// A field the encoder leaves out when it has no value (`if is_some`), given as `null`,
    /// is the canonical encoding of no event: every reader refuses it, stored bytes verified
    /// where they lie or not and the JSON form alike, so no surface keeps bytes another calls
    /// corrupt. An opaque field is the exception: `null` is its value (`result: null`).
    #[test]
    fn null_for_a_field_left_out_is_refused_by_every_reader() {
        let fields = [
            ("work_claimed", "checkpoint"),
            ("work_failed", "not_before"),
            ("work_cancelled", "revoked"),
            ("effect_reconciled", "to"),
            ("evidence_recorded", "retryable"),
            ("work_created", "contract.deadline_at"),
            ("work_expanded", "work[0].type"),
            ("work_expanded", "work[0].contract.deadline_at"),
        ];
        let mut covered = std::collections::BTreeSet::new();
        for e in transcript_events() {
            let json = serde_json::to_value(e).expect("JSON");
            let kind = json["kind"]["type"].as_str().expect("a type").to_string();
            for (of, field) in fields {
                if of != kind {
                    continue;
                }
                let mut edited = json.clone();
                let path: Vec<&str> = field.split('.').collect();
                let (last, steps) = path.split_last().expect("a field");
                let mut at = edited.get_mut("kind");
                for step in steps {
                    at = match step.strip_suffix("[0]") {
                        Some(list) => at.and_then(|v| v.get_mut(list)?.get_mut(0)),
                        None => at.and_then(|v| v.get_mut(*step)),
                    };
                }
                let Some(map) = at
                    .and_then(Value::as_object_mut)
                    .filter(|m| !m.contains_key(*last))
                else {
                    continue;
                };
                let last = *last;
                map.insert(last.to_string(), Value::Null);
                let bytes = canonical::canonical_from(&edited).expect("transcodes");
                assert!(Event::from_cbor(&bytes).is_err(), "{of}.{field}");
                assert!(Event::from_cbor_verified(&bytes).is_err(), "{of}.{field}");
                assert!(Event::from_serde(&edited).is_err(), "{of}.{field}");
                covered.insert((of, field));
            }
        }
        assert_eq!(covered.len(), fields.len(), "{covered:?}");
    }

    /// Every byte of every stored event changed in a few ways, and every cut.
    #[test]
    fn readers_agree_with_the_derive_on_damaged_events() {
        for e in transcript_events().iter().step_by(3) {
            let bytes = e.to_cbor().expect("encodes");
            for i in 0..bytes.len() {
                for flip in [0x01, 0x20, 0x80, 0xff] {
                    let mut bad = bytes.clone();
                    bad[i] ^= flip;
                    readers_agree(&bad).expect("agree");
                }
                readers_agree(&bytes[..i]).expect("agree");
            }
        }
    }

    proptest! {
        /// Stored events with bytes overwritten, cut short or extended.
        #[test]
        fn readers_agree_with_the_derive_on_edited_events(
            pick in any::<proptest::sample::Index>(),
            edits in proptest::collection::vec((any::<proptest::sample::Index>(), any::<u8>()), 0..4),
            cut in proptest::option::of(any::<proptest::sample::Index>()),
            extra in proptest::collection::vec(any::<u8>(), 0..2),
        ) {
            let events = transcript_events();
            let mut bytes = events[pick.index(events.len())].to_cbor().expect("encodes");
            for (at, value) in &edits {
                let i = at.index(bytes.len());
                bytes[i] = *value;
            }
            if let Some(cut) = cut {
                bytes.truncate(cut.index(bytes.len()));
            }
            bytes.extend_from_slice(&extra);
            readers_agree(&bytes)?;
        }

        /// The hand-written header encoding is the canonical encoding, for every length and
        /// integer width, and so is the hand-written event encoding.
        #[test]
        fn compute_id_is_the_canonical_hash_of_the_header(
            group in id(), actor in id(), action in id(),
            aggregate in "[a-z:0-9]{0,300}",
            seq in any::<u64>(), at in prop_oneof![0u64..30, any::<u64>()],
            revision in prop_oneof![0u64..300, 60_000u64..70_000, any::<u64>()],
            hashes in any::<[u8; 32]>(),
        ) {
            let e = Event {
                id: Hash::ZERO,
                group, seq, at, actor, action,
                content_hash: Hash(hashes),
                aggregate: aggregate.into(), revision,
                prev: Hash([7; 32]),
                payload_hash: Hash(hashes.map(|b| b ^ 0x5a)),
                kind: EventKind::LeasesExpired(LeasesExpired { expired: vec![] }),
            };
            prop_assert_eq!(e.compute_id().expect("hashes"), e.compute_id_generic().expect("hashes"));
            prop_assert_eq!(e.to_cbor().expect("encodes"), canonical::to_vec(&e).expect("encodes"));
        }
    }
}
