//! `Authority`: one Group's authority in memory — decide, append, replay — over
//! [`mwp_core::memory::MemoryGroup`] and so over the core's authority driver. Hosts that
//! persist elsewhere (IndexedDB, files) use `decide` and `append` with their own write in
//! between, or the stores of [`crate::idb_store`].

use mwp_core::authority::{self, Config, Policy};
use mwp_core::memory::MemoryGroup;
use mwp_core::snapshot::Snapshot;
use mwp_core::{Decision, Error, Event, GroupState, Limits};
use serde_json::json;
use wasm_bindgen::prelude::*;

use crate::codec::{command_from_js, num, parse_secret_key, to_js, uint, verified_event_from_js};
use crate::error::AcceptError;
use crate::frames;

/// The JS object describing a decision: `{outcome, receipt, event?, eventCbor?}`.
pub fn decision_to_js(decision: &Decision) -> Result<JsValue, Error> {
    match decision {
        Decision::Accepted(event) => {
            let obj = to_js(&json!({
                "outcome": "accepted",
                "receipt": event.receipt(),
                "event": &**event,
            }))?;
            let bytes = js_sys::Uint8Array::from(event.to_cbor()?.as_slice());
            // Setting a property on a fresh plain object cannot fail.
            let _ = js_sys::Reflect::set(&obj, &"eventCbor".into(), &bytes);
            Ok(obj)
        }
        Decision::Duplicate(receipt) => to_js(&json!({"outcome": "duplicate", "receipt": receipt})),
        Decision::Rejected(r) => to_js(&json!({"outcome": "rejected", "error": r})),
    }
}

// Shared with the replica, which the viewer build has without this module.
pub use crate::replica::{frontier_of, state_hash_of};

/// One Group's authority, in memory.
#[wasm_bindgen]
pub struct Authority {
    group: MemoryGroup,
}

impl Default for Authority {
    fn default() -> Self {
        Authority {
            group: MemoryGroup::from(authority::Authority::keyless(Policy::default(), None)),
        }
    }
}

impl Authority {
    /// The state, once the group is open.
    pub fn group_state(&self) -> Option<&GroupState> {
        self.group.state()
    }

    fn limits(&self) -> &Limits {
        &self.group.driver().policy().limits
    }

    /// Decides with the core's authority driver and keeps what an accepted command commits.
    fn submit_one(&mut self, cmd: &mwp_core::Command, now_ms: u64) -> Result<Decision, Error> {
        self.group.submit(cmd, now_ms)
    }
}

#[wasm_bindgen]
impl Authority {
    /// An authority with no group yet: the first accepted command must be `open_group`.
    /// With `secretKey` (a hex seed) it signs its own ticks (`tick`) and snapshots, keeps a
    /// signed snapshot at the core's cadence, and accepts only an `open_group` naming that
    /// key's public half; without one it holds no key: it accepts an `open_group` naming any
    /// `authority_key`, sends no ticks, and signs snapshots with the key `snapshot` is given.
    /// `snapshotEvery` is the cadence of the kept snapshot (default 100,000 events).
    #[wasm_bindgen(constructor)]
    pub fn new(
        secret_key: Option<String>,
        snapshot_every: Option<f64>,
    ) -> Result<Authority, AcceptError> {
        let Some(hex) = secret_key else {
            return Ok(Authority::default());
        };
        let mut policy = Policy::default();
        if let Some(n) = snapshot_every {
            policy.snapshot_every = Some(uint(n, "snapshotEvery")?);
        }
        let config = Config::new(parse_secret_key(&hex)?, policy);
        Ok(Authority {
            group: MemoryGroup::new(config),
        })
    }

    /// Rebuilds an authority from a frame batch of stored events (seq 1 first), verifying
    /// every event and the chain. `secretKey` as for the constructor.
    #[wasm_bindgen(js_name = fromLog)]
    pub fn from_log(
        frames_batch: &[u8],
        secret_key: Option<String>,
    ) -> Result<Authority, AcceptError> {
        let mut authority = Authority::new(secret_key, None)?;
        for bytes in frames::split(frames_batch)? {
            let event = Event::from_cbor_verified(bytes)?;
            authority.group.append(&event)?;
        }
        Ok(authority)
    }

    /// Decides a command (JSON-form object or CBOR bytes) at `nowMs` and, if accepted,
    /// appends and applies its event. Returns `{outcome: "accepted"|"duplicate", receipt,
    /// event?, eventCbor?}`; a rejection throws an `AcceptError` with the spec's code.
    pub fn submit(&mut self, command: JsValue, now_ms: f64) -> Result<JsValue, AcceptError> {
        let cmd = command_from_js(command, self.limits())?;
        let decision = self
            .submit_one(&cmd, uint(now_ms, "nowMs")?)?
            .into_result()?;
        Ok(decision_to_js(&decision)?)
    }

    /// Decides many commands in order, each seeing the ones before. Rejections are values:
    /// returns `{results, events}` where `results[i]` is the decision object of command `i`
    /// or `{outcome: "rejected", error}`, and `events` is a frame batch of the new events.
    #[wasm_bindgen(js_name = submitBatch)]
    pub fn submit_batch(
        &mut self,
        commands: Vec<JsValue>,
        now_ms: f64,
    ) -> Result<JsValue, AcceptError> {
        let now = uint(now_ms, "nowMs")?;
        let results = js_sys::Array::new();
        let mut batch = Vec::new();
        for command in commands {
            let decided =
                command_from_js(command, self.limits()).and_then(|cmd| self.submit_one(&cmd, now));
            let result = match decided {
                Ok(decision) => {
                    if let Decision::Accepted(event) = &decision {
                        frames::push(&mut batch, &event.to_cbor()?)?;
                    }
                    decision_to_js(&decision)?
                }
                Err(error) => to_js(&json!({"outcome": "rejected", "error": error}))?,
            };
            results.push(&result);
        }
        let out = js_sys::Object::new();
        let _ = js_sys::Reflect::set(&out, &"results".into(), &results);
        let _ = js_sys::Reflect::set(
            &out,
            &"events".into(),
            &js_sys::Uint8Array::from(batch.as_slice()),
        );
        Ok(out.into())
    }

