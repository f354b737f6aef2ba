//! Reading a write set and a replica's image from their canonical CBOR by readers of their
//! own.
//!
//! A write set is most of what a host's journal holds, and its projection rows are an
//! internally tagged enum, which serde's derive reads by buffering each row's entries before
//! it knows the variant. [`WriteSet::from_canonical`] reads the rows with [`Row`]'s reader
//! below (the `type` entry found first, then the variant's entries read in place), and every
//! other field by its `Deserialize`; so does [`ReplicaImage`]'s reader (an agent image's
//! replica, `AgentImage::from_canonical`). They accept, refuse and decode what the derive does from
//! the same bytes (a test holds them together): keys in canonical order, a key that is none of
//! the fields checked and skipped (none of these derives denies unknown fields), a missing one
//! refused by name.

use serde::Deserialize;

use super::{GroupHeader, ReplicaImage, Row, WriteSet};
use crate::canonical::{self, required, CanonError, Decode, DecodeFields, Decoder, Serde};
use crate::id::Id;
use crate::id_map::Arc;
use crate::state::{Approval, EvidenceNote, Expansion, Member, StoredReceipt};
use crate::work::WorkItem;

/// The fields of each struct variant of [`Row`], read by [`canonical::decode_struct!`].
struct MemberRow {
    actor: Id,
    member: Serde<Member>,
}
struct WorkRow {
    work: Id,
    item: WorkItem,
}
struct ApprovalRow {
    approval: Id,
    value: Serde<Approval>,
}
struct ReceiptRow {
    actor: Id,
    action: Id,
    receipt: Serde<StoredReceipt>,
}
struct TerminalRow {
    seq: u64,
    work: Id,
}
struct ExpansionRow {
    trigger: u64,
    expansion: Serde<Expansion>,
}
struct RedactedRow {
    seq: u64,
}
struct EvidenceRow {
    index: u64,
    note: Serde<EvidenceNote>,
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
                        member: Box::new(r.member.0),
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
                        value: Box::new(r.value.0),
                    }
                }
                "receipt" => {
                    let r = ReceiptRow::decode_fields(t.entries()?)?;
                    Row::Receipt {
                        actor: r.actor,
                        action: r.action,
                        receipt: Arc::new(r.receipt.0),
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
                        expansion: Box::new(r.expansion.0),
                    }
                }
                "redacted" => Row::Redacted {
                    seq: RedactedRow::decode_fields(t.entries()?)?.seq,
                },
                "evidence" => {
                    let r = EvidenceRow::decode_fields(t.entries()?)?;
                    Row::Evidence {
                        index: r.index,
                        note: Box::new(r.note.0),
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

impl<'de> Decode<'de> for WriteSet {
    fn decode(de: &mut Decoder<'de>) -> Result<WriteSet, CanonError> {
        let mut e = canonical::Entries::open(de, None)?;
        let mut ws = WriteSet::default();
        // Which of the fields that may not be left out were there, in `REQUIRED`'s order.
        const REQUIRED: [&str; 9] = [
            "serial",
            "reset",
            "applied",
            "projection",
            "queue",
            "checkpoints",
            "outbox",
            "effects",
            "cursor",
        ];
        let mut seen = [false; 9];
        while let Some(key) = e.key()? {
            let at = REQUIRED.iter().position(|k| k.as_bytes() == key);
            match key {
                b"group" => ws.group = e.value()?,
                b"serial" => ws.serial = e.value()?,
                b"reset" => ws.reset = e.value()?,
                b"applied" => ws.applied = e.value::<Serde<_>>()?.0,
                b"projection" => ws.projection = e.value()?,
                b"queue" => ws.queue = e.value::<Serde<_>>()?.0,
                b"checkpoints" => ws.checkpoints = e.value::<Serde<_>>()?.0,
                b"outbox" => ws.outbox = e.value::<Serde<_>>()?.0,
                b"effects" => ws.effects = e.value::<Serde<_>>()?.0,
                b"meta" => ws.meta = e.value::<Option<Serde<_>>>()?.map(|m| m.0),
                b"cursor" => ws.cursor = e.value()?,
                // The derive ignores a key that is none of the fields, once checked.
                other => e.skip_value(other)?,
            }
            if let Some(i) = at {
                seen[i] = true;
            }
        }
        let end = e.pos();
        e.finish();
        if let Some(i) = seen.iter().position(|s| !s) {
            return Err(canonical::missing_field(REQUIRED[i], end));
        }
        Ok(ws)
    }
}

/// A replica's image field by field: its rows by [`Row`]'s reader, every other field by its
/// `Deserialize`.
impl<'de> Decode<'de> for ReplicaImage {
    fn decode(de: &mut Decoder<'de>) -> Result<ReplicaImage, CanonError> {
        let mut e = canonical::Entries::open(de, None)?;
        let (mut rows, mut queue, mut checkpoints, mut recent, mut cursor) =
            (None, None, None, None, None);
        while let Some(key) = e.key()? {
            match key {
                b"rows" => rows = Some(e.value()?),
                b"queue" => queue = Some(e.value::<Serde<_>>()?.0),
                b"cursor" => cursor = Some(e.value()?),
                b"recent" => recent = Some(e.value::<Serde<_>>()?.0),
                b"checkpoints" => checkpoints = Some(e.value::<Serde<_>>()?.0),
                // The derive ignores a key that is none of the fields, once checked.
                other => e.skip_value(other)?,
            }
        }
        let end = e.pos();
        e.finish();
        Ok(ReplicaImage {
            rows: required(rows, "rows", end)?,
            queue: required(queue, "queue", end)?,
            checkpoints: required(checkpoints, "checkpoints", end)?,
            recent: required(recent, "recent", end)?,
            cursor: required(cursor, "cursor", end)?,
        })
    }
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
