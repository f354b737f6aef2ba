//! Replica (SPEC §7): dedup, buffering, gaps, verification, write sets, images.

use mwp_core::canonical::{self, Strictness};
use mwp_core::replica::{Offer, QueueChange, Replica, ReplicaImage, WriteSet};
use mwp_core::{Code, Event, GroupState, Limits};
use mwp_tests::fixtures::{id, rich, Rng, Scenario};
use serde_json::json;

fn applied(o: &Offer) -> &WriteSet {
    match o {
        Offer::Applied { write_set, .. } => write_set,
        other => panic!("expected applied, got {other:?}"),
    }
}

#[test]
fn in_order_apply_matches_the_authority_at_every_seq() {
    let s = rich();
    let hashes = s.hashes();
    let mut r = Replica::new(s.group.clone());
    for e in s.events() {
        let seq = e.seq;
        let o = r.offer(e);
        assert_eq!(applied(&o).cursor, seq);
        assert_eq!(r.state_hash().unwrap(), hashes[seq as usize], "seq {seq}");
    }
    assert_eq!(r.cursor() as usize, hashes.len() - 1);
    assert_eq!(r.state().unwrap(), s.state());
}

#[test]
fn any_delivery_order_with_repeats_converges_and_never_passes_a_gap() {
    let s = rich();
    let events = s.events();
    let hashes = s.hashes();
    for seed in 0..100u64 {
        let mut rng = Rng(seed);
        // Every event once or more, shuffled.
        let mut deliveries: Vec<Event> = Vec::new();
        for e in &events {
            for _ in 0..=rng.below(3) {
                deliveries.push(e.clone());
            }
        }
        for i in (1..deliveries.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            deliveries.swap(i, j);
        }
        let mut r = Replica::new(s.group.clone());
        let mut seen = std::collections::BTreeSet::new();
        for e in deliveries {
            let seq = e.seq;
            let before = r.cursor();
            let o = r.offer(e);
            seen.insert(seq);
            // The cursor is exactly the contiguous prefix delivered so far.
            let contiguous = (1..).take_while(|n| seen.contains(n)).last().unwrap_or(0);
            assert_eq!(r.cursor(), contiguous, "seed {seed}");
            match &o {
                Offer::Duplicate => assert!(seq <= before || r.cursor() < seq),
                Offer::Buffered => assert!(seq > before + 1),
                Offer::Applied { write_set, .. } => {
                    assert_eq!(seq, before + 1);
                    let seqs: Vec<u64> = write_set.applied.iter().map(|a| a.seq).collect();
                    assert_eq!(seqs, (before + 1..=r.cursor()).collect::<Vec<_>>());
                }
                Offer::Rejected(e) => panic!("seed {seed}: {e}"),
            }
            if r.cursor() != before {
                assert_eq!(r.state_hash().unwrap(), hashes[r.cursor() as usize]);
            }
        }
        assert_eq!(r.cursor() as usize, events.len());
        assert_eq!(r.buffered(), 0);
    }
}

#[test]
fn a_repeated_event_is_a_duplicate_whenever_it_comes() {
    let s = rich();
    let ev = s.events();
    let mut r = Replica::new(s.group.clone());
    assert_eq!(r.offer(ev[2].clone()), Offer::Buffered);
    assert_eq!(r.offer(ev[2].clone()), Offer::Duplicate);
    applied(&r.offer(ev[0].clone()));
    assert_eq!(r.offer(ev[0].clone()), Offer::Duplicate);
    applied(&r.offer(ev[1].clone()));
    assert_eq!(r.cursor(), 3);
    assert_eq!(r.offer(ev[2].clone()), Offer::Duplicate);
}

fn rejected(o: Offer) -> mwp_core::Error {
    match o {
        Offer::Rejected(e) => e,
        other => panic!("expected rejected, got {other:?}"),
    }
}

