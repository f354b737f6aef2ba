//! The fuzz targets' bodies, shared by the cargo-fuzz binaries (`core/fuzz/fuzz_targets/`)
//! and by the corpus replay test (`core/tests/fuzz_corpus.rs`), so a saved input runs the
//! same code under `cargo test` as under the fuzzer. Every check here panics on failure:
//! a panic is what both harnesses report.

#![allow(dead_code)] // each fuzz target uses part of this file

use std::sync::OnceLock;

use mwp_core::memory::MemoryAuthority;
use mwp_core::transcript::Runner;
use mwp_core::{accept, canonical, Command, Decision, Event, GroupState, Id, Limits, SecretKey};

/// Input layout of the `accept` target: a flags byte, 8 bytes of time offset (little
/// endian), then the command bytes.
pub const ACCEPT_HEADER: usize = 9;
/// Flag: the command bytes are CBOR (else JSON).
pub const FLAG_CBOR: u8 = 1;
/// Flag: re-sign the decoded command with its actor's transcript key, so that the fuzzer
/// reaches the checks behind the signature.
pub const FLAG_RESIGN: u8 = 2;
/// The time the fixed state was built at; the target decides at `BASE_MS + offset`.
pub const BASE_MS: u64 = 10_000;

/// A small group in several states: w1 running (bob), w2 queued behind w1, w3 leased (carol),
/// w4 succeeded, w5 blocked; approval ap1 pending.
const SCENARIO: &str = r#"{"at": 1000, "org": "acme", "group": "g1", "actor": "alice", "action": "open", "body": {"type": "open_group", "mission": "m1", "title": "fuzz", "members": [{"actor": "alice", "role": "owner"}, {"actor": "bob", "role": "worker"}, {"actor": "carol", "role": "worker"}, {"actor": "rita", "role": "reviewer"}, {"actor": "otto", "role": "observer"}]}}
{"actor": "alice", "body": {"type": "create_work", "work": "w1", "contract": {"max_attempts": 3, "backoff_base_ms": 100, "backoff_max_ms": 1000, "cost_budget": 10, "risk": "low"}, "after": [], "spec": {"do": 1}}}
{"actor": "alice", "body": {"type": "create_work", "work": "w2", "contract": {"max_attempts": 2, "backoff_base_ms": 100, "backoff_max_ms": 1000, "cost_budget": 10, "risk": "high"}, "after": ["w1"], "spec": {"do": 2}}}
{"actor": "alice", "body": {"type": "create_work", "work": "w3", "contract": {"max_attempts": 1, "backoff_base_ms": 100, "backoff_max_ms": 1000, "cost_budget": 5, "deadline_at": 50000, "risk": "low"}, "after": [], "spec": {"do": 3}}}
{"actor": "alice", "body": {"type": "create_work", "work": "w4", "contract": {"max_attempts": 1, "backoff_base_ms": 100, "backoff_max_ms": 1000, "cost_budget": 5, "risk": "low"}, "after": [], "spec": {"do": 4}}}
{"actor": "alice", "body": {"type": "create_work", "work": "w5", "contract": {"max_attempts": 1, "backoff_base_ms": 100, "backoff_max_ms": 1000, "cost_budget": 5, "risk": "low"}, "after": [], "spec": {"do": 5}}}
{"actor": "bob", "expect_rev": 1, "body": {"type": "claim_work", "work": "w1", "lease_ms": 30000, "start_within_ms": 5000}}
{"actor": "bob", "body": {"type": "start_work", "work": "w1", "lease": "w1#1"}}
{"actor": "bob", "body": {"type": "intend_effect", "work": "w1", "lease": "w1#1", "op": "send", "mode": "undeclared", "irreversible": false, "target": "x"}}
{"actor": "carol", "expect_rev": 1, "body": {"type": "claim_work", "work": "w3", "lease_ms": 20000, "start_within_ms": 5000}}
{"actor": "carol", "expect_rev": 1, "body": {"type": "claim_work", "work": "w4", "lease_ms": 20000, "start_within_ms": 5000}}
{"actor": "carol", "body": {"type": "start_work", "work": "w4", "lease": "w4#1"}}
{"actor": "carol", "body": {"type": "submit", "work": "w4", "lease": "w4#1", "result": {"ok": true}}}
{"actor": "bob", "expect_rev": 1, "body": {"type": "claim_work", "work": "w5", "lease_ms": 20000, "start_within_ms": 5000}}
{"actor": "bob", "body": {"type": "start_work", "work": "w5", "lease": "w5#1"}}
{"actor": "bob", "body": {"type": "block", "work": "w5", "lease": "w5#1", "data": 1, "needs": {"key": "k1", "kind": "human"}}}
{"actor": "bob", "body": {"type": "request_approval", "approval": "ap1", "work": "w2", "reason": "risky"}}
"#;

