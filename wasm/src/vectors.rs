//! Cross-host vectors: a transcript run with every byte that matters written down, so the
//! same transcript run natively, in Node, in Deno and in a browser can be compared byte for
//! byte. This module is plain Rust (no JS types): the native test in `tests/` and the wasm
//! export `vectorLines` call the same function.
//!
//! One output line per transcript step:
//! `{"step": N, "out": <the runner's output line>, "state_hash": "<hex>",
//!   "event_cbor": "<hex>"?, "receipt_cbor": "<hex>"?}`
//! where `state_hash` is the hash of the step's group state after the step, `event_cbor` the
//! canonical CBOR of an accepted step's event and `receipt_cbor` that of its receipt (also for
//! a duplicate). A last line checks replay: `{"replay": {"seq", "state_hash", "log_sha256",
//! "replica_cursor", "replica_state_hash"}}` — the log replayed by [`replay_log`], and offered
//! to a fresh replica in a scrambled order with repeats.

use mwp_core::accept::Decision;
use mwp_core::canonical;
use mwp_core::memory::MemoryAuthority;
use mwp_core::replica::Replica;
use mwp_core::transcript::{Host, Runner};
use mwp_core::{Command, Error, Event, GroupState, Hash, Id, Result, WorkState};
use serde_json::{json, Map, Value};
use std::cell::RefCell;
use std::rc::Rc;

/// What the recording host shares with the vector runner between steps.
#[derive(Default)]
struct Shared {
    inner: MemoryAuthority,
    group: Option<Id>,
    event: Option<Vec<u8>>,
    receipt: Option<Vec<u8>>,
}

/// A memory authority that remembers the bytes of the last decision. The transcript
/// runner holds its host for its whole life, so what is recorded lives in a shared cell the
/// vector runner reads after each step.
struct Recording(Rc<RefCell<Shared>>);

impl Host for Recording {
    fn submit(&mut self, cmd: &Command, now_ms: u64) -> Result<Decision> {
        let mut shared = self.0.borrow_mut();
        shared.group = Some(cmd.group.clone());
        let decision = shared.inner.submit(cmd, now_ms)?;
        match &decision {
            Decision::Accepted(event) => {
                shared.event = Some(event.to_cbor()?);
                shared.receipt = Some(canonical::to_vec(&event.receipt())?);
            }
            Decision::Duplicate(receipt) => shared.receipt = Some(canonical::to_vec(receipt)?),
            Decision::Rejected(_) => {}
        }
        Ok(decision)
    }
    fn restart(&mut self) -> Result<()> {
        self.0.borrow_mut().inner.restart()
    }
    fn state(&self, group: &Id) -> Option<GroupState> {
        Host::state(&self.0.borrow().inner, group)
    }
    fn work_state(&self, group: &Id, work: &Id) -> Option<WorkState> {
        self.0.borrow().inner.work_state(group, work)
    }
}

/// Replays a frame batch of stored events (seq 1 first): decode, verify, check the chain and
/// apply each. Returns the last seq and the state hash.
pub fn replay_log(batch: &[u8]) -> Result<(u64, Hash)> {
    let mut state: Option<GroupState> = None;
    for bytes in crate::frames::split(batch)? {
        let event = Event::from_cbor_verified(bytes)?;
        GroupState::apply_to(&mut state, &event)?;
    }
    let seq = state.as_ref().map_or(0, |s| s.seq);
    let hash = state.as_ref().map_or(Ok(Hash::ZERO), GroupState::hash)?;
    Ok((seq, hash))
}

/// Runs a transcript and returns its vector lines (see the module doc).
pub fn vector_lines(text: &str) -> Result<Vec<String>> {
    let shared = Rc::new(RefCell::new(Shared::default()));
    let mut host = Recording(Rc::clone(&shared));
    let mut runner = Runner::new(&mut host);
    let mut lines = Vec::new();
    for line in text.lines() {
        let Some(out) = runner.run_line(line).pop() else {
            continue;
        };
        let mut s = shared.borrow_mut();
        let step = out.get("step").cloned().unwrap_or(Value::Null);
        let state_hash = match &s.group {
            Some(g) => hash_of(s.inner.group(g).and_then(|g| g.state()))?,
            None => Hash::ZERO,
        };
        let mut line = Map::new();
        line.insert("step".into(), step);
        line.insert("out".into(), out);
        line.insert("state_hash".into(), json!(state_hash));
        if let Some(e) = s.event.take() {
            line.insert("event_cbor".into(), json!(hex::encode(e)));
        }
        if let Some(r) = s.receipt.take() {
            line.insert("receipt_cbor".into(), json!(hex::encode(r)));
        }
        lines.push(to_line(&Value::Object(line))?);
    }
    drop(runner);
    let s = shared.borrow();
    if let Some(group) = &s.group {
        let log = s
            .inner
            .group(group)
            .map(|g| g.log().to_vec())
            .unwrap_or_default();
        lines.push(to_line(&replay_line(&log, group)?)?);
    }
    Ok(lines)
}

