//! Scenario builder: signs commands with the transcript keys and decides them on a memory
//! authority, so tests can produce real, verifiable logs that exercise every event kind.

use std::collections::BTreeMap;

use mwp_core::crypto::Hash;
use mwp_core::effect::effect_key;
use mwp_core::lease::LeaseId;
use mwp_core::memory::MemoryAuthority;
use mwp_core::{Body, Command, Decision, Event, GroupState, Id, Result, SecretKey};
use serde_json::{json, Value};

/// Parses an ID known to be valid.
pub fn id(s: &str) -> Id {
    Id::new(s).expect("test IDs are valid")
}

/// A body from its JSON form.
pub fn body(v: Value) -> Body {
    serde_json::from_value(v).expect("test bodies are well formed")
}

/// The default test contract.
pub fn contract(max_attempts: u32, risk: &str) -> Value {
    json!({"max_attempts": max_attempts, "backoff_base_ms": 100, "backoff_max_ms": 1000,
           "cost_budget": 100, "risk": risk})
}

/// A group on a memory authority, driven by signed commands.
pub struct Scenario {
    /// The authority.
    pub auth: MemoryAuthority,
    /// Organization.
    pub org: Id,
    /// Group.
    pub group: Id,
    /// Current time.
    pub now: u64,
    next: u64,
    sessions: BTreeMap<String, u64>,
}

impl Scenario {
    /// Opens `group` in org `acme` at time 1000 with members alice (owner), bob and carol
    /// (workers), rita (reviewer) and otto (observer), all with transcript keys.
    pub fn open(group: &str) -> Scenario {
        Scenario::open_in("acme", group)
    }

    /// As [`Scenario::open`], in another org.
    pub fn open_in(org: &str, group: &str) -> Scenario {
        let mut s = Scenario {
            auth: MemoryAuthority::new(),
            org: id(org),
            group: id(group),
            now: 1000,
            next: 0,
            sessions: BTreeMap::new(),
        };
        let key = |a: &str| SecretKey::for_transcript(a).public().to_hex();
        let members: Vec<Value> = [
            ("alice", "owner"),
            ("bob", "worker"),
            ("carol", "worker"),
            ("dave", "worker"),
            ("rita", "reviewer"),
            ("otto", "observer"),
        ]
        .iter()
        .map(|(a, r)| json!({"actor": a, "role": r, "key": key(a)}))
        .collect();
        s.ok(
            "alice",
            None,
            json!({"type": "open_group", "mission": "m1", "title": {"name": "Ship it"},
                   "members": members, "authority_key": key("@authority")}),
        );
        s
    }

    /// A signed command from `actor` (session as last replaced).
    pub fn command(&mut self, actor: &str, expect: Option<u64>, b: Value) -> Command {
        self.next += 1;
        let session = self.sessions.get(actor).copied().unwrap_or(1);
        let session = if b["type"] == "replace_session" {
            session + 1
        } else {
            session
        };
        Command::signed(
            self.org.clone(),
            self.group.clone(),
            id(actor),
            id(&format!("s-{}", self.next)),
            session,
            expect,
            body(b),
            &SecretKey::for_transcript(actor),
        )
        .expect("test commands sign")
    }

    /// Decides a command at the current time.
    pub fn submit(&mut self, cmd: &Command) -> Result<Decision> {
        let d = self.auth.submit(cmd, self.now)?;
        if let (Decision::Accepted(_), Body::ReplaceSession(_)) = (&d, &cmd.body) {
            self.sessions.insert(cmd.actor.to_string(), cmd.session);
        }
        Ok(d)
    }

    /// Sends a command that must be accepted; returns its event.
    pub fn ok(&mut self, actor: &str, expect: Option<u64>, b: Value) -> Event {
        let cmd = self.command(actor, expect, b.clone());
        match self.submit(&cmd) {
            Ok(Decision::Accepted(e)) => *e,
            other => panic!("{actor} {b}: expected accepted, got {other:?}"),
        }
    }

    /// The state.
    pub fn state(&self) -> &GroupState {
        self.auth
            .group(&self.group)
            .and_then(|g| g.state())
            .expect("the group is open")
    }

    /// Revision of a work item.
    pub fn rev(&self, work: &str) -> u64 {
        self.state().revision_of(&format!("work:{work}"))
    }

    /// The lease of `work` at `epoch`.
    pub fn lease(&self, work: &str, epoch: u64) -> String {
        LeaseId::derive(&self.group, &id(work), epoch).to_hex()
    }

