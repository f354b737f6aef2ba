//! The payload hash (SPEC §3) computed by `event::payload_hash` equals a direct reading of the
//! rule on the JSON form — every opaque field replaced by the hex SHA-256 of its canonical
//! CBOR — for every event the transcripts produce, and for each of them redacted.

use mwp_core::event::{payload_hash, EventKind, OPAQUE_FIELDS};
use mwp_core::{canonical, opaque, Event, Id};
use serde_json::Value;

mod common;
use common::Recorder;

fn reference(kind: &EventKind) -> mwp_core::crypto::Hash {
    let mut json = serde_json::to_value(kind).expect("a kind is JSON");
    let expanded = json["type"] == "work_expanded";
    let hash = |v: &Value| Value::String(opaque::hash(&v.into()).expect("hashes").to_hex());
    for (k, v) in json.as_object_mut().expect("a kind is an object") {
        if OPAQUE_FIELDS.contains(&k.as_str()) {
            *v = hash(v);
        } else if expanded && k == "work" {
            for item in v.as_array_mut().expect("a work list") {
                let spec = hash(&item["spec"]);
                item["spec"] = spec;
            }
        }
    }
    mwp_core::crypto::Hash(canonical::hash(&json).expect("hashes"))
}

/// `Event::from_cbor` (fields read in order, `kind` by its tag) gives the event back, as the
/// generic canonical deserializer and the `ciborium::Value` path do; and it refuses the bytes
/// when any one byte is changed so that they stop being a canonical event.
fn same_decoding(e: &Event) {
    let bytes = e.to_cbor().expect("encodes");
    assert_eq!(&Event::from_cbor(&bytes).expect("decodes"), e);
    let generic: Event =
        canonical::from_slice(&bytes, canonical::Strictness::Canonical).expect("decodes");
    assert_eq!(&generic, e);
    let tree: Event = canonical::decode(&bytes, canonical::Strictness::Canonical)
        .expect("decodes")
        .deserialized()
        .expect("deserializes");
    assert_eq!(&tree, e);
    assert_eq!(&Event::from_cbor_verified(&bytes).expect("verifies"), e);
    // Every header field and the kind, changed and re-encoded under the old id and payload
    // hash: the verified decoding refuses each, as `verify` does.
    let tampered: [&dyn Fn(&mut Event); 11] = [
        &|t| t.at += 1,
        &|t| t.seq += 1,
        &|t| t.revision += 1,
        &|t| t.prev.0[0] ^= 1,
        &|t| t.content_hash.0[31] ^= 1,
        &|t| t.payload_hash.0[5] ^= 1,
        &|t| t.aggregate.push('x'),
        &|t| t.actor = Id::new("mallory").expect("valid"),
        &|t| t.action = Id::new("other-action").expect("valid"),
        &|t| t.group = Id::new("other-group").expect("valid"),
        &|t| t.kind = EventKind::LeasesExpired(mwp_core::event::LeasesExpired { expired: vec![] }),
    ];
    for (n, change) in tampered.iter().enumerate() {
        let mut t = e.clone();
        change(&mut t);
        let b = t.to_cbor().expect("encodes");
        let err = Event::from_cbor_verified(&b).expect_err(&format!("tamper {n} detected"));
        assert_eq!(err.code, mwp_core::Code::LogCorrupt);
        assert!(t.verify().is_err(), "tamper {n}");
    }
    for i in (0..bytes.len()).step_by(5) {
        let mut bad = bytes.clone();
        bad[i] ^= 0x20;
        let checked = Event::from_cbor_verified(&bad).ok();
        let reference = Event::from_cbor(&bad).ok().filter(|e| e.verify().is_ok());
        assert_eq!(checked, reference, "byte {i} flipped");
        let fast = Event::from_cbor(&bad).ok();
        let generic: Option<Event> =
            canonical::from_slice(&bad, canonical::Strictness::Canonical).ok();
        match (&fast, &generic) {
            // What is accepted is exactly the canonical encoding of what it decodes to.
            (Some(f), Some(g)) => {
                assert_eq!(f, g, "byte {i} flipped");
                assert_eq!(f.to_cbor().expect("encodes"), bad, "byte {i} flipped");
            }
            (Some(f), None) => panic!("byte {i} flipped: only the fast path accepts {f:?}"),
            // serde reads an internally tagged enum's tag through a buffer that also takes
            // a byte string; such a record is not the canonical encoding of its event.
            (None, Some(g)) => assert_ne!(g.to_cbor().expect("encodes"), bad, "byte {i}"),
            (None, None) => {}
        }
    }
}

#[test]
fn payload_hash_follows_the_rule_for_every_transcript_event() {
    let mut kinds = std::collections::BTreeSet::new();
    let mut n = 0;
    for (_, text) in common::transcripts() {
        let mut host = Recorder::default();
        common::run(&mut host, &text);
        for mut e in host.events {
            same_decoding(&e);
            assert_eq!(payload_hash(&e.kind).expect("hashes"), reference(&e.kind));
            assert_eq!(e.payload_hash, reference(&e.kind));
            let json = serde_json::to_value(&e.kind).expect("json");
            kinds.insert(json["type"].as_str().expect("tag").to_owned());
            e.redact().expect("redacts");
            assert_eq!(payload_hash(&e.kind).expect("hashes"), reference(&e.kind));
            e.verify().expect("a redacted event verifies");
            same_decoding(&e);
            n += 1;
        }
    }
    assert!(n > 150, "{n} events");
    assert!(kinds.len() >= 27, "every event kind is covered: {kinds:?}");
}

/// Every event the transcripts produce, and each of them redacted, in their stored form.
fn transcript_records() -> &'static [Vec<u8>] {
    static RECORDS: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    RECORDS.get_or_init(|| {
        common::transcript_events()
            .iter()
            .map(|e| e.to_cbor().expect("encodes"))
            .collect()
    })
}

proptest::proptest! {
    /// Stored events with bytes overwritten, cut short or extended: the verified decoding
    /// accepts exactly what the generic canonical decoder followed by `verify` accepts, and
    /// gives the same event.
    #[test]
    fn verified_decoding_agrees_with_the_generic_path_on_damaged_records(
        pick in proptest::prelude::any::<proptest::sample::Index>(),
        edits in proptest::collection::vec(
            (proptest::prelude::any::<proptest::sample::Index>(), proptest::prelude::any::<u8>()),
            0..4,
        ),
        cut in proptest::option::of(proptest::prelude::any::<proptest::sample::Index>()),
        extra in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2),
    ) {
        let records = transcript_records();
        let mut bytes = records[pick.index(records.len())].clone();
        common::damage(&mut bytes, &edits, cut, &extra);
        let checked = Event::from_cbor_verified(&bytes);
        let generic: Option<Event> = canonical::from_slice::<Event>(
            &bytes,
            canonical::Strictness::Canonical,
        )
        .ok()
        .filter(|e| e.verify().is_ok())
        // What is accepted is exactly the canonical encoding of what it decodes to.
        .filter(|e| e.to_cbor().ok().as_deref() == Some(&bytes[..]));
        if let Err(e) = &checked {
            proptest::prop_assert_eq!(e.code, mwp_core::Code::LogCorrupt);
        }
        proptest::prop_assert_eq!(checked.ok(), generic);
    }
}
