//! Replica and snapshot benchmarks (figures in docs/bench-replica.md).
//!
//! * `replica/apply_from_bytes`: decode, verify (payload hash, id, chain) and apply events
//!   from their stored canonical CBOR into a fresh replica, write sets included; baseline
//!   `replica/state_apply_decoded`: `GroupState::apply` on already-decoded events, no
//!   verification, no write sets (what a naive replay would do).
//! * `replica/phase_decode`, `replica/phase_verify`: the decoding and verification parts
//!   alone, to show where the time goes.
//! * `snapshot/build_sign` and `snapshot/verify_restore` on the state of a 100,000-event
//!   group (receipt index included).
//!
//! * `head/sign` and `head/verify`: one signed head (SPEC §8a), what a server pays at most
//!   ten times a second per group read, and what a replica pays per head offered.
//!
//! The last line is one JSON object (`"bench": "snapshot"`): the median time to verify and
//! restore the 100,000-event snapshot against its same-run baseline, replaying the same
//! group's stored events from bytes into a fresh replica (what a replica without a snapshot
//! does), in interleaved rounds, with the peak RSS.
//!
//! `cargo bench -p mwp-core --bench replica`

#![allow(missing_docs)] // criterion_group! generates an undocumented function

#[allow(dead_code)] // only the peak RSS is used here
mod common;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use mwp_core::memory::MemoryGroup;
use mwp_core::replica::{Offer, Replica};
use mwp_core::snapshot::Snapshot;
use mwp_core::{Body, Command, Decision, Event, GroupState, Id, SecretKey};
use serde_json::json;

fn id(s: &str) -> Id {
    Id::new(s).expect("valid id")
}

/// A group with `n` events: work items created, claimed, started, charged with a
/// checkpoint and submitted by four workers (five events each).
fn group(n: usize) -> MemoryGroup {
    let mut g = MemoryGroup::default();
    let keys: Vec<(Id, SecretKey)> = ["alice", "w0", "w1", "w2", "w3"]
        .iter()
        .map(|a| (id(a), SecretKey::for_transcript(a)))
        .collect();
    let mut action = 0u64;
    let mut now = 1_000u64;
    let mut send = |g: &mut MemoryGroup,
                    who: usize,
                    expect: Option<u64>,
                    body: serde_json::Value,
                    now: u64| {
        action += 1;
        let (actor, key) = &keys[who];
        let body: Body = serde_json::from_value(body).expect("well-formed body");
        let cmd = Command::signed(
            id("acme"),
            id("g"),
            actor.clone(),
            id(&format!("x{action}")),
            1,
            expect,
            body,
            key,
        )
        .expect("signs");
        match g.submit(&cmd, now).expect("accepted") {
            Decision::Accepted(e) => *e,
            Decision::Duplicate(_) => unreachable!("fresh action IDs"),
            Decision::Rejected(r) => panic!("rejected: {r}"),
        }
    };
    let members: Vec<_> = keys
        .iter()
        .enumerate()
        .map(|(i, (a, k))| json!({"actor": a, "role": if i == 0 { "owner" } else { "worker" }, "key": k.public()}))
        .collect();
    send(
        &mut g,
        0,
        None,
        json!({"type": "open_group", "mission": "m", "title": "bench", "members": members,
        "authority_key": SecretKey::for_transcript("@authority").public()}),
        now,
    );
    let contract = json!({"max_attempts": 3, "backoff_base_ms": 10, "backoff_max_ms": 100, "cost_budget": 100, "risk": "low"});
    let mut i = 0usize;
    while g.log().len() + 5 <= n {
        let w = format!("job-{i}");
        let who = 1 + i % 4;
        now += 1;
        send(
            &mut g,
            0,
            None,
            json!({"type": "create_work", "work": w, "contract": contract, "after": [], "spec": {"n": i}}),
            now,
        );
        let claimed = send(
            &mut g,
            who,
            Some(1),
            json!({"type": "claim_work", "work": w, "lease_ms": 60_000, "start_within_ms": 10_000}),
            now,
        );
        let lease = match &claimed.kind {
            mwp_core::EventKind::WorkClaimed(c) => c.lease.id,
            _ => unreachable!("claim gives work_claimed"),
        };
        send(
            &mut g,
            who,
            None,
            json!({"type": "start_work", "work": w, "lease": lease}),
            now,
        );
        send(
            &mut g,
            who,
            None,
            json!({"type": "charge", "work": w, "lease": lease, "cost": 1, "data": {"step": 1}}),
            now,
        );
        send(
            &mut g,
            who,
            None,
            json!({"type": "submit", "work": w, "lease": lease, "result": {"ok": i}}),
            now,
        );
        i += 1;
    }
    g
}

