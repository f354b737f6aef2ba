//! Native replay rate of the benchmark log, to compare with the same log replayed by the
//! wasm build in Node (`node js/bench/replay.mjs`). Figures: docs/bench-wasm.md.
//! Run: cargo bench -p mwp-wasm --bench replay

// `criterion_group!` defines an undocumented public function.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn replay(c: &mut Criterion) {
    let items = 2500;
    let log = mwp_wasm::vectors::bench_log(items).expect("the bench log builds");
    let events = mwp_wasm::frames::split(&log).expect("frames").len();
    println!(
        "bench log: {events} events, {} bytes, sha256 {}",
        log.len(),
        hex::encode(mwp_core::canonical::sha256(&log))
    );
    let mut group = c.benchmark_group("replay");
    group.throughput(Throughput::Elements(events as u64));
    group.sample_size(10);
    group.bench_function("native replay_log (decode, verify, apply)", |b| {
        b.iter(|| mwp_wasm::vectors::replay_log(&log).expect("replays"))
    });
    group.finish();
}

criterion_group!(benches, replay);
criterion_main!(benches);
