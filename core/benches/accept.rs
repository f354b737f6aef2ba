//! Accept throughput: commands decided and applied per second, with and without Ed25519
//! signature checking, beside the raw Ed25519 verify rate measured in the same run; and the
//! accepted events' stored bytes, written by `Event::to_cbor` beside the generic encoder.
//!
//! `cargo bench -p mwp-core --bench accept`
// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use mwp_core::accept::accept_preverified;
use mwp_core::{accept, Command, Decision, GroupState, Limits, Result};

#[allow(dead_code)] // the workload only
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

type Decide = fn(Option<&GroupState>, &Command, u64, &Limits) -> Result<Decision>;

fn run(genesis: &GroupState, cmds: &[Command], decide: Decide) -> GroupState {
    let limits = Limits::default();
    let mut state = Some(genesis.clone());
    for cmd in cmds {
        match decide(state.as_ref(), cmd, common::NOW_MS, &limits) {
            Ok(Decision::Accepted(event)) => {
                GroupState::apply_to(&mut state, &event).expect("accepted events apply")
            }
            other => panic!("the workload is valid: {other:?}"),
        }
    }
    state.expect("open")
}

fn bench(c: &mut Criterion) {
    let limits = Limits::default();
    let mut genesis = None;
    let Decision::Accepted(e) = accept(None, &common::open(), 0, &limits).expect("opens") else {
        panic!("genesis is accepted")
    };
    GroupState::apply_to(&mut genesis, &e).expect("applies");
    let genesis = genesis.expect("open");
    let cmds = common::workload(1_000);

    let mut group = c.benchmark_group("accept");
    group.sample_size(10);
    group.throughput(Throughput::Elements(cmds.len() as u64));
    group.bench_function("accept+apply, signatures checked", |b| {
        b.iter_batched(
            || (),
            |()| run(&genesis, &cmds, accept),
            BatchSize::PerIteration,
        )
    });
    group.bench_function("accept+apply, signatures not checked", |b| {
        b.iter_batched(
            || (),
            |()| run(&genesis, &cmds, unchecked),
            BatchSize::PerIteration,
        )
    });
    // The baseline: Ed25519 verification of the same commands' signed bytes, with keys
    // already decompressed — the fastest a signature check can be.
    let prepared: Vec<(
        ed25519_dalek::VerifyingKey,
        Vec<u8>,
        ed25519_dalek::Signature,
    )> = cmds
        .iter()
        .map(|c| {
            let key = genesis.members[&c.actor].key;
            (
                ed25519_dalek::VerifyingKey::from_bytes(&key.0).expect("valid key"),
                c.content_bytes().expect("encodes"),
                ed25519_dalek::Signature::from_bytes(&c.sig.0),
            )
        })
        .collect();
    group.bench_function("raw ed25519 verify", |b| {
        b.iter(|| {
            for (key, msg, sig) in &prepared {
                ed25519_dalek::Verifier::verify(key, msg, sig).expect("verifies");
            }
        })
    });
    // The rule every host uses (SPEC §2): the same check, strict.
    group.bench_function("raw ed25519 verify_strict", |b| {
        b.iter(|| {
            for (key, msg, sig) in &prepared {
                key.verify_strict(msg, sig).expect("verifies");
            }
        })
    });
    group.finish();

    // The stored bytes of each accepted event: the authority's encoder beside the generic one
    // (the baseline it replaced), over the workload's events.
    let mut events = Vec::new();
    let mut state = Some(genesis.clone());
    for cmd in &cmds {
        if let Ok(Decision::Accepted(event)) = accept(state.as_ref(), cmd, common::NOW_MS, &limits)
        {
            GroupState::apply_to(&mut state, &event).expect("accepted events apply");
            events.push(event);
        }
    }
    for e in &events {
        assert_eq!(
            e.to_cbor().expect("encodes"),
            mwp_core::canonical::to_vec(e).expect("encodes")
        );
    }
    let mut group = c.benchmark_group("event_bytes");
    group.throughput(Throughput::Elements(events.len() as u64));
    group.bench_function("Event::to_cbor", |b| {
        b.iter(|| {
            for e in &events {
                std::hint::black_box(e.to_cbor().expect("encodes"));
            }
        })
    });
    group.bench_function("canonical::to_vec (generic)", |b| {
        b.iter(|| {
            for e in &events {
                std::hint::black_box(mwp_core::canonical::to_vec(e).expect("encodes"));
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
