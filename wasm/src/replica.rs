//! `Replica`: one Group rebuilt from events delivered at least once, in any order
//! (SPEC §7), over [`mwp_core::replica::Replica`].

use std::collections::BTreeMap;

use mwp_core::replica::{Offer, Replica as CoreReplica};
use mwp_core::snapshot::Snapshot;
use mwp_core::{Error, Event, GroupState, Id};
use serde_json::json;
use wasm_bindgen::prelude::*;

use crate::codec::{event_from_js, num, parse_public_key, to_js, uint};
use crate::error::OfferError;
use crate::frames;

/// The hash (hex) of an optional state: all zeros before genesis.
pub fn state_hash_of(state: Option<&GroupState>) -> Result<String, Error> {
    Ok(state
        .map_or(Ok(mwp_core::Hash::ZERO), GroupState::hash)?
        .to_hex())
}

/// Work items a worker may claim at `now_ms`, as a JS array of IDs.
pub fn frontier_of(state: Option<&GroupState>, now_ms: u64) -> Vec<String> {
    state.map_or_else(Vec::new, |s| {
        s.frontier(now_ms)
            .into_iter()
            .map(|id| id.to_string())
            .collect()
    })
}

/// The JS object for one offer: `{result, seq, cursor, error?}`.
pub fn offer_to_json(offer: &Offer, seq: u64, cursor: u64) -> serde_json::Value {
    match offer {
        Offer::Rejected(e) => {
            json!({"result": "rejected", "seq": seq, "cursor": cursor, "error": e})
        }
        other => json!({"result": other.name(), "seq": seq, "cursor": cursor}),
    }
}

/// Counts of a batch of offers.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BatchSummary {
    /// Events applied (including buffered ones drained by them).
    pub applied: u64,
    /// Offers that were duplicates.
    pub duplicate: u64,
    /// Offers kept in the early buffer.
    pub buffered: u64,
    /// Offers rejected.
    pub rejected: u64,
    /// The cursor after the batch.
    pub cursor: u64,
    /// The rejections, in order: `{seq, error}`.
    pub errors: Vec<serde_json::Value>,
}

/// An event with its canonical bytes.
pub type Encoded = (Event, Vec<u8>);

/// Early events a replica buffered, with the bytes they came in, by seq: when a later event
/// fills the gap and drains them, their bytes are at hand to store.
pub type Pending = BTreeMap<u64, Encoded>;

/// Offers every event of a frame batch; returns the summary and the applied events with
/// their canonical bytes (in seq order), which a durable host writes in one transaction.
/// Each frame is decoded and verified where its bytes lie ([`CoreReplica::offer_bytes_with`]);
/// decoding is canonical-only, so a frame's bytes are its event's encoding: they are stored
/// as they came, never encoded again.
pub fn offer_frames(
    replica: &mut CoreReplica,
    pending: &mut Pending,
    batch: &[u8],
) -> Result<(BatchSummary, Vec<Encoded>), Error> {
    let mut summary = BatchSummary::default();
    let mut applied: Vec<Encoded> = Vec::new();
    for bytes in frames::split(batch)? {
        let mut seen = None;
        let offer = replica.offer_bytes_with(bytes, |e| seen = Some(e.clone()));
        let Some(event) = seen else {
            // The frame did not decode or verify: its seq is known when its header was read.
            if let Offer::Rejected(e) = offer {
                let seq = e
                    .details
                    .get("seq")
                    .cloned()
                    .unwrap_or(serde_json::Value::Null);
                summary.rejected += 1;
                summary.errors.push(json!({"seq": seq, "error": e}));
            }
            continue;
        };
        let (seq, id) = (event.seq, event.id);
        let mut kept = Some((event, bytes.to_vec()));
        match offer {
            Offer::Applied {
                write_set, dropped, ..
            } => {
                for a in &write_set.applied {
                    let delivered = kept.take_if(|_| a.seq == seq && a.id == id);
                    match delivered.or_else(|| pending.remove(&a.seq).filter(|(e, _)| e.id == a.id))
                    {
                        Some(encoded) => applied.push(encoded),
                        None => {
                            return Err(Error::corrupt(format!(
                                "the replica applied seq {} but its bytes were not delivered here",
                                a.seq
                            )))
                        }
                    }
                }
                summary.applied += write_set.applied.len() as u64;
                for e in dropped {
                    summary.errors.push(json!({"seq": null, "error": e}));
                }
            }
            Offer::Duplicate => summary.duplicate += 1,
            Offer::Buffered => {
                summary.buffered += 1;
                pending.extend(kept.map(|k| (seq, k)));
            }
            Offer::Rejected(e) => {
                summary.rejected += 1;
                summary.errors.push(json!({"seq": seq, "error": e}));
            }
        }
    }
    let cursor = replica.cursor();
    pending.retain(|seq, _| *seq > cursor);
    summary.cursor = cursor;
    Ok((summary, applied))
}

