//! The chain of a Group's log (SPEC §2, "Event"): `seq` starts at 1 and has no gaps, and
//! `prev` chains every event to the one before (all zeros before seq 1). This module is the
//! one place that says whether an event continues a reader's place in that log; the readers
//! that take events one after another (a live tail, a replay, a page of stored rows, an
//! export, the events of a fork proof, and [`crate::GroupState::apply`], where every event
//! changes a state) ask it, and each words the answer its own way.
//!
//! A reader holds a [`Position`]: the last seq it took and that event's id when it knows it.
//! [`Position::check`] answers whether an event continues it: `Ok(())`, or the [`Break`], in
//! this order of precedence:
//!
//! 1. the event is of another group → [`Break::Group`];
//! 2. its seq is not the next one → [`Break::Seq`] (a gap when it is past it, a step back
//!    when it is at or before the position);
//! 3. its `prev` is not the id of the event before → [`Break::Prev`] (checked only when the
//!    position knows that id: a reader that starts after seq N without event N learns its id
//!    from the first event it takes).
//!
//! A reader that starts from a snapshot stands at [`Position::from_snapshot`]: after its seq,
//! whose event's id is its chain head. [`Position::check_last`] says whether the id a log
//! holds for the event at a position's seq is the one the position names: the rule that ties
//! a snapshot to its log (SPEC §8, "`chain_head` = id of event `seq`"), which every host that
//! restores a snapshot or serves one against its log asks, and words its own way
//! ([`ChainHead`]'s `Display` is the file store's wording).
//!
//! [`Position::advance`] then moves the position past the event. Whether the event hashes to
//! its id is the decoding's check (`Event::from_cbor_verified`, [`Event::verify`]), made by
//! the caller before or after, as its wording orders them. Nothing here allocates: a
//! position and a break are plain values.

use crate::crypto::Hash;
use crate::event::Event;
use crate::id::Id;
use crate::snapshot::Snapshot;

/// Where a reader is in a Group's log: the last seq taken and, when known, its event's id.
///
/// The group is the reader's and does not change, so it is given to [`Position::check`]
/// rather than held here: a position is a copyable value a host can keep beside anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Seq of the last event taken (0 before the first event of the log).
    pub seq: u64,
    /// Its id, when the reader knows it ([`Hash::ZERO`] at seq 0); `None` when the reader
    /// started after `seq` without reading that event: the next event's `prev` is then taken
    /// as it is, and the chain is checked from there on.
    pub id: Option<Hash>,
}

/// How an event fails to continue a [`Position`], in the order [`Position::check`] looks.
/// The event itself is the caller's, so a break names only what the event does not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Break {
    /// The event is of another group than the reader's (its `group` names which).
    Group,
    /// The event is not at the next seq: a gap when `received > expected`, a step back (a
    /// repeat or an older event) when it is below.
    Seq {
        /// The next seq: the position's plus one.
        expected: u64,
        /// The event's seq.
        received: u64,
    },
    /// The event is at the next seq, but its `prev` is not the id of the event before it.
    Prev {
        /// The event's seq (the event before it is `seq - 1`, the position's).
        seq: u64,
        /// The id of the event before, as the position knows it.
        expected: Hash,
        /// The event's `prev`.
        received: Hash,
    },
}

/// The id a log holds for the event at a position's seq is not the one the position names
/// ([`Position::check_last`]): for a snapshot, its chain head is not the id of the event at
/// its seq.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainHead {
    /// The position's seq: the snapshot's.
    pub seq: u64,
    /// The id the position names: the snapshot's chain head.
    pub expected: Hash,
    /// The id the log holds for the event at that seq.
    pub received: Hash,
}

/// "event N is not the snapshot's chain head".
impl std::fmt::Display for ChainHead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "event {} is not the snapshot's chain head", self.seq)
    }
}

impl Break {
    /// Whether this is a [`Break::Seq`] past the next seq: events were missed.
    pub fn is_gap(&self) -> bool {
        matches!(self, Break::Seq { expected, received } if received > expected)
    }
}

impl Position {
    /// Before the first event of a log: seq 0, whose id is all zeros.
    pub const START: Position = Position {
        seq: 0,
        id: Some(Hash::ZERO),
    };

