//! `Agent` and `AgentImage`: the core's agent driver (SPEC §7) for JavaScript hosts.
//!
//! The driver is sans-IO, here as in Rust: the host feeds it what happened (`handle*`, with
//! the time) and drains what it decided (`poll*`), in this order every time it wakes up:
//!
//! 1. `pollWriteSet()` → `{serial, cbor}`: make the write set durable (one IndexedDB
//!    transaction, one fsynced append), then `handleCommitted(nowMs, serial)`;
//! 2. `pollTransmit()` → a request for the authority (`command`, `fetch_events`,
//!    `lookup_receipt`, `fetch_snapshot`, `ack`); deliver the answer with the matching
//!    `handle*`;
//! 3. `pollDispatch()` → an effect to perform now; report it with `handleEffectOutcome`;
//! 4. `pollNotice()` → news for the application (`run`, `lease_lost`, `uncertain`, …);
//! 5. `pollTimeout()` → when to call `handleTimeout` at the latest.
//!
//! Nothing reaches the network or an effect target before the write set recording it is
//! committed. A restart is `Agent.restore(config, key, image)` with an [`AgentImage`] that
//! committed every write set the host made durable.

use mwp_core::agent::{
    Agent as CoreAgent, AgentImage as CoreImage, Config, Dispatch, Notice, Transmit,
};
use mwp_core::canonical;
use mwp_core::command::EffectMode;
use mwp_core::replica::WriteSet;
use mwp_core::{Error, Hash, Id, Receipt};
use serde::Deserialize;
use serde_json::{json, Value};
use wasm_bindgen::prelude::*;

use crate::authority::{frontier_of, state_hash_of};
use crate::codec::{from_js, json_from_js, num, parse_public_key, parse_secret_key, to_js, uint};
use crate::error::AgentError;
use crate::frames;

/// The configuration as JS gives it: identities required, time budgets optional.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct JsConfig {
    org: Id,
    group: Id,
    actor: Id,
    authority_key: String,
    capacity: Option<u32>,
    lease_ms: Option<u64>,
    start_within_ms: Option<u64>,
    renew_margin_ms: Option<u64>,
    grace_ms: Option<u64>,
    resend_ms: Option<u64>,
    sync_ms: Option<u64>,
    effect_timeout_ms: Option<u64>,
    planner: Option<bool>,
}

fn config_from_js(value: JsValue) -> Result<Config, Error> {
    let c: JsConfig = from_js(value, "agent config")?;
    let key = parse_public_key(&c.authority_key)?;
    let mut config = Config::new(c.org, c.group, c.actor, key);
    let set = |slot: &mut u64, v: Option<u64>| {
        if let Some(v) = v {
            *slot = v;
        }
    };
    if let Some(n) = c.capacity {
        config.capacity = n as usize;
    }
    set(&mut config.lease_ms, c.lease_ms);
    set(&mut config.start_within_ms, c.start_within_ms);
    set(&mut config.renew_margin_ms, c.renew_margin_ms);
    set(&mut config.grace_ms, c.grace_ms);
    set(&mut config.resend_ms, c.resend_ms);
    set(&mut config.sync_ms, c.sync_ms);
    set(&mut config.effect_timeout_ms, c.effect_timeout_ms);
    config.planner = c.planner.unwrap_or(false);
    Ok(config)
}

fn id(value: &str, what: &str) -> Result<Id, Error> {
    Id::new(value).map_err(|e| Error::malformed(format!("{what}: {e}")))
}

fn hash(value: &str, what: &str) -> Result<Hash, Error> {
    Hash::from_hex(value).map_err(|e| Error::malformed(format!("{what}: {e}")))
}

/// A JS value as opaque JSON data (`undefined` → `null`).
fn opaque(value: JsValue) -> Result<Value, Error> {
    if value.is_undefined() {
        return Ok(Value::Null);
    }
    json_from_js(value)
}

/// An error the host hands back (an `MwpError`, its `toJSON()`, or `{code, message, …}`).
fn error_from_js(value: JsValue) -> Result<Error, Error> {
    let json = json_from_js(value)?;
    serde_json::from_value(json).map_err(|e| {
        Error::malformed(format!(
            "error: expected {{code, message, ...details}} with a spec code: {e}"
        ))
    })
}