/// The fixed state the `accept` target decides against.
pub fn fixed_state() -> &'static GroupState {
    static STATE: OnceLock<GroupState> = OnceLock::new();
    STATE.get_or_init(|| {
        let mut host = MemoryAuthority::new();
        let mut runner = Runner::new(&mut host);
        let lines = runner.run_all(SCENARIO);
        assert!(!runner.failed(), "the fuzz scenario runs: {lines:?}");
        assert!(
            lines.iter().all(|l| l["outcome"] == "accepted"),
            "every scenario step is accepted: {lines:?}"
        );
        let g = Id::new("g1").expect("valid id");
        host.group(&g)
            .and_then(|g| g.state())
            .cloned()
            .expect("the scenario opens g1")
    })
}

/// `command_decode`: JSON and CBOR decoding of arbitrary bytes never panics, and whatever
/// decodes re-encodes to a command that decodes to itself with the same content hash.
pub fn command_decode(data: &[u8]) {
    let limits = Limits::default();
    for decoded in [
        Command::from_json(data, &limits),
        Command::from_cbor(data, &limits),
    ] {
        let Ok(cmd) = decoded else { continue };
        let hash = cmd.content_hash().expect("a decoded command hashes");
        let cbor = cmd.to_cbor().expect("a decoded command encodes");
        let again = Command::from_cbor(&cbor, &limits).expect("its canonical CBOR decodes");
        assert_eq!(again, cmd, "CBOR round trip");
        assert_eq!(again.content_hash().expect("hashes"), hash);
        let json = serde_json::to_vec(&cmd).expect("a decoded command is JSON");
        let again = Command::from_json(&json, &limits).expect("its JSON decodes");
        assert_eq!(
            again.content_hash().expect("hashes"),
            hash,
            "JSON round trip"
        );
    }
}

/// `accept`: decode a command (see [`ACCEPT_HEADER`]), decide it against [`fixed_state`],
/// and apply what is accepted. Accept never panics, an accepted event verifies, survives its
/// encoding and applies; a duplicate is the stored receipt.
pub fn accept_bytes(data: &[u8]) {
    let Some((header, body)) = data.split_at_checked(ACCEPT_HEADER) else {
        return;
    };
    let flags = header[0];
    let mut offset = [0u8; 8];
    offset.copy_from_slice(&header[1..]);
    let now = BASE_MS.saturating_add(u64::from_le_bytes(offset) % 1_000_000);
    let limits = Limits::default();
    let decoded = if flags & FLAG_CBOR != 0 {
        Command::from_cbor(body, &limits)
    } else {
        Command::from_json(body, &limits)
    };
    let Ok(mut cmd) = decoded else { return };
    if flags & FLAG_RESIGN != 0 {
        cmd.sign(&SecretKey::for_transcript(cmd.actor.as_str()))
            .expect("a decoded command signs");
    }
    let state = fixed_state();
    match accept(Some(state), &cmd, now, &limits) {
        Err(e) => assert!(!e.message.is_empty(), "every error says what was wrong"),
        Ok(Decision::Rejected(r)) => {
            assert!(!r.message.is_empty(), "every rejection says what was wrong");
            assert!(r.code.is_rejection(), "a rejection carries a check's code");
        }
        Ok(Decision::Duplicate(r)) => {
            let stored = state
                .receipt(r.actor.as_str(), r.action.as_str())
                .expect("a duplicate names a stored receipt");
            assert_eq!(
                canonical::to_vec(&stored).expect("encodes"),
                canonical::to_vec(&r).expect("encodes")
            );
        }
        Ok(Decision::Accepted(event)) => {
            event.verify().expect("an accepted event verifies");
            let bytes = event.to_cbor().expect("an accepted event encodes");
            let stored = Event::from_cbor(&bytes).expect("its encoding decodes");
            assert_eq!(stored, *event, "event round trip");
            let mut next = state.clone();
            next.apply(&stored).expect("an accepted event applies");
            assert_eq!(next.seq, state.seq + 1);
            assert_eq!(
                next.receipt(cmd.actor.as_str(), cmd.action.as_str()),
                Some(event.receipt())
            );
        }
    }
}
