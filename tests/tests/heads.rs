//! Signed heads (SPEC §8a): a replica verifies its chain through a head signed by the key the
//! caller pins; a forged tail is refused or stays provisional; a fork yields a proof that
//! verifies on its own.

use mwp_core::head::{ForkProof, SignedHead};
use mwp_core::replica::{HeadOffer, Offer, Replica};
use mwp_core::{Code, Event, Hash, PublicKey, SecretKey};
use mwp_tests::fixtures::{contract, id, Scenario};
use serde_json::json;

fn authority() -> SecretKey {
    SecretKey::for_transcript("@authority")
}

fn head_of(e: &Event, key: &SecretKey) -> SignedHead {
    SignedHead::sign(&id("acme"), &e.group, e.seq, e.id, 5_000, key).unwrap()
}

/// Two scenarios sharing a genesis and three events, then diverging: the honest log and a
/// mirror's forged tail, each a valid hash chain.
fn honest_and_forged() -> (Vec<Event>, Vec<Event>) {
    let mut a = Scenario::open("g1");
    let mut b = Scenario::open("g1");
    for s in [&mut a, &mut b] {
        s.ok("alice", None, json!({"type": "create_work", "work": "w1", "contract": contract(2, "low"), "after": [], "spec": {}}));
    }
    a.ok("alice", None, json!({"type": "create_work", "work": "w2", "contract": contract(2, "low"), "after": [], "spec": {}}));
    b.ok("alice", None, json!({"type": "create_work", "work": "evil", "contract": contract(2, "low"), "after": [], "spec": {}}));
    for s in [&mut a, &mut b] {
        s.ok("alice", None, json!({"type": "create_work", "work": "w3", "contract": contract(2, "low"), "after": [], "spec": {}}));
    }
    let (a, b) = (a.events(), b.events());
    assert_eq!(a[1].id, b[1].id, "a shared prefix");
    assert_ne!(a[2].id, b[2].id, "then a fork");
    (a, b)
}

fn apply_all(r: &mut Replica, events: &[Event]) {
    for e in events {
        assert!(matches!(
            r.offer(e.clone()),
            Offer::Applied { .. } | Offer::Duplicate
        ));
    }
}

#[test]
fn events_past_the_last_verified_head_are_provisional_until_one_verifies_them() {
    let (honest, _) = honest_and_forged();
    let key = authority();
    let mut r = Replica::new(id("g1"));
    apply_all(&mut r, &honest[..2]);
    assert_eq!(r.verified_through(), 0);
    assert!(r.is_provisional(1));
    let through = r
        .offer_head(&head_of(&honest[1], &key), &key.public())
        .unwrap();
    assert_eq!(through, HeadOffer::Verified { through: 2 });
    assert!(!r.is_provisional(2));
    // A head ahead of the cursor waits, then verifies when its event is applied.
    let ahead = head_of(&honest[3], &key);
    assert_eq!(
        r.offer_head(&ahead, &key.public()).unwrap(),
        HeadOffer::Ahead { through: 2 }
    );
    apply_all(&mut r, &honest[2..3]);
    assert!(r.is_provisional(3));
    apply_all(&mut r, &honest[3..]);
    assert_eq!(r.verified_through(), 4);
    assert_eq!(r.verified_head(), Some(&ahead));
}

