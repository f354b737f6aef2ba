//! Replay throughput: events per second rebuilding a Group's state from a 100,000-event log,
//! from decoded events (apply only) and from the encoded log (decode, verify payload hash
//! and id, check the chain, apply), beside its floor: SHA-256 over each event's stored bytes
//! (what the id and the payload hash must hash at least) plus applying the already-decoded
//! event. The gap between the replay from bytes and the floor is decoding and checking.
//!
//! After criterion's groups, the bench runs the three interleaved (5 rounds, medians) and
//! prints one JSON line: events/s of each, the ratio of the floor's rate to the replay's
//! (issue goal: at most 1.5), the process's peak RSS, and where a replay's time goes per
//! event (`per_event_ns`): decoding alone, the hashing that checks the payload hash and the id
//! (decoding with those checks, less decoding alone), applying, and the floor's one SHA-256
//! pass over the stored bytes (the floor less applying).
//!
//! `cargo bench -p mwp-core --bench replay`
// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mwp_core::accept::accept_preverified;
use mwp_core::{accept, Command, Decision, Event, GroupState, Limits, Result};

#[allow(dead_code)] // the workload and the peak RSS only
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

/// The floor of a replay from bytes: SHA-256 of every event's stored bytes, and applying the
/// already-decoded event.
fn replay_floor(log: &[Vec<u8>], events: &[Event]) -> (GroupState, u8) {
    let mut state = None;
    let mut fold = 0u8;
    for (bytes, e) in log.iter().zip(events) {
        fold ^= mwp_core::canonical::sha256(bytes)[0];
        GroupState::apply_to(&mut state, e).expect("replays");
    }
    (state.expect("open"), fold)
}

/// Decodes every event, checked (payload hash and id) if `verify`, dropping each at once as a
/// replay does; returns a fold of the seqs so that nothing is optimised away.
fn decode_all(log: &[Vec<u8>], verify: bool) -> u64 {
    let mut fold = 0;
    for bytes in log {
        let e = if verify {
            Event::from_cbor_verified(bytes)
        } else {
            Event::from_cbor(bytes)
        };
        fold ^= std::hint::black_box(e.expect("decodes")).seq;
    }
    fold
}

/// Interleaved rounds of the three replays and of decoding with and without the checks,
/// medians, as one JSON line.
fn summary(events: &[Event], encoded: &[Vec<u8>]) {
    let rounds = 5;
    let mut t: [Vec<f64>; 5] = Default::default();
    let secs = |f: &mut dyn FnMut()| {
        let start = std::time::Instant::now();
        f();
        start.elapsed().as_secs_f64()
    };
    for _ in 0..rounds {
        let mut keep = Vec::new();
        t[0].push(secs(&mut || keep.push(replay_bytes(encoded))));
        t[1].push(secs(&mut || keep.push(replay_floor(encoded, events).0)));
        t[2].push(secs(&mut || keep.push(replay_decoded(events))));
        let mut fold = 0;
        t[3].push(secs(&mut || fold ^= decode_all(encoded, false)));
        t[4].push(secs(&mut || fold ^= decode_all(encoded, true)));
        std::hint::black_box(fold);
    }
    let n = events.len() as f64;
    let eps = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        n / v[v.len() / 2]
    };
    let (bytes, floor, decoded) = (eps(&mut t[0]), eps(&mut t[1]), eps(&mut t[2]));
    let (decode, checked) = (eps(&mut t[3]), eps(&mut t[4]));
    let ns = |per_s: f64| (1e9 / per_s * 10.0).round() / 10.0;
    println!(
        "{}",
        serde_json::json!({
            "bench": "replay",
            "events": events.len(),
            "rounds": rounds,
            "from_bytes_events_per_s": bytes.round(),
            "floor_events_per_s": floor.round(),
            "decoded_apply_events_per_s": decoded.round(),
            "floor_over_from_bytes": (floor / bytes * 1000.0).round() / 1000.0,
            "per_event_ns": {
                "from_bytes": ns(bytes),
                "decode": ns(decode),
                "check_hashes": ((ns(checked) - ns(decode)) * 10.0).round() / 10.0,
                "apply": ns(decoded),
                "floor": ns(floor),
                "floor_sha256": ((ns(floor) - ns(decoded)) * 10.0).round() / 10.0,
            },
            "peak_rss_kib": common::peak_rss_kib(),
        })
    );
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
    assert_eq!(
        replay_floor(&encoded, &events).0.hash().expect("hash"),
        live
    );

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
    group.bench_function("floor: sha256 of the bytes + apply decoded", |b| {
        b.iter_with_large_drop(|| replay_floor(&encoded, &events))
    });
    group.finish();
    summary(&events, &encoded);
}

criterion_group!(benches, bench);
criterion_main!(benches);
