//! Snapshots (SPEC §8): build, sign, verify, restore; every tampering is rejected.

use mwp_core::accept::accept;
use mwp_core::receipt::Disposition;
use mwp_core::replica::{Offer, Replica, Row};
use mwp_core::snapshot::{Snapshot, SnapshotRef, SCHEMA};
use mwp_core::state::StoredReceipt;
use mwp_core::transcript::run_in_memory;
use mwp_core::{Code, Decision, Error, Hash, Limits, SecretKey};
use mwp_tests::fixtures::{id, rich, Scenario};
use serde_json::json;

fn authority() -> SecretKey {
    SecretKey::for_transcript("@authority")
}

fn check_of(e: &Error) -> &str {
    assert_eq!(e.code, Code::SnapshotInvalid, "{e}");
    e.details["check"]
        .as_str()
        .expect("SNAPSHOT_INVALID names its check")
}

/// A small reference snapshot (so every bit can be flipped) of group g1 at its head.
fn reference() -> (Scenario, Vec<u8>) {
    let mut s = Scenario::open("g1");
    s.ok("alice", None, json!({"type": "create_work", "work": "w1", "contract": mwp_tests::fixtures::contract(2, "low"),
                               "after": [], "spec": {}}));
    s.claim_start("bob", "w1", 10_000);
    let bytes = Snapshot::build_cbor(s.state(), &authority()).unwrap();
    (s, bytes)
}

#[test]
fn build_verify_restore_and_resume_strictly_after() {
    let s = rich();
    let events = s.events();
    let mut partial = None;
    for e in &events[..40] {
        mwp_core::GroupState::apply_to(&mut partial, e).unwrap();
    }
    let partial = partial.unwrap();
    let snap = Snapshot::build(&partial, &authority()).unwrap();
    let bytes = snap.to_cbor().unwrap();
    // The one-pass encoder writes exactly the canonical bytes.
    assert_eq!(Snapshot::build_cbor(&partial, &authority()).unwrap(), bytes);
    assert_eq!(snap.schema, SCHEMA);
    assert_eq!((snap.seq, snap.chain_head), (40, events[39].id));
    let key = partial.authority_key;
    // Both verification paths accept it and agree.
    snap.verify(&key, &s.org, &s.group, 40).unwrap();
    let decoded = Snapshot::verify_bytes(&bytes, &key, &s.org, &s.group, 0).unwrap();
    assert_eq!(decoded, snap);

    let mut r = Replica::new(s.group.clone());
    let ws = r.restore_bytes(&bytes, &key, &s.org, 0).unwrap();
    assert!(ws.reset);
    assert_eq!(ws.cursor, 40);
    assert_eq!(r.state_hash().unwrap(), partial.hash().unwrap());
    // Events up to the snapshot are duplicates; replay resumes at 41.
    for e in &events[..40] {
        assert_eq!(r.offer(e.clone()), Offer::Duplicate);
    }
    for e in &events[40..] {
        assert!(matches!(r.offer(e.clone()), Offer::Applied { .. }));
    }
    assert_eq!(r.state_hash().unwrap(), s.state().hash().unwrap());
}

#[test]
fn receipts_travel_inside_so_idempotency_survives_restore() {
    let mut s = Scenario::open("g1");
    let cmd = s.command(
        "alice",
        None,
        json!({"type": "create_work", "work": "w1", "contract": mwp_tests::fixtures::contract(2, "low"), "after": [], "spec": {}}),
    );
    let Decision::Accepted(event) = s.submit(&cmd).unwrap() else {
        panic!("accepted")
    };
    let bytes = Snapshot::build_cbor(s.state(), &authority()).unwrap();
    let mut r = Replica::new(s.group.clone());
    r.restore_bytes(&bytes, &s.state().authority_key, &s.org, 0)
        .unwrap();
    match accept(r.state(), &cmd, s.now, &Limits::default()).unwrap() {
        Decision::Duplicate(receipt) => assert_eq!(receipt, event.receipt()),
        other => panic!("expected the original receipt, got {other:?}"),
    }
}

