//! Reading a write set and a replica's image from their canonical CBOR by readers of their
//! own.
//!
//! A write set is most of what a host's journal holds, and its projection rows are an
//! internally tagged enum, which serde's derive reads by buffering each row's entries before
//! it knows the variant. [`WriteSet::from_canonical`] reads the rows with [`Row`]'s reader
//! below (the `type` entry found first, then the variant's entries read in place), its queue
//! changes alike, and every other field by a reader of its own (a row's header by its derive);
//! so does [`ReplicaImage`]'s reader (an agent image's replica, `AgentImage::from_canonical`).
//! They accept, refuse and decode what the derive does from the same bytes (tests hold them
//! together): keys in canonical order, a key that is none of the fields checked and skipped
//! (none of these derives denies unknown fields), a missing one refused by name.

use serde::Deserialize;

use super::{
    AppliedEvent, CheckpointRecord, GroupHeader, QueueChange, QueueEntry, ReplicaImage, Row,
    WriteSet,
};
use crate::canonical::{self, CanonError, Decode, DecodeFields, Decoder};
use crate::id::Id;
use crate::id_map::Arc;
use crate::state::{Approval, EvidenceNote, Expansion, Member, StoredReceipt};
use crate::work::WorkItem;

/// The fields of each struct variant of [`Row`], read by [`canonical::decode_struct!`].
struct MemberRow {
    actor: Id,
    member: Member,
}
struct WorkRow {
    work: Id,
    item: WorkItem,
}
struct ApprovalRow {
    approval: Id,
    value: Approval,
}
struct ReceiptRow {
    actor: Id,
    action: Id,
    receipt: StoredReceipt,
}
struct TerminalRow {
    seq: u64,
    work: Id,
}
struct ExpansionRow {
    trigger: u64,
    expansion: Expansion,
}
struct RedactedRow {
    seq: u64,
}
struct EvidenceRow {
    index: u64,
    note: EvidenceNote,
}

canonical::decode_struct! {
    MemberRow [ignore_unknown] { actor, member }
    WorkRow [ignore_unknown] { work, item }
    ApprovalRow [ignore_unknown] { approval, value }
    ReceiptRow [ignore_unknown] { actor, action, receipt }
    TerminalRow [ignore_unknown] { seq, work }
    ExpansionRow [ignore_unknown] { trigger, expansion }
    RedactedRow [ignore_unknown] { seq }
    EvidenceRow [ignore_unknown] { index, note }
}

impl<'de> Decode<'de> for Row {
    fn decode(de: &mut Decoder<'de>) -> Result<Row, CanonError> {
        de.tagged(&"a projection row", "type", None, |name, t| {
            Ok(match name {
                "header" => Row::Header(Box::new(GroupHeader::deserialize(t)?)),
                "member" => {
                    let r = MemberRow::decode_fields(t.entries()?)?;
                    Row::Member {
                        actor: r.actor,
                        member: Box::new(r.member),
                    }
                }
                "work" => {
                    let r = WorkRow::decode_fields(t.entries()?)?;
                    Row::Work {
                        work: r.work,
                        item: Arc::new(r.item),
                    }
                }
                "approval" => {
                    let r = ApprovalRow::decode_fields(t.entries()?)?;
                    Row::Approval {
                        approval: r.approval,
                        value: Box::new(r.value),
                    }
                }
                "receipt" => {
                    let r = ReceiptRow::decode_fields(t.entries()?)?;
                    Row::Receipt {
                        actor: r.actor,
                        action: r.action,
                        receipt: Arc::new(r.receipt),
                    }
                }
                "terminal" => {
                    let r = TerminalRow::decode_fields(t.entries()?)?;
                    Row::Terminal {
                        seq: r.seq,
                        work: r.work,
                    }
                }
                "expansion" => {
                    let r = ExpansionRow::decode_fields(t.entries()?)?;
                    Row::Expansion {
                        trigger: r.trigger,
                        expansion: Box::new(r.expansion),
                    }
                }
                "redacted" => Row::Redacted {
                    seq: RedactedRow::decode_fields(t.entries()?)?.seq,
                },
                "evidence" => {
                    let r = EvidenceRow::decode_fields(t.entries()?)?;
                    Row::Evidence {
                        index: r.index,
                        note: Box::new(r.note),
                    }
                }
                other => {
                    return Err(canonical::refused(
                        &format!("unknown projection row type {other:?}"),
                        0,
                    ))
                }
            })
        })
    }
}