    /// A reader that starts after `seq` without having read that event: its id is known only
    /// at seq 0 (all zeros), else learnt from the first event taken.
    pub fn after(seq: u64) -> Position {
        Position {
            seq,
            id: (seq == 0).then_some(Hash::ZERO),
        }
    }

    /// A reader that has taken event `seq` with id `id`.
    pub fn at(seq: u64, id: Hash) -> Position {
        Position { seq, id: Some(id) }
    }

    /// A reader that restored `snapshot`: after its seq, whose event's id is its chain head.
    pub fn from_snapshot(snapshot: &Snapshot) -> Position {
        Position::at(snapshot.seq, snapshot.chain_head)
    }

    /// Whether `id`, the id a log holds for the event at this position's seq (the id of the
    /// event row or record there, decoded and verified by the caller, or what a head row says
    /// it is), is the one this position names: `Ok` when it is, or when the position does not
    /// know its id ([`Position::after`]); the [`ChainHead`] naming both otherwise. From
    /// [`Position::from_snapshot`], this is the check that a snapshot's chain head is the id
    /// of the event at its seq.
    pub fn check_last(&self, id: &Hash) -> Result<(), ChainHead> {
        match self.id {
            Some(expected) if expected != *id => Err(ChainHead {
                seq: self.seq,
                expected,
                received: *id,
            }),
            _ => Ok(()),
        }
    }

    /// The seq the next event must have. (At `u64::MAX`, which no log reaches, it stays
    /// `u64::MAX`.)
    pub fn next_seq(&self) -> u64 {
        self.seq.saturating_add(1)
    }

    /// Whether `event` continues this position in `group`'s log: of `group`, at the next
    /// seq, and chained to the event before when its id is known. The first break found, in
    /// that order, otherwise. Its id and payload hash are not checked here.
    pub fn check(&self, group: &Id, event: &Event) -> Result<(), Break> {
        if &event.group != group {
            return Err(Break::Group);
        }
        let expected = self.next_seq();
        if event.seq != expected {
            return Err(Break::Seq {
                expected,
                received: event.seq,
            });
        }
        match self.id {
            Some(id) if event.prev != id => Err(Break::Prev {
                seq: event.seq,
                expected: id,
                received: event.prev,
            }),
            _ => Ok(()),
        }
    }

    /// Moves past `event`, which [`Position::check`] accepted: its seq and id become the
    /// position's.
    pub fn advance(&mut self, event: &Event) {
        debug_assert_eq!(event.seq, self.next_seq(), "advance after a check");
        *self = Position::at(event.seq, event.id);
    }

