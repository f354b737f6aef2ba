//! Decoding the receipt index of a Group state: receipts by actor, then action.
//!
//! Snapshots carry the index so that idempotency survives a restore (SPEC §8), and it is most
//! of a snapshot's bytes: one receipt per accepted command. The canonical decoder hands its
//! bytes to [`read`], written for its exact shape, which checks everything the decoder would
//! (canonical heads, key order, identifiers, hex, the seven fields in canonical order) and
//! builds the maps directly. On anything else it gives up and the maps' and the receipts'
//! own readers (`canonical::Decode`, which read what serde's derive reads) read the same bytes,
//! so what is accepted and what it decodes to never depend on the path taken. Other formats
//! (JSON, JS values) always take the ordinary path.
//!
//! A snapshot streamed from its file ([`read_streamed`]) is read entry by entry from the
//! streamed decoder's window with the same reader; an entry it declines is read by that
//! decoder's ordinary path, so that the outcome, errors included, is the ordinary path's.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

use crate::canonical::{self, CanonError, Items, StreamDecoder, ITEM_BYTES};
use crate::crypto::{FromHex, Hash};
use crate::id::Id;
use crate::id_map::IdMap;
use crate::receipt::Disposition;
use crate::state::{Receipts, StoredReceipt};

/// The index as a state's reader reads it from the canonical decoder: what [`deserialize`]
/// does there, without serde's visitors. The item's bytes are read by [`read`], or, where it
/// gives up, by the maps' and the receipts' own readers; bytes that are not a whole item are
/// read in place by those readers, which word what is wrong.
pub(crate) fn decode(
    de: &mut canonical::Decoder<'_>,
) -> Result<BTreeMap<Id, Receipts>, CanonError> {
    let start = de.pos();
    let Some(bytes) = de.item_bytes() else {
        return canonical::Decode::decode(de);
    };
    if let Some(index) = read(bytes) {
        return Ok(index);
    }
    canonical::read_whole(bytes).map_err(|e| in_the_index(&e, start))
}

/// An error of the index's readers, read from the index's own bytes, which start at `start`.
#[cold]
fn in_the_index(e: &CanonError, start: usize) -> CanonError {
    CanonError::new(
        format!(
            "in the receipt index: {} (at byte {} of it)",
            e.reason, e.offset
        ),
        start,
    )
}

/// The index, for `#[serde(deserialize_with)]`.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<Id, Receipts>, D::Error> {
    d.deserialize_newtype_struct(ITEM_BYTES, IndexVisitor)
}

struct IndexVisitor;

impl<'de> Visitor<'de> for IndexVisitor {
    type Value = BTreeMap<Id, Receipts>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("receipts by actor, then action")
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        BTreeMap::deserialize(d)
    }

    fn visit_borrowed_bytes<E: de::Error>(self, bytes: &'de [u8]) -> Result<Self::Value, E> {
        if let Some(index) = read(bytes) {
            return Ok(index);
        }
        canonical::read_whole::<BTreeMap<Id, Receipts>>(bytes).map_err(|e| {
            E::custom(format!(
                "in the receipt index: {} (at byte {} of it)",
                e.reason, e.offset
            ))
        })
    }
}

/// The index from its canonical bytes, or `None` if they are anything but the canonical
/// encoding of a valid index.
fn read(bytes: &[u8]) -> Option<BTreeMap<Id, Receipts>> {
    let mut r = Items::new(bytes);
    let actors = r.map()?;
    // Each actor and the bytes of its receipts, found by walking heads; each part is then
    // read in full.
    let mut parts = Vec::new();
    let mut previous_actor = None;
    for _ in 0..actors {
        let (actor, encoded) = key(&mut r, previous_actor)?;
        previous_actor = Some(encoded);
        parts.push((actor, r.item()?));
    }
    if !r.done() {
        return None;
    }
    let maps = read_parts(&parts, bytes.len())?;
    Some(
        parts
            .into_iter()
            .map(|(actor, _)| actor)
            .zip(maps)
            .collect(),
    )
}