fn transmit_to_json(t: &Transmit) -> Value {
    match t {
        Transmit::Command(cmd) => json!({"type": "command", "action": cmd.action, "command": cmd}),
        Transmit::FetchEvents { after } => json!({"type": "fetch_events", "after": after}),
        Transmit::LookupReceipt { action } => json!({"type": "lookup_receipt", "action": action}),
        Transmit::FetchSnapshot(r) => json!({"type": "fetch_snapshot", "snapshot": r}),
        Transmit::Ack { cursor } => json!({"type": "ack", "cursor": cursor}),
    }
}

fn dispatch_to_json(d: &Dispatch) -> Value {
    json!({
        "key": d.key,
        "work": d.work,
        "op": d.op,
        "mode": d.mode,
        "irreversible": d.irreversible,
        "target": d.target,
        "attempt": d.attempt,
    })
}

fn notice_to_json(n: &Notice) -> Value {
    match n {
        Notice::Run {
            work,
            lease,
            epoch,
            checkpoint,
            resumed,
        } => json!({
            "type": "run", "work": work, "lease": lease, "epoch": epoch,
            "checkpoint": checkpoint, "resumed": resumed,
        }),
        Notice::Released { work, lease, state } => {
            json!({"type": "released", "work": work, "lease": lease, "state": state})
        }
        Notice::LeaseLost {
            work,
            lease,
            reason,
        } => json!({"type": "lease_lost", "work": work, "lease": lease, "reason": reason}),
        Notice::Suspended { work } => json!({"type": "suspended", "work": work}),
        Notice::Uncertain { key, work, op } => {
            json!({"type": "uncertain", "key": key, "work": work, "op": op})
        }
        Notice::Evidence { action, receipt } => {
            json!({"type": "evidence", "action": action, "receipt": receipt})
        }
        Notice::Rejected {
            action,
            command,
            error,
        } => json!({"type": "rejected", "action": action, "command": command, "error": error}),
        Notice::Dropped { action, reason } => {
            json!({"type": "dropped", "action": action, "reason": reason})
        }
        Notice::Corrupt(error) => json!({"type": "corrupt", "error": error}),
        Notice::Plan { trigger, work } => {
            json!({"type": "plan", "trigger": trigger, "work": work})
        }
    }
}

/// What an agent host keeps: every committed write set folded in. Restarting from it is the
/// ordinary path (`Agent.restore`).
#[wasm_bindgen]
#[derive(Default)]
pub struct AgentImage {
    inner: CoreImage,
}

impl AgentImage {
    /// Wraps a core image.
    pub fn from_core(inner: CoreImage) -> AgentImage {
        AgentImage { inner }
    }

    /// The core image.
    pub fn core(&self) -> &CoreImage {
        &self.inner
    }
}

#[wasm_bindgen]
impl AgentImage {
    /// An empty image (a new agent).
    #[wasm_bindgen(constructor)]
    pub fn new() -> AgentImage {
        AgentImage::default()
    }

    /// An image saved with `toCbor()`.
    #[wasm_bindgen(js_name = fromCbor)]
    pub fn from_cbor(bytes: &[u8]) -> Result<AgentImage, AgentError> {
        let inner = CoreImage::from_canonical(bytes)
            .map_err(|e| Error::corrupt(format!("agent image: {e}")))?;
        Ok(AgentImage { inner })
    }

    /// Canonical CBOR of the image (to store it whole, e.g. to compact a write-set log).
    #[wasm_bindgen(js_name = toCbor)]
    pub fn to_cbor(&self) -> Result<Vec<u8>, AgentError> {
        Ok(canonical::to_vec(&self.inner).map_err(Error::from)?)
    }

    /// Folds in one write set (its canonical CBOR, as `pollWriteSet` gave it). Serials must
    /// follow each other: `STORAGE` otherwise, and nothing changes.
    pub fn commit(&mut self, write_set: &[u8]) -> Result<(), AgentError> {
        let ws = WriteSet::from_canonical(write_set)
            .map_err(|e| Error::corrupt(format!("write set: {e}")))?;
        Ok(self.inner.commit(&ws)?)
    }