    /// Decides a command without appending anything: for hosts that make the event durable
    /// first and then call `append`.
    pub fn decide(&self, command: JsValue, now_ms: f64) -> Result<JsValue, AcceptError> {
        let cmd = command_from_js(command, self.limits())?;
        let decision = self
            .group
            .driver()
            .check(&cmd, uint(now_ms, "nowMs")?)?
            .into_result()?;
        Ok(decision_to_js(&decision)?)
    }

    /// Appends and applies an accepted event (CBOR bytes or JSON form). Throws
    /// `LOG_CORRUPT` if it does not verify or does not follow the last event.
    pub fn append(&mut self, event: JsValue) -> Result<(), AcceptError> {
        let event = verified_event_from_js(event)?;
        Ok(self.group.append(&event)?)
    }

    /// Seq of the last event (0 before genesis).
    #[wasm_bindgen(getter)]
    pub fn seq(&self) -> f64 {
        num(self.group.state().map_or(0, |s| s.seq))
    }

    /// Id (hex) of the last event (all zeros before genesis).
    #[wasm_bindgen(getter)]
    pub fn head(&self) -> String {
        self.group
            .state()
            .map_or(mwp_core::Hash::ZERO, |s| s.head)
            .to_hex()
    }

    /// Hash (hex) of the canonical state.
    #[wasm_bindgen(js_name = stateHash)]
    pub fn state_hash(&self) -> Result<String, AcceptError> {
        Ok(state_hash_of(self.group.state())?)
    }

    /// The state as a JS object (`null` before genesis).
    pub fn state(&self) -> Result<JsValue, AcceptError> {
        Ok(to_js(&self.group.state())?)
    }

    /// Canonical CBOR of the state (`undefined` before genesis).
    #[wasm_bindgen(js_name = stateCbor)]
    pub fn state_cbor(&self) -> Result<Option<Vec<u8>>, AcceptError> {
        Ok(self.group.state().map(GroupState::to_cbor).transpose()?)
    }

    /// Stored events after seq `after`, at most `limit`, as a frame batch.
    pub fn events(&self, after: f64, limit: Option<f64>) -> Result<Vec<u8>, AcceptError> {
        let after = usize::try_from(uint(after, "after")?).unwrap_or(usize::MAX);
        let limit = match limit {
            Some(l) => usize::try_from(uint(l, "limit")?).unwrap_or(usize::MAX),
            None => usize::MAX,
        };
        let log = self.group.log();
        let mut out = Vec::new();
        for bytes in log.iter().skip(after).take(limit) {
            frames::push(&mut out, bytes)?;
        }
        Ok(out)
    }

    /// The original receipt of (actor, action), or `undefined`.
    pub fn receipt(&self, actor: &str, action: &str) -> Result<JsValue, AcceptError> {
        let receipt = self.group.state().and_then(|s| s.receipt(actor, action));
        Ok(match receipt {
            Some(r) => to_js(&r)?,
            None => JsValue::UNDEFINED,
        })
    }

    /// IDs of the work items a worker may claim at `nowMs`.
    pub fn frontier(&self, now_ms: f64) -> Result<Vec<String>, AcceptError> {
        Ok(frontier_of(self.group.state(), uint(now_ms, "nowMs")?))
    }

    /// The earliest time a `tick` would expire a lease, or `undefined` (also once archived):
    /// the driver's next wake.
    #[wasm_bindgen(js_name = nextDeadline)]
    pub fn next_deadline(&self) -> Option<f64> {
        self.group.driver().next_wake().map(num)
    }

    /// Sends the authority's own `tick` if a lease deadline has passed at `nowMs` (the core
    /// names and signs it): its decision object, or `undefined` when none is due or this
    /// authority holds no key.
    pub fn tick(&mut self, now_ms: f64) -> Result<JsValue, AcceptError> {
        match self.group.tick(uint(now_ms, "nowMs")?)? {
            Some((_, decision)) => Ok(decision_to_js(&decision.into_result()?)?),
            None => Ok(JsValue::UNDEFINED),
        }
    }

    /// A signed snapshot of the current state (canonical CBOR), signed with `secretKey` (a
    /// hex seed) or, without it, with this authority's own key.
    pub fn snapshot(&self, secret_key: Option<String>) -> Result<Vec<u8>, AcceptError> {
        let snapshot = match secret_key {
            Some(hex) => {
                let key = parse_secret_key(&hex)?;
                let state = self.group.state().ok_or_else(|| {
                    Error::new(mwp_core::Code::NotFound, "the group is not open yet")
                })?;
                Snapshot::build(state, &key)?
            }
            None => self.group.driver().snapshot()?,
        };
        Ok(snapshot.to_cbor()?)
    }

    /// The latest signed snapshot this authority kept at the core's cadence (after every
    /// 100,000 events and after `group_archived`; only with a key), or `undefined`.
    #[wasm_bindgen(js_name = latestSnapshot)]
    pub fn latest_snapshot(&self) -> Option<Vec<u8>> {
        self.group.latest_snapshot().map(|s| s.bytes.clone())
    }
}
