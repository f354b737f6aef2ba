//! Decoding the receipt index of a Group state: receipts by actor, then action.
//!
//! Snapshots carry the index so that idempotency survives a restore (SPEC §8), and it is most
//! of a snapshot's bytes: one receipt per accepted command. The canonical decoder hands its
//! bytes to [`read`], written for its exact shape, which checks everything the decoder would
//! (canonical heads, key order, identifiers, hex, the seven fields in canonical order) and
//! builds the maps directly. On anything else it gives up and the ordinary decoder reads the
//! same bytes, so what is accepted and what it decodes to never depend on the path taken.
//! Other formats (JSON, JS values) always take the ordinary path.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

use crate::canonical::{self, Items, Strictness, ITEM_BYTES};
use crate::crypto::{FromHex, Hash};
use crate::id::Id;
use crate::id_map::IdMap;
use crate::receipt::Disposition;
use crate::state::{Receipts, StoredReceipt};

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
        canonical::from_slice(bytes, Strictness::Canonical).map_err(|e| {
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
        let actor = key(&mut r, &mut previous_actor)?;
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
        let action = key(&mut r, &mut previous_action)?;
        if receipts.insert(action, receipt(&mut r)?) {
            return None;
        }
    }
    r.done().then_some(receipts)
}

/// A map key: an identifier whose encoding sorts after the previous key's.
fn key<'de>(r: &mut Items<'de>, previous: &mut Option<&'de [u8]>) -> Option<Id> {
    let (text, encoded) = r.text_bytes()?;
    if previous.is_some_and(|p| p >= encoded) {
        return None;
    }
    *previous = Some(encoded);
    // The alphabet is ASCII: bytes it accepts are valid UTF-8.
    Id::from_bytes_checked(text)
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
                    canonical::from_slice(&damaged, Strictness::Canonical);
                if let Some(fast) = read(&damaged) {
                    read_by_hand += 1;
                    assert_eq!(ordinary.as_ref().ok(), Some(&fast), "byte {i} bit {bit}");
                }
            }
        }
        // Flips inside identifiers and numbers still decode (to other values).
        assert!(read_by_hand > 0);
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
            canonical::from_slice(&bytes, Strictness::Canonical);
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
}