    /// Serial of the last committed write set (0 for a new agent).
    #[wasm_bindgen(getter)]
    pub fn serial(&self) -> f64 {
        num(self.inner.serial)
    }

    /// The durable cursor the image holds.
    #[wasm_bindgen(getter)]
    pub fn cursor(&self) -> f64 {
        num(self.inner.replica.cursor)
    }
}

/// One agent (actor, Group): its replica, work queue, leases, outbox and effect journal.
#[wasm_bindgen]
pub struct Agent {
    inner: CoreAgent,
}

#[wasm_bindgen]
impl Agent {
    /// A new agent. `config`: `{org, group, actor, authorityKey}` plus optional `capacity`,
    /// `leaseMs`, `startWithinMs`, `renewMarginMs`, `graceMs`, `resendMs`, `syncMs`,
    /// `effectTimeoutMs`. `secretKey`: the actor's key seed (64 hex digits).
    #[wasm_bindgen(constructor)]
    pub fn new(config: JsValue, secret_key: &str) -> Result<Agent, AgentError> {
        let config = config_from_js(config)?;
        let key = parse_secret_key(secret_key)?;
        Ok(Agent {
            inner: CoreAgent::new(config, key)?,
        })
    }

    /// Reopens an agent from what its host committed.
    pub fn restore(
        config: JsValue,
        secret_key: &str,
        image: &AgentImage,
    ) -> Result<Agent, AgentError> {
        let config = config_from_js(config)?;
        let key = parse_secret_key(secret_key)?;
        Ok(Agent {
            inner: CoreAgent::restore(config, key, &image.inner)?,
        })
    }

    /// The next write set to commit, `{serial, cbor}`, or `undefined`.
    #[wasm_bindgen(js_name = pollWriteSet)]
    pub fn poll_write_set(&mut self) -> Result<JsValue, AgentError> {
        let Some(ws) = self.inner.poll_write_set() else {
            return Ok(JsValue::UNDEFINED);
        };
        let bytes = canonical::to_vec(&ws).map_err(Error::from)?;
        let out = js_sys::Object::new();
        let set = |k: &str, v: &JsValue| js_sys::Reflect::set(&out, &k.into(), v).map(|_| ());
        set("serial", &num(ws.serial).into())
            .and_then(|()| set("cbor", &js_sys::Uint8Array::from(&bytes[..]).into()))
            .map_err(|_| Error::malformed("write set does not convert to JavaScript"))?;
        Ok(out.into())
    }

    /// The next request for the authority, or `undefined`: `{type: "command", action,
    /// command, cbor}` (the signed command in its JSON form and as canonical CBOR),
    /// `{type: "fetch_events", after}`, `{type: "lookup_receipt", action}`,
    /// `{type: "fetch_snapshot", snapshot: {seq, hash, location}}` or `{type: "ack", cursor}`.
    #[wasm_bindgen(js_name = pollTransmit)]
    pub fn poll_transmit(&mut self) -> Result<JsValue, AgentError> {
        let Some(t) = self.inner.poll_transmit() else {
            return Ok(JsValue::UNDEFINED);
        };
        let js = to_js(&transmit_to_json(&t))?;
        if let Transmit::Command(cmd) = &t {
            let bytes = cmd.to_cbor()?;
            js_sys::Reflect::set(
                &js,
                &"cbor".into(),
                &js_sys::Uint8Array::from(&bytes[..]).into(),
            )
            .map_err(|_| Error::malformed("command does not convert to JavaScript"))?;
        }
        Ok(js)
    }

    /// The next effect to perform, `{key, work, op, mode, irreversible, target, attempt}`, or
    /// `undefined`. Pass `key` to the target as its idempotency key.
    #[wasm_bindgen(js_name = pollDispatch)]
    pub fn poll_dispatch(&mut self) -> Result<JsValue, AgentError> {
        match self.inner.poll_dispatch() {
            Some(d) => Ok(to_js(&dispatch_to_json(&d))?),
            None => Ok(JsValue::UNDEFINED),
        }
    }

