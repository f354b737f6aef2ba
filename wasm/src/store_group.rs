//! `StoreGroup`: one Group's authority driver, without its log, for hosts that keep the log
//! in their own files (the Node/Deno file store of `js/src/file-store.js`). The host streams
//! stored events in (`applyStored`), decides commands (`submit`: the core's authority driver
//! decides and applies, and says what to persist: the event, the seq a redaction erases, the
//! signed snapshot that is due; the host writes and syncs before it answers), asks for the
//! authority's own tick (`pollTick`), and for the redacted form of an event it must erase
//! (`redactEvent` in [`crate::codec`]). Memory holds the state, never the log.

use std::sync::Arc;

use mwp_core::authority::{self, Authority, Config, Policy, Step};
use mwp_core::chain::Position;
use mwp_core::snapshot::Snapshot;
use mwp_core::{Error, Event, GroupState, Id, Limits};
use serde_json::json;
use wasm_bindgen::prelude::*;

use crate::authority::{decision_to_js, frontier_of, state_hash_of};
use crate::codec::{command_from_js, num, parse_secret_key, to_js, uint};
use crate::error::StoreError;
use crate::frames;

/// One Group's authority driver, for a host that stores the log itself.
#[wasm_bindgen]
pub struct StoreGroup {
    driver: Authority,
    /// The group whose stored log this replays, when the host named it.
    group: Option<Id>,
    /// Where the snapshot this was resumed from stands (its seq and chain head), while no
    /// event has been applied past it: the stored event at that seq is checked against it
    /// ([`StoreGroup::apply_stored`]), not applied.
    snapshot: Option<Position>,
}

/// The driver's key and policy: signing with `secret_key` (hex seed), a signed snapshot after
/// every `snapshot_every` events (`None`: only after `group_archived`), and the
/// Organizations' archival policies from the text of the operator's policy file
/// (`mwp_audit::load_policy`; `None`: no group is sealed).
fn config(
    secret_key: &str,
    snapshot_every: Option<f64>,
    org_policy: Option<String>,
) -> Result<Arc<Config>, Error> {
    let snapshot_every = match snapshot_every {
        Some(n) => Some(uint(n, "snapshotEvery")?),
        None => None,
    };
    let audit = match org_policy {
        Some(text) => Some(Arc::new(mwp_audit::load_policy(&text)?)),
        None => None,
    };
    let policy = Policy {
        snapshot_every,
        audit,
        ..Policy::default()
    };
    Ok(Config::new(parse_secret_key(secret_key)?, policy))
}

impl StoreGroup {
    fn state_ref(&self) -> Option<&GroupState> {
        self.driver.state()
    }

    fn limits(&self) -> &Limits {
        &self.driver.policy().limits
    }
}

#[wasm_bindgen]
impl StoreGroup {
    /// A group with no events yet, under the authority signing with `secretKey` (hex seed)
    /// and snapshotting every `snapshotEvery` events (`null`: only on archive). The first
    /// accepted command must be an `open_group` naming that key. With `group`, the log
    /// replayed into it with `applyStored` must be that group's (its first event belongs to
    /// `group`): a log stored under another group's name is `LOG_CORRUPT`. `orgPolicy`: the
    /// text of the operator's Organization policy file (`mwp.org-policy.v1`), under which an
    /// archived group of a named org is sealed (`MALFORMED` if it does not parse).
    #[wasm_bindgen(constructor)]
    pub fn new(
        secret_key: &str,
        snapshot_every: Option<f64>,
        group: Option<String>,
        org_policy: Option<String>,
    ) -> Result<StoreGroup, StoreError> {
        let group = match group {
            Some(g) => Some(Id::new(g).map_err(|e| StoreError::malformed(format!("group: {e}")))?),
            None => None,
        };
        Ok(StoreGroup {
            driver: Authority::new(config(secret_key, snapshot_every, org_policy)?),
            group,
            snapshot: None,
        })
    }

    /// A group resumed from a signed snapshot (canonical CBOR) that verifies under the
    /// public half of `secretKey` and belongs to `group`; `snapshotEvery` and `orgPolicy` as
    /// for the constructor. Throws `SNAPSHOT_INVALID` with the reason.
    #[wasm_bindgen(js_name = fromSnapshot)]
    pub fn from_snapshot(
        bytes: &[u8],
        secret_key: &str,
        group: &str,
        snapshot_every: Option<f64>,
        org_policy: Option<String>,
    ) -> Result<StoreGroup, StoreError> {
        let config = config(secret_key, snapshot_every, org_policy)?;
        let group = Id::new(group).map_err(|e| StoreError::malformed(format!("group: {e}")))?;
        let snap = Snapshot::verify_stored(bytes, &config.public_key(), &group)?;
        Ok(StoreGroup {
            snapshot: Some(Position::from_snapshot(&snap)),
            driver: Authority::restore(config, Some(snap.state)),
            group: Some(group),
        })
    }