#[test]
fn events_that_do_not_verify_are_rejected_and_never_applied() {
    let s = rich();
    let ev = s.events();
    let mut r = Replica::new(s.group.clone());
    for e in &ev[..5] {
        applied(&r.offer(e.clone()));
    }
    let before = r.state_hash().unwrap();
    let next = ev[5].clone();

    // A changed opaque value: payload hash no longer matches.
    let mut changed = serde_json::to_value(&next).unwrap();
    changed["kind"]["spec"] = json!({"do": "something else"});
    let bad: Event = serde_json::from_value(changed).unwrap();
    let e = rejected(r.offer(bad));
    assert_eq!(e.code, Code::LogCorrupt);
    assert!(e.message.contains("payload hash"), "{e}");

    // A changed header field: the id no longer matches.
    let mut bad = next.clone();
    bad.at += 1;
    let e = rejected(r.offer(bad));
    assert_eq!(e.code, Code::LogCorrupt);
    assert!(e.message.contains("id"), "{e}");

    // A self-consistent event with a broken prev chain.
    let mut bad = next.clone();
    bad.prev = ev[0].id;
    bad.id = bad.compute_id().unwrap();
    let e = rejected(r.offer(bad.clone()));
    assert_eq!(e.code, Code::LogCorrupt);
    assert!(e.message.contains("prev"), "{e}");
    // ... also when it waits in the buffer first: dropped when drained, never applied.
    let mut bad_later = ev[6].clone();
    bad_later.prev = ev[1].id;
    bad_later.id = bad_later.compute_id().unwrap();
    assert_eq!(r.offer(bad_later), Offer::Buffered);
    match r.offer(next.clone()) {
        Offer::Applied {
            cursor, dropped, ..
        } => {
            assert_eq!(cursor, 6);
            assert_eq!(dropped.len(), 1);
            assert_eq!(dropped[0].code, Code::LogCorrupt);
        }
        other => panic!("{other:?}"),
    }
    assert_ne!(r.state_hash().unwrap(), before);
    applied(&r.offer(ev[6].clone()));

    // Another group's event.
    let other = Scenario::open("g2").events().remove(0);
    let e = rejected(r.offer(other));
    assert_eq!(e.code, Code::LogCorrupt);

    // A different (self-consistent) event at an applied seq.
    let mut fork = ev[3].clone();
    fork.at += 5;
    fork.id = fork.compute_id().unwrap();
    let e = rejected(r.offer(fork));
    assert_eq!(e.code, Code::LogCorrupt);
    assert_eq!(r.cursor(), 7);
}

/// The bytes path (`offer_bytes_with`) answers as `offer` does on the decoded event, shows
/// `seen` exactly the events whose bytes decode and verify, and names the seq of bytes whose
/// header was read but whose payload hash or id does not verify.
#[test]
fn bytes_are_offered_as_their_event_and_seen_only_when_they_verify() {
    let s = rich();
    let ev = s.events();
    let encoded: Vec<Vec<u8>> = ev.iter().map(|e| e.to_cbor().unwrap()).collect();
    let mut by_event = Replica::new(s.group.clone());
    let mut by_bytes = Replica::new(s.group.clone());
    // Out of order with a repeat: buffered, applied with what it drains, duplicate.
    for i in [2, 0, 1, 1, 3] {
        let mut shown = Vec::new();
        let answer = by_bytes.offer_bytes_with(&encoded[i], |e| shown.push(e.clone()));
        assert_eq!(shown, [ev[i].clone()]);
        assert_eq!(answer, by_event.offer(ev[i].clone()), "event {i}");
    }
    let (hash, cursor) = (by_bytes.state_hash().unwrap(), by_bytes.cursor());
    assert_eq!(cursor, 4);

    let mut tampered = ev[4].clone();
    tampered.at += 1; // the id no longer matches
    let mut seen = false;
    let e = rejected(by_bytes.offer_bytes_with(&tampered.to_cbor().unwrap(), |_| seen = true));
    assert!(!seen);
    assert_eq!(e.code, Code::LogCorrupt);
    assert_eq!(e.details.get("seq"), Some(&json!(ev[4].seq)), "{e}");

    let e = rejected(by_bytes.offer_bytes_with(&encoded[4][..20], |_| seen = true));
    assert!(!seen);
    assert_eq!(e.code, Code::LogCorrupt);
    assert_eq!(e.details.get("seq"), None, "{e}");
    assert_eq!(
        (by_bytes.state_hash().unwrap(), by_bytes.cursor()),
        (hash, cursor)
    );
}

#[test]
fn a_rejected_event_changes_nothing() {
    let s = rich();
    let ev = s.events();
    let mut r = Replica::new(s.group.clone());
    for e in &ev[..8] {
        applied(&r.offer(e.clone()));
    }
    let (hash, cursor, queue) = (r.state_hash().unwrap(), r.cursor(), r.queue().clone());
    let mut bad = ev[8].clone();
    bad.revision += 7;
    bad.id = bad.compute_id().unwrap();
    rejected(r.offer(bad));
    assert_eq!(
        (r.state_hash().unwrap(), r.cursor(), r.queue()),
        (hash, cursor, &queue)
    );
}

#[test]
fn redacted_events_verify_and_apply_to_the_same_state() {
    let s = rich();
    let stored = s.events();
    let redacted = stored.iter().filter(|e| {
        serde_json::to_string(&e.kind)
            .unwrap()
            .contains("$redacted")
    });
    assert!(
        redacted.count() >= 1,
        "the stored log holds a redacted event"
    );
    // Also redact every event's values: the chain still verifies and the state is the same.
    let mut r = Replica::new(s.group.clone());
    for mut e in stored {
        e.redact().unwrap();
        applied(&r.offer(e));
    }
    assert_eq!(r.state_hash().unwrap(), s.state().hash().unwrap());
}

#[test]
fn the_buffer_is_bounded() {
    let s = rich();
    let ev = s.events();
    let limits = Limits {
        max_buffered_events: 3,
        ..Limits::default()
    };
    let mut r = Replica::with_limits(s.group.clone(), limits);
    for e in &ev[1..4] {
        assert_eq!(r.offer(e.clone()), Offer::Buffered);
    }
    let e = rejected(r.offer(ev[4].clone()));
    assert_eq!(e.code, Code::Malformed);
    assert_eq!(e.details["limit"], json!(3));
    // Filling the gap drains the buffer; the refused event is simply delivered again.
    assert_eq!(applied(&r.offer(ev[0].clone())).cursor, 4);
    assert_eq!(applied(&r.offer(ev[4].clone())).cursor, 5);
}