/// The fields of [`QueueChange::Remove`].
struct QueueRemove {
    work: Id,
}

// A queue change's entry, a processed event and a checkpoint; their derives skip unknown
// fields, as these readers do.
canonical::decode_struct! {
    QueueEntry [ignore_unknown] { work, not_before, deadline_at if is_some }
    QueueRemove [ignore_unknown] { work }
    AppliedEvent [ignore_unknown] { seq, id }
    CheckpointRecord [ignore_unknown] { work, seq, data }
}

/// The variant names of [`QueueChange`], as its derive names them.
const QUEUE_CHANGES: &[&str] = &["put", "remove"];

impl<'de> Decode<'de> for QueueChange {
    /// An internally tagged enum, read as a projection row is: its `type` found first, then
    /// the variant's entries read in place.
    fn decode(de: &mut Decoder<'de>) -> Result<QueueChange, CanonError> {
        de.tagged(&"a queue change", "type", None, |name, t| match name {
            "put" => QueueEntry::decode_fields(t.entries()?).map(QueueChange::Put),
            "remove" => QueueRemove::decode_fields(t.entries()?)
                .map(|r| QueueChange::Remove { work: r.work }),
            other => Err(canonical::unknown_variant(other, QUEUE_CHANGES)),
        })
    }
}

