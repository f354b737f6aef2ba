//! `StoreGroup`: one Group's state, without its log, for hosts that keep the log in their own
//! files (the Node/Deno file store of `js/src/file-store.js`). The host streams stored events
//! in (`applyStored`), decides commands (`submit`: accept and apply; the host then writes the
//! event and syncs before it answers), and asks for the redacted form of an event it must
//! erase (`redactEvent` in [`crate::codec`]). Memory holds the state, never the log.

use mwp_core::snapshot::Snapshot;
use mwp_core::{accept, Decision, Error, Event, GroupState, Id, Limits};
use serde_json::json;
use wasm_bindgen::prelude::*;

use crate::authority::{decision_to_js, frontier_of, state_hash_of};
use crate::codec::{command_from_js, num, parse_public_key, parse_secret_key, to_js, uint};
use crate::error::StoreError;
use crate::frames;

/// One Group's state, for a host that stores the log itself.
#[wasm_bindgen]
pub struct StoreGroup {
    state: Option<GroupState>,
    limits: Limits,
}

impl Default for StoreGroup {
    fn default() -> Self {
        StoreGroup::new()
    }
}

#[wasm_bindgen]
impl StoreGroup {
    /// A group with no events yet: the first accepted command must be `open_group`.
    #[wasm_bindgen(constructor)]
    pub fn new() -> StoreGroup {
        StoreGroup {
            state: None,
            limits: Limits::default(),
        }
    }

    /// A group resumed from a signed snapshot (canonical CBOR) that verifies under
    /// `trustedKey` (hex) and belongs to `group`. Throws `SNAPSHOT_INVALID` with the reason.
    #[wasm_bindgen(js_name = fromSnapshot)]
    pub fn from_snapshot(
        bytes: &[u8],
        trusted_key: &str,
        group: &str,
    ) -> Result<StoreGroup, StoreError> {
        let key = parse_public_key(trusted_key)?;
        let group = Id::new(group).map_err(|e| StoreError::malformed(format!("group: {e}")))?;
        let snap = Snapshot::verify_stored(bytes, &key, &group)?;
        Ok(StoreGroup {
            state: Some(snap.state),
            limits: Limits::default(),
        })
    }

    /// Applies one stored event (canonical CBOR), which must carry seq `expectSeq`: decodes
    /// it (non-canonical bytes are `LOG_CORRUPT`), verifies its payload hash and id, and
    /// applies it (chain, group and seq checked). Returns the event's id (hex). On error the
    /// state is unchanged.
    #[wasm_bindgen(js_name = applyStored)]
    pub fn apply_stored(&mut self, bytes: &[u8], expect_seq: f64) -> Result<String, StoreError> {
        let expect = uint(expect_seq, "expectSeq")?;
        let event = Event::from_cbor_verified(bytes)?;
        if event.seq != expect {
            return Err(Error::corrupt(format!(
                "the record of seq {expect} holds event seq {}",
                event.seq
            ))
            .into());
        }
        GroupState::apply_to(&mut self.state, &event)?;
        Ok(event.id.to_hex())
    }

    /// Applies a frame batch of stored events, seq `firstSeq` first (as `applyStored`, one
    /// boundary crossing for many events). Returns the id (hex) of the last one; on error,
    /// the events before the failing one stay applied and the error's `details.seq` names it.
    #[wasm_bindgen(js_name = applyStoredBatch)]
    pub fn apply_stored_batch(
        &mut self,
        batch: &[u8],
        first_seq: f64,
    ) -> Result<String, StoreError> {
        let first = uint(first_seq, "firstSeq")?;
        let mut last = self.head();
        for (seq, bytes) in (first..).zip(frames::split(batch)?) {
            last = self
                .apply_stored(bytes, num(seq))
                .map_err(|e| StoreError(e.0.with("seq", seq)))?;
        }
        Ok(last)
    }

    /// Decides a command (JSON-form object or CBOR bytes) at `nowMs`; an accepted event is
    /// applied to the state at once (the host must make it durable before answering).
    /// Returns `{outcome: "accepted"|"duplicate", receipt, event?, eventCbor?}`; a rejection
    /// throws a `StoreError` with the spec's code and leaves the state unchanged.
    pub fn submit(&mut self, command: JsValue, now_ms: f64) -> Result<JsValue, StoreError> {
        let cmd = command_from_js(command, &self.limits)?;
        let decision = accept(
            self.state.as_ref(),
            &cmd,
            uint(now_ms, "nowMs")?,
            &self.limits,
        )?
        .into_result()?;
        if let Decision::Accepted(event) = &decision {
            // apply checks before it changes anything: on error the state is untouched.
            GroupState::apply_to(&mut self.state, event)?;
        }
        Ok(decision_to_js(&decision)?)
    }