/// Each actor's receipts. With the `parallel` feature (not on WebAssembly), an index of a MiB
/// or more is read by two threads, each taking about half of the bytes.
fn read_parts(parts: &[(Id, &[u8])], total: usize) -> Option<Vec<Receipts>> {
    #[cfg(all(feature = "parallel", not(target_family = "wasm")))]
    if total >= 1 << 20 && parts.len() >= 2 {
        let mut half = 0;
        let mut split = parts.len() - 1;
        for (i, (_, p)) in parts.iter().enumerate() {
            half += p.len();
            if 2 * half >= total {
                split = (i + 1).min(parts.len() - 1);
                break;
            }
        }
        let (first, second) = parts.split_at(split);
        let read_all = |ps: &[(Id, &[u8])]| -> Option<Vec<Receipts>> {
            ps.iter().map(|(_, p)| actor_receipts(p)).collect()
        };
        return std::thread::scope(|scope| {
            let other = std::thread::Builder::new()
                .name("mwp-receipt-index".to_owned())
                .spawn_scoped(scope, || read_all(second));
            let mut maps = read_all(first)?;
            let rest = match other {
                Ok(handle) => handle.join().ok()??,
                // No thread to be had: this one reads the rest.
                Err(_) => read_all(second)?,
            };
            maps.extend(rest);
            Some(maps)
        });
    }
    let _ = total;
    parts.iter().map(|(_, p)| actor_receipts(p)).collect()
}

/// One actor's receipts, by action.
fn actor_receipts(bytes: &[u8]) -> Option<Receipts> {
    let mut r = Items::new(bytes);
    let n = r.map()?;
    // A receipt takes over a hundred bytes: room for what the bytes can hold, no more.
    let mut receipts = IdMap::with_capacity(n.min(r.remaining() / 64));
    let mut previous_action = None;
    for _ in 0..n {
        let (action, receipt, encoded) = entry(&mut r, previous_action)?;
        previous_action = Some(encoded);
        if receipts.insert(action, receipt) {
            return None;
        }
    }
    r.done().then_some(receipts)
}

/// Bytes of the window an entry of an actor's receipts is read from by hand: a key and a
/// receipt take about 250 bytes; a longer entry (a long aggregate) is left to the ordinary
/// path.
const ENTRY_WINDOW: usize = 1024;

/// The receipt index from a streamed snapshot (the `receipts` entry of its state): actors by
/// the ordinary path, each actor's receipts entry by entry with [`key`] and [`receipt`] from
/// the decoder's window. What it accepts, decodes and refuses, and the error it gives, are
/// the ordinary path's (`BTreeMap::<Id, Receipts>::deserialize` on the same decoder).
pub(crate) fn read_streamed<R: std::io::Read>(
    de: &mut StreamDecoder<R>,
) -> Result<BTreeMap<Id, Receipts>, CanonError> {
    let Some(mut actors) = de.map_entries()? else {
        return BTreeMap::deserialize(de);
    };
    let mut index = BTreeMap::new();
    while actors.left() > 0 {
        let actor: Id = actors.key()?;
        let receipts = actors.value(actor_receipts_streamed)?;
        index.insert(actor, receipts);
    }
    actors.finish();
    Ok(index)
}

/// One actor's receipts from a streamed decoder (see [`read_streamed`]).
fn actor_receipts_streamed<R: std::io::Read>(
    de: &mut StreamDecoder<R>,
) -> Result<Receipts, CanonError> {
    let Some(mut entries) = de.map_entries()? else {
        return Receipts::deserialize(de);
    };
    // As in `actor_receipts`: room for what the bytes can hold, no more.
    let mut receipts = IdMap::with_capacity(entries.left().min(entries.remaining() / 64));
    while entries.left() > 0 {
        let by_hand = entries.by_hand(ENTRY_WINDOW, |bytes, previous| {
            let mut r = Items::new(bytes);
            let (action, receipt, encoded) = entry(&mut r, previous)?;
            Some(((action, receipt), encoded.len(), r.pos()))
        })?;
        let (action, receipt) = match by_hand {
            Some(entry) => {
                #[cfg(test)]
                tests::BY_HAND.set(tests::BY_HAND.get() + 1);
                entry
            }
            None => {
                let action: Id = entries.key()?;
                (action, entries.value(|de| StoredReceipt::deserialize(de))?)
            }
        };
        // Keys come in strictly increasing order (checked for both paths): no action twice.
        let twice = receipts.insert(action, receipt);
        debug_assert!(!twice);
    }
    entries.finish();
    Ok(receipts)
}

/// One entry of an actor's receipts: its action (a key sorting after `previous`), its
/// receipt, and the key's encoding.
fn entry<'de>(
    r: &mut Items<'de>,
    previous: Option<&[u8]>,
) -> Option<(Id, StoredReceipt, &'de [u8])> {
    let (action, encoded) = key(r, previous)?;
    Some((action, receipt(r)?, encoded))
}

