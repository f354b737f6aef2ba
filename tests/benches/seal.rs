//! The cost of archival under an Organization policy (SPEC §6a): sealing an archived
//! group's audit log and opening it again, beside the baselines a user would otherwise pay
//! for the same history: replaying it from its stored bytes (what opening must do anyway),
//! and SHA-256 of the plaintext (the floor of any integrity check over it).
//! Run: cargo bench -p mwp-tests --bench seal   (the last line is a JSON summary)

// `criterion_group!` defines an undocumented public function.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mwp_core::audit::OrgPolicy;
use mwp_core::{Event, GroupState, SecretKey};
use mwp_tests::fixtures::{archive, contract, Scenario};
use serde_json::json;

/// An archived group of `n` work items: its stored events and final snapshot.
fn archived(n: usize) -> (Vec<Vec<u8>>, Vec<u8>) {
    let mut s = Scenario::open("g1");
    for i in 0..n {
        s.ok(
            "alice",
            None,
            json!({"type": "create_work", "work": format!("w{i}"), "contract": contract(2, "low"),
                   "after": [], "spec": {"do": format!("step {i}"), "input": "x".repeat(64)}}),
        );
    }
    archive(&mut s);
    let g = s.auth.group(&s.group).expect("the group");
    let snap = g
        .latest_snapshot()
        .expect("the final snapshot")
        .bytes
        .clone();
    (g.log().to_vec(), snap)
}

fn replay(log: &[Vec<u8>]) -> GroupState {
    let mut state = None;
    for b in log {
        let e = Event::from_cbor_verified(b).expect("verifies");
        GroupState::apply_to(&mut state, &e).expect("applies");
    }
    state.expect("open")
}

fn secs(f: &mut dyn FnMut()) -> f64 {
    let t = std::time::Instant::now();
    f();
    t.elapsed().as_secs_f64()
}

fn bench(c: &mut Criterion) {
    let (log, snap) = archived(20_000);
    let (identity, recipient) = mwp_audit::generate_identity();
    let ids = mwp_audit::parse_identities(&identity).expect("identity");
    let policy = OrgPolicy {
        recipients: vec![recipient],
        retain_days: 1,
        remove_plain: false,
    };
    let key = SecretKey::for_transcript("@authority");
    let seal = || {
        mwp_audit::seal_to_vec(&policy, &log, &snap, 1, &key)
            .expect("seals")
            .0
    };
    let artifact = seal();
    let plain_len: usize = log.iter().map(|e| e.len() + 5).sum::<usize>() + snap.len();
    let mut plain = Vec::with_capacity(plain_len);
    log.iter().for_each(|e| plain.extend_from_slice(e));
    plain.extend_from_slice(&snap);

    let mut g = c.benchmark_group("seal");
    g.sample_size(10);
    g.throughput(Throughput::Elements(log.len() as u64));
    g.bench_function("seal (encode, encrypt, sign)", |b| b.iter(seal));
    g.bench_function("open (decrypt, verify chain, snapshot, state)", |b| {
        b.iter(|| mwp_audit::open(&artifact, &ids, None).expect("opens"))
    });
    g.bench_function("baseline: replay the stored bytes", |b| {
        b.iter(|| replay(&log))
    });
    g.bench_function("floor: sha256 of the plaintext", |b| {
        b.iter(|| mwp_core::canonical::sha256(&plain))
    });
    g.finish();

    // Interleaved rounds, medians, one JSON line.
    let mut t = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..5 {
        t[0].push(secs(&mut || drop(seal())));
        t[1].push(secs(&mut || drop(mwp_audit::open(&artifact, &ids, None))));
        t[2].push(secs(&mut || drop(replay(&log))));
        t[3].push(secs(&mut || {
            std::hint::black_box(mwp_core::canonical::sha256(&plain));
        }));
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let [s, o, r, h] = t.map(|mut v| med(&mut v));
    let mb = plain.len() as f64 / 1e6;
    println!(
        "{}",
        json!({
            "bench": "seal",
            "events": log.len(),
            "plaintext_bytes": plain.len(),
            "artifact_bytes": artifact.len(),
            "seal_ms": (s * 1e4).round() / 10.0,
            "seal_mb_per_s": (mb / s).round(),
            "open_ms": (o * 1e4).round() / 10.0,
            "replay_ms": (r * 1e4).round() / 10.0,
            "sha256_ms": (h * 1e4).round() / 10.0,
            "open_over_replay": ((o / r) * 1000.0).round() / 1000.0,
            "seal_over_sha256": ((s / h) * 1000.0).round() / 1000.0,
        })
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