#[test]
fn every_bit_flip_and_every_truncation_is_rejected() {
    let (s, bytes) = reference();
    let key = s.state().authority_key;
    Snapshot::verify_bytes(&bytes, &key, &s.org, &s.group, 0).expect("the reference verifies");
    Snapshot::verify_stored(&bytes, &key, &s.group).expect("and as a store's own");
    let mut checks = std::collections::BTreeMap::<String, usize>::new();
    let mut tried = 0usize;
    for i in 0..bytes.len() {
        for bit in 0..8 {
            let mut t = bytes.clone();
            t[i] ^= 1 << bit;
            tried += 1;
            let e = Snapshot::verify_bytes(&t, &key, &s.org, &s.group, 0)
                .expect_err(&format!("flipping bit {bit} of byte {i} must be rejected"));
            *checks.entry(check_of(&e).to_owned()).or_default() += 1;
            // A store's own snapshot (org bound by the key and the group) is refused alike.
            let own = Snapshot::verify_stored(&t, &key, &s.group)
                .expect_err(&format!("verify_stored: bit {bit} of byte {i}"));
            assert_eq!(check_of(&own), check_of(&e), "byte {i} bit {bit}");
            // And so is one streamed from a file.
            let streamed =
                Snapshot::verify_stored_from(&t[..], t.len() as u64, Some(&key), &s.group)
                    .expect_err(&format!("verify_stored_from: bit {bit} of byte {i}"));
            assert_eq!(check_of(&streamed), check_of(&e), "byte {i} bit {bit}");
            // The struct path agrees whenever the bytes decode at all (sampled: it
            // re-encodes the state).
            if i % 7 != 0 {
                continue;
            }
            if let Ok(snap) = Snapshot::from_cbor(&t) {
                assert!(
                    snap.verify(&key, &s.org, &s.group, 0).is_err(),
                    "byte {i} bit {bit}"
                );
            }
        }
    }
    assert_eq!(tried, bytes.len() * 8);
    for n in 0..bytes.len() {
        let e = Snapshot::verify_bytes(&bytes[..n], &key, &s.org, &s.group, 0)
            .expect_err(&format!("truncation to {n} bytes must be rejected"));
        assert_eq!(check_of(&e), "decode");
    }
    // Flips are caught at decode, at the state hash and at the signature.
    for c in ["decode", "state_hash", "signature"] {
        assert!(checks.get(c).copied().unwrap_or(0) > 0, "{checks:?}");
    }
    println!(
        "{} flips of {} bytes rejected: {checks:?}",
        tried,
        bytes.len()
    );
}

#[test]
fn wrong_key_org_group_and_older_seq_are_rejected_by_name() {
    let (s, bytes) = reference();
    let key = s.state().authority_key;
    let seq = s.state().seq;
    let e = Snapshot::verify_bytes(
        &bytes,
        &SecretKey::for_transcript("mallory").public(),
        &s.org,
        &s.group,
        0,
    )
    .unwrap_err();
    assert_eq!(check_of(&e), "signature");
    // Signed by another key that claims to be the signer: still not the trusted key.
    let forged = Snapshot::build_cbor(s.state(), &SecretKey::for_transcript("mallory")).unwrap();
    assert_eq!(
        check_of(&Snapshot::verify_bytes(&forged, &key, &s.org, &s.group, 0).unwrap_err()),
        "signature"
    );
    let e = Snapshot::verify_bytes(&bytes, &key, &id("other"), &s.group, 0).unwrap_err();
    assert_eq!(check_of(&e), "org");
    let e = Snapshot::verify_bytes(&bytes, &key, &s.org, &id("g2"), 0).unwrap_err();
    assert_eq!(check_of(&e), "group");
    let e = Snapshot::verify_bytes(&bytes, &key, &s.org, &s.group, seq + 1).unwrap_err();
    assert_eq!(check_of(&e), "seq");
    Snapshot::verify_bytes(&bytes, &key, &s.org, &s.group, seq).unwrap();

    // A genuine snapshot of a group in another org, restored as if it were ours.
    let o = Scenario::open_in("other", "g1");
    let theirs = Snapshot::build_cbor(o.state(), &authority()).unwrap();
    let e = Snapshot::verify_bytes(&theirs, &key, &s.org, &s.group, 0).unwrap_err();
    assert_eq!(check_of(&e), "org");
    // A genuine snapshot of another group of our org.
    let g2 = Scenario::open("g2");
    let theirs = Snapshot::build_cbor(g2.state(), &authority()).unwrap();
    let e = Snapshot::verify_bytes(&theirs, &key, &s.org, &s.group, 0).unwrap_err();
    assert_eq!(check_of(&e), "group");
}

