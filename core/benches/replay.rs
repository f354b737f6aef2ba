//! Replay throughput: events per second rebuilding a Group's state from a 100,000-event log,
//! from decoded events (apply only) and from the encoded log (decode, verify payload hash
//! and id, check the chain, apply).
//!
//! `cargo bench -p mwp-core --bench replay`
// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mwp_core::accept::accept_preverified;
use mwp_core::{accept, Command, Decision, Event, GroupState, Limits, Result};

mod common;

/// Decides without the Ed25519 check: the command's key is the actor's registered key.
fn unchecked(
    state: Option<&GroupState>,
    cmd: &Command,
    now_ms: u64,
    limits: &Limits,
) -> Result<Decision> {
    match state.and_then(|s| s.members.get(&cmd.actor)).map(|m| m.key) {
        Some(key) => accept_preverified(state, cmd, now_ms, limits, &key),
        None => accept(state, cmd, now_ms, limits),
    }
}

/// Builds the log: genesis, then the workload's events (7 per work item).
fn log(items: usize) -> Vec<Event> {
    let limits = Limits::default();
    let mut state = None;
    let mut events = Vec::new();
    let mut cmds = vec![common::open()];
    cmds.extend(common::workload(items));
    for cmd in &cmds {
        // The log is the bench's input, not what it measures: skip signature checks.
        match unchecked(state.as_ref(), cmd, common::NOW_MS, &limits) {
            Ok(Decision::Accepted(event)) => {
                GroupState::apply_to(&mut state, &event).expect("applies");
                events.push(*event);
            }
            other => panic!("the workload is valid: {other:?}"),
        }
    }
    events
}

fn replay_decoded(events: &[Event]) -> GroupState {
    let mut state = None;
    for e in events {
        GroupState::apply_to(&mut state, e).expect("replays");
    }
    state.expect("open")
}

fn replay_bytes(log: &[Vec<u8>]) -> GroupState {
    let mut state = None;
    for bytes in log {
        let e = Event::from_cbor_verified(bytes).expect("decodes and verifies");
        GroupState::apply_to(&mut state, &e).expect("replays");
    }
    state.expect("open")
}

fn bench(c: &mut Criterion) {
    // 14,286 items × 7 + genesis = 100,003 events.
    let events = log(14_286);
    let encoded: Vec<Vec<u8>> = events
        .iter()
        .map(|e| e.to_cbor().expect("encodes"))
        .collect();
    let live = replay_decoded(&events).hash().expect("hash");
    assert_eq!(replay_bytes(&encoded).hash().expect("hash"), live);

    let mut group = c.benchmark_group("replay");
    group.sample_size(10);
    group.throughput(Throughput::Elements(events.len() as u64));
    // The rebuilt state is what a host keeps: freeing it is not part of replay, so it is
    // dropped outside the timed loop.
    group.bench_function("decoded events, apply", |b| {
        b.iter_with_large_drop(|| replay_decoded(&events))
    });
    group.bench_function("encoded log, decode+verify+apply", |b| {
        b.iter_with_large_drop(|| replay_bytes(&encoded))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
