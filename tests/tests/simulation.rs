//! The deterministic simulation (see `mwp_tests::sim`): every seed runs a mission with
//! dependencies to completion under lossy delivery, crashes, outages, lease expiries and lost
//! effect outcomes, checking the invariants after every step, and runs twice with the same
//! trace hash. One worker is the Group's planner: it disposes of every terminal event (some
//! fan out into follow-up items) and crashes before answering, before committing its answer
//! and after sending it; every terminal event must get exactly one disposition, and after a
//! restart no claim may come before the pending dispositions.
//!
//! `cargo test -p mwp-tests --test simulation` runs 500 seeds; set `MWP_SIM_SEEDS` for more
//! (and `MWP_SIM_FIRST` to start elsewhere), e.g. the nightly size:
//! `MWP_SIM_SEEDS=20000 cargo test --release -p mwp-tests --test simulation`.

use std::collections::BTreeMap;

use mwp_tests::sim::run;

/// Seeds that once failed; they stay.
/// Seed 23: a snapshot restore left buffered events stranded (fixed: restore drains).
/// Seed 1092: a claim the planner sent before a crash, delivered after its restart, was taken
/// for one made after it (fixed: the check judges only what the planner makes after a restart).
const REGRESSIONS: &[u64] = &[23, 1092];

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What a share of the seeds added up to.
#[derive(Default)]
struct Tally {
    totals: BTreeMap<&'static str, u64>,
    events: u64,
    runs: u64,
    steps: u64,
}

/// Runs every `workers`-th seed from `offset`, each twice, and adds up what they did.
fn run_share(seeds: &[u64], offset: usize, workers: usize) -> Tally {
    let mut tally = Tally::default();
    for &seed in seeds.iter().skip(offset).step_by(workers) {
        let a = run(seed).unwrap_or_else(|v| panic!("{v}"));
        let b = run(seed).unwrap_or_else(|v| panic!("second run: {v}"));
        assert_eq!(a.trace, b.trace, "seed {seed} is not deterministic");
        assert_eq!(a, b);
        for (k, v) in &a.stats {
            *tally.totals.entry(k).or_default() += v;
        }
        tally.events += a.events;
        tally.steps += a.steps;
        tally.runs += 1;
    }
    tally
}

/// The seeds are shared out among one thread per core: each seed's run is deterministic and
/// independent of the others, so the share changes only the wall time.
#[test]
fn simulation() {
    let first = env("MWP_SIM_FIRST", 0);
    let n = env("MWP_SIM_SEEDS", 500);
    let seeds: Vec<u64> = REGRESSIONS
        .iter()
        .copied()
        .chain(first..first + n)
        .collect();
    let workers = std::thread::available_parallelism()
        .map_or(1, |c| c.get())
        .clamp(1, seeds.len().max(1));
    let shares: Vec<Tally> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let seeds = &seeds;
                scope.spawn(move || run_share(seeds, w, workers))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut totals: BTreeMap<&'static str, u64> = BTreeMap::new();
    let (mut events, mut runs, mut steps) = (0u64, 0u64, 0u64);
    for share in shares {
        for (k, v) in share.totals {
            *totals.entry(k).or_default() += v;
        }
        events += share.events;
        runs += share.runs;
        steps += share.steps;
    }
    println!("{runs} seeds, {events} events, {steps} steps; {totals:?}");
    // The faults the harness promises actually happened.
    for what in [
        "crashes",
        "outages",
        "ticks",
        "dispatches",
        "uncertain",
        "dropped",
        "repeated",
        "restores",
        "expansions",
        "planner_crash_before_answer",
        "planner_crash_before_commit",
        "planner_crash_after_send",
        "planner_restarts_with_pending",
    ] {
        assert!(
            totals.get(what).copied().unwrap_or(0) > 0 || n < 50,
            "no {what} in {totals:?}"
        );
    }
}
