//! The IndexedDB authority ([`IdbAuthority`]): the core's authority driver over the store of
//! [`crate::idb_store`], one `readwrite` transaction per `submit` batch. In the `full` build
//! only; the dashboard build carries the replica alone.

use mwp_core::authority::{Authority, Config, Policy, Step};
use mwp_core::{Code, Error, GroupState, Hash};
use serde_json::json;
use wasm_bindgen::prelude::*;

use crate::authority::decision_to_js;
use crate::codec::{command_from_js, count, num, parse_secret_key, to_js, uint};
use crate::error::StoreError;
use crate::idb_store::{group_id, unpoisoned, Checkpoint, Store, DEFAULT_CHECKPOINT_EVERY};
use crate::replica::{frontier_of, state_hash_of};

/// An authority whose log lives in IndexedDB, over the core's authority driver. Each
/// `submit` call is one transition: one `readwrite` transaction for the whole batch. The
/// driver's snapshot cadence decides when the state is checkpointed. With a key, the driver
/// also signs each due snapshot once its batch is durable, and the latest is kept in memory
/// (`latestSnapshot`): IndexedDB persists the unsigned checkpoint, from which it is signed
/// again on request.
#[wasm_bindgen]
pub struct IdbAuthority {
    store: Store,
    driver: Authority,
    poisoned: Option<Error>,
    latest_snapshot: Option<Vec<u8>>,
}

impl IdbAuthority {
    fn check(&self) -> Result<(), Error> {
        unpoisoned(&self.poisoned)
    }

    async fn submit_inner(
        &mut self,
        commands: Vec<JsValue>,
        now_ms: f64,
        abort: bool,
    ) -> Result<JsValue, Error> {
        self.check()?;
        let now = uint(now_ms, "nowMs")?;
        let mut decided = Vec::with_capacity(commands.len());
        let mut events = Vec::new();
        let mut due = false;
        let mut signed = None;
        for command in commands {
            let limits = &self.driver.policy().limits;
            let result = command_from_js(command, limits).and_then(|cmd| {
                if cmd.group != self.store.group {
                    return Err(Error::new(
                        Code::WrongGroup,
                        format!(
                            "the command is for group {}, this store holds {}",
                            cmd.group, self.store.group
                        ),
                    ));
                }
                Ok(match self.driver.handle_command(&cmd, now)? {
                    Step::Accepted(commit) => {
                        // The stored values a redaction erases are found by `erasures`
                        // below, from the events themselves.
                        due |= commit.snapshot.is_some();
                        if let Some(snapshot) = commit.snapshot.as_ref().filter(|d| d.signable()) {
                            signed = Some(snapshot.sign_stored()?.0);
                        }
                        events.push(((*commit.event).clone(), commit.bytes.clone()));
                        commit.into_decision()
                    }
                    step => step.into_decision(),
                })
            });
            decided.push(result);
        }
        // The state after the batch stands for the snapshot the driver made due in it.
        let checkpoint = match self.driver.state() {
            Some(s) if due => Some(Checkpoint::of(s)?),
            _ => None,
        };
        let write = self.store.write_transition(events, true, checkpoint, abort);
        if let Err(e) = write.await {
            self.poisoned = Some(e.clone());
            return Err(e);
        }
        if signed.is_some() {
            self.latest_snapshot = signed;
        }
        let results = js_sys::Array::new();
        for result in decided {
            let value = match result {
                Ok(decision) => decision_to_js(&decision)?,
                Err(error) => to_js(&json!({"outcome": "rejected", "error": error}))?,
            };
            results.push(&value);
        }
        Ok(results.into())
    }
}

#[wasm_bindgen]
impl IdbAuthority {
    /// Opens (creating if needed) the store `name` for `group` and rebuilds the state from
    /// its last checkpoint and the events after it. `checkpointEvery` (default 1000) is the
    /// driver's snapshot cadence: the state is checkpointed in the transaction of every
    /// batch holding a seq that is a multiple of it, and of a `group_archived`. With
    /// `secretKey` (hex seed) the authority signs its own ticks (`tick`) and accepts only an
    /// `open_group` naming that key; without one it holds no key (any `authority_key`, no
    /// ticks).
    pub async fn open(
        name: String,
        group: String,
        checkpoint_every: Option<f64>,
        secret_key: Option<String>,
    ) -> Result<IdbAuthority, StoreError> {
        let group = group_id(&group)?;
        let checkpoint_every = match checkpoint_every {
            Some(n) => uint(n, "checkpointEvery")?.max(1),
            None => DEFAULT_CHECKPOINT_EVERY,
        };
        let policy = Policy {
            snapshot_every: Some(checkpoint_every),
            ..Policy::default()
        };
        let key = secret_key.as_deref().map(parse_secret_key).transpose()?;
        let store = Store::open(&name, group).await?;
        let (state, _) = store.load().await?;
        let driver = match key {
            Some(key) => Authority::restore(Config::new(key, policy), state),
            None => Authority::keyless(policy, state),
        };
        Ok(IdbAuthority {
            store,
            driver,
            poisoned: None,
            latest_snapshot: None,
        })
    }