    /// [`Position::check`], then [`Position::advance`] when the event continues the
    /// position; on a break the position is unchanged.
    pub fn take(&mut self, group: &Id, event: &Event) -> Result<(), Break> {
        self.check(group, event)?;
        self.advance(event);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_common::transcript_events;

    fn id(s: &str) -> Id {
        Id::new(s).expect("id")
    }

    /// An event of `group` at `seq` with id `[n; 32]` and `prev`; the rest is any event's
    /// (nothing here reads it).
    fn event(group: &str, seq: u64, n: u8, prev: Hash) -> Event {
        let mut e = transcript_events()[0].clone();
        e.group = id(group);
        e.seq = seq;
        e.id = Hash([n; 32]);
        e.prev = prev;
        e
    }

    #[test]
    fn a_log_is_taken_from_seq_1_with_prev_all_zeros() {
        let g = id("g1");
        let mut pos = Position::START;
        assert_eq!(pos, Position::after(0));
        let first = event("g1", 1, 1, Hash::ZERO);
        pos.take(&g, &first).expect("seq 1 after the start");
        assert_eq!(pos, Position::at(1, Hash([1; 32])));
        pos.take(&g, &event("g1", 2, 2, Hash([1; 32])))
            .expect("seq 2 chained to seq 1");
        assert_eq!(pos, Position::at(2, Hash([2; 32])));
    }

    #[test]
    fn a_snapshot_stands_at_its_seq_with_its_chain_head() {
        let state = crate::test_common::transcript_states(usize::MAX)
            .pop()
            .expect("a state");
        let snap = Snapshot::build(
            &state,
            &crate::crypto::SecretKey::for_transcript("@authority"),
        )
        .expect("builds");
        let at = Position::from_snapshot(&snap);
        assert_eq!(at, Position::at(snap.seq, snap.chain_head));
        assert_eq!(at.check_last(&snap.chain_head), Ok(()));
        let other = Hash([7; 32]);
        let e = at.check_last(&other).expect_err("another id");
        assert_eq!(
            e,
            ChainHead {
                seq: snap.seq,
                expected: snap.chain_head,
                received: other
            }
        );
        assert_eq!(
            e.to_string(),
            format!("event {} is not the snapshot's chain head", snap.seq)
        );
        // A reader that never read the event at its seq takes any id.
        assert_eq!(Position::after(snap.seq).check_last(&other), Ok(()));
    }

    #[test]
    fn seq_1_must_chain_to_all_zeros() {
        let e = event("g1", 1, 1, Hash([9; 32]));
        assert_eq!(
            Position::START.check(&id("g1"), &e),
            Err(Break::Prev {
                seq: 1,
                expected: Hash::ZERO,
                received: Hash([9; 32])
            })
        );
    }

    #[test]
    fn a_reader_after_seq_n_learns_its_id_from_the_first_event() {
        let g = id("g1");
        let mut pos = Position::after(5);
        assert_eq!(pos.id, None);
        // Any prev is taken for seq 6: the reader never saw seq 5.
        pos.take(&g, &event("g1", 6, 6, Hash([42; 32])))
            .expect("the first event");
        assert_eq!(pos, Position::at(6, Hash([6; 32])));
        // From there on the chain is checked.
        assert_eq!(
            pos.check(&g, &event("g1", 7, 7, Hash([42; 32]))),
            Err(Break::Prev {
                seq: 7,
                expected: Hash([6; 32]),
                received: Hash([42; 32])
            })
        );
        pos.take(&g, &event("g1", 7, 7, Hash([6; 32])))
            .expect("chained");
    }

    #[test]
    fn another_group_comes_first() {
        // Another group at a wrong seq with a wrong prev: the group is what is named.
        let pos = Position::at(3, Hash([3; 32]));
        let e = event("g2", 9, 9, Hash([1; 32]));
        assert_eq!(pos.check(&id("g1"), &e), Err(Break::Group));
    }

    #[test]
    fn a_gap_and_a_step_back_name_both_seqs_and_come_before_prev() {
        let g = id("g1");
        let mut pos = Position::at(3, Hash([3; 32]));
        let gap = pos.check(&g, &event("g1", 6, 6, Hash([1; 32])));
        assert_eq!(
            gap,
            Err(Break::Seq {
                expected: 4,
                received: 6
            })
        );
        assert!(gap.err().is_some_and(|b| b.is_gap()));
        for seq in [0, 2, 3] {
            let back = pos.check(&g, &event("g1", seq, 1, Hash([3; 32])));
            assert_eq!(
                back,
                Err(Break::Seq {
                    expected: 4,
                    received: seq
                })
            );
            assert!(!back.err().is_some_and(|b| b.is_gap()));
        }
        // A break leaves the position as it was.
        let before = pos;
        assert!(pos.take(&g, &event("g1", 5, 5, Hash([3; 32]))).is_err());
        assert_eq!(pos, before);
    }

    #[test]
    fn a_prev_that_does_not_chain_names_the_seq_and_both_ids() {
        let pos = Position::at(3, Hash([3; 32]));
        assert_eq!(
            pos.check(&id("g1"), &event("g1", 4, 4, Hash([2; 32]))),
            Err(Break::Prev {
                seq: 4,
                expected: Hash([3; 32]),
                received: Hash([2; 32])
            })
        );
        assert!(!Break::Group.is_gap());
    }

    #[test]
    fn the_transcripts_logs_are_taken_whole() {
        // The events of a real log, from the start: every one continues the one before.
        let events: Vec<&Event> = transcript_events()
            .iter()
            .step_by(2) // each is followed by itself redacted
            .take_while(|e| e.group == transcript_events()[0].group)
            .collect();
        let g = events[0].group.clone();
        let mut pos = Position::START;
        for e in &events {
            if e.seq == 1 && pos.seq > 0 {
                break; // the next transcript's log
            }
            pos.take(&g, e).expect("a log chains");
        }
        assert!(pos.seq > 1);
    }
}
