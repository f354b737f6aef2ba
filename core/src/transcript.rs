//! Transcripts (SPEC §12): readable JSON Lines scenarios, one step per line, run against any
//! authority host. The runner has no IO: it takes lines and gives back one JSON output line
//! per step, so the CLI, the tests and the wasm build all run transcripts the same way.
//!
//! Beyond SPEC §12, the runner fills in what a scenario author would otherwise repeat:
//! a missing `org`/`group` repeats the previous step's, a missing `action` becomes
//! `step-N`, and a missing `session` is the actor's current session as the runner has seen it
//! (1, or the epoch of its last accepted `replace_session`). Blank lines are skipped and not
//! counted. A line that is not a valid step fails the run.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::accept::Decision;
use crate::command::Command;
use crate::crypto::{Hash, SecretKey, Signature};
use crate::error::{Error, Result};
use crate::id::{Id, AUTHORITY_ACTOR};
use crate::lease::LeaseId;
use crate::limits::Limits;
use crate::memory::MemoryAuthority;
use crate::replica::Replica;
use crate::snapshot::Snapshot;
use crate::state::GroupState;
use crate::work::WorkState;

/// What a transcript runs against.
pub trait Host {
    /// Decides one command.
    fn submit(&mut self, cmd: &Command, now_ms: u64) -> Result<Decision>;
    /// Drops all in-memory state and reopens from storage.
    fn restart(&mut self) -> Result<()>;
    /// A copy of a group's state.
    fn state(&self, group: &Id) -> Option<GroupState>;
    /// A work item's state, without copying the group state.
    fn work_state(&self, group: &Id, work: &Id) -> Option<WorkState>;
    /// Carries out what the host's authority driver does by itself in `group` at `now_ms`
    /// (the `advance` op): every tick it sends ([`crate::authority::Authority::poll_tick`]),
    /// in order, with its decision. The default is for a host without a driver.
    fn advance(&mut self, group: &Id, now_ms: u64) -> Result<Vec<Decision>> {
        let _ = (group, now_ms);
        Err(Error::new(
            crate::Code::NotPermitted,
            "this host has no authority driver: it cannot advance on its own",
        ))
    }
}

impl Host for MemoryAuthority {
    fn submit(&mut self, cmd: &Command, now_ms: u64) -> Result<Decision> {
        MemoryAuthority::submit(self, cmd, now_ms)
    }
    fn restart(&mut self) -> Result<()> {
        MemoryAuthority::restart(self)
    }
    fn state(&self, group: &Id) -> Option<GroupState> {
        self.group(group)?.state().cloned()
    }
    fn work_state(&self, group: &Id, work: &Id) -> Option<WorkState> {
        Some(self.group(group)?.state()?.work.get(work)?.state)
    }
    fn advance(&mut self, group: &Id, now_ms: u64) -> Result<Vec<Decision>> {
        MemoryAuthority::advance(self, group, now_ms)
    }
}

const STEP_FIELDS: [&str; 12] = [
    "at",
    "org",
    "group",
    "actor",
    "action",
    "session",
    "body",
    "expect",
    "expect_rev",
    "tamper",
    "sig",
    "op",
];
const EXPECT_FIELDS: [&str; 6] = ["outcome", "code", "seq", "revision", "disposition", "state"];

/// Runs transcript steps one by one, remembering what later steps default to.
pub struct Runner<'h> {
    host: &'h mut dyn Host,
    step: u64,
    at: u64,
    org: Option<String>,
    group: Option<String>,
    sessions: BTreeMap<(String, String), u64>,
    limits: Limits,
    failed: bool,
}

impl<'h> Runner<'h> {
    /// A runner over `host`.
    pub fn new(host: &'h mut dyn Host) -> Self {
        Runner {
            host,
            step: 0,
            at: 0,
            org: None,
            group: None,
            sessions: BTreeMap::new(),
            limits: Limits::default(),
            failed: false,
        }
    }

    /// Whether any step failed its `expect` (or was not a valid step).
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// Runs every line of a transcript; returns the output lines.
    pub fn run_all(&mut self, text: &str) -> Vec<Value> {
        text.lines().flat_map(|l| self.run_line(l)).collect()
    }