fn benches(c: &mut Criterion) {
    let big = group(100_000);
    let state = big.state().expect("open").clone();
    eprintln!(
        "group: {} events, {} work items",
        state.seq,
        state.work.len()
    );

    let bytes: Vec<Vec<u8>> = big.log()[..20_000].to_vec();
    let events: Vec<Event> = bytes
        .iter()
        .map(|b| Event::from_cbor(b).expect("decodes"))
        .collect();
    let mut g = c.benchmark_group("replica");
    g.sample_size(10);
    g.throughput(Throughput::Elements(bytes.len() as u64));
    g.bench_function("apply_from_bytes", |b| {
        // As in the replay bench, freeing the replica afterwards is not part of applying.
        b.iter_with_large_drop(|| {
            let mut r = Replica::new(id("g"));
            for e in &bytes {
                match r.offer_bytes(e) {
                    Offer::Applied { write_set, .. } => {
                        criterion::black_box(write_set);
                    }
                    other => panic!("{other:?}"),
                }
            }
            assert_eq!(r.cursor(), bytes.len() as u64);
            r
        })
    });
    g.bench_function("phase_decode", |b| {
        b.iter(|| {
            bytes
                .iter()
                .map(|e| Event::from_cbor(e).expect("decodes"))
                .collect::<Vec<_>>()
        })
    });
    g.bench_function("phase_verify", |b| {
        b.iter(|| events.iter().all(|e| e.verify().is_ok()))
    });
    g.bench_function("state_apply_decoded", |b| {
        b.iter_batched(
            || events.clone(),
            |events| {
                let mut s = None;
                for e in &events {
                    GroupState::apply_to(&mut s, e).expect("applies");
                }
                s
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();

    let key = SecretKey::for_transcript("@authority");
    let snap = Snapshot::build_cbor(&state, &key).expect("builds");
    eprintln!("snapshot of seq {}: {} bytes", state.seq, snap.len());
    let mut g = c.benchmark_group("snapshot");
    g.sample_size(10);
    g.bench_function("build_sign_100k", |b| {
        b.iter(|| Snapshot::build_cbor(&state, &key).expect("builds"))
    });
    g.bench_function("phase_decode_100k", |b| {
        b.iter(|| Snapshot::from_cbor(&snap).expect("decodes"))
    });
    g.bench_function("verify_restore_100k", |b| {
        // Dropping the restored replica and its write set afterwards is not part of
        // restoring it.
        b.iter_with_large_drop(|| {
            let mut r = Replica::new(id("g"));
            let ws = r
                .restore_bytes(&snap, &key.public(), &id("acme"), 0)
                .expect("restores");
            (r, ws)
        })
    });
    g.finish();
    summary(big.log(), &snap, &key);

    let mut g = c.benchmark_group("head");
    let head_id = mwp_core::Hash([7; 32]);
    g.bench_function("sign", |b| {
        b.iter(|| {
            mwp_core::head::SignedHead::sign(&id("acme"), &id("g"), 100_000, head_id, 1, &key)
                .expect("signs")
        })
    });
    let head = mwp_core::head::SignedHead::sign(&id("acme"), &id("g"), 100_000, head_id, 1, &key)
        .expect("signs");
    let public = key.public();
    g.bench_function("verify", |b| {
        b.iter(|| head.verify(&public, &id("g")).expect("verifies"))
    });
    g.finish();
}

/// Interleaved rounds of restoring the snapshot and of replaying the whole log it stands for
/// from bytes, medians, as one JSON line.
fn summary(log: &[Vec<u8>], snap: &[u8], key: &SecretKey) {
    let rounds = 3;
    let (mut restore, mut replay) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let start = std::time::Instant::now();
        let mut r = Replica::new(id("g"));
        let ws = r
            .restore_bytes(snap, &key.public(), &id("acme"), 0)
            .expect("restores");
        restore.push(start.elapsed().as_secs_f64());
        drop((r, ws));

        let start = std::time::Instant::now();
        let mut r = Replica::new(id("g"));
        for e in log {
            assert!(matches!(r.offer_bytes(e), Offer::Applied { .. }));
        }
        replay.push(start.elapsed().as_secs_f64());
        assert_eq!(r.cursor(), log.len() as u64);
    }
    let ms = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2] * 1e5).round() / 100.0
    };
    let (restore_ms, replay_ms) = (ms(&mut restore), ms(&mut replay));
    println!(
        "{}",
        json!({
            "bench": "snapshot",
            "events": log.len(),
            "snapshot_bytes": snap.len(),
            "rounds": rounds,
            "verify_restore_ms": restore_ms,
            "replay_from_bytes_ms": replay_ms,
            "restore_over_replay": (restore_ms / replay_ms * 1000.0).round() / 1000.0,
            "peak_rss_kib": common::peak_rss_kib(),
        })
    );
}

criterion_group!(replica, benches);
criterion_main!(replica);