#[test]
fn a_forged_tail_is_refused_at_the_signed_heads_seq_and_nothing_changes() {
    let (honest, forged) = honest_and_forged();
    let key = authority();
    let mut r = Replica::new(id("g1"));
    apply_all(&mut r, &forged[..2]);
    r.offer_head(&head_of(&honest[3], &key), &key.public())
        .unwrap();
    // The mirror's seq 3 chains; it stays provisional. Its seq 4 contradicts the head.
    apply_all(&mut r, &forged[2..3]);
    assert!(r.is_provisional(3));
    let hash = r.state_hash().unwrap();
    match r.offer(forged[3].clone()) {
        Offer::Rejected(e) => {
            assert_eq!(e.code, Code::Fork, "{e}");
            assert_eq!(e.details["seq"], 4);
            assert_eq!(e.details["heads"].as_array().unwrap().len(), 1);
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!((r.cursor(), r.state_hash().unwrap()), (3, hash));
    assert_eq!(r.verified_through(), 0);
}

#[test]
fn a_head_at_an_applied_seq_with_another_id_is_a_fork() {
    let (honest, forged) = honest_and_forged();
    let key = authority();
    let mut r = Replica::new(id("g1"));
    apply_all(&mut r, &forged);
    let e = r
        .offer_head(&head_of(&honest[3], &key), &key.public())
        .unwrap_err();
    assert_eq!(e.code, Code::Fork);
    assert_eq!(e.details["chain_id"], forged[3].id.to_hex());
    assert_eq!(r.verified_through(), 0);
}

#[test]
fn a_head_signed_by_another_key_or_for_another_group_is_refused() {
    let (honest, _) = honest_and_forged();
    let key = authority();
    let mallory = SecretKey::for_transcript("mallory");
    let mut r = Replica::new(id("g1"));
    apply_all(&mut r, &honest);
    let e = r
        .offer_head(&head_of(&honest[3], &mallory), &key.public())
        .unwrap_err();
    assert_eq!(
        (e.code, e.details["check"].as_str()),
        (Code::HeadInvalid, Some("signature"))
    );
    // The mirror cannot choose the key: one it signed with verifies only under itself.
    let wrong_org = SignedHead::sign(&id("other"), &id("g1"), 4, honest[3].id, 1, &key).unwrap();
    let e = r.offer_head(&wrong_org, &key.public()).unwrap_err();
    assert_eq!(e.details["check"], "org");
    let wrong_group = SignedHead::sign(&id("acme"), &id("g2"), 4, honest[3].id, 1, &key).unwrap();
    assert_eq!(
        r.offer_head(&wrong_group, &key.public())
            .unwrap_err()
            .details["check"],
        "group"
    );
    assert_eq!(r.verified_through(), 0);
}

#[test]
fn two_heads_at_one_seq_give_a_proof_that_verifies_alone() {
    let (honest, forged) = honest_and_forged();
    let key = authority();
    let mut r = Replica::new(id("g1"));
    apply_all(&mut r, &honest);
    r.offer_head(&head_of(&honest[3], &key), &key.public())
        .unwrap();
    // The authority signs another history at seq 4: equivocation.
    let e = r
        .offer_head(&head_of(&forged[3], &key), &key.public())
        .unwrap_err();
    assert_eq!(e.code, Code::Fork);
    let proof = hex_decode(e.details["proof"].as_str().unwrap());
    let fork = ForkProof::from_cbor(&proof)
        .unwrap()
        .verify(Some(&key.public()))
        .unwrap();
    assert_eq!((fork.seq, fork.kind), (4, "heads"));
}

#[test]
fn a_chain_reaching_one_head_and_passing_another_with_another_id_is_a_fork() {
    let (honest, forged) = honest_and_forged();
    let key = authority();
    let pk: PublicKey = key.public();
    // Head at seq 3 over the forged history, head at seq 4 over the honest one, and the
    // honest events 3..=4.
    let lo = head_of(&forged[2], &key);
    let hi = head_of(&honest[3], &key);
    let proof = ForkProof::of_chain(pk, lo.clone(), hi.clone(), honest[2..4].to_vec());
    let bytes = proof.to_cbor().unwrap();
    let fork = ForkProof::from_cbor(&bytes).unwrap().verify(None).unwrap();
    assert_eq!((fork.seq, fork.kind), (3, "chain"));
    // The same heads with the forged events prove nothing: the chain does not reach `hi`.
    let bogus = ForkProof::of_chain(pk, lo, hi.clone(), forged[2..4].to_vec());
    assert!(bogus.verify(None).is_err());
    // Consistent heads prove nothing either.
    let agree = ForkProof::of_chain(pk, head_of(&honest[2], &key), hi, honest[2..4].to_vec());
    assert_eq!(agree.verify(None).unwrap_err().code, Code::Malformed);
    // A flipped byte anywhere in a proof file is refused or proves nothing new.
    let mut flipped = bytes.clone();
    let n = flipped.len() / 2;
    flipped[n] ^= 1;
    if let Ok(p) = ForkProof::from_cbor(&flipped) {
        assert!(p.verify(None).is_err());
    }
    let _ = Hash::ZERO;
}

/// A proof's events must be one chain from the lower head's seq: another group's event, a
/// seq that repeats or skips, or a `prev` that does not chain is refused, naming the event.
#[test]
fn a_proof_whose_events_do_not_chain_names_where() {
    let (honest, forged) = honest_and_forged();
    let key = authority();
    let pk: PublicKey = key.public();
    let mut other = Scenario::open("g2");
    other.ok("alice", None, json!({"type": "create_work", "work": "w1", "contract": contract(2, "low"), "after": [], "spec": {}}));
    let other = other.events();
    let (lo, hi) = (head_of(&forged[1], &key), head_of(&honest[3], &key));
    let refused = |events: Vec<Event>| {
        ForkProof::of_chain(pk, lo.clone(), hi.clone(), events)
            .verify(None)
            .unwrap_err()
            .message
    };
    assert_eq!(
        refused(vec![other[1].clone(), honest[2].clone(), honest[3].clone()]),
        "fork proof rejected: event 0 is seq 2 of group g2, expected seq 2 of g1"
    );
    assert_eq!(
        refused(vec![
            honest[1].clone(),
            honest[1].clone(),
            honest[3].clone()
        ]),
        "fork proof rejected: event 1 is seq 2 of group g1, expected seq 3 of g1"
    );
    assert_eq!(
        refused(vec![
            honest[1].clone(),
            honest[3].clone(),
            honest[3].clone()
        ]),
        "fork proof rejected: event 1 is seq 4 of group g1, expected seq 3 of g1"
    );
    assert_eq!(
        refused(vec![
            honest[1].clone(),
            forged[2].clone(),
            honest[3].clone()
        ]),
        "fork proof rejected: event seq 4 does not chain to seq 3"
    );
}

#[test]
fn a_restored_snapshot_is_verified_through_its_seq() {
    let (honest, _) = honest_and_forged();
    let key = authority();
    let mut s = Scenario::open("g1");
    let _ = &honest;
    s.ok("alice", None, json!({"type": "create_work", "work": "w1", "contract": contract(2, "low"), "after": [], "spec": {}}));
    let snap = mwp_core::snapshot::Snapshot::build(s.state(), &key).unwrap();
    let mut r = Replica::new(id("g1"));
    r.restore(&snap, &key.public(), &id("acme"), 0).unwrap();
    assert_eq!(r.verified_through(), 2);
}

fn hex_decode(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}