    /// Runs one line and gives its output lines: none for a blank line, one for a command
    /// or an op, one per action for an `advance` that made the authority act (SPEC §12).
    pub fn run_line(&mut self, line: &str) -> Vec<Value> {
        if line.trim().is_empty() {
            return Vec::new();
        }
        self.step += 1;
        let step = self.step;
        let out = match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(map)) => self.run_step(map),
            Ok(_) => Err(format!("step {step} is not a JSON object")),
            Err(e) => Err(format!("step {step} is not valid JSON: {e}")),
        };
        match out {
            Ok(v) => v,
            Err(problem) => {
                self.failed = true;
                vec![json!({"step": step, "outcome": "invalid", "problem": problem})]
            }
        }
    }

    fn run_step(&mut self, mut map: Map<String, Value>) -> std::result::Result<Vec<Value>, String> {
        if let Some(k) = map.keys().find(|k| !STEP_FIELDS.contains(&k.as_str())) {
            return Err(format!(
                "unknown step field {k:?}; a step has {}",
                STEP_FIELDS.join(", ")
            ));
        }
        if let Some(at) = map.get("at") {
            self.at = at.as_u64().ok_or("`at` must be a non-negative integer")?;
        }
        let expect = map.remove("expect");
        if let Some(Value::Object(e)) = &expect {
            if let Some(k) = e.keys().find(|k| !EXPECT_FIELDS.contains(&k.as_str())) {
                return Err(format!(
                    "unknown expect field {k:?}; expect may name {}",
                    EXPECT_FIELDS.join(", ")
                ));
            }
        } else if expect.is_some() {
            return Err("`expect` must be an object".into());
        }
        // A field the runner reads itself has one type: any other is named, never passed
        // over (a `group` that is not a string would otherwise run the step in the previous
        // step's group).
        for (field, kind, is) in [
            ("group", "a string", Value::is_string as fn(&Value) -> bool),
            ("org", "a string", Value::is_string),
            ("actor", "a string", Value::is_string),
            ("tamper", "true or false", Value::is_boolean),
        ] {
            if map.get(field).is_some_and(|v| !is(v)) {
                return Err(format!("`{field}` must be {kind}"));
            }
        }
        if let Some(g) = map.get("group").and_then(Value::as_str) {
            self.group = Some(g.to_owned());
        }
        if let Some(o) = map.get("org").and_then(Value::as_str) {
            self.org = Some(o.to_owned());
        }
        let mut out = match map.get("op").cloned() {
            Some(op) => match op.as_str().ok_or("`op` must be a string")? {
                "advance" => self.advance(map.contains_key("at"))?,
                op => vec![self.run_op(op)?],
            },
            None => vec![self.run_command(&map)?],
        };
        // An `expect` is checked against the step's last line.
        if let (Some(Value::Object(e)), Some(last)) = (expect, out.last_mut()) {
            let mismatches = check_expect(&e, last);
            if !mismatches.is_empty() {
                self.failed = true;
                last["mismatch"] = Value::Array(mismatches);
            }
        }
        Ok(out)
    }

    /// `{"op": "advance", "at": T}`: what the authority does by itself at T, one line per
    /// action (a tick prints like a command, with `"source": "authority"`), or one `idle`
    /// line when it has nothing to do.
    fn advance(&mut self, has_at: bool) -> std::result::Result<Vec<Value>, String> {
        if !has_at {
            return Err("an advance step needs `at`: the time the authority advances to".into());
        }
        let step = self.step;
        let group = self.current_group()?;
        let at = self.at;
        let done = match self.host.advance(&group, at) {
            Ok(done) => done,
            Err(e) => {
                return Ok(vec![
                    json!({"step": step, "op": "advance", "source": "authority", "outcome": "rejected", "error": e}),
                ])
            }
        };
        if done.is_empty() {
            return Ok(vec![
                json!({"step": step, "op": "advance", "source": "authority", "at": at, "outcome": "idle"}),
            ]);
        }
        Ok(done
            .into_iter()
            .map(|decision| {
                let mut line = decision_line(step, decision);
                line["op"] = json!("advance");
                line["source"] = json!("authority");
                line
            })
            .collect())
    }

    fn current_group(&self) -> std::result::Result<Id, String> {
        let g = self.group.clone().ok_or("no group named yet")?;
        Id::new(g).map_err(|e| e.to_string())
    }

    fn run_op(&mut self, op: &str) -> std::result::Result<Value, String> {
        let step = self.step;
        let group = self.current_group()?;
        let result = match op {
            "restart" => self.host.restart().and_then(|()| {
                let s = self.host.state(&group);
                Ok((s.as_ref().map_or(0, |s| s.seq), hash_of(s.as_ref())?))
            }),
            "snapshot" => self.snapshot(&group),
            other => {
                return Err(format!(
                    "unknown op {other:?}; ops are restart, snapshot and advance"
                ))
            }
        };
        Ok(match result {
            Ok((seq, hash)) => json!({"step": step, "op": op, "seq": seq, "state_hash": hash}),
            Err(e) => json!({"step": step, "op": op, "outcome": "rejected", "error": e}),
        })
    }

    /// Takes, verifies and restores a snapshot into a fresh replica.
    fn snapshot(&mut self, group: &Id) -> Result<(u64, Hash)> {
        let state = self.host.state(group).ok_or_else(|| {
            Error::new(crate::Code::NotFound, format!("group {group} is not open"))
        })?;
        let key = SecretKey::for_transcript(AUTHORITY_ACTOR);
        let bytes = Snapshot::build_cbor(&state, &key)?;
        // Verified against the key the group registered, as any replica would.
        let mut replica = Replica::new(group.clone());
        replica.restore_bytes(&bytes, &state.authority_key, &state.org, state.seq)?;
        let hash = replica.state_hash()?;
        if hash != state.hash()? {
            return Err(Error::corrupt(
                "restored state hash differs from the authority's",
            ));
        }
        Ok((replica.cursor(), hash))
    }

    fn run_command(&mut self, map: &Map<String, Value>) -> std::result::Result<Value, String> {
        let step = self.step;
        let group = self
            .group
            .clone()
            .ok_or("the first step must name `group`")?;
        let org = self.org.clone().ok_or("the first step must name `org`")?;
        let actor = map
            .get("actor")
            .and_then(Value::as_str)
            .ok_or("a command step needs `actor`")?
            .to_owned();
        let action = map
            .get("action")
            .cloned()
            .unwrap_or_else(|| Value::String(format!("step-{step}")));
        let session = match map.get("session") {
            Some(s) => s.clone(),
            None => json!(self
                .sessions
                .get(&(group.clone(), actor.clone()))
                .copied()
                .unwrap_or(1)),
        };
        let mut body = map
            .get("body")
            .cloned()
            .ok_or("a command step needs `body`")?;
        fill_body(&mut body, &group);
        let mut envelope = json!({
            "org": org, "group": group, "actor": actor, "action": action,
            "session": session, "body": body, "sig": "00".repeat(64),
        });
        if let Some(rev) = map.get("expect_rev") {
            envelope["expect"] = rev.clone();
        }
        let work = body
            .get("work")
            .and_then(Value::as_str)
            .and_then(|w| Id::new(w).ok());
        let group_id = Id::new(group.clone()).ok();
        let sig = match map.get("sig") {
            None => None,
            Some(Value::String(hex)) => {
                Some(Signature::from_hex(hex).map_err(|e| format!("`sig`: {e}"))?)
            }
            Some(_) => return Err("`sig` must be a string of 128 hex digits".into()),
        };
        let decided = serde_json::to_vec(&envelope)
            .map_err(|e| Error::malformed(e.to_string()))
            .and_then(|bytes| Command::from_json(&bytes, &self.limits))
            .and_then(|mut cmd| {
                match sig {
                    Some(sig) => cmd.sig = sig,
                    None => cmd.sign(&SecretKey::for_transcript(&actor))?,
                }
                if map.get("tamper").and_then(Value::as_bool) == Some(true) {
                    cmd.sig.0[0] ^= 1;
                }
                let d = self.host.submit(&cmd, self.at)?;
                Ok((cmd, d))
            });
        let mut out = match decided {
            Ok((_, decision)) => {
                if let Decision::Accepted(event) = &decision {
                    if let crate::event::EventKind::SessionReplaced(s) = &event.kind {
                        self.sessions
                            .insert((group.clone(), actor.clone()), s.session);
                    }
                }
                decision_line(step, decision)
            }
            Err(e) => json!({"step": step, "outcome": "rejected", "error": e}),
        };
        if let (Some(g), Some(w)) = (group_id, work) {
            if let Some(state) = self.host.work_state(&g, &w) {
                out["state"] = json!(state);
            }
        }
        Ok(out)
    }
}

