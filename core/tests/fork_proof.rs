//! `ForkProof::from_cbor` reads a proof's events as stored events are read, not through the
//! derived `Deserialize` of `ForkProof`; it accepts and gives exactly what the derive does
//! (`canonical::from_slice::<ForkProof>`), on every kind of event and on damaged proofs.

use mwp_core::canonical::{self, Strictness};
use mwp_core::crypto::{Hash, SecretKey};
use mwp_core::head::{ForkProof, SignedHead};
use mwp_core::{Code, Event, Id};

mod common;
use common::transcript_events;

/// A proof carrying `events` (decoding does not check that they chain).
fn proof_bytes(events: &[Event]) -> Vec<u8> {
    let key = SecretKey::for_transcript("@authority");
    let (org, group) = (Id::new("acme").expect("id"), Id::new("g1").expect("id"));
    let a = SignedHead::sign(&org, &group, 3, Hash([1; 32]), 10, &key).expect("signs");
    let b = SignedHead::sign(&org, &group, 4, Hash([2; 32]), 11, &key).expect("signs");
    ForkProof::of_chain(key.public(), a, b, events.to_vec())
        .to_cbor()
        .expect("encodes")
}

/// The proof the derive reads, if it reads one and the bytes are its canonical encoding:
/// what a proof file may be. (Inside an event's kind, serde's buffering of the tagged enum
/// also reads a byte string where text is expected, which is not that proof's encoding.)
fn by_derive(bytes: &[u8]) -> Option<ForkProof> {
    canonical::from_slice::<ForkProof>(bytes, Strictness::Canonical)
        .ok()
        .filter(|p| p.to_cbor().ok().as_deref() == Some(bytes))
}

/// Both read the same proof, or both refuse (`MALFORMED`).
fn agree(bytes: &[u8]) {
    let read = ForkProof::from_cbor(bytes);
    if let Err(e) = &read {
        assert_eq!(e.code, Code::Malformed, "{e}");
    }
    assert_eq!(read.ok(), by_derive(bytes), "{bytes:02x?}");
}

/// Every event of every kind, in one proof and each alone, reads as the derive reads it.
#[test]
fn proofs_read_every_kind_as_the_derive_does() {
    let events = transcript_events();
    let bytes = proof_bytes(events);
    let read = ForkProof::from_cbor(&bytes).expect("decodes");
    assert_eq!(read.events, events);
    assert_eq!(Some(read), by_derive(&bytes));
    for e in events {
        agree(&proof_bytes(std::slice::from_ref(e)));
    }
    agree(&proof_bytes(&[]));
}

/// Every byte of proofs of two events, over every kind, changed in a few ways, and every cut:
/// accepted exactly where the derive accepts, to the same proof.
#[test]
fn proofs_agree_with_the_derive_on_damaged_bytes() {
    let events = transcript_events();
    for pair in events.chunks(2).step_by(7) {
        let bytes = proof_bytes(pair);
        for i in 0..bytes.len() {
            for flip in [0x01, 0x20, 0x80, 0xff] {
                let mut bad = bytes.clone();
                bad[i] ^= flip;
                agree(&bad);
            }
            agree(&bytes[..i]);
        }
        let mut longer = bytes.clone();
        longer.push(0);
        agree(&longer);
    }
}

proptest::proptest! {
    /// Proofs of up to three events, over every kind, with bytes overwritten, cut short or
    /// extended.
    #[test]
    fn proofs_agree_with_the_derive_on_edited_bytes(
        picks in proptest::collection::vec(proptest::prelude::any::<proptest::sample::Index>(), 0..4),
        edits in proptest::collection::vec(
            (proptest::prelude::any::<proptest::sample::Index>(), proptest::prelude::any::<u8>()),
            0..4,
        ),
        cut in proptest::option::of(proptest::prelude::any::<proptest::sample::Index>()),
        extra in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2),
    ) {
        let events = transcript_events();
        let chosen: Vec<Event> = picks.iter().map(|p| events[p.index(events.len())].clone()).collect();
        let mut bytes = proof_bytes(&chosen);
        common::damage(&mut bytes, &edits, cut, &extra);
        agree(&bytes);
    }
}