/// Snapshots of a MiB or more are hashed on a second thread while they decode, and their
/// receipt index is read by a decoder written for its shape: the outcome is the one of the
/// small reference, intact and damaged in each part.
#[test]
fn a_large_snapshot_is_checked_like_a_small_one() {
    let (s, _) = reference();
    let mut state = s.state().clone();
    let bulk = state.receipts.entry(id("bob")).or_default();
    for i in 0..6_000u64 {
        // Names whose byte order is not their canonical order (shorter first) among them.
        let action = match i {
            0 => "z".to_owned(),
            1 => "a-much-longer-action-identifier-than-the-rest".to_owned(),
            _ => format!("bulk-{i:05}"),
        };
        bulk.insert(
            id(&action),
            StoredReceipt {
                seq: i,
                event_id: Hash::of(&i.to_be_bytes()),
                content_hash: Hash::of(&i.to_le_bytes()),
                aggregate: "work:bulk".into(),
                revision: i,
                disposition: Disposition::Applied,
                at: 1_000 + i,
            },
        );
    }
    let bytes = Snapshot::build_cbor(&state, &authority()).unwrap();
    assert!(bytes.len() > 1 << 20, "{} bytes", bytes.len());
    let key = state.authority_key;
    let verify = |b: &[u8]| Snapshot::verify_bytes(b, &key, &s.org, &s.group, 0);
    let snap = verify(&bytes).unwrap();
    assert_eq!(snap.state, state);
    assert_eq!(snap, Snapshot::build(&state, &authority()).unwrap());
    let mut r = Replica::new(s.group.clone());
    let ws = r.restore_bytes(&bytes, &key, &s.org, 0).unwrap();
    assert_eq!(r.state_hash().unwrap(), state.hash().unwrap());
    // A row per receipt, each actor's in canonical key order (length, then bytes).
    let mut receipt_rows: Vec<(String, String)> = Vec::new();
    for row in &ws.projection {
        if let Row::Receipt { actor, action, .. } = row {
            receipt_rows.push((actor.to_string(), action.to_string()));
        }
    }
    let expected: Vec<(String, String)> = state
        .receipts
        .iter()
        .flat_map(|(actor, by_action)| {
            let mut actions: Vec<String> = by_action.iter().map(|(a, _)| a.to_string()).collect();
            actions.sort_by(|a, b| (a.len(), a).cmp(&(b.len(), b)));
            actions.into_iter().map(move |a| (actor.to_string(), a))
        })
        .collect();
    assert_eq!(receipt_rows, expected);

    let find = |needle: &[u8], from: usize| {
        from + bytes[from..]
            .windows(needle.len())
            .position(|w| w == needle)
            .expect("present")
    };
    // A receipt's aggregate in the middle of the state, still valid text: the state hash.
    let mut damaged = bytes.clone();
    damaged[find(b"work:bulk", bytes.len() / 2) + 5] = b'c';
    assert_eq!(check_of(&verify(&damaged).unwrap_err()), "state_hash");
    // A digit of the signature: the signature.
    let mut damaged = bytes.clone();
    let digit = find(b"\x63sig\x78\x80", 0) + 6;
    damaged[digit] = if damaged[digit] == b'0' { b'1' } else { b'0' };
    assert_eq!(check_of(&verify(&damaged).unwrap_err()), "signature");
    // A receipt that no longer decodes, and a truncation: the decode.
    let mut damaged = bytes.clone();
    damaged[find(b"work:bulk", bytes.len() / 2) - 1] = 0xff;
    assert_eq!(check_of(&verify(&damaged).unwrap_err()), "decode");
    assert_eq!(
        check_of(&verify(&bytes[..bytes.len() - 1]).unwrap_err()),
        "decode"
    );
    // The bindings.
    let e = Snapshot::verify_bytes(&bytes, &key, &id("other"), &s.group, 0).unwrap_err();
    assert_eq!(check_of(&e), "org");
    let e = Snapshot::verify_bytes(&bytes, &key, &s.org, &s.group, state.seq + 1).unwrap_err();
    assert_eq!(check_of(&e), "seq");
}

