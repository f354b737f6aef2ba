//! Work items and their lifecycle states (SPEC §5).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::canonical;
use crate::command::{Contract, EffectMode, Needs};
use crate::crypto::Hash;
use crate::id::Id;
use crate::id_map::{Arc, IdMap, Lookup};
use crate::lease::{Lease, LeaseId, PastLease};

/// Where a work item is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkState {
    /// Ready to be claimed once on the frontier.
    Queued,
    /// Claimed; not started yet.
    Leased,
    /// Started under its lease.
    Running,
    /// Parked until `resolve_block`.
    Blocked,
    /// Waiting for unknown effect outcomes to be reconciled.
    Waiting,
    /// Terminal: succeeded.
    Succeeded,
    /// Terminal: failed for good.
    Failed,
    /// Terminal: cancelled.
    Cancelled,
}

impl WorkState {
    /// Whether no further transition is possible.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            WorkState::Succeeded | WorkState::Failed | WorkState::Cancelled
        )
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkState::Queued => "queued",
            WorkState::Leased => "leased",
            WorkState::Running => "running",
            WorkState::Blocked => "blocked",
            WorkState::Waiting => "waiting",
            WorkState::Succeeded => "succeeded",
            WorkState::Failed => "failed",
            WorkState::Cancelled => "cancelled",
        }
    }
}

/// An opaque value as the state keeps it: its hash and the seq of the event that recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpaqueRef {
    /// Seq of the recording event.
    pub seq: u64,
    /// Hash of the value.
    pub hash: Hash,
}

/// Where an effect stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectStatus {
    /// Intent recorded; no outcome yet.
    Intended,
    /// Outcome recorded by the lease holder.
    Settled,
    /// The lease ended with a repeatable effect unsettled: safe to issue again.
    Abandoned,
    /// The lease ended with an undeclared effect unsettled: nobody knows if it happened.
    Unknown,
    /// An unknown outcome, settled by `reconcile_effect`.
    Reconciled,
}

/// An effect recorded against a work item.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Effect {
    /// Operation ID.
    pub op: Id,
    /// Ownership epoch it was intended under.
    pub epoch: u64,
    /// Repeatability.
    pub mode: EffectMode,
    /// Cannot be undone.
    pub irreversible: bool,
    /// The target, as a hash.
    pub target: OpaqueRef,
    /// Where it stands.
    pub status: EffectStatus,
    /// For a reconciled effect: whether it happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub happened: Option<bool>,
    /// The external receipt of a settled or reconciled effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<OpaqueRef>,
}

// Handed to the canonical encoder in canonical key order; JSON gets the declared order.
canonical::encode_struct! {
    Effect {
        op, epoch, mode, irreversible, target, status, happened if is_some,
        receipt if is_some,
    }
    WorkItem {
        contract, after, spec, state, revision, epoch, attempts, not_before, spent,
        lease if is_some, past_leases, checkpoint if is_some,
        needs if is_some, outcome if is_some, effects,
    }
}

// Neither derive denies unknown fields: their readers check and skip them too.
canonical::decode_struct! {
    OpaqueRef [ignore_unknown] { seq, hash }
    Effect [ignore_unknown] {
        op, epoch, mode, irreversible, target, status, happened if is_some, receipt if is_some,
    }
}

/// A work item as the Group state holds it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct WorkItem {
    /// Budgets.
    pub contract: Contract,
    /// Items that must succeed first: fixed when the item is created, so held as a boxed
    /// slice, 8 bytes smaller than a `Vec` (docs/decisions.md, "Group state lookups").
    pub after: Box<[Id]>,
    /// The spec, as a hash.
    pub spec: OpaqueRef,
    /// Lifecycle state.
    pub state: WorkState,
    /// Aggregate revision.
    pub revision: u64,
    /// Ownership epoch: bumped by every claim.
    pub epoch: u64,
    /// Failed attempts so far.
    pub attempts: u32,
    /// Not claimable before this time (retry backoff).
    pub not_before: u64,
    /// Cost charged so far.
    pub spent: u64,
    /// The current lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// Leases that ended, so late results can be recognised.
    pub past_leases: Vec<PastLease>,
    /// The latest checkpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<OpaqueRef>,
    /// What a blocked item needs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needs: Option<Needs>,
    /// The result of a succeeded item, or the last error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<OpaqueRef>,
    /// Effects by key.
    pub effects: BTreeMap<Hash, Effect>,
}