/// An event is read at the depth it sits at in the proof: an opaque value nested as deep as a
/// stored event may hold is too deep inside a proof, as the derive finds.
#[test]
fn events_nest_as_deep_inside_a_proof_as_the_derive_allows() {
    let opened = &transcript_events()[0];
    let mut json = serde_json::to_value(opened).expect("JSON");
    let marker = "x".repeat(40);
    json["kind"]["title"] = serde_json::Value::String(marker.clone());
    let plain = canonical::to_vec(&json).expect("encodes");
    let mut encoded_marker = vec![0x78, 40];
    encoded_marker.extend_from_slice(marker.as_bytes());
    let at = plain
        .windows(encoded_marker.len())
        .position(|w| w == encoded_marker)
        .expect("the marker is there");
    let mut deeper_alone_than_in_a_proof = 0;
    for levels in 118..=130 {
        // `title` as `levels` arrays, one inside the other, around a 0.
        let mut event = plain[..at].to_vec();
        event.extend(std::iter::repeat_n(0x81, levels));
        event.push(0x00);
        event.extend_from_slice(&plain[at + encoded_marker.len()..]);
        let alone = Event::from_cbor(&event).is_ok();
        assert_eq!(
            alone,
            canonical::from_slice::<Event>(&event, Strictness::Canonical).is_ok()
        );
        // The proof holds the event's bytes as they are.
        let mut proof = proof_bytes(std::slice::from_ref(opened));
        let stored = opened.to_cbor().expect("encodes");
        let start = proof
            .windows(stored.len())
            .position(|w| w == stored)
            .expect("the event is there");
        proof.splice(start..start + stored.len(), event);
        agree(&proof);
        if alone && ForkProof::from_cbor(&proof).is_err() {
            deeper_alone_than_in_a_proof += 1;
        }
    }
    assert_eq!(
        deeper_alone_than_in_a_proof, 2,
        "two levels: the proof and its events"
    );
}

/// An error inside an event names the event and where in the proof it is.
#[test]
fn an_error_names_the_event_it_is_in() {
    let events = &transcript_events()[..3];
    let bytes = proof_bytes(events);
    let second = events[1].to_cbor().expect("encodes");
    let start = bytes
        .windows(second.len())
        .position(|w| w == second)
        .expect("the event is there");
    let mut bad = bytes.clone();
    // The event's map head: 12 entries become 11.
    bad[start] ^= 0x01;
    let e = ForkProof::from_cbor(&bad).expect_err("refused");
    assert!(
        e.message.contains("events[1]") && e.message.contains(&format!("at byte {start}")),
        "{e}"
    );
    assert!(by_derive(&bad).is_none());
}

/// A byte string spelling a key inside an event's kind: serde's buffering of the tagged kind
/// read it, so the derive took such a proof, which is not the canonical encoding of what it
/// decodes to. It is refused, as the same event stored is, and so is it by `ForkProof`'s
/// `Deserialize`, whose events are read by `Event`'s reader.
#[test]
fn a_byte_string_for_text_inside_an_event_is_refused() {
    let opened = &transcript_events()[0];
    let bytes = proof_bytes(std::slice::from_ref(opened));
    // The kind's first key, `org`, as a byte string.
    let kind = b"\x64kind\xa6\x63org";
    let value_head = |bytes: &[u8]| {
        bytes
            .windows(kind.len())
            .position(|w| w == kind)
            .expect("the kind is there")
            + 6
    };
    let mut bad = bytes.clone();
    let at = value_head(&bad);
    bad[at] ^= 0x20;
    assert!(canonical::from_slice::<ForkProof>(&bad, Strictness::Canonical).is_err());
    let e = ForkProof::from_cbor(&bad).expect_err("refused");
    assert_eq!(e.code, Code::Malformed);
    assert!(e.message.contains("events[0]"), "{e}");
    let mut stored = opened.to_cbor().expect("encodes");
    let at = value_head(&stored);
    stored[at] ^= 0x20;
    assert!(Event::from_cbor(&stored).is_err());
}