    /// Sends the authority's own `tick` if a lease deadline has passed at `nowMs` (the core
    /// names and signs it) and writes it as `submit` does: its result, or `undefined` when
    /// none is due or this authority holds no key.
    pub async fn tick(&mut self, now_ms: f64) -> Result<JsValue, StoreError> {
        self.check()?;
        let now = uint(now_ms, "nowMs")?;
        let Some(tick) = self.driver.poll_tick(now)? else {
            return Ok(JsValue::UNDEFINED);
        };
        let results = self
            .submit_inner(vec![to_js(&tick)?], now_ms, false)
            .await?;
        Ok(js_sys::Array::from(&results).get(0))
    }

    /// Decides commands in order (each sees the ones before) and writes every accepted event
    /// with its receipt in one transaction. Resolves, once that is durable, to one result per
    /// command: `{outcome: "accepted"|"duplicate", receipt, event?, eventCbor?}` or
    /// `{outcome: "rejected", error}`. A storage failure rejects the promise with `STORAGE`
    /// and poisons the store.
    pub async fn submit(
        &mut self,
        commands: Vec<JsValue>,
        now_ms: f64,
    ) -> Result<JsValue, StoreError> {
        Ok(self.submit_inner(commands, now_ms, false).await?)
    }

    /// Test hook: like `submit`, but aborts the transaction after issuing every write.
    #[doc(hidden)]
    #[wasm_bindgen(js_name = submitThenAbort)]
    pub async fn submit_then_abort(
        &mut self,
        commands: Vec<JsValue>,
        now_ms: f64,
    ) -> Result<JsValue, StoreError> {
        Ok(self.submit_inner(commands, now_ms, true).await?)
    }

    /// Stored events after `after`, at most `limit`, as a frame batch.
    pub async fn events(&self, after: f64, limit: Option<f64>) -> Result<Vec<u8>, StoreError> {
        self.check()?;
        Ok(self
            .store
            .events(uint(after, "after")?, count(limit, "limit")?)
            .await?)
    }

    /// Seq of the last event (0 before genesis).
    #[wasm_bindgen(getter)]
    pub fn seq(&self) -> f64 {
        num(self.driver.state().map_or(0, |s| s.seq))
    }

    /// Id (hex) of the last event.
    #[wasm_bindgen(getter)]
    pub fn head(&self) -> String {
        self.driver.state().map_or(Hash::ZERO, |s| s.head).to_hex()
    }

    /// Hash (hex) of the canonical state.
    #[wasm_bindgen(js_name = stateHash)]
    pub fn state_hash(&self) -> Result<String, StoreError> {
        Ok(state_hash_of(self.driver.state())?)
    }

    /// The state as a JS object (`null` before genesis).
    pub fn state(&self) -> Result<JsValue, StoreError> {
        Ok(to_js(&self.driver.state())?)
    }

    /// Canonical CBOR of the state (`undefined` before genesis).
    #[wasm_bindgen(js_name = stateCbor)]
    pub fn state_cbor(&self) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.driver.state().map(GroupState::to_cbor).transpose()?)
    }

    /// The original receipt of (actor, action), or `undefined`.
    pub fn receipt(&self, actor: &str, action: &str) -> Result<JsValue, StoreError> {
        Ok(
            match self.driver.state().and_then(|s| s.receipt(actor, action)) {
                Some(r) => to_js(&r)?,
                None => JsValue::UNDEFINED,
            },
        )
    }

    /// IDs of the work items a worker may claim at `nowMs`.
    pub fn frontier(&self, now_ms: f64) -> Result<Vec<String>, StoreError> {
        Ok(frontier_of(self.driver.state(), uint(now_ms, "nowMs")?))
    }

    /// The earliest time a `tick` would expire a lease, or `undefined`.
    #[wasm_bindgen(js_name = nextDeadline)]
    pub fn next_deadline(&self) -> Option<f64> {
        self.driver.next_wake().map(num)
    }

    /// The canonical CBOR of the latest signed snapshot the driver's cadence made due since
    /// this store was opened (only with `secretKey`), or `undefined`.
    #[wasm_bindgen(js_name = latestSnapshot)]
    pub fn latest_snapshot(&self) -> Option<Vec<u8>> {
        self.latest_snapshot.clone()
    }

    /// Closes the connection (after pending transactions finish).
    pub fn close(&self) {
        self.store.db.close();
    }
}