    /// The next notice, `{type, …}`, or `undefined`. Types: `run`, `released`, `lease_lost`,
    /// `suspended`, `uncertain`, `evidence`, `rejected`, `dropped`, `corrupt`.
    #[wasm_bindgen(js_name = pollNotice)]
    pub fn poll_notice(&mut self) -> Result<JsValue, AgentError> {
        match self.inner.poll_notice() {
            Some(n) => Ok(to_js(&notice_to_json(&n))?),
            None => Ok(JsValue::UNDEFINED),
        }
    }

    /// The latest time to call `handleTimeout`, or `undefined`.
    #[wasm_bindgen(js_name = pollTimeout)]
    pub fn poll_timeout(&self) -> Option<f64> {
        self.inner.poll_timeout().map(num)
    }

    /// Delivers events: a frame batch of canonical CBOR events (as `mwp serve` and
    /// `frameBatch` give them). Events that do not verify become `corrupt` notices.
    #[wasm_bindgen(js_name = handleEvents)]
    pub fn handle_events(&mut self, now_ms: f64, batch: &[u8]) -> Result<(), AgentError> {
        let now = uint(now_ms, "nowMs")?;
        // Every frame decodes, or nothing is delivered; events that decode but do not
        // verify are the replica's to refuse (as `corrupt` notices).
        let events = frames::split(batch)?
            .into_iter()
            .map(mwp_core::Event::from_cbor)
            .collect::<Result<Vec<_>, Error>>()?;
        self.inner.handle_events(now, events);
        Ok(())
    }

    /// The authority's receipt for a command this agent sent.
    #[wasm_bindgen(js_name = handleReceipt)]
    pub fn handle_receipt(
        &mut self,
        now_ms: f64,
        action: &str,
        receipt: JsValue,
    ) -> Result<(), AgentError> {
        let now = uint(now_ms, "nowMs")?;
        let action = id(action, "action")?;
        let receipt: Receipt = from_js(receipt, "receipt")?;
        self.inner.handle_answer(now, &action, Ok(receipt));
        Ok(())
    }

    /// The authority's rejection of a command this agent sent (`{code, message, …}`).
    #[wasm_bindgen(js_name = handleRejection)]
    pub fn handle_rejection(
        &mut self,
        now_ms: f64,
        action: &str,
        error: JsValue,
    ) -> Result<(), AgentError> {
        let now = uint(now_ms, "nowMs")?;
        let action = id(action, "action")?;
        let error = error_from_js(error)?;
        self.inner.handle_answer(now, &action, Err(error));
        Ok(())
    }

    /// The answer to a `lookup_receipt`: the receipt, or `null` when there is none.
    #[wasm_bindgen(js_name = handleLookup)]
    pub fn handle_lookup(
        &mut self,
        now_ms: f64,
        action: &str,
        receipt: JsValue,
    ) -> Result<(), AgentError> {
        let now = uint(now_ms, "nowMs")?;
        let action = id(action, "action")?;
        let receipt: Option<Receipt> = if receipt.is_null() || receipt.is_undefined() {
            None
        } else {
            Some(from_js(receipt, "receipt")?)
        };
        self.inner.handle_lookup(now, &action, receipt);
        Ok(())
    }

    /// A failed `fetch_events` (a `CURSOR_TOO_OLD` answer leads to a `fetch_snapshot`).
    #[wasm_bindgen(js_name = handleFetchError)]
    pub fn handle_fetch_error(&mut self, now_ms: f64, error: JsValue) -> Result<(), AgentError> {
        let now = uint(now_ms, "nowMs")?;
        let error = error_from_js(error)?;
        self.inner.handle_fetch_error(now, &error);
        Ok(())
    }

    /// The bytes of a fetched snapshot; it is verified against the authority key.
    #[wasm_bindgen(js_name = handleSnapshot)]
    pub fn handle_snapshot(&mut self, now_ms: f64, bytes: &[u8]) -> Result<(), AgentError> {
        self.inner.handle_snapshot(uint(now_ms, "nowMs")?, bytes);
        Ok(())
    }