// `WorkItem` takes unknown fields (its derive does not deny them): its reader checks and
// skips them too.
canonical::decode_struct! {
    WorkItem [ignore_unknown] {
        contract, after, spec, state, revision, epoch, attempts, not_before, spent,
        lease if is_some, past_leases, checkpoint if is_some, needs if is_some,
        outcome if is_some, effects,
    }
}

impl WorkItem {
    /// The item's aggregate name.
    pub fn aggregate(work: &Id) -> String {
        format!("work:{work}")
    }

    /// The lease with this ID, current or past, and whether it is current.
    pub fn find_lease(&self, id: &LeaseId) -> Option<(Option<&Lease>, Option<&PastLease>)> {
        if let Some(l) = self.lease.as_ref().filter(|l| &l.id == id) {
            return Some((Some(l), None));
        }
        self.past_leases
            .iter()
            .find(|p| &p.id == id)
            .map(|p| (None, Some(p)))
    }

    /// Effects of the current epoch that have an intent but no outcome.
    pub fn unsettled(&self) -> impl Iterator<Item = (&Hash, &Effect)> {
        self.effects
            .iter()
            .filter(move |(_, e)| e.epoch == self.epoch && e.status == EffectStatus::Intended)
    }

    /// Effects whose outcome is unknown.
    pub fn unknown(&self) -> impl Iterator<Item = (&Hash, &Effect)> {
        self.effects
            .iter()
            .filter(|(_, e)| e.status == EffectStatus::Unknown)
    }

    /// Where the item goes when its lease is revoked or expires: `waiting` if an undeclared
    /// effect is unsettled, else `queued`.
    pub fn state_after_losing_lease(&self) -> WorkState {
        if self
            .unsettled()
            .any(|(_, e)| e.mode == EffectMode::Undeclared)
        {
            WorkState::Waiting
        } else {
            WorkState::Queued
        }
    }

    /// Backoff before retry number `attempt` (1-based):
    /// `min(backoff_base_ms · 2^(attempt−1), backoff_max_ms)`.
    pub fn backoff_ms(&self, attempt: u32) -> u64 {
        let c = &self.contract;
        let shift = attempt.saturating_sub(1).min(63);
        c.backoff_base_ms
            .saturating_mul(1u64 << shift)
            .min(c.backoff_max_ms)
    }
}

/// The Group's work items by ID: looked up by hash ([`IdMap`]), iterated in ID order.
///
/// Every command and event looks up its work item, often several times. The IDs are also
/// kept in a sorted set, so that every iteration (tick expiry, revocations, the frontier,
/// encoding) sees ID order on every host. Items are never removed.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct WorkItems {
    items: IdMap<WorkItem>,
    order: BTreeSet<Id>,
}

impl WorkItems {
    /// An empty set of work items.
    pub fn new() -> WorkItems {
        WorkItems::default()
    }

    /// The item with this ID.
    pub fn get<Q: Lookup + ?Sized>(&self, id: &Q) -> Option<&WorkItem> {
        self.items.get(id)
    }

    /// The item with this ID, to change it.
    pub fn get_mut<Q: Lookup + ?Sized>(&mut self, id: &Q) -> Option<&mut WorkItem> {
        self.items.get_mut(id)
    }

    /// The stored ID and the item for `id`.
    pub fn get_key_value<Q: Lookup + ?Sized>(&self, id: &Q) -> Option<(&Id, &WorkItem)> {
        self.items.get_key_value(id)
    }

    /// Whether an item has this ID.
    pub fn contains_key<Q: Lookup + ?Sized>(&self, id: &Q) -> bool {
        self.items.contains_key(id)
    }