fn hash_of(state: Option<&GroupState>) -> Result<Hash> {
    state.map_or(Ok(Hash::ZERO), GroupState::hash)
}

fn to_line(value: &Value) -> Result<String> {
    serde_json::to_string(value).map_err(|e| Error::malformed(format!("vector line: {e}")))
}

/// The deterministic delivery order of the replica check: a scramble of `0..n` with every
/// third event offered twice.
pub fn delivery_order(n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    // A fixed permutation: sort by a multiplicative hash of the index.
    order.sort_by_key(|i| (i.wrapping_mul(2_654_435_761) % 1_000_003, *i));
    let repeats: Vec<usize> = (0..n).step_by(3).collect();
    order.extend(repeats);
    order
}

fn replay_line(log: &[Vec<u8>], group: &Id) -> Result<Value> {
    let mut batch = Vec::new();
    for bytes in log {
        crate::frames::push(&mut batch, bytes)?;
    }
    let (seq, state_hash) = replay_log(&batch)?;
    let mut replica = Replica::new(group.clone());
    for i in delivery_order(log.len()) {
        let _ = replica.offer(Event::from_cbor(&log[i])?);
    }
    Ok(json!({"replay": {
        "seq": seq,
        "state_hash": state_hash,
        "log_sha256": hex::encode(canonical::sha256(&batch)),
        "replica_cursor": replica.cursor(),
        "replica_state_hash": replica.state_hash()?,
    }}))
}

/// A deterministic log for benchmarks: a group, then `items` work items each created,
/// claimed, started and submitted (4 events per item, `1 + 4·items` events), as a frame
/// batch. Natively and in wasm it is the same bytes.
pub fn bench_log(items: u32) -> Result<Vec<u8>> {
    let key = |actor: &str| mwp_core::SecretKey::for_transcript(actor);
    let public = |actor: &str| key(actor).public().to_hex();
    let mut authority = MemoryAuthority::new();
    let mut submit = |actor: &str,
                      action: String,
                      now: u64,
                      expect: Option<u64>,
                      body: Value|
     -> Result<()> {
        let mut envelope = json!({"org": "acme", "group": "bench", "actor": actor, "action": action,
            "session": 1, "body": body, "sig": "00".repeat(64)});
        if let Some(e) = expect {
            envelope["expect"] = json!(e);
        }
        let bytes = serde_json::to_vec(&envelope).map_err(|e| Error::malformed(e.to_string()))?;
        let mut cmd = Command::from_json(&bytes, &mwp_core::Limits::default())?;
        cmd.sign(&key(actor))?;
        match authority.submit(&cmd, now)? {
            Decision::Accepted(_) => Ok(()),
            Decision::Duplicate(_) => Err(Error::malformed("bench log: unexpected duplicate")),
            Decision::Rejected(r) => Err(r.into_error()),
        }
    };
    submit(
        "alice",
        "open".into(),
        1000,
        None,
        json!({"type": "open_group", "mission": "m",
        "title": "bench", "authority_key": public("@authority"),
        "members": [{"actor": "alice", "role": "owner", "key": public("alice")},
                    {"actor": "bob", "role": "worker", "key": public("bob")}]}),
    )?;
    for i in 0..items {
        let work = format!("w{i}");
        let now = 2000 + u64::from(i) * 10;
        submit(
            "alice",
            format!("c{i}"),
            now,
            None,
            json!({"type": "create_work", "work": work,
            "contract": {"max_attempts": 3, "backoff_base_ms": 100, "backoff_max_ms": 1000,
                         "cost_budget": 10, "risk": "low"},
            "after": [], "spec": {"n": i}}),
        )?;
        submit(
            "bob",
            format!("k{i}"),
            now,
            Some(1),
            json!({"type": "claim_work", "work": work,
            "lease_ms": 30000, "start_within_ms": 5000}),
        )?;
        let lease = mwp_core::lease::LeaseId::derive(
            &Id::new("bench").map_err(|e| Error::malformed(e.to_string()))?,
            &Id::new(work.clone()).map_err(|e| Error::malformed(e.to_string()))?,
            1,
        )
        .to_hex();
        submit(
            "bob",
            format!("s{i}"),
            now + 1,
            None,
            json!({"type": "start_work", "work": work, "lease": lease}),
        )?;
        submit(
            "bob",
            format!("r{i}"),
            now + 2,
            None,
            json!({"type": "submit", "work": work, "lease": lease, "result": {"ok": i}}),
        )?;
    }
    let group = Id::new("bench").map_err(|e| Error::malformed(e.to_string()))?;
    let mut batch = Vec::new();
    for bytes in authority.group(&group).map(|g| g.log()).unwrap_or_default() {
        crate::frames::push(&mut batch, bytes)?;
    }
    Ok(batch)
}