/// The output line of a decided command.
fn decision_line(step: u64, decision: Decision) -> Value {
    match decision {
        Decision::Accepted(event) => {
            json!({"step": step, "outcome": "accepted", "receipt": event.receipt(), "event": event})
        }
        Decision::Duplicate(receipt) => {
            json!({"step": step, "outcome": "duplicate", "receipt": receipt})
        }
        Decision::Rejected(r) => json!({"step": step, "outcome": "rejected", "error": r}),
    }
}

fn hash_of(state: Option<&GroupState>) -> Result<Hash> {
    state.map_or(Ok(Hash::ZERO), GroupState::hash)
}

/// Fills derived keys and `"<work>#<epoch>"` lease references.
fn fill_body(body: &mut Value, group: &str) {
    let Some(map) = body.as_object_mut() else {
        return;
    };
    let kind = map
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if let Some(Value::String(lease)) = map.get("lease") {
        if let Some((work, epoch)) = lease.split_once('#') {
            if let (Ok(g), Ok(w), Ok(e)) = (Id::new(group), Id::new(work), epoch.parse::<u64>()) {
                let id = LeaseId::derive(&g, &w, e).to_hex();
                map.insert("lease".into(), Value::String(id));
            }
        }
    }
    let derived = |actor: &str| Value::String(SecretKey::for_transcript(actor).public().to_hex());
    match kind.as_str() {
        "open_group" => {
            if !map.contains_key("authority_key") {
                map.insert("authority_key".into(), derived(AUTHORITY_ACTOR));
            }
            if let Some(Value::Array(members)) = map.get_mut("members") {
                for m in members.iter_mut().filter_map(Value::as_object_mut) {
                    if !m.contains_key("key") {
                        if let Some(a) = m.get("actor").and_then(Value::as_str).map(str::to_owned) {
                            m.insert("key".into(), derived(&a));
                        }
                    }
                }
            }
        }
        "add_member" if !map.contains_key("key") => {
            if let Some(a) = map.get("actor").and_then(Value::as_str).map(str::to_owned) {
                map.insert("key".into(), derived(&a));
            }
        }
        _ => {}
    }
}

/// Compares a step's `expect` with its output; returns the mismatches.
fn check_expect(expect: &Map<String, Value>, out: &Value) -> Vec<Value> {
    let mut bad = Vec::new();
    for (field, want) in expect {
        let got = match field.as_str() {
            "outcome" => out.get("outcome").cloned(),
            "code" => out.pointer("/error/code").cloned(),
            "seq" => out
                .pointer("/receipt/seq")
                .or_else(|| out.get("seq"))
                .cloned(),
            "revision" => out.pointer("/receipt/revision").cloned(),
            "disposition" => out.pointer("/receipt/disposition").cloned(),
            "state" => out.get("state").cloned(),
            _ => None,
        }
        .unwrap_or(Value::Null);
        if &got != want {
            bad.push(json!({"field": field, "expected": want, "actual": got}));
        }
    }
    bad
}

/// Runs a whole transcript on a fresh memory authority.
pub fn run_in_memory(text: &str) -> (Vec<Value>, bool) {
    let mut host = MemoryAuthority::new();
    let mut runner = Runner::new(&mut host);
    let lines = runner.run_all(text);
    let failed = runner.failed();
    (lines, failed)
}