    /// The effect key of `op` on `work` at `epoch`.
    pub fn effect(&self, work: &str, epoch: u64, op: &str) -> Hash {
        effect_key(&self.state().mission, &id(work), epoch, &id(op))
    }

    /// The log as stored (redacted values erased).
    pub fn events(&self) -> Vec<Event> {
        self.auth
            .group(&self.group)
            .expect("the group exists")
            .logged(0, usize::MAX)
            .expect("the log decodes")
    }

    /// Hash of the state after each seq: `hashes[n]` is the hash at seq `n` (0: nothing).
    pub fn hashes(&self) -> Vec<Hash> {
        let mut out = vec![Hash::ZERO];
        let mut state = None;
        for e in self.events() {
            GroupState::apply_to(&mut state, &e).expect("the log applies");
            out.push(state.as_ref().expect("applied").hash().expect("hashes"));
        }
        out
    }

    /// Signs and submits a `tick` as the authority.
    pub fn tick(&mut self) -> Event {
        self.ok("@authority", None, json!({"type": "tick"}))
    }

    /// Claims and starts `work` for `actor`; returns the lease.
    pub fn claim_start(&mut self, actor: &str, work: &str, lease_ms: u64) -> String {
        let rev = self.rev(work);
        let e = self.ok(
            actor,
            Some(rev),
            json!({"type": "claim_work", "work": work, "lease_ms": lease_ms, "start_within_ms": 500}),
        );
        let lease = match &e.kind {
            mwp_core::EventKind::WorkClaimed(c) => c.lease.id.to_hex(),
            _ => unreachable!("claim_work gives work_claimed"),
        };
        self.ok(
            actor,
            None,
            json!({"type": "start_work", "work": work, "lease": lease}),
        );
        lease
    }
}