/// A map key: an identifier whose encoding sorts after the previous key's; with its
/// encoding (head included).
fn key<'de>(r: &mut Items<'de>, previous: Option<&[u8]>) -> Option<(Id, &'de [u8])> {
    let (text, encoded) = r.text_bytes()?;
    if previous.is_some_and(|p| p >= encoded) {
        return None;
    }
    // The alphabet is ASCII: bytes it accepts are valid UTF-8.
    Some((Id::from_bytes_checked(text)?, encoded))
}

/// One receipt: its seven fields, keys in canonical order (shorter first, then bytewise).
fn receipt(r: &mut Items<'_>) -> Option<StoredReceipt> {
    r.eat(b"\xa7\x62at").then_some(())?;
    let at = r.uint()?;
    r.eat(b"\x63seq").then_some(())?;
    let seq = r.uint()?;
    r.eat(b"\x68event_id").then_some(())?;
    let event_id = hash(r)?;
    r.eat(b"\x68revision").then_some(())?;
    let revision = r.uint()?;
    r.eat(b"\x69aggregate").then_some(())?;
    let aggregate = compact_str::CompactString::new(r.text()?);
    r.eat(b"\x6bdisposition").then_some(())?;
    let disposition = if r.eat(b"\x67applied") {
        Disposition::Applied
    } else if r.eat(b"\x68evidence") {
        Disposition::Evidence
    } else {
        return None;
    };
    r.eat(b"\x6ccontent_hash").then_some(())?;
    let content_hash = hash(r)?;
    Some(StoredReceipt {
        seq,
        event_id,
        content_hash,
        aggregate,
        revision,
        disposition,
        at,
    })
}

