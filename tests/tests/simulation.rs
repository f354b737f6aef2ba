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

#[test]
fn simulation() {
    let first = env("MWP_SIM_FIRST", 0);
    let n = env("MWP_SIM_SEEDS", 500);
    let mut totals: BTreeMap<&'static str, u64> = BTreeMap::new();
    let (mut events, mut runs, mut steps) = (0u64, 0u64, 0u64);
    for seed in REGRESSIONS.iter().copied().chain(first..first + n) {
        let a = run(seed).unwrap_or_else(|v| panic!("{v}"));
        let b = run(seed).unwrap_or_else(|v| panic!("second run: {v}"));
        assert_eq!(a.trace, b.trace, "seed {seed} is not deterministic");
        assert_eq!(a, b);
        for (k, v) in &a.stats {
            *totals.entry(k).or_default() += v;
        }
        events += a.events;
        steps += a.steps;
        runs += 1;
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