#[test]
fn write_sets_rebuild_the_same_state_queue_and_checkpoints() {
    let s = rich();
    let mut r = Replica::new(s.group.clone());
    let mut image = ReplicaImage::default();
    let mut rng = Rng(7);
    let mut pending: Vec<Event> = Vec::new();
    for e in s.events() {
        pending.push(e);
        // Deliver in small reversed batches, so write sets cover several events.
        if rng.chance(400) {
            continue;
        }
        for e in pending.drain(..).rev() {
            if let Offer::Applied { write_set, .. } = r.offer(e) {
                // Every write set survives both serialisations unchanged.
                let cbor = canonical::to_vec(&write_set).unwrap();
                let back: WriteSet = canonical::from_slice(&cbor, Strictness::Canonical).unwrap();
                assert_eq!(back, write_set);
                let json = serde_json::to_string(&write_set).unwrap();
                assert_eq!(serde_json::from_str::<WriteSet>(&json).unwrap(), write_set);
                image.commit(&write_set).unwrap();
                let reopened =
                    Replica::from_image(s.group.clone(), &image, Limits::default()).unwrap();
                assert_eq!(reopened.state_hash().unwrap(), r.state_hash().unwrap());
                assert_eq!(reopened.queue(), r.queue());
                assert_eq!(image.cursor, r.cursor());
            }
        }
    }
    assert_eq!(image.state().unwrap().as_ref(), Some(s.state()));
    // The redacted checkpoint of w1 is stored as its marker; w6's latest is kept as data.
    let w1 = &image.checkpoints[&id("w1")];
    assert!(
        mwp_core::opaque::redacted_hash(&w1.data).is_some(),
        "{w1:?}"
    );
    assert_eq!(image.checkpoints[&id("w6")].data, json!({"d": 6}));
}

#[test]
fn write_sets_must_be_committed_in_order() {
    let s = rich();
    let ev = s.events();
    let mut r = Replica::new(s.group.clone());
    let first = applied(&r.offer(ev[0].clone())).clone();
    let second = applied(&r.offer(ev[1].clone())).clone();
    let mut image = ReplicaImage::default();
    let e = image.commit(&second).unwrap_err();
    assert_eq!(e.code, Code::Storage);
    assert_eq!(image, ReplicaImage::default());
    image.commit(&first).unwrap();
    image.commit(&second).unwrap();
    assert_eq!(image.cursor, 2);
}

#[test]
fn the_queue_is_the_frontier() {
    let s = rich();
    let mut r = Replica::new(s.group.clone());
    let mut state: Option<GroupState> = None;
    for e in s.events() {
        GroupState::apply_to(&mut state, &e).unwrap();
        let o = r.offer(e);
        for q in &applied(&o).queue {
            if let QueueChange::Put(entry) = q {
                assert!(r.queue().contains_key(&entry.work));
            }
        }
        let st = state.as_ref().unwrap();
        for now in [0, 1000, 1010, 2000, 5000, 1_000_000] {
            let ours: Vec<_> = r.frontier(now).map(|e| e.work.clone()).collect();
            let theirs: Vec<_> = st.frontier(now).into_iter().cloned().collect();
            assert_eq!(ours, theirs, "at seq {} now {now}", st.seq);
        }
    }
}

#[test]
fn a_restore_applies_buffered_events_it_made_contiguous() {
    // Regression (simulation seed 23): events buffered beyond a gap that a snapshot then
    // covers must be applied by the restore, not left stranded (a re-offer of a buffered
    // event is a duplicate).
    let s = rich();
    let ev = s.events();
    let mut at10 = None;
    for e in &ev[..10] {
        GroupState::apply_to(&mut at10, e).unwrap();
    }
    let bytes = mwp_core::snapshot::Snapshot::build_cbor(
        at10.as_ref().unwrap(),
        &mwp_core::SecretKey::for_transcript("@authority"),
    )
    .unwrap();
    let mut r = Replica::new(s.group.clone());
    for e in &ev[..3] {
        applied(&r.offer(e.clone()));
    }
    for e in &ev[10..14] {
        assert_eq!(r.offer(e.clone()), Offer::Buffered);
    }
    let ws = r
        .restore_bytes(&bytes, &s.state().authority_key, &s.org, r.cursor())
        .unwrap();
    assert_eq!(r.cursor(), 14);
    assert_eq!(ws.cursor, 14);
    assert_eq!(r.buffered(), 0);
    let seqs: Vec<u64> = ws.applied.iter().map(|a| a.seq).collect();
    assert_eq!(seqs, vec![10, 11, 12, 13, 14]);
    let mut image = ReplicaImage::default();
    image.commit(&ws).unwrap();
    assert_eq!(
        image.state().unwrap().unwrap().hash().unwrap(),
        r.state_hash().unwrap()
    );
}