    /// The item with this ID, shared.
    pub fn get_shared<Q: Lookup + ?Sized>(&self, id: &Q) -> Option<&Arc<WorkItem>> {
        self.items.get_shared(id)
    }

    /// Adds or replaces an item; returns whether it replaced one.
    pub fn insert(&mut self, id: Id, item: WorkItem) -> bool {
        self.insert_shared(id, Arc::new(item))
    }

    /// Adds or replaces a shared item; returns whether it replaced one.
    pub fn insert_shared(&mut self, id: Id, item: Arc<WorkItem>) -> bool {
        if !self.items.contains_key(&id) {
            self.order.insert(id.clone());
        }
        self.items.insert_shared(id, item)
    }
    /// Number of items.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Items in ID order.
    pub fn iter(&self) -> impl Iterator<Item = (&Id, &WorkItem)> + '_ {
        // Every ID in `order` has an item: `insert` adds both and nothing removes either.
        self.order
            .iter()
            .filter_map(|id| self.items.get(id).map(|item| (id, item)))
    }

    /// Items in ID order, shared.
    pub fn iter_shared(&self) -> impl Iterator<Item = (&Id, &Arc<WorkItem>)> + '_ {
        // Every ID in `order` has an item: `insert` adds both and nothing removes either.
        self.order
            .iter()
            .filter_map(|id| self.items.get_shared(id).map(|item| (id, item)))
    }

    /// IDs in order.
    pub fn keys(&self) -> impl Iterator<Item = &Id> + '_ {
        self.order.iter()
    }

    /// Items in ID order.
    pub fn values(&self) -> impl Iterator<Item = &WorkItem> + '_ {
        self.iter().map(|(_, item)| item)
    }
}

impl<'a> IntoIterator for &'a WorkItems {
    type Item = (&'a Id, &'a WorkItem);
    type IntoIter = Box<dyn Iterator<Item = (&'a Id, &'a WorkItem)> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl fmt::Debug for WorkItems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for WorkItems {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // JSON in ID order; the canonical encoder gets the entries in canonical key order
        // (shorter IDs first), so it need not move them into place.
        if serializer.is_human_readable() {
            serializer.collect_map(self.iter())
        } else {
            serializer.collect_map(canonical::in_key_order(self.iter()))
        }
    }
}

/// Bytes of a streamed decoder's window a work item is read from with the slice decoder: an
/// item takes about 400 bytes, more with many past leases or effects; a longer one is read by
/// the streamed decoder itself.
const WORK_WINDOW: usize = 16 << 10;

impl WorkItems {
    /// The work items of a streamed snapshot, entry by entry: each whole in the decoder's
    /// window is read by the slice decoder, which is quicker, any other by the streamed
    /// decoder's ordinary path ([`canonical::StreamDecoder::map_entries`]). What it accepts,
    /// decodes and refuses, and its errors, are those of `WorkItems::deserialize` on the
    /// same decoder.
    pub(crate) fn read_streamed<R: std::io::Read>(
        de: &mut canonical::StreamDecoder<R>,
    ) -> Result<WorkItems, canonical::CanonError> {
        let Some(mut entries) = de.map_entries()? else {
            return WorkItems::deserialize(de);
        };
        let mut items = Bulk::with_capacity(entries.left().min(entries.remaining() / 64));
        while entries.left() > 0 {
            let (id, item) = match entries.by_slice::<Id, WorkItem>(WORK_WINDOW)? {
                Some(entry) => entry,
                None => {
                    let id: Id = entries.key()?;
                    (id, entries.value(|de| WorkItem::deserialize(de))?)
                }
            };
            items.push(id, item)?;
        }
        entries.finish();
        Ok(items.finish())
    }
}

/// Work items read from a map, one by one: the IDs are kept aside and put in order once, at
/// the end (sorting them and building the ordered set in one go costs a fraction of
/// inserting each into it).
struct Bulk {
    items: IdMap<WorkItem>,
    ids: Vec<Id>,
}

impl Bulk {
    /// Room for `n` items (callers bound `n` by what the input can hold).
    fn with_capacity(n: usize) -> Bulk {
        Bulk {
            items: IdMap::with_capacity(n),
            ids: Vec::with_capacity(n),
        }
    }

