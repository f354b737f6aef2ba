//! A reader's place in a Group's log, for the npm client's live tail: the core's
//! [`mwp_core::chain::Position::check`], so the tail asks the rule rather than restating it.

use mwp_core::chain::{Break, Position};
use mwp_core::{Error, Hash, Id};
use wasm_bindgen::prelude::*;

use crate::codec::{event_from_js, to_js, uint};
use crate::error::CodecError;

/// Whether `event` (JSON form, or canonical CBOR bytes) continues a reader's place in
/// `group`'s log: after seq `seq`, whose event id (hex) is `id` when the reader knows it
/// (`undefined` when it started after `seq` without reading that event; before seq 1 it is
/// all zeros and need not be given). Returns `null` when the event continues it, else the
/// first break, in the core's order: `{kind: "group"}` (another group),
/// `{kind: "seq", expected, received}` (not the next seq: a gap when `received` is past
/// `expected`, a step back below it), `{kind: "prev", seq, expected, received}` (its `prev`,
/// `received`, is not the id of the event before, `expected`; ids in hex), and, for an event
/// that continues it, `{kind: "id", seq, reason}` when it does not hash to its payload hash
/// and id ([`mwp_core::Event::verify`]): the id a tail goes on from is then one the event
/// holds, not one a server claims. Throws `MALFORMED` for a group, seq, id or event that is
/// not one.
#[wasm_bindgen(js_name = chainCheck)]
pub fn chain_check(
    group: &str,
    seq: f64,
    id: Option<String>,
    event: JsValue,
) -> Result<JsValue, CodecError> {
    let group = Id::new(group).map_err(|e| Error::malformed(format!("`group`: {e}")))?;
    let seq = uint(seq, "seq")?;
    let id = match id {
        Some(hex) => {
            Some(Hash::from_hex(&hex).map_err(|e| Error::malformed(format!("`id`: {e}")))?)
        }
        None => Position::after(seq).id,
    };
    let event = event_from_js(event)?;
    let found = match (Position { seq, id }).check(&group, &event) {
        Ok(()) => match event.verify() {
            Ok(()) => return Ok(JsValue::NULL),
            Err(e) => {
                serde_json::json!({ "kind": "id", "seq": event.seq, "reason": e.message })
            }
        },
        Err(Break::Group) => serde_json::json!({ "kind": "group" }),
        Err(Break::Seq { expected, received }) => {
            serde_json::json!({ "kind": "seq", "expected": expected, "received": received })
        }
        Err(Break::Prev {
            seq,
            expected,
            received,
        }) => serde_json::json!({
            "kind": "prev",
            "seq": seq,
            "expected": expected.to_hex(),
            "received": received.to_hex(),
        }),
    };
    Ok(to_js(&found)?)
}