/// A log that exercises every event kind: membership changes, approvals, claims, starts,
/// renewals, charges, checkpoints, blocks, effects (settled, abandoned and reconciled),
/// retries, expiry by tick, session replacement, evidence, expansion, cancel, reassign,
/// redaction and archive. Values of one checkpoint are redacted in the stored log.
pub fn rich() -> Scenario {
    let mut s = Scenario::open("g1");
    let c = |n, r| contract(n, r);
    for (w, after, risk) in [
        ("w1", vec![], "low"),
        ("w2", vec!["w1"], "low"),
        ("w3", vec![], "high"),
        ("w4", vec![], "low"),
        ("w6", vec![], "low"),
        ("w7", vec![], "low"),
    ] {
        s.ok(
            "alice",
            None,
            json!({"type": "create_work", "work": w, "contract": c(3, risk), "after": after,
                   "spec": {"do": w}}),
        );
    }
    let members_rev = s.state().members_revision;
    s.ok(
        "alice",
        Some(members_rev),
        json!({"type": "add_member", "actor": "eve", "role": "worker",
               "key": SecretKey::for_transcript("eve").public().to_hex()}),
    );
    let members_rev = s.state().members_revision;
    s.ok(
        "alice",
        Some(members_rev),
        json!({"type": "change_role", "actor": "eve", "role": "reviewer"}),
    );
    s.ok("alice", None, json!({"type": "request_approval", "approval": "ap1", "work": "w3", "reason": {"why": "prod"}}));
    s.ok(
        "rita",
        Some(1),
        json!({"type": "decide_approval", "approval": "ap1", "grant": true}),
    );

    // w1: bob runs, charges, settles an effect, checkpoints; carol finishes it.
    let l1 = s.claim_start("bob", "w1", 30_000);
    let rev = s.rev("w1");
    s.ok(
        "bob",
        Some(rev),
        json!({"type": "renew_lease", "work": "w1", "lease": l1, "lease_ms": 30_000}),
    );
    s.ok(
        "bob",
        None,
        json!({"type": "charge", "work": "w1", "lease": l1, "cost": 4, "data": {"step": 1}}),
    );
    s.ok(
        "bob",
        None,
        json!({"type": "intend_effect", "work": "w1", "lease": l1, "op": "e1", "mode": "keyed",
                             "irreversible": false, "target": {"url": "https://x"}}),
    );
    s.ok(
        "bob",
        None,
        json!({"type": "settle_effect", "work": "w1", "lease": l1, "op": "e1",
                             "outcome": {"ok": true}, "receipt": {"id": "r-1"}}),
    );
    let cp = s.ok(
        "bob",
        None,
        json!({"type": "checkpoint", "work": "w1", "lease": l1, "data": {"half": true}}),
    );
    s.now += 10;
    let l1b = s.claim_start("carol", "w1", 30_000);
    let done = s.ok(
        "carol",
        None,
        json!({"type": "submit", "work": "w1", "lease": l1b, "result": {"ok": 1}}),
    );
    // A late result under bob's released lease: evidence.
    s.ok(
        "bob",
        None,
        json!({"type": "submit", "work": "w1", "lease": l1, "result": {"late": true}}),
    );
    s.ok(
        "alice",
        None,
        json!({"type": "expand", "trigger": done.seq, "work": [
        {"work": "w5", "contract": c(2, "low"), "after": ["w1"], "spec": {"do": "w5"}}]}),
    );

    // w2: fails once (retry with backoff), then blocks, is resolved, then succeeds.
    let l2 = s.claim_start("bob", "w2", 30_000);
    s.ok("bob", None, json!({"type": "fail", "work": "w2", "lease": l2, "error": {"e": "flaky"}, "retryable": true}));
    s.now += 1000;
    let l2b = s.claim_start("bob", "w2", 30_000);
    s.ok(
        "bob",
        None,
        json!({"type": "block", "work": "w2", "lease": l2b, "data": {"at": 2},
                             "needs": {"key": "k1", "kind": "human"}}),
    );
    s.ok(
        "rita",
        None,
        json!({"type": "resolve_block", "work": "w2", "key": "k1", "resolution": {"ok": true}}),
    );
    let l2c = s.claim_start("carol", "w2", 30_000);
    s.ok(
        "carol",
        None,
        json!({"type": "submit", "work": "w2", "lease": l2c, "result": {"ok": 2}}),
    );

    // w3 (high risk, approved): an undeclared effect whose lease expires → waiting →
    // reconciled → queued.
    let l3 = s.claim_start("carol", "w3", 1_000);
    s.ok(
        "carol",
        None,
        json!({"type": "intend_effect", "work": "w3", "lease": l3, "op": "u1",
                               "mode": "undeclared", "irreversible": false, "target": {"t": 3}}),
    );
    // w4: a keyed effect abandoned when bob's session is replaced.
    let l4 = s.claim_start("bob", "w4", 60_000);
    s.ok(
        "bob",
        None,
        json!({"type": "intend_effect", "work": "w4", "lease": l4, "op": "k1",
                             "mode": "keyed", "irreversible": false, "target": {"t": 4}}),
    );
    s.now += 2_000;
    s.tick();
    let key = s.effect("w3", 1, "u1");
    s.ok(
        "rita",
        None,
        json!({"type": "reconcile_effect", "work": "w3", "key": key, "happened": false,
                              "receipt": {"checked": true}}),
    );
    s.ok("bob", None, json!({"type": "replace_session"}));
    // w6: reassigned; w7: cancelled while leased.
    s.claim_start("dave", "w6", 60_000);
    s.ok(
        "rita",
        None,
        json!({"type": "reassign", "work": "w6", "reason": {"r": "slow"}}),
    );
    s.claim_start("dave", "w7", 60_000);
    s.ok(
        "rita",
        None,
        json!({"type": "cancel", "work": "w7", "reason": {"r": "dup"}}),
    );
    let members_rev = s.state().members_revision;
    s.ok(
        "alice",
        Some(members_rev),
        json!({"type": "remove_member", "actor": "otto"}),
    );
    s.ok(
        "alice",
        None,
        json!({"type": "redact", "seq": cp.seq, "reason": {"gdpr": 1}}),
    );
    let l6 = s.claim_start("dave", "w6", 60_000);
    s.ok(
        "dave",
        None,
        json!({"type": "charge", "work": "w6", "lease": l6, "cost": 1}),
    );
    s.ok(
        "dave",
        None,
        json!({"type": "checkpoint", "work": "w6", "lease": l6, "data": {"d": 6}}),
    );
    s
}

/// Archives a scenario's group (nothing may be leased or running).
pub fn archive(s: &mut Scenario) -> Event {
    s.ok(
        "alice",
        None,
        json!({"type": "archive", "reason": {"done": true}}),
    )
}

/// A deterministic pseudo-random generator (splitmix64): tests need no RNG crate.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// True with probability `per_mille / 1000`.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
}