#[test]
fn checks_run_in_the_order_of_the_spec() {
    let (s, bytes) = reference();
    let key = s.state().authority_key;
    let good = Snapshot::from_cbor(&bytes).unwrap();
    // Wrong schema, also wrong everything else: schema is reported first.
    let mut bad = good.clone();
    bad.schema = "mwp.snapshot.v0".into();
    bad.state_hash = Hash::ZERO;
    let e = bad.verify(&key, &id("x"), &id("y"), u64::MAX).unwrap_err();
    assert_eq!(check_of(&e), "schema");
    let e = Snapshot::verify_bytes(&bad.to_cbor().unwrap(), &key, &id("x"), &id("y"), u64::MAX)
        .unwrap_err();
    assert_eq!(check_of(&e), "schema");
    // State hash before signature.
    let mut bad = good.clone();
    bad.state.revision += 1;
    let e = bad
        .verify(
            &SecretKey::for_transcript("x").public(),
            &s.org,
            &s.group,
            0,
        )
        .unwrap_err();
    assert_eq!(check_of(&e), "state_hash");
    // A state that hashes right but disagrees with the header.
    let mut bad = good.clone();
    bad.seq += 1;
    assert_eq!(
        check_of(&bad.verify(&key, &s.org, &s.group, 0).unwrap_err()),
        "state_hash"
    );
    // Signature before org, group and seq.
    let mut bad = good.clone();
    bad.sig.0[3] ^= 4;
    let e = bad.verify(&key, &id("x"), &id("y"), u64::MAX).unwrap_err();
    assert_eq!(check_of(&e), "signature");
    // Org before group before seq.
    let e = good.verify(&key, &id("x"), &id("y"), u64::MAX).unwrap_err();
    assert_eq!(check_of(&e), "org");
    let e = good.verify(&key, &s.org, &id("y"), u64::MAX).unwrap_err();
    assert_eq!(check_of(&e), "group");
}

#[test]
fn a_failed_restore_changes_nothing() {
    let s = rich();
    let events = s.events();
    let key = s.state().authority_key;
    let mut r = Replica::new(s.group.clone());
    for e in &events[..30] {
        r.offer(e.clone());
    }
    let (hash, cursor) = (r.state_hash().unwrap(), r.cursor());
    // An older snapshot than the cursor.
    let mut old = None;
    for e in &events[..10] {
        mwp_core::GroupState::apply_to(&mut old, e).unwrap();
    }
    let old = Snapshot::build_cbor(old.as_ref().unwrap(), &authority()).unwrap();
    let e = r.restore_bytes(&old, &key, &s.org, r.cursor()).unwrap_err();
    assert_eq!(check_of(&e), "seq");
    // Tampered bytes.
    let mut bad = Snapshot::build_cbor(s.state(), &authority()).unwrap();
    let n = bad.len();
    bad[n - 3] ^= 1;
    assert!(r.restore_bytes(&bad, &key, &s.org, cursor).is_err());
    // Even an older snapshot that is otherwise valid, when asked with a low cursor.
    assert_eq!(
        check_of(&r.restore_bytes(&old, &key, &s.org, 0).unwrap_err()),
        "seq"
    );
    assert_eq!((r.state_hash().unwrap(), r.cursor()), (hash, cursor));
    // The current one restores.
    let good = Snapshot::build_cbor(s.state(), &authority()).unwrap();
    r.restore_bytes(&good, &key, &s.org, cursor).unwrap();
    assert_eq!(r.state_hash().unwrap(), s.state().hash().unwrap());
}

#[test]
fn cursor_too_old_carries_its_snapshot_reference() {
    let (s, bytes) = reference();
    let snap = Snapshot::from_cbor(&bytes).unwrap();
    let r = snap.reference("/v1/groups/g1/snapshots/latest");
    assert_eq!((r.seq, r.hash), (s.state().seq, s.state().hash().unwrap()));
    let e = r.cursor_too_old(0, 3);
    assert_eq!(e.code, Code::CursorTooOld);
    let v = serde_json::to_value(&e).unwrap();
    assert_eq!(v["code"], "CURSOR_TOO_OLD");
    assert_eq!(v["snapshot"]["seq"], json!(r.seq));
    assert_eq!(v["snapshot"]["location"], "/v1/groups/g1/snapshots/latest");
    assert_eq!(SnapshotRef::from_error(&e), Some(r));
    assert_eq!(
        SnapshotRef::from_error(&Error::new(Code::NotFound, "x")),
        None
    );
}