    /// Adds an item; an ID seen before is refused, as a map's key given twice.
    fn push<E: serde::de::Error>(&mut self, id: Id, item: WorkItem) -> Result<(), E> {
        if self.items.insert(id.clone(), item) {
            return Err(E::custom(format!("work {id} appears twice")));
        }
        self.ids.push(id);
        Ok(())
    }

    fn finish(self) -> WorkItems {
        WorkItems {
            items: self.items,
            order: self.ids.into_iter().collect(),
        }
    }
}

/// The work items of a state held whole, read by their own readers: a map by ID, its keys in
/// canonical order, each item read by [`WorkItem`]'s reader. It accepts and decodes what
/// `WorkItems::deserialize` does on the same decoder.
impl<'de> canonical::Decode<'de> for WorkItems {
    fn decode(de: &mut canonical::Decoder<'de>) -> Result<WorkItems, canonical::CanonError> {
        let mut items = WorkItems::new();
        canonical::map_entries(de, |id: Id, item: WorkItem| items.insert(id, item))?;
        Ok(items)
    }
}

impl<'de> Deserialize<'de> for WorkItems {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<WorkItems, D::Error> {
        struct Items;
        impl<'de> Visitor<'de> for Items {
            type Value = WorkItems;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of work items by ID")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WorkItems, A::Error> {
                // One by one: the list-then-sort of [`Bulk`] would build a sort into the
                // WebAssembly module for a few percent of a replica's restore.
                let mut items = WorkItems::new();
                while let Some((id, item)) = map.next_entry::<Id, WorkItem>()? {
                    if items.insert(id.clone(), item) {
                        return Err(serde::de::Error::custom(format!("work {id} appears twice")));
                    }
                }
                Ok(items)
            }
        }
        deserializer.deserialize_map(Items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::{Decode, Decoder};

    /// A work item with every field set: a lease, past leases, an effect with every optional
    /// field, a checkpoint, what it needs and an outcome.
    fn rich_item() -> WorkItem {
        let h = |c: char| c.to_string().repeat(64);
        serde_json::from_value(serde_json::json!({
            "contract": {"max_attempts": 3, "backoff_base_ms": 10, "backoff_max_ms": 100,
                "cost_budget": 7, "deadline_at": 90_000, "risk": "high"},
            "after": ["w0", "w00"],
            "spec": {"seq": 2, "hash": h('a')},
            "state": "blocked",
            "revision": 6,
            "epoch": 3,
            "attempts": 2,
            "not_before": 1_500,
            "spent": 4,
            "lease": {"id": "0".repeat(32), "work": "w1", "holder": "bob", "session": 2,
                "epoch": 3, "granted_at": 1_000, "start_by": 2_000, "expires_at": 61_000},
            "past_leases": [
                {"id": "1".repeat(32), "holder": "bob", "epoch": 1, "end": "expired"},
                {"id": "2".repeat(32), "holder": "carol", "epoch": 2, "end": "revoked"}],
            "checkpoint": {"seq": 5, "hash": h('b')},
            "needs": {"key": "approval-1", "kind": "a human's yes"},
            "outcome": {"seq": 4, "hash": h('c')},
            "effects": {
                h('d'): {"op": "charge", "epoch": 2, "mode": "undeclared", "irreversible": true,
                    "target": {"seq": 4, "hash": h('e')}, "status": "reconciled",
                    "happened": false, "receipt": {"seq": 6, "hash": h('f')}},
                h('e'): {"op": "read", "epoch": 3, "mode": "read_only", "irreversible": false,
                    "target": {"seq": 6, "hash": h('0')}, "status": "intended"}},
        }))
        .expect("a work item")
    }

    /// The hand-written reader's value and end, if it reads `bytes`.
    fn by_reader(bytes: &[u8]) -> Option<(WorkItem, usize)> {
        let mut de = Decoder::nested(bytes, 0);
        WorkItem::decode(&mut de).ok().map(|item| (item, de.pos()))
    }

    /// The derive's value and end, or its error.
    fn by_derive(bytes: &[u8]) -> Result<(WorkItem, usize), canonical::CanonError> {
        let mut de = Decoder::nested(bytes, 0);
        WorkItem::deserialize(&mut de).map(|item| (item, de.pos()))
    }

    /// The reader reads a work item with every field as the derive does, and on every
    /// damaged or cut copy of it reads nothing the derive refuses, and nothing else than the
    /// derive reads: what it refuses, the derive decides.
    #[test]
    fn the_reader_reads_work_items_as_the_derive_does() {
        let item = rich_item();
        let bytes = canonical::to_vec(&item).expect("encodes");
        assert_eq!(by_reader(&bytes), Some((item.clone(), bytes.len())));
        assert_eq!(by_derive(&bytes), Ok((item, bytes.len())));
        let (mut read, mut refused) = (0, 0);
        let mut check = |bad: &[u8]| match by_reader(bad) {
            Some(value) => {
                assert_eq!(by_derive(bad), Ok(value), "{bad:02x?}");
                read += 1;
            }
            None => refused += 1,
        };
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut bad = bytes.clone();
                bad[i] ^= 1 << bit;
                check(&bad);
            }
            check(&bytes[..i]);
        }
        // Flips in the values of identifiers, counts and hashes still read.
        assert!(read > 0 && refused > 0, "{read} read, {refused} refused");
    }

    /// A field the derive ignores (it does not deny unknown fields) is checked and skipped by
    /// the reader too, in the item and in its effects, leases and hashes of opaque values; a
    /// key that is not UTF-8 is refused by both.
    #[test]
    fn a_work_item_with_an_unknown_field_is_read_as_the_derive_reads_it() {
        let item = rich_item();
        let mut json = serde_json::to_value(&item).expect("JSON");
        json["zz_unknown"] = serde_json::json!([1, 2]);
        json["spec"]["zz"] = serde_json::json!(null);
        json["past_leases"][0]["zz"] = serde_json::json!({"a": 1});
        let effect = json["effects"]
            .as_object()
            .and_then(|m| m.keys().next().cloned())
            .expect("an effect");
        json["effects"][&effect]["zz"] = serde_json::json!("x");
        let bytes = canonical::to_vec(&json).expect("encodes");
        assert_eq!(by_reader(&bytes), Some((item.clone(), bytes.len())));
        assert_eq!(by_derive(&bytes), Ok((item, bytes.len())));
        let mut bad = bytes.clone();
        let at = bad
            .windows(10)
            .position(|w| w == b"zz_unknown")
            .expect("there");
        bad[at + 1] = 0xff;
        assert_eq!(by_reader(&bad), None);
        assert!(by_derive(&bad).is_err());
    }

    /// A field the encoder leaves out when it has no value, given as `null`, is not the
    /// canonical encoding of the item the derive reads from it (which leaves it out): the
    /// reader refuses it, as it refuses any other encoding of a stored item.
    #[test]
    fn null_for_a_field_left_out_is_refused() {
        let item = rich_item();
        let json = serde_json::to_value(&item).expect("JSON");
        let effect = json["effects"]
            .as_object()
            .and_then(|m| m.keys().next().cloned())
            .expect("an effect");
        let mut tried = 0;
        for field in [
            "lease",
            "checkpoint",
            "needs",
            "outcome",
            "happened",
            "receipt",
        ] {
            let mut edited = json.clone();
            let at = match field {
                "happened" | "receipt" => &mut edited["effects"][&effect],
                _ => &mut edited,
            };
            let map = at.as_object_mut().expect("a map");
            map.insert(field.to_string(), serde_json::Value::Null);
            let bytes = canonical::to_vec(&edited).expect("encodes");
            assert_eq!(by_reader(&bytes), None, "{field}");
            if let Ok((derived, _)) = by_derive(&bytes) {
                assert_ne!(
                    canonical::to_vec(&derived).expect("encodes"),
                    bytes,
                    "{field}"
                );
            }
            tried += 1;
        }
        assert_eq!(tried, 6);
    }
}