    /// The group's ID (`undefined` before genesis).
    #[wasm_bindgen(getter)]
    pub fn group(&self) -> Option<String> {
        self.state.as_ref().map(|s| s.group.to_string())
    }

    /// The group's org (`undefined` before genesis).
    #[wasm_bindgen(getter)]
    pub fn org(&self) -> Option<String> {
        self.state.as_ref().map(|s| s.org.to_string())
    }

    /// Seq of the last event (0 before genesis).
    #[wasm_bindgen(getter)]
    pub fn seq(&self) -> f64 {
        num(self.state.as_ref().map_or(0, |s| s.seq))
    }

    /// Id (hex) of the last event (all zeros before genesis).
    #[wasm_bindgen(getter)]
    pub fn head(&self) -> String {
        self.state
            .as_ref()
            .map_or(mwp_core::Hash::ZERO, |s| s.head)
            .to_hex()
    }

    /// Whether the group is archived.
    #[wasm_bindgen(getter)]
    pub fn archived(&self) -> bool {
        self.state.as_ref().is_some_and(|s| s.archived)
    }

    /// Seqs of the redacted events, ascending.
    #[wasm_bindgen(getter)]
    pub fn redacted(&self) -> Vec<f64> {
        self.state
            .as_ref()
            .map_or_else(Vec::new, |s| s.redacted.iter().map(|&n| num(n)).collect())
    }

    /// Hash (hex) of the canonical state.
    #[wasm_bindgen(js_name = stateHash)]
    pub fn state_hash(&self) -> Result<String, StoreError> {
        Ok(state_hash_of(self.state.as_ref())?)
    }

    /// The state as a JS object (`null` before genesis).
    pub fn state(&self) -> Result<JsValue, StoreError> {
        Ok(to_js(&self.state)?)
    }

    /// Canonical CBOR of the state (`undefined` before genesis).
    #[wasm_bindgen(js_name = stateCbor)]
    pub fn state_cbor(&self) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.state.as_ref().map(GroupState::to_cbor).transpose()?)
    }

    /// The original receipt of (actor, action), or `undefined`.
    pub fn receipt(&self, actor: &str, action: &str) -> Result<JsValue, StoreError> {
        match self.state.as_ref().and_then(|s| s.receipt(actor, action)) {
            Some(r) => Ok(to_js(&r)?),
            None => Ok(JsValue::UNDEFINED),
        }
    }

    /// IDs of the work items a worker may claim at `nowMs`.
    pub fn frontier(&self, now_ms: f64) -> Result<Vec<String>, StoreError> {
        Ok(frontier_of(self.state.as_ref(), uint(now_ms, "nowMs")?))
    }

    /// The earliest time a `tick` would expire a lease, or `undefined` (also once archived).
    #[wasm_bindgen(js_name = nextDeadline)]
    pub fn next_deadline(&self) -> Option<f64> {
        mwp_core::authority::next_wake(self.state.as_ref()?).map(num)
    }

    /// The `tick` the authority sends at `nowMs`, signed with its secret key seed (hex), as
    /// the core's authority driver names it (`tick.<the seq it will have>`); `undefined`
    /// when no lease deadline has passed, the group is archived or not open yet.
    #[wasm_bindgen(js_name = dueTick)]
    pub fn due_tick(&self, secret_key_hex: &str, now_ms: f64) -> Result<JsValue, StoreError> {
        let key = parse_secret_key(secret_key_hex)?;
        let now = uint(now_ms, "nowMs")?;
        let tick = match &self.state {
            Some(s) => mwp_core::authority::due_tick(s, &key, now)?,
            None => None,
        };
        Ok(match tick {
            Some(cmd) => to_js(&cmd)?,
            None => JsValue::UNDEFINED,
        })
    }

    /// A signed snapshot (canonical CBOR) of the current state with the authority's secret
    /// key seed (hex), and its header fields: `{bytes, seq, state_hash}`.
    pub fn snapshot(&self, secret_key_hex: &str) -> Result<JsValue, StoreError> {
        let key = parse_secret_key(secret_key_hex)?;
        let state = self
            .state
            .as_ref()
            .ok_or_else(|| Error::new(mwp_core::Code::NotFound, "the group is not open yet"))?;
        let snap = Snapshot::build(state, &key)?;
        let out = to_js(&json!({"seq": snap.seq, "state_hash": snap.state_hash}))?;
        let bytes = js_sys::Uint8Array::from(snap.to_cbor()?.as_slice());
        // Setting a property on a fresh plain object cannot fail.
        let _ = js_sys::Reflect::set(&out, &"bytes".into(), &bytes);
        Ok(out)
    }
}