    /// The link to the authority went up or down.
    #[wasm_bindgen(js_name = handleConnectivity)]
    pub fn handle_connectivity(&mut self, now_ms: f64, up: bool) -> Result<(), AgentError> {
        self.inner.handle_connectivity(uint(now_ms, "nowMs")?, up);
        Ok(())
    }

    /// Time passed (call at `pollTimeout()` or later).
    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(&mut self, now_ms: f64) -> Result<(), AgentError> {
        self.inner.handle_timeout(uint(now_ms, "nowMs")?);
        Ok(())
    }

    /// A dispatched effect happened: its outcome and the target's receipt (opaque JSON).
    #[wasm_bindgen(js_name = handleEffectOutcome)]
    pub fn handle_effect_outcome(
        &mut self,
        now_ms: f64,
        key: &str,
        outcome: JsValue,
        receipt: JsValue,
    ) -> Result<(), AgentError> {
        let now = uint(now_ms, "nowMs")?;
        let key = hash(key, "key")?;
        let (outcome, receipt) = (opaque(outcome)?, opaque(receipt)?);
        self.inner
            .handle_effect_outcome(now, &key, outcome, receipt);
        Ok(())
    }

    /// The write set `serial` (and every one before it) is durable.
    #[wasm_bindgen(js_name = handleCommitted)]
    pub fn handle_committed(&mut self, now_ms: f64, serial: f64) -> Result<(), AgentError> {
        let now = uint(now_ms, "nowMs")?;
        self.inner.handle_committed(now, uint(serial, "serial")?);
        Ok(())
    }

    /// Submits the result of held work; returns the command's action ID.
    pub fn submit(
        &mut self,
        now_ms: f64,
        work: &str,
        result: JsValue,
    ) -> Result<String, AgentError> {
        let now = uint(now_ms, "nowMs")?;
        let work = id(work, "work")?;
        Ok(self.inner.submit(now, &work, opaque(result)?)?.to_string())
    }

    /// The rule's answer for a pending trigger (a `plan` notice): the `create_work` bodies
    /// of the items to create, or `[]` for the empty disposition. Returns the action ID
    /// (`expand-<trigger>`).
    pub fn dispose(
        &mut self,
        now_ms: f64,
        trigger: f64,
        work: JsValue,
    ) -> Result<String, AgentError> {
        let now = uint(now_ms, "nowMs")?;
        let trigger = uint(trigger, "trigger")?;
        let work: Vec<mwp_core::command::NewWork> = from_js(work, "work")?;
        Ok(self.inner.dispose(now, trigger, work)?.to_string())
    }

    /// Triggers still lacking this planner's disposition.
    #[wasm_bindgen(js_name = pendingDispositions)]
    pub fn pending_dispositions(&self) -> Vec<f64> {
        self.inner
            .pending_dispositions()
            .into_iter()
            .map(|s| s as f64)
            .collect()
    }

    /// Reports a failure of held work; returns the action ID.
    pub fn fail(
        &mut self,
        now_ms: f64,
        work: &str,
        error: JsValue,
        retryable: bool,
    ) -> Result<String, AgentError> {
        let now = uint(now_ms, "nowMs")?;
        let work = id(work, "work")?;
        Ok(self
            .inner
            .fail(now, &work, opaque(error)?, retryable)?
            .to_string())
    }

    /// Checkpoints running work (the lease is released); returns the action ID.
    pub fn checkpoint(
        &mut self,
        now_ms: f64,
        work: &str,
        data: JsValue,
    ) -> Result<String, AgentError> {
        let now = uint(now_ms, "nowMs")?;
        let work = id(work, "work")?;
        Ok(self
            .inner
            .checkpoint(now, &work, opaque(data)?)?
            .to_string())
    }