/// Decodes a canonical state (as stored by a host) into a [`GroupState`].
pub fn state_from_cbor(bytes: &[u8]) -> Result<GroupState, Error> {
    GroupState::from_canonical(bytes)
        .map_err(|e| Error::corrupt(format!("stored state does not decode: {e}")))
}

/// Restores `replica` from snapshot bytes after validating them (SPEC §8).
pub fn restore_snapshot(
    replica: &mut CoreReplica,
    snapshot: &[u8],
    trusted_key_hex: &str,
    org: &str,
    requested_cursor: u64,
) -> Result<Snapshot, Error> {
    let trusted = parse_public_key(trusted_key_hex)?;
    let org = Id::new(org).map_err(|e| Error::malformed(format!("org: {e}")))?;
    let snap = Snapshot::from_cbor(snapshot)?;
    // The replica's own write set is not used: the stores here keep their own layout.
    let _reset = replica.restore(&snap, &trusted, &org, requested_cursor)?;
    Ok(snap)
}

/// One Group's replica, in memory.
#[wasm_bindgen]
pub struct Replica {
    inner: CoreReplica,
    pending: Pending,
}

impl Replica {
    /// The core replica.
    pub fn core(&self) -> &CoreReplica {
        &self.inner
    }

    /// A replica over a core one (e.g. what a static export was read into).
    pub fn from_core(inner: CoreReplica) -> Replica {
        Replica {
            inner,
            pending: Pending::new(),
        }
    }
}

#[wasm_bindgen]
impl Replica {
    /// An empty replica of `group`.
    #[wasm_bindgen(constructor)]
    pub fn new(group: &str) -> Result<Replica, OfferError> {
        let group = Id::new(group).map_err(|e| OfferError::malformed(format!("group: {e}")))?;
        Ok(Replica {
            inner: CoreReplica::new(group),
            pending: Pending::new(),
        })
    }

    /// A replica resumed from a local projection: canonical CBOR of a state, as `stateCbor()`
    /// gives it.
    #[wasm_bindgen(js_name = fromStateCbor)]
    pub fn from_state_cbor(bytes: &[u8]) -> Result<Replica, OfferError> {
        Ok(Replica {
            inner: CoreReplica::from_state(state_from_cbor(bytes)?),
            pending: Pending::new(),
        })
    }

    /// Offers one delivered event (CBOR bytes or JSON form). Returns
    /// `{result: "applied"|"duplicate"|"buffered"|"rejected", seq, cursor, error?}`:
    /// rejections are values, not exceptions.
    pub fn offer(&mut self, event: JsValue) -> Result<JsValue, OfferError> {
        let event = match event_from_js(event) {
            Ok(event) => event,
            Err(e) => {
                let json = offer_to_json(&Offer::Rejected(e), 0, self.inner.cursor());
                return Ok(to_js(&json)?);
            }
        };
        // One frame through the batch path, so early events keep their bytes for later.
        let seq = event.seq;
        let mut batch = Vec::new();
        frames::push(&mut batch, &event.to_cbor()?)?;
        let (summary, _) = offer_frames(&mut self.inner, &mut self.pending, &batch)?;
        let cursor = summary.cursor;
        let json = if summary.applied > 0 {
            json!({"result": "applied", "seq": seq, "cursor": cursor})
        } else if summary.buffered > 0 {
            json!({"result": "buffered", "seq": seq, "cursor": cursor})
        } else if summary.rejected > 0 {
            let error = summary.errors.first().map(|e| e["error"].clone());
            json!({"result": "rejected", "seq": seq, "cursor": cursor, "error": error})
        } else {
            json!({"result": "duplicate", "seq": seq, "cursor": cursor})
        };
        Ok(to_js(&json)?)
    }