#[test]
fn transcript_snapshot_and_restart_ops_follow_section_12() {
    let text = r#"{"at": 1000, "org": "acme", "group": "g1", "actor": "alice", "action": "open", "body": {"type": "open_group", "mission": "m1", "title": "t", "members": [{"actor": "alice", "role": "owner"}, {"actor": "bob", "role": "worker"}]}}
{"actor": "alice", "action": "c1", "body": {"type": "create_work", "work": "w1", "contract": {"max_attempts": 1, "backoff_base_ms": 1, "backoff_max_ms": 1, "cost_budget": 1, "risk": "low"}, "after": [], "spec": {}}}
{"op": "snapshot", "expect": {"seq": 2}}
{"op": "restart", "expect": {"seq": 2}}
{"actor": "alice", "action": "c1", "body": {"type": "create_work", "work": "w1", "contract": {"max_attempts": 1, "backoff_base_ms": 1, "backoff_max_ms": 1, "cost_budget": 1, "risk": "low"}, "after": [], "spec": {}}, "expect": {"outcome": "duplicate", "seq": 2}}
{"op": "snapshot", "expect": {"seq": 2}}"#;
    let (lines, failed) = run_in_memory(text);
    assert!(!failed, "{lines:#?}");
    let hash = lines[2]["state_hash"].clone();
    for (i, n) in [(2usize, 3), (3, 4), (5, 6)] {
        let l = &lines[i];
        assert_eq!(l["step"], json!(n));
        assert_eq!(l["seq"], json!(2));
        assert_eq!(l["state_hash"], hash);
        let keys: Vec<&str> = l.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["step", "op", "seq", "state_hash"]);
    }
    assert_eq!(lines[2]["op"], "snapshot");
    assert_eq!(lines[3]["op"], "restart");

    // A group naming an authority key that is not the runner's is refused at its opening
    // (the authority signs its snapshots, SPEC §11), so no snapshot is taken.
    let foreign = text.replace(
        r#""members""#,
        &format!(
            r#""authority_key": "{}", "members""#,
            SecretKey::for_transcript("elsewhere").public()
        ),
    );
    let (lines, _) = run_in_memory(&foreign);
    assert_eq!(lines[0]["outcome"], "rejected");
    assert_eq!(lines[0]["error"]["code"], "NOT_PERMITTED");
    assert_eq!(lines[2]["outcome"], "rejected");
    assert_eq!(lines[2]["error"]["code"], "NOT_FOUND");
}

/// `Snapshot::from_cbor` reads the ten fields in canonical order straight from the bytes; it
/// gives what the generic canonical deserializer gives, and refuses what it refuses, for the
/// rich scenario's snapshot and every one-byte change of the reference snapshot.
#[test]
fn field_by_field_decoding_equals_the_generic_one() {
    use mwp_core::canonical::{from_slice, Strictness};
    let rich = Snapshot::build_cbor(rich().state(), &authority()).unwrap();
    let generic: Snapshot = from_slice(&rich, Strictness::Canonical).unwrap();
    assert_eq!(Snapshot::from_cbor(&rich).unwrap(), generic);
    let (_, bytes) = reference();
    for i in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[i] ^= 0x01;
        let fast = Snapshot::from_cbor(&bad).ok();
        let generic = from_slice::<Snapshot>(&bad, Strictness::Canonical).ok();
        assert_eq!(fast, generic, "byte {i}");
    }
}

/// A snapshot streamed from a file (its state read field by field, its receipts entry by
/// entry) decodes to what its bytes held whole decode to: the rich scenario's state after
/// every event, which passes through every field of the state.
#[test]
fn a_streamed_snapshot_decodes_as_its_bytes_held_whole() {
    let s = rich();
    let mut state = None;
    for e in s.events() {
        mwp_core::GroupState::apply_to(&mut state, &e).unwrap();
        let state = state.as_ref().unwrap();
        let bytes = Snapshot::build_cbor(state, &authority()).unwrap();
        let whole = Snapshot::verify_stored(&bytes, &state.authority_key, &s.group).unwrap();
        let streamed =
            Snapshot::verify_stored_from(&bytes[..], bytes.len() as u64, None, &s.group).unwrap();
        assert_eq!(streamed, whole, "after seq {}", e.seq);
        assert_eq!(&streamed.state, state, "after seq {}", e.seq);
    }
}