// A write set and a replica's image, field by field: their rows by [`Row`]'s reader, every
// other field by its own.
canonical::decode_struct! {
    WriteSet [ignore_unknown] {
        group, serial, reset, applied, projection, queue, checkpoints, outbox, effects, meta,
        cursor,
    }
    ReplicaImage [ignore_unknown] { rows, queue, checkpoints, recent, cursor }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::AgentImage;
    use crate::replica::{Offer, Replica};
    use crate::test_common::{agrees_with_derive, run, transcripts, Agreement, Recorder};

    /// The write sets a replica gives while it follows every transcript's groups: rows of
    /// every kind (header, members, work items, approvals, receipts, terminal events,
    /// expansions, redactions, evidence).
    fn transcript_write_sets() -> Vec<WriteSet> {
        let mut sets = Vec::new();
        for (_, text) in transcripts() {
            let mut host = Recorder::default();
            run(&mut host, &text);
            let mut replicas = std::collections::BTreeMap::new();
            for e in &host.events {
                let r = replicas
                    .entry(e.group.clone())
                    .or_insert_with(|| Replica::new(e.group.clone()));
                if let Offer::Applied { write_set, .. } = r.offer(e.clone()) {
                    sets.push(write_set);
                }
            }
        }
        sets
    }

    fn by_derive<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Option<T> {
        canonical::from_slice(bytes, canonical::Strictness::Canonical).ok()
    }

    /// The write set's reader against the derive on every write set of every transcript.
    #[test]
    fn the_write_sets_reader_reads_what_the_derive_reads() {
        let sets = transcript_write_sets();
        let mut kinds = std::collections::BTreeSet::new();
        for ws in &sets {
            for row in &ws.projection {
                kinds.insert(row.key().split('/').next().unwrap_or("").to_owned());
            }
        }
        assert_eq!(kinds.len(), 9, "{kinds:?}");
        let mut counts = Agreement::default();
        for ws in &sets {
            agrees_with_derive(ws, WriteSet::from_canonical, &mut counts);
        }
        assert!(
            counts.accepted > 1000 && counts.refused > 1000,
            "{counts:?}"
        );
    }

    /// An agent image's reader against the derive, on the image each transcript's write sets
    /// build for each of its groups.
    #[test]
    fn the_agent_images_reader_reads_what_the_derive_reads() {
        let mut images = Vec::new();
        let mut by_group: std::collections::BTreeMap<Id, AgentImage> = Default::default();
        for mut ws in transcript_write_sets() {
            let image = by_group
                .entry(ws.group.clone().expect("a group"))
                .or_default();
            if ws.applied.first().map(|a| a.seq) == Some(1) {
                // A group of the next transcript with the same name: a new image.
                images.push(std::mem::take(image));
            }
            ws.serial = image.serial + 1;
            image.commit(&ws).expect("commits");
        }
        images.extend(by_group.into_values());
        let mut counts = Agreement::default();
        for image in &images {
            agrees_with_derive(image, AgentImage::from_canonical, &mut counts);
        }
        assert!(
            counts.accepted > 1000 && counts.refused > 1000,
            "{counts:?}"
        );
    }

    /// A journal effect of work `w1` that was dispatched once and happened, its outcome and
    /// receipt not recorded.
    fn observed_effect() -> crate::agent::EffectEntry {
        let id = |s: &str| Id::new(s).expect("an identifier");
        crate::agent::EffectEntry {
            key: crate::Hash([1; 32]),
            work: id("w1"),
            epoch: 1,
            lease: crate::lease::LeaseId([2; 16]),
            op: id("op"),
            mode: crate::command::EffectMode::Undeclared,
            irreversible: false,
            high_risk: false,
            target: crate::opaque::Opaque::null(),
            status: crate::agent::JournalStatus::Observed,
            dispatches: 1,
            dispatched_at: Some(5),
            happened: Some(true),
            outcome: None,
            receipt: None,
        }
    }

    /// A command as an agent's outbox keeps it: `checkpoint` of `w1`, signed by `alice`.
    fn signed_command() -> crate::Command {
        let id = |s: &str| Id::new(s).expect("an identifier");
        crate::Command::signed(
            id("acme"),
            id("g1"),
            id("alice"),
            id("a1"),
            1,
            None,
            crate::command::Body::Checkpoint(crate::command::Checkpoint {
                work: id("w1"),
                lease: crate::lease::LeaseId([2; 16]),
                data: crate::opaque::Opaque::null(),
            }),
            &crate::SecretKey::for_transcript("alice"),
        )
        .expect("signs")
    }

    /// Reads `value`'s encoding, each byte changed to every value and every cut, and its
    /// encoding with an unknown key (which each of these derives skips), by `T`'s reader and
    /// by its derive; `tagged` as [`canonical::every_byte_reads_as_the_derive`] takes it.
    fn part_reads_as_its_derive<T>(value: &T, tagged: bool)
    where
        T: for<'de> Decode<'de> + serde::de::DeserializeOwned + serde::Serialize,
        T: PartialEq + std::fmt::Debug,
    {
        let bytes = canonical::to_vec(value).expect("encodes");
        let (accepted, refused) = canonical::every_byte_reads_as_the_derive::<T>(&bytes, tagged);
        assert!(accepted > 0 && refused > 0, "{value:?}");
        let extended = canonical::with_unknown_key(&bytes);
        assert_eq!(canonical::read_whole::<T>(&extended).as_ref(), Ok(value));
        canonical::every_byte_reads_as_the_derive::<T>(&extended, tagged);
    }

    /// The parts of a write set and of an agent image are read by their own readers as by
    /// their derives: a processed event, a checkpoint, a queue entry and both queue changes,
    /// an outbox entry (its command read by the command's derive), its binding and both
    /// outbox changes, a journal effect and the agent's counters; each byte changed to every
    /// value, every cut, and with an unknown key, which each of them skips. The changes are
    /// internally tagged: where the derive's buffering takes a byte string as a key, the
    /// readers refuse it, as they refuse any other encoding that is not canonical.
    #[test]
    fn the_parts_of_write_sets_and_images_are_read_as_their_derives_read_them() {
        use crate::agent::{AgentMeta, Binding, OutboxChange, OutboxEntry};
        use crate::replica::{AppliedEvent, CheckpointRecord, QueueChange, QueueEntry};
        let id = |s: &str| Id::new(s).expect("an identifier");
        part_reads_as_its_derive(
            &AppliedEvent {
                seq: 7,
                id: crate::Hash([3; 32]),
            },
            false,
        );
        part_reads_as_its_derive(
            &CheckpointRecord {
                work: id("w1"),
                seq: 9,
                data: crate::opaque::Opaque::from_canonical(
                    &canonical::to_vec(&serde_json::json!({"step": [1, "a"]})).expect("encodes"),
                ),
            },
            false,
        );
        let entry = QueueEntry {
            work: id("w1"),
            not_before: 3,
            deadline_at: Some(500),
        };
        part_reads_as_its_derive(&entry, false);
        part_reads_as_its_derive(
            &QueueEntry {
                deadline_at: None,
                ..entry.clone()
            },
            false,
        );
        part_reads_as_its_derive(&QueueChange::Put(entry), true);
        part_reads_as_its_derive(&QueueChange::Remove { work: id("w2") }, true);
        let binding = Binding {
            work: Some(id("w1")),
            epoch: Some(1),
            lease: Some(crate::lease::LeaseId([2; 16])),
            op: Some(id("op")),
        };
        part_reads_as_its_derive(&binding, false);
        part_reads_as_its_derive(&Binding::default(), false);
        let outbox = OutboxEntry {
            base: id("a1"),
            rebases: 2,
            command: signed_command(),
            binding,
            made_at: 1,
            offline: true,
        };
        part_reads_as_its_derive(&outbox, false);
        part_reads_as_its_derive(&OutboxChange::Put(outbox), true);
        part_reads_as_its_derive(&OutboxChange::Remove { base: id("a2") }, true);
        part_reads_as_its_derive(&observed_effect(), false);
        part_reads_as_its_derive(
            &crate::agent::EffectEntry {
                outcome: Some(crate::opaque::Opaque::null()),
                receipt: Some(crate::opaque::Opaque::text("r")),
                dispatched_at: None,
                ..observed_effect()
            },
            false,
        );
        part_reads_as_its_derive(
            &AgentMeta {
                session: 3,
                next_action: 41,
            },
            false,
        );
    }

    /// A queue change or an outbox change whose `type` is none of its variants is refused in
    /// serde's words, and one without a `type` is refused, as by the derive.
    #[test]
    fn a_change_of_no_known_type_is_refused() {
        use crate::agent::OutboxChange;
        use crate::replica::QueueChange;
        let unknown =
            canonical::to_vec(&serde_json::json!({"type": "move", "work": "w1"})).expect("encodes");
        let untyped = canonical::to_vec(&serde_json::json!({"work": "w1"})).expect("encodes");
        let e = canonical::read_whole::<QueueChange>(&unknown).expect_err("no such variant");
        assert!(
            e.reason
                .contains("unknown variant `move`, expected `put` or `remove`"),
            "{e}"
        );
        assert!(by_derive::<QueueChange>(&unknown).is_none());
        let e = canonical::read_whole::<OutboxChange>(&unknown).expect_err("no such variant");
        assert!(e.reason.contains("unknown variant `move`"), "{e}");
        assert!(by_derive::<OutboxChange>(&unknown).is_none());
        assert!(canonical::read_whole::<QueueChange>(&untyped).is_err());
        assert!(by_derive::<QueueChange>(&untyped).is_none());
        assert!(canonical::read_whole::<OutboxChange>(&untyped).is_err());
        assert!(by_derive::<OutboxChange>(&untyped).is_none());
    }

    /// An effect whose observed outcome and receipt are the opaque value `null` reads back
    /// with them, by the reader and by the derive: read as left out, a restarted agent would
    /// settle the effect with another outcome than the one it observed.
    #[test]
    fn a_null_outcome_is_kept_in_an_agent_image() {
        let entry = crate::agent::EffectEntry {
            outcome: Some(crate::opaque::Opaque::null()),
            receipt: Some(crate::opaque::Opaque::null()),
            ..observed_effect()
        };
        let mut image = AgentImage::default();
        image.effects.insert(entry.key, entry);
        let bytes = canonical::to_vec(&image).expect("encodes");
        assert_eq!(AgentImage::from_canonical(&bytes).as_ref(), Ok(&image));
        let derived: AgentImage =
            canonical::from_slice(&bytes, canonical::Strictness::Canonical).expect("derive");
        assert_eq!(derived, image);
        let json = serde_json::to_string(&image).expect("JSON");
        assert_eq!(serde_json::from_str::<AgentImage>(&json).ok(), Some(image));
    }

    /// `null` where the encoder leaves a field out (a queue entry's `deadline_at`, an outbox
    /// binding's `work`, `epoch`, `lease` and `op`, an effect's `dispatched_at` and
    /// `happened`) is not the canonical encoding of the image or write set it would decode
    /// to: both readers refuse it, as they refuse any other encoding of a stored value.
    #[test]
    fn null_for_a_field_left_out_is_refused_in_images_and_write_sets() {
        use crate::agent::{Binding, OutboxChange, OutboxEntry};
        use crate::replica::{QueueChange, QueueEntry};
        let id = |s: &str| Id::new(s).expect("an identifier");
        let effect = observed_effect();
        let binding = Binding {
            work: Some(id("w1")),
            epoch: Some(1),
            lease: Some(crate::lease::LeaseId([2; 16])),
            op: Some(id("op")),
        };
        let command = signed_command();
        let ws = WriteSet {
            group: Some(id("g1")),
            serial: 1,
            queue: vec![QueueChange::Put(QueueEntry {
                work: id("w1"),
                not_before: 0,
                deadline_at: Some(9),
            })],
            outbox: vec![OutboxChange::Put(OutboxEntry {
                base: id("a1"),
                rebases: 0,
                command,
                binding,
                made_at: 1,
                offline: false,
            })],
            effects: vec![effect],
            cursor: 0,
            ..WriteSet::default()
        };
        let mut image = AgentImage::default();
        image.commit(&ws).expect("commits");
        let ws_json = serde_json::to_value(&ws).expect("JSON");
        let image_json = serde_json::to_value(&image).expect("JSON");
        let bytes = canonical::to_vec(&ws_json).expect("encodes");
        assert_eq!(WriteSet::from_canonical(&bytes).as_ref(), Ok(&ws));
        let bytes = canonical::to_vec(&image_json).expect("encodes");
        assert_eq!(AgentImage::from_canonical(&bytes).as_ref(), Ok(&image));
        let mut tried = 0;
        for (path, field) in [
            ("/queue/0", "deadline_at"),
            ("/outbox/0/binding", "work"),
            ("/outbox/0/binding", "epoch"),
            ("/outbox/0/binding", "lease"),
            ("/outbox/0/binding", "op"),
            ("/effects/0", "dispatched_at"),
            ("/effects/0", "happened"),
        ] {
            let mut edited = ws_json.clone();
            let at = edited.pointer_mut(path).and_then(|v| v.as_object_mut());
            at.expect(path)
                .insert(field.into(), serde_json::Value::Null);
            let bytes = canonical::to_vec(&edited).expect("encodes");
            assert!(WriteSet::from_canonical(&bytes).is_err(), "{path}/{field}");
            assert!(by_derive::<WriteSet>(&bytes).is_none(), "{path}/{field}");
            tried += 1;
        }
        for (path, field) in [
            ("/replica/queue/w1", "deadline_at"),
            ("/outbox/a1/binding", "epoch"),
            (
                "/effects/0101010101010101010101010101010101010101010101010101010101010101",
                "happened",
            ),
        ] {
            let mut edited = image_json.clone();
            let at = edited.pointer_mut(path).and_then(|v| v.as_object_mut());
            at.expect(path)
                .insert(field.into(), serde_json::Value::Null);
            let bytes = canonical::to_vec(&edited).expect("encodes");
            assert!(
                AgentImage::from_canonical(&bytes).is_err(),
                "{path}/{field}"
            );
            tried += 1;
        }
        assert_eq!(tried, 10);
    }

    /// Hostile bytes, as a journal or an image file on disk may hold them, are refused
    /// without a panic or an allocation beyond their size: lengths that claim more than the
    /// input holds, nesting past the limit inside a skipped key and inside a row, a row with
    /// no `type`, and any short input.
    #[test]
    fn hostile_bytes_are_refused() {
        use crate::state::GroupState;
        let key = |out: &mut Vec<u8>, k: &str| {
            out.push(0x60 | k.len() as u8);
            out.extend_from_slice(k.as_bytes());
        };
        let mut cases: Vec<Vec<u8>> = Vec::new();
        // `projection` claiming 2^64 − 1 rows.
        let mut b = vec![0xa1];
        key(&mut b, "projection");
        b.extend_from_slice(&[0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        cases.push(b);
        // A row claiming 2^32 entries, and one with no `type`.
        for row in [
            &[0xba, 0xff, 0xff, 0xff, 0xff][..],
            &[0xa1, 0x61, b'a', 0x01],
        ] {
            let mut b = vec![0xa1];
            key(&mut b, "projection");
            b.push(0x81);
            b.extend_from_slice(row);
            cases.push(b);
        }
        // Nesting past the limit under an unknown key, and inside a row's unknown key.
        let deep = |out: &mut Vec<u8>| {
            out.extend(std::iter::repeat_n(0x81, canonical::MAX_DEPTH + 2));
            out.push(0x00);
        };
        let mut b = vec![0xa1];
        key(&mut b, "zz");
        deep(&mut b);
        cases.push(b);
        let mut b = vec![0xa1];
        key(&mut b, "projection");
        b.extend_from_slice(&[0x81, 0xa2]);
        key(&mut b, "zz");
        deep(&mut b);
        key(&mut b, "type");
        key(&mut b, "redacted");
        cases.push(b);
        for bytes in &cases {
            for cut in 0..=bytes.len() {
                let part = &bytes[..cut];
                assert!(WriteSet::from_canonical(part).is_err(), "{part:02x?}");
                assert!(AgentImage::from_canonical(part).is_err(), "{part:02x?}");
                assert!(GroupState::from_canonical(part).is_err(), "{part:02x?}");
            }
        }
    }

    proptest::proptest! {
        /// Any bytes are read or refused, never a panic.
        #[test]
        fn any_bytes_are_read_or_refused(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
            let _ = WriteSet::from_canonical(&bytes);
            let _ = AgentImage::from_canonical(&bytes);
            let _ = crate::state::GroupState::from_canonical(&bytes);
        }
    }

    /// A key that is none of the fields is checked and skipped, in the write set and in a
    /// row, as the derive does; a field left out is refused by name, and so is a row's.
    #[test]
    fn unknown_keys_are_skipped_and_missing_ones_named() {
        use ciborium::Value;
        let ws = transcript_write_sets()
            .into_iter()
            .find(|ws| ws.projection.iter().any(|r| matches!(r, Row::Work { .. })))
            .expect("a write set with a work item");
        let value = canonical::decode(
            &canonical::to_vec(&ws).expect("encodes"),
            canonical::Strictness::Canonical,
        )
        .expect("decodes");
        let Value::Map(mut map) = value else {
            panic!("a map")
        };
        let zz = (Value::Text("zz".into()), Value::Array(vec![Value::Null]));
        for (k, v) in &mut map {
            if k.as_text() == Some("projection") {
                if let Value::Array(rows) = v {
                    for row in rows {
                        if let Value::Map(entries) = row {
                            entries.push(zz.clone());
                        }
                    }
                }
            }
        }
        map.push(zz);
        let bytes = canonical::encode_value(&Value::Map(map.clone())).expect("encodes");
        assert_eq!(WriteSet::from_canonical(&bytes).as_ref(), Ok(&ws));
        assert_eq!(by_derive::<WriteSet>(&bytes).as_ref(), Some(&ws));
        let mut without = map.clone();
        without.retain(|(k, _)| k.as_text() != Some("cursor"));
        let bytes = canonical::encode_value(&Value::Map(without)).expect("encodes");
        let err = WriteSet::from_canonical(&bytes).expect_err("missing");
        assert!(err.reason.contains("missing field `cursor`"), "{err}");
        assert!(by_derive::<WriteSet>(&bytes).is_none());
        // `group` and `meta` may be left out: they are `None`.
        let mut without = map;
        without.retain(|(k, _)| k.as_text() != Some("group") && k.as_text() != Some("meta"));
        let bytes = canonical::encode_value(&Value::Map(without)).expect("encodes");
        let read = WriteSet::from_canonical(&bytes).expect("reads");
        assert_eq!((read.group.as_ref(), read.meta), (None, None));
        assert_eq!(by_derive::<WriteSet>(&bytes).as_ref(), Some(&read));
    }
}