    /// Offers every event of a frame batch. Returns `{applied, duplicate, buffered,
    /// rejected, cursor, errors}`.
    #[wasm_bindgen(js_name = offerBatch)]
    pub fn offer_batch(&mut self, batch: &[u8]) -> Result<JsValue, OfferError> {
        let (summary, _) = offer_frames(&mut self.inner, &mut self.pending, batch)?;
        Ok(to_js(&summary)?)
    }

    /// Restores from a signed snapshot (CBOR bytes) after validating schema, state hash,
    /// signature against `trustedKey` (hex), org and group, and `seq ≥ requestedCursor`.
    /// Throws `SNAPSHOT_INVALID` with the reason; on error nothing changes.
    pub fn restore(
        &mut self,
        snapshot: &[u8],
        trusted_key: &str,
        org: &str,
        requested_cursor: f64,
    ) -> Result<(), OfferError> {
        let cursor = uint(requested_cursor, "requestedCursor")?;
        restore_snapshot(&mut self.inner, snapshot, trusted_key, org, cursor)?;
        let cursor = self.inner.cursor();
        self.pending.retain(|seq, _| *seq > cursor);
        Ok(())
    }

    /// Offers a signed head (an object or JSON string in its JSON form) under the authority
    /// key the caller pins (hex): `{result: "verified"|"ahead"|"stale", verifiedThrough}`.
    /// Throws `HEAD_INVALID` (`details.check`) for a head that does not verify, and `FORK`
    /// (`details.heads`, and `details.proof` in hex when two heads conflict) for one the
    /// chain contradicts. On error nothing changes.
    #[wasm_bindgen(js_name = offerHead)]
    pub fn offer_head(
        &mut self,
        head: JsValue,
        authority_key: &str,
    ) -> Result<JsValue, OfferError> {
        Ok(crate::head::offer_head(
            &mut self.inner,
            head,
            authority_key,
        )?)
    }

    /// The highest seq a signed head vouched for (0 before any): events past it are
    /// provisional.
    #[wasm_bindgen(getter, js_name = verifiedThrough)]
    pub fn verified_through(&self) -> f64 {
        num(self.inner.verified_through())
    }

    /// Whether event `seq` is past the last verified head.
    #[wasm_bindgen(js_name = isProvisional)]
    pub fn is_provisional(&self, seq: f64) -> Result<bool, OfferError> {
        Ok(self.inner.is_provisional(uint(seq, "seq")?))
    }

    /// The latest signed head that verified against the chain (JSON form), or `null`.
    #[wasm_bindgen(getter, js_name = verifiedHead)]
    pub fn verified_head(&self) -> JsValue {
        crate::head::verified_head(&self.inner)
    }

    /// The group.
    #[wasm_bindgen(getter)]
    pub fn group(&self) -> String {
        self.inner.group().to_string()
    }

    /// Highest contiguous seq applied: what an ACK carries.
    #[wasm_bindgen(getter)]
    pub fn cursor(&self) -> f64 {
        num(self.inner.cursor())
    }

    /// Id (hex) of the event at the cursor.
    #[wasm_bindgen(getter)]
    pub fn head(&self) -> String {
        self.inner.head().to_hex()
    }

    /// Number of early events waiting for a gap to fill.
    #[wasm_bindgen(getter)]
    pub fn buffered(&self) -> f64 {
        self.inner.buffered() as f64
    }

    /// Hash (hex) of the canonical state.
    #[wasm_bindgen(js_name = stateHash)]
    pub fn state_hash(&self) -> Result<String, OfferError> {
        Ok(state_hash_of(self.inner.state())?)
    }

    /// The state as a JS object (`null` before genesis).
    pub fn state(&self) -> Result<JsValue, OfferError> {
        Ok(to_js(&self.inner.state())?)
    }

    /// Canonical CBOR of the state (`undefined` before genesis).
    #[wasm_bindgen(js_name = stateCbor)]
    pub fn state_cbor(&self) -> Result<Option<Vec<u8>>, OfferError> {
        Ok(self.inner.state().map(GroupState::to_cbor).transpose()?)
    }

    /// IDs of the work items a worker may claim at `nowMs`.
    pub fn frontier(&self, now_ms: f64) -> Result<Vec<String>, OfferError> {
        Ok(frontier_of(self.inner.state(), uint(now_ms, "nowMs")?))
    }

    /// The earliest time a `tick` would expire a lease, or `undefined`.
    #[wasm_bindgen(js_name = nextDeadline)]
    pub fn next_deadline(&self) -> Option<f64> {
        self.inner.state()?.next_deadline().map(num)
    }
}