fn hash(r: &mut Items<'_>) -> Option<Hash> {
    Hash::parse_bytes(r.text_bytes()?.0).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    std::thread_local! {
        /// Entries [`read_streamed`] read by hand on this thread.
        pub(super) static BY_HAND: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    fn id(s: &str) -> Id {
        Id::new(s).expect("valid")
    }

    fn sample() -> BTreeMap<Id, Receipts> {
        let mut index = BTreeMap::new();
        for (a, actor) in ["agent-1", "b", "@authority"].into_iter().enumerate() {
            let mut receipts = Receipts::new();
            for i in 0..4u64 {
                let action = id(&format!("{}-{i}", "x".repeat(i as usize + 1)));
                receipts.insert(
                    action,
                    StoredReceipt {
                        seq: 1000 * a as u64 + i,
                        event_id: Hash::of(&[a as u8, i as u8]),
                        content_hash: Hash::of(&[i as u8]),
                        aggregate: format!("work:w{i}").into(),
                        revision: i * 300,
                        disposition: if i % 2 == 0 {
                            Disposition::Applied
                        } else {
                            Disposition::Evidence
                        },
                        at: 1_700_000_000_000 + i,
                    },
                );
            }
            index.insert(id(actor), receipts);
        }
        index
    }

    #[test]
    fn reads_what_the_encoder_writes() {
        let index = sample();
        let bytes = canonical::to_vec(&index).expect("encodes");
        assert_eq!(read(&bytes), Some(index));
    }

    /// Whatever a damaged index holds, the reader either gives up or decodes exactly what the
    /// ordinary decoder decodes: every single-bit flip of every byte.
    #[test]
    fn a_damaged_index_is_read_as_the_ordinary_decoder_reads_it() {
        let bytes = canonical::to_vec(&sample()).expect("encodes");
        let mut read_by_hand = 0;
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut damaged = bytes.clone();
                damaged[i] ^= 1 << bit;
                let ordinary: Result<BTreeMap<Id, Receipts>, _> =
                    canonical::from_slice(&damaged, canonical::Strictness::Canonical);
                if let Some(fast) = read(&damaged) {
                    read_by_hand += 1;
                    assert_eq!(ordinary.as_ref().ok(), Some(&fast), "byte {i} bit {bit}");
                }
            }
        }
        // Flips inside identifiers and numbers still decode (to other values).
        assert!(read_by_hand > 0);
    }

    /// What [`read`] gives up on is read by the maps' and the receipts' readers, which read
    /// what the derive reads: each byte of an index changed to every value, and every cut.
    #[test]
    fn what_the_fast_reader_declines_is_read_as_the_derive_reads_it() {
        let bytes = canonical::to_vec(&sample()).expect("encodes");
        let (accepted, refused) =
            canonical::every_byte_reads_as_the_derive::<BTreeMap<Id, Receipts>>(&bytes, false);
        assert!(accepted > 0 && refused > 0, "{accepted} {refused}");
    }

    /// A stored receipt with a field it does not have would decode to a state that does not
    /// hash to the bytes that were signed: both readers refuse it.
    #[test]
    fn a_receipt_with_an_unknown_field_is_refused() {
        let mut value = serde_json::to_value(sample()).expect("to JSON");
        value["b"]["x-0"]["extra"] = serde_json::json!(1);
        let bytes = canonical::to_vec(&value).expect("encodes");
        assert_eq!(read(&bytes), None);
        let ordinary: Result<BTreeMap<Id, Receipts>, _> =
            canonical::from_slice(&bytes, canonical::Strictness::Canonical);
        let e = ordinary.expect_err("unknown field");
        assert!(e.reason.contains("unknown field"), "{e}");
    }

    #[test]
    fn an_index_in_another_shape_is_left_to_the_ordinary_decoder() {
        let mut bytes = canonical::to_vec(&sample()).expect("encodes");
        // A truncated index, and one followed by another item.
        assert_eq!(read(&bytes[..bytes.len() - 1]), None);
        bytes.push(0);
        assert_eq!(read(&bytes), None);
    }

    /// The index read from a streamed decoder by [`read_streamed`] and by the ordinary path
    /// (`BTreeMap::deserialize` on the same decoder), then checked to be the whole input.
    fn streamed(
        bytes: &[u8],
        piece: usize,
        by_hand: bool,
    ) -> Result<BTreeMap<Id, Receipts>, CanonError> {
        let mut de = StreamDecoder::new(canonical::Pieces { bytes, piece }, bytes.len());
        let index = if by_hand {
            read_streamed(&mut de)
        } else {
            BTreeMap::<Id, Receipts>::deserialize(&mut de)
        };
        index.and_then(|index| de.finish().map(|()| index))
    }

    /// The streamed reader accepts, decodes and refuses exactly as the streamed decoder's
    /// ordinary path does, down to the error's wording and offset: every single-bit flip,
    /// read in pieces of several sizes (so that the window's edge falls inside entries).
    #[test]
    fn the_streamed_reader_is_the_ordinary_streamed_path() {
        let bytes = canonical::to_vec(&sample()).expect("encodes");
        BY_HAND.set(0);
        assert_eq!(streamed(&bytes, usize::MAX, true), Ok(sample()));
        // Every entry of the sample is read by hand.
        assert_eq!(BY_HAND.get(), 12);
        let refused = canonical::every_flip_reads_alike(&bytes, &[usize::MAX, 100, 7], streamed);
        assert!(refused > 0);
    }

    /// An entry longer than the window read by hand, and a map in another shape, are the
    /// ordinary path's: read, or refused with its error.
    #[test]
    fn the_streamed_reader_leaves_other_shapes_to_the_ordinary_path() {
        let mut index = sample();
        let long = "work:".to_owned() + &"x".repeat(2 * ENTRY_WINDOW);
        let receipts = index.get_mut(&id("b")).expect("b");
        let mut first = receipts.get(&id("x-0")).expect("x-0").clone();
        first.aggregate = long.into();
        receipts.insert(id("x-0"), first);
        let bytes = canonical::to_vec(&index).expect("encodes");
        BY_HAND.set(0);
        assert_eq!(streamed(&bytes, 999, true), Ok(index));
        assert_eq!(BY_HAND.get(), 11);
        // A receipt with a field it does not have, an actor whose receipts are a list, and
        // an index that is not a map.
        let mut value = serde_json::to_value(sample()).expect("to JSON");
        value["b"]["x-0"]["extra"] = serde_json::json!(1);
        let mut list = serde_json::to_value(sample()).expect("to JSON");
        list["b"] = serde_json::json!([1, 2]);
        for v in [value, list, serde_json::json!("receipts")] {
            let bytes = canonical::to_vec(&v).expect("encodes");
            let e = streamed(&bytes, usize::MAX, true).expect_err("refused");
            assert_eq!(Err(e), streamed(&bytes, usize::MAX, false));
        }
    }
}