    /// Charges cost to running work; returns the action ID.
    pub fn charge(
        &mut self,
        now_ms: f64,
        work: &str,
        cost: f64,
        data: JsValue,
    ) -> Result<String, AgentError> {
        let now = uint(now_ms, "nowMs")?;
        let work = id(work, "work")?;
        let cost = uint(cost, "cost")?;
        let data = if data.is_undefined() || data.is_null() {
            None
        } else {
            Some(json_from_js(data)?.into())
        };
        Ok(self.inner.charge(now, &work, cost, data)?.to_string())
    }

    /// Records the intent of an effect (`mode`: `read_only`, `idempotent` or `undeclared`);
    /// it is dispatched once the intent is accepted. Returns the effect's key (hex).
    #[wasm_bindgen(js_name = intendEffect)]
    pub fn intend_effect(
        &mut self,
        now_ms: f64,
        work: &str,
        op: &str,
        mode: &str,
        irreversible: bool,
        target: JsValue,
    ) -> Result<String, AgentError> {
        let now = uint(now_ms, "nowMs")?;
        let work = id(work, "work")?;
        let op = id(op, "op")?;
        let mode: EffectMode = serde_json::from_value(Value::String(mode.to_owned()))
            .map_err(|e| Error::malformed(format!("mode: {e}")))?;
        let key = self
            .inner
            .intend_effect(now, &work, &op, mode, irreversible, opaque(target)?)?;
        Ok(key.to_hex())
    }

    /// Settles an uncertain effect after finding out whether it happened.
    #[wasm_bindgen(js_name = resolveEffect)]
    pub fn resolve_effect(
        &mut self,
        now_ms: f64,
        key: &str,
        happened: bool,
        receipt: JsValue,
    ) -> Result<(), AgentError> {
        let now = uint(now_ms, "nowMs")?;
        let key = hash(key, "key")?;
        Ok(self
            .inner
            .resolve_effect(now, &key, happened, opaque(receipt)?)?)
    }

    /// Starts a new session (revoking the old one's leases); returns the action ID.
    #[wasm_bindgen(js_name = replaceSession)]
    pub fn replace_session(&mut self, now_ms: f64) -> Result<String, AgentError> {
        Ok(self
            .inner
            .replace_session(uint(now_ms, "nowMs")?)?
            .to_string())
    }

    /// The session number.
    #[wasm_bindgen(getter)]
    pub fn session(&self) -> f64 {
        num(self.inner.session())
    }

    /// Whether the link is up.
    #[wasm_bindgen(getter)]
    pub fn online(&self) -> bool {
        self.inner.online()
    }

    /// The replica's cursor (highest contiguous seq applied).
    #[wasm_bindgen(getter)]
    pub fn cursor(&self) -> f64 {
        num(self.inner.replica().cursor())
    }

    /// The highest cursor whose write set is committed (what an ACK carries).
    #[wasm_bindgen(getter, js_name = durableCursor)]
    pub fn durable_cursor(&self) -> f64 {
        num(self.inner.durable_cursor())
    }

    /// Leases held, by work item: `{work: {id, epoch, expires_at, …}}`.
    pub fn leases(&self) -> Result<JsValue, AgentError> {
        Ok(to_js(self.inner.leases())?)
    }

    /// Commands waiting for their receipt, by base action ID.
    pub fn outbox(&self) -> Result<JsValue, AgentError> {
        Ok(to_js(self.inner.outbox())?)
    }

    /// The effect journal, by key.
    pub fn effects(&self) -> Result<JsValue, AgentError> {
        Ok(to_js(self.inner.effects())?)
    }

    /// The replica's state as a JS object (`null` before genesis).
    pub fn state(&self) -> Result<JsValue, AgentError> {
        Ok(to_js(&self.inner.replica().state())?)
    }

    /// Hash (hex) of the replica's canonical state.
    #[wasm_bindgen(js_name = stateHash)]
    pub fn state_hash(&self) -> Result<String, AgentError> {
        Ok(state_hash_of(self.inner.replica().state())?)
    }

    /// IDs of the work items a worker may claim at `nowMs`.
    pub fn frontier(&self, now_ms: f64) -> Result<Vec<String>, AgentError> {
        Ok(frontier_of(
            self.inner.replica().state(),
            uint(now_ms, "nowMs")?,
        ))
    }
}