    /// Applies one stored event (canonical CBOR), which must carry seq `expectSeq`: decodes
    /// it (non-canonical bytes are `LOG_CORRUPT`), verifies its payload hash and id, and
    /// applies it (chain, group and seq checked). The event at the seq of the snapshot this
    /// was resumed from (`fromSnapshot`), before any later one, is not applied but checked:
    /// its id must be the snapshot's chain head (the core's `chain::Position::check_last`),
    /// else `LOG_CORRUPT` "event N is not the snapshot's chain head". Returns the event's id
    /// (hex). On error the state is unchanged.
    #[wasm_bindgen(js_name = applyStored)]
    pub fn apply_stored(&mut self, bytes: &[u8], expect_seq: f64) -> Result<String, StoreError> {
        let expect = uint(expect_seq, "expectSeq")?;
        let event = Event::from_cbor_verified(bytes)?;
        if event.seq != expect {
            return Err(Error::corrupt(format!(
                "record seq {expect} holds event seq {}",
                event.seq
            ))
            .into());
        }
        if let Some(at) = self.snapshot.filter(|at| at.seq == event.seq) {
            at.check_last(&event.id)
                .map_err(|e| Error::corrupt(e.to_string()))?;
            return Ok(event.id.to_hex());
        }
        match &self.group {
            Some(group) => self.driver.handle_stored(group, &event)?,
            None => self.driver.handle_logged(&event)?,
        }
        self.snapshot = None;
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

    /// Decides a command (JSON-form object or CBOR bytes) at `nowMs` with the core's
    /// authority driver; an accepted event is applied to the state at once (the host must
    /// make it durable before answering). Returns `{decision, erase?, snapshot?}`: the
    /// decision `{outcome: "accepted"|"duplicate", receipt, event?, eventCbor?}`, the seq
    /// whose stored values a redaction erases once the event is durable, and the signed
    /// snapshot that is due after it (`{bytes, seq, state_hash}`, to store once the event is
    /// durable), and `seal`: the Organization's policy (`{recipients, retain_days,
    /// remove_plain}`) when the event archives a group whose org has one: the host seals
    /// the audit log (`AuditSealer`) once the event and the final snapshot are durable. A
    /// rejection throws a `StoreError` with the spec's code and changes nothing.
    pub fn submit(&mut self, command: JsValue, now_ms: f64) -> Result<JsValue, StoreError> {
        let cmd = command_from_js(command, self.limits())?;
        let out = js_sys::Object::new();
        let commit = match self.driver.handle_command(&cmd, uint(now_ms, "nowMs")?)? {
            Step::Accepted(commit) => commit,
            step => {
                let decision = decision_to_js(&step.into_decision().into_result()?)?;
                // Setting a property on a fresh plain object cannot fail.
                let _ = js_sys::Reflect::set(&out, &"decision".into(), &decision);
                return Ok(out.into());
            }
        };
        let snapshot = match &commit.snapshot {
            Some(due) => Some(snapshot_to_js(&due.sign()?)?),
            None => None,
        };
        let erase = commit.erase;
        let seal = match &commit.seal {
            Some(policy) => Some(to_js(policy)?),
            None => None,
        };
        let decision = decision_to_js(&commit.into_decision())?;
        let _ = js_sys::Reflect::set(&out, &"decision".into(), &decision);
        if let Some(seq) = erase {
            let _ = js_sys::Reflect::set(&out, &"erase".into(), &num(seq).into());
        }
        if let Some(snapshot) = snapshot {
            let _ = js_sys::Reflect::set(&out, &"snapshot".into(), &snapshot);
        }
        if let Some(seal) = seal {
            let _ = js_sys::Reflect::set(&out, &"seal".into(), &seal);
        }
        Ok(out.into())
    }

    /// Whether this store may sign for the group (its ticks, snapshots and heads) with its
    /// key: the core's rule (`mwp_core::authority::check_store_key`), which a host asks once
    /// the group's state is restored from its log and snapshot, before it writes or signs
    /// anything for it. Throws `STORAGE` naming `keyFile` (where the host read its key from),
    /// the group and both public keys (`details.file`, `group`, `authority_key`, `key`) when
    /// the group is not archived and names another `authority_key` in its `open_group`.
    /// Nothing to check before genesis.
    #[wasm_bindgen(js_name = checkStoreKey)]
    pub fn check_store_key(&self, key_file: &str) -> Result<(), StoreError> {
        let (Some(state), Some(config)) = (self.state_ref(), self.driver.config()) else {
            return Ok(());
        };
        Ok(authority::check_store_key(
            state,
            &config.public_key(),
            key_file,
        )?)
    }

    /// The group's ID (`undefined` before genesis).
    #[wasm_bindgen(getter)]
    pub fn group(&self) -> Option<String> {
        self.state_ref().map(|s| s.group.to_string())
    }

    /// The group's org (`undefined` before genesis).
    #[wasm_bindgen(getter)]
    pub fn org(&self) -> Option<String> {
        self.state_ref().map(|s| s.org.to_string())
    }

    /// Seq of the last event (0 before genesis).
    #[wasm_bindgen(getter)]
    pub fn seq(&self) -> f64 {
        num(self.state_ref().map_or(0, |s| s.seq))
    }

    /// Id (hex) of the last event (all zeros before genesis).
    #[wasm_bindgen(getter)]
    pub fn head(&self) -> String {
        self.state_ref()
            .map_or(mwp_core::Hash::ZERO, |s| s.head)
            .to_hex()
    }

    /// Whether the group is archived.
    #[wasm_bindgen(getter)]
    pub fn archived(&self) -> bool {
        self.state_ref().is_some_and(|s| s.archived)
    }

    /// The Organization's policy (`{recipients, retain_days, remove_plain}`) the group must
    /// be sealed under, when it is archived and its org has one (`Authority::seal_due`):
    /// what a host checks on open, to finish a seal a crash interrupted. `undefined`
    /// otherwise.
    #[wasm_bindgen(getter, js_name = sealDue)]
    pub fn seal_due(&self) -> Result<JsValue, StoreError> {
        match self.driver.seal_due() {
            Some(policy) => Ok(to_js(policy)?),
            None => Ok(JsValue::UNDEFINED),
        }
    }

    /// Whether stored event `seq` is served in its redacted form whatever its record holds
    /// (`authority::serves_redacted`): its redaction is in the state, and its erasure may
    /// not be done yet (an erasure a writer began, read by a read-only open before the
    /// writer finished it). `MALFORMED` for a `seq` that is not a count.
    #[wasm_bindgen(js_name = servesRedacted)]
    pub fn serves_redacted(&self, seq: f64) -> Result<bool, StoreError> {
        let seq = uint(seq, "seq")?;
        Ok(self
            .state_ref()
            .is_some_and(|s| authority::serves_redacted(s, seq)))
    }

    /// Seqs of the redacted events, ascending.
    #[wasm_bindgen(getter)]
    pub fn redacted(&self) -> Vec<f64> {
        self.state_ref()
            .map_or_else(Vec::new, |s| s.redacted.iter().map(|&n| num(n)).collect())
    }

    /// Hash (hex) of the canonical state.
    #[wasm_bindgen(js_name = stateHash)]
    pub fn state_hash(&self) -> Result<String, StoreError> {
        Ok(state_hash_of(self.state_ref())?)
    }

    /// The state as a JS object (`null` before genesis).
    pub fn state(&self) -> Result<JsValue, StoreError> {
        Ok(to_js(&self.state_ref())?)
    }

    /// Canonical CBOR of the state (`undefined` before genesis).
    #[wasm_bindgen(js_name = stateCbor)]
    pub fn state_cbor(&self) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.state_ref().map(GroupState::to_cbor).transpose()?)
    }

    /// The original receipt of (actor, action), or `undefined`.
    pub fn receipt(&self, actor: &str, action: &str) -> Result<JsValue, StoreError> {
        match self.state_ref().and_then(|s| s.receipt(actor, action)) {
            Some(r) => Ok(to_js(&r)?),
            None => Ok(JsValue::UNDEFINED),
        }
    }

    /// IDs of the work items a worker may claim at `nowMs`.
    pub fn frontier(&self, now_ms: f64) -> Result<Vec<String>, StoreError> {
        Ok(frontier_of(self.state_ref(), uint(now_ms, "nowMs")?))
    }

    /// The earliest time a `tick` would expire a lease, or `undefined` (also once archived):
    /// the driver's next wake.
    #[wasm_bindgen(js_name = nextDeadline)]
    pub fn next_deadline(&self) -> Option<f64> {
        self.driver.next_wake().map(num)
    }

    /// The `tick` the authority sends at `nowMs`, as the core's authority driver names and
    /// signs it (`tick.<the seq it will have>`); `undefined` when no lease deadline has
    /// passed, the group is archived or not open yet. Submit it like any command.
    #[wasm_bindgen(js_name = pollTick)]
    pub fn poll_tick(&self, now_ms: f64) -> Result<JsValue, StoreError> {
        Ok(match self.driver.poll_tick(uint(now_ms, "nowMs")?)? {
            Some(cmd) => to_js(&cmd)?,
            None => JsValue::UNDEFINED,
        })
    }

    /// A signed snapshot (canonical CBOR) of the current state with the authority's key, and
    /// its header fields: `{bytes, seq, state_hash}`.
    pub fn snapshot(&self) -> Result<JsValue, StoreError> {
        Ok(snapshot_to_js(&self.driver.snapshot()?)?)
    }
}

/// `{bytes, seq, state_hash}` of a signed snapshot.
fn snapshot_to_js(snap: &Snapshot) -> Result<JsValue, Error> {
    let out = to_js(&json!({"seq": snap.seq, "state_hash": snap.state_hash}))?;
    let bytes = js_sys::Uint8Array::from(snap.to_cbor()?.as_slice());
    // Setting a property on a fresh plain object cannot fail.
    let _ = js_sys::Reflect::set(&out, &"bytes".into(), &bytes);
    Ok(out)
}
