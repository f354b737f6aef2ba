//! `chain::Position` against a reference written from SPEC §2 alone: a run of events read
//! after seq `s` continues the log iff event `i` is of the group, at seq `s + 1 + i`, and its
//! `prev` is the id of the event before it (event `i - 1`'s, or the start's when the reader
//! knows it; all zeros at seq 0). Short logs are drawn, then mutated (a seq, a `prev`, a
//! group changed; events swapped, dropped, repeated): taking them one at a time stops at
//! exactly the first event the reference refuses, with the break it names, and moves the
//! position past exactly the events before it.

use mwp_core::chain::{Break, Position};
use mwp_core::crypto::Hash;
use mwp_core::{Code, Event, GroupState, Id};
use proptest::prelude::*;

mod common;
use common::transcript_events;

fn id(s: &str) -> Id {
    Id::new(s).expect("test IDs are valid")
}

/// The id of the `n`th event drawn (never all zeros).
fn nth_id(n: usize) -> Hash {
    Hash([n as u8 + 1; 32])
}

/// How a drawn log is damaged.
#[derive(Debug, Clone)]
enum Mutation {
    Seq(usize, u64),
    /// `prev` set to the id of drawn event `k` (`None`: all zeros).
    Prev(usize, Option<usize>),
    Group(usize),
    Swap(usize, usize),
    Drop(usize),
    Repeat(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (0..8usize, 0..12u64).prop_map(|(i, s)| Mutation::Seq(i, s)),
        (0..8usize, proptest::option::of(0..8usize)).prop_map(|(i, k)| Mutation::Prev(i, k)),
        (0..8usize).prop_map(Mutation::Group),
        (0..8usize, 0..8usize).prop_map(|(i, j)| Mutation::Swap(i, j)),
        (0..8usize).prop_map(Mutation::Drop),
        (0..8usize).prop_map(Mutation::Repeat),
    ]
}

/// The reference: the index of the first event that does not continue the log, and why.
fn first_refused(
    group: &Id,
    start: u64,
    start_id: Option<Hash>,
    events: &[Event],
) -> Option<(usize, Break)> {
    (0..events.len()).find_map(|i| {
        let e = &events[i];
        let seq = start + 1 + i as u64;
        let before = if i == 0 {
            start_id
        } else {
            Some(events[i - 1].id)
        };
        if &e.group != group {
            Some((i, Break::Group))
        } else if e.seq != seq {
            Some((
                i,
                Break::Seq {
                    expected: seq,
                    received: e.seq,
                },
            ))
        } else {
            match before {
                Some(p) if p != e.prev => Some((
                    i,
                    Break::Prev {
                        seq,
                        expected: p,
                        received: e.prev,
                    },
                )),
                _ => None,
            }
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn taking_events_stops_where_the_reference_does(
        start in 0..4u64,
        known in any::<bool>(),
        len in 0..7usize,
        mutations in proptest::collection::vec(mutation(), 0..3),
    ) {
        let group = id("g1");
        // The reader's start: seq 0 is all zeros; after another seq it knows event `start`'s
        // id or not.
        let start_id = Hash([0xee; 32]);
        let pos0 = match (start, known) {
            (0, _) => Position::START,
            (s, true) => Position::at(s, start_id),
            (s, false) => Position::after(s),
        };
        let chain_start = if start == 0 { Hash::ZERO } else { start_id };
        let mut events: Vec<Event> = (0..len)
            .map(|i| {
                let mut e = transcript_events()[0].clone();
                e.group = group.clone();
                e.seq = start + 1 + i as u64;
                e.id = nth_id(i);
                e.prev = if i == 0 { chain_start } else { nth_id(i - 1) };
                e
            })
            .collect();
        for m in mutations {
            let n = events.len();
            if n == 0 {
                break;
            }
            match m {
                Mutation::Seq(i, s) => events[i % n].seq = s,
                Mutation::Prev(i, k) => events[i % n].prev = k.map_or(Hash::ZERO, nth_id),
                Mutation::Group(i) => events[i % n].group = id("g2"),
                Mutation::Swap(i, j) => events.swap(i % n, j % n),
                Mutation::Drop(i) => {
                    events.remove(i % n);
                }
                Mutation::Repeat(i) => {
                    let e = events[i % n].clone();
                    events.insert(i % n, e);
                }
            }
        }

        let mut pos = pos0;
        let mut taken = 0;
        let mut refused = None;
        for (i, e) in events.iter().enumerate() {
            let before = pos;
            match pos.take(&group, e) {
                Ok(()) => {
                    prop_assert_eq!(pos, Position::at(e.seq, e.id));
                    taken += 1;
                }
                Err(b) => {
                    prop_assert_eq!(pos, before, "a break moves nothing");
                    prop_assert_eq!(pos.check(&group, e), Err(b), "check and take agree");
                    refused = Some((i, b));
                    break;
                }
            }
        }
        let known_start = (start == 0 || known).then_some(chain_start);
        let want = first_refused(&group, start, known_start, &events);
        prop_assert_eq!(refused, want);
        prop_assert_eq!(taken, want.map_or(events.len(), |(i, _)| i));
        prop_assert_eq!(pos.seq, start + taken as u64);
    }
}

/// A state asks [`Position`] too: [`GroupState::apply`] refuses an event that does not
/// continue the state's log as `LOG_CORRUPT`, worded by the break, and changes nothing; the
/// genesis event must continue the start of a log.
#[test]
fn a_state_refuses_what_does_not_continue_its_log() {
    // The first transcript's log: every other event (the rest are their redacted copies).
    let first = &transcript_events()[0];
    let log: Vec<&Event> = transcript_events()
        .iter()
        .step_by(2)
        .enumerate()
        .take_while(|(i, e)| e.group == first.group && e.seq == *i as u64 + 1)
        .map(|(_, e)| e)
        .collect();
    assert!(
        log.len() >= 3,
        "the first transcript has at least three events"
    );
    let mut state = GroupState::genesis(log[0]).expect("genesis applies");
    state.apply(log[1]).expect("seq 2 applies");
    let before = state.hash().expect("hashes");

    type Damage = fn(&mut Event);
    let refusals: [(Damage, &str); 3] = [
        (
            |e| e.group = id("elsewhere"),
            "event seq 3 does not apply: it belongs to group elsewhere",
        ),
        (|e| e.seq = 5, "event seq 5 does not apply: expected seq 3"),
        (
            |e| e.prev = Hash([7; 32]),
            "event seq 3 does not apply: its prev is not the id of the event before it",
        ),
    ];
    for (damage, want) in refusals {
        let mut e = log[2].clone();
        damage(&mut e);
        let err = state.apply(&e).expect_err("refused");
        assert_eq!((err.code, err.message.as_str()), (Code::LogCorrupt, want));
        assert_eq!(
            state.hash().expect("hashes"),
            before,
            "a refusal changes nothing"
        );
    }
    state.apply(log[2]).expect("the event itself applies");

    for damage in [
        |e: &mut Event| e.seq = 2,
        |e: &mut Event| e.prev = Hash([7; 32]),
    ] {
        let mut e = log[0].clone();
        damage(&mut e);
        let err = GroupState::genesis(&e).expect_err("refused");
        assert!(
            err.message
                .ends_with("group_opened must be seq 1 with a zero prev"),
            "{err}"
        );
    }
}
