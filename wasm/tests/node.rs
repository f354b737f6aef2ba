//! The wasm glue, run in Node by wasm-bindgen-test-runner: decisions, replicas, snapshots,
//! codecs, transcripts and vectors, each checked through the JS-facing API.
#![cfg(target_arch = "wasm32")]

mod common;

use common::*;
use mwp_wasm::codec::{canonical_decode, canonical_encode, decode_event, to_js, verify_event};
use mwp_wasm::frames;
use mwp_wasm::snapshot::{build_snapshot, verify_snapshot};
use mwp_wasm::{Authority, Replica};
use serde_json::json;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_test::wasm_bindgen_test;

fn authority_with_work() -> (Authority, Vec<Vec<u8>>) {
    let mut a = Authority::default();
    let mut log = Vec::new();
    for cmd in [
        open("g1"),
        create("g1", "w1", "c1"),
        create("g1", "w2", "c2"),
    ] {
        let d = a
            .submit(cmd, 1000.0)
            .map_err(JsValue::from)
            .expect("accepted");
        assert_eq!(prop_str(&d, "outcome"), "accepted");
        log.push(event_cbor(&d));
    }
    (a, log)
}

#[wasm_bindgen_test]
fn submit_accepts_and_a_retry_gets_the_same_receipt() {
    let (mut a, _) = authority_with_work();
    assert_eq!(a.seq(), 3.0);
    let again = a
        .submit(create("g1", "w1", "c1"), 5000.0)
        .map_err(JsValue::from)
        .expect("duplicate");
    assert_eq!(prop_str(&again, "outcome"), "duplicate");
    assert_eq!(prop(&prop(&again, "receipt"), "seq").as_f64(), Some(2.0));
    assert_eq!(a.seq(), 3.0, "a duplicate appends nothing");
}

#[wasm_bindgen_test]
fn a_rejection_is_a_js_error_named_for_the_export_with_the_spec_code() {
    let (mut a, _) = authority_with_work();
    let hash = a.state_hash().map_err(JsValue::from).expect("hash");
    // claim_work is compare-and-set: without `expect` it is CAS_REQUIRED.
    let claim = command(
        "g1",
        "bob",
        "b1",
        None,
        json!({"type": "claim_work", "work": "w1",
        "lease_ms": 30000, "start_within_ms": 5000}),
    );
    let err = JsValue::from(a.submit(claim, 2000.0).expect_err("rejected"));
    assert_eq!(name_of(&err), "AcceptError");
    assert_eq!(code_of(&err), "CAS_REQUIRED");
    assert!(err.is_instance_of::<js_sys::Error>());
    assert_eq!(
        a.state_hash().map_err(JsValue::from).expect("hash"),
        hash,
        "a rejection changes nothing"
    );
    // Same action id, different content: ACTION_ID_COLLISION.
    let err = JsValue::from(
        a.submit(create("g1", "w9", "c1"), 2000.0)
            .expect_err("collision"),
    );
    assert_eq!(code_of(&err), "ACTION_ID_COLLISION");
}

#[wasm_bindgen_test]
fn batch_results_are_values_and_events_one_frame_batch() {
    let mut a = Authority::default();
    let cmds = vec![
        open("g1"),
        create("g1", "w1", "c1"),
        create("g1", "w1", "c1b"),
    ];
    let out = a
        .submit_batch(cmds, 1000.0)
        .map_err(JsValue::from)
        .expect("batch");
    let results: js_sys::Array = prop(&out, "results").into();
    assert_eq!(results.length(), 3);
    assert_eq!(prop_str(&results.get(2), "outcome"), "rejected");
    assert_eq!(
        prop_str(&prop(&results.get(2), "error"), "code"),
        "ALREADY_EXISTS"
    );
    let batch = js_sys::Uint8Array::from(prop(&out, "events")).to_vec();
    assert_eq!(frames::split(&batch).expect("frames").len(), 2);
    let rebuilt = Authority::from_log(&batch, None)
        .map_err(JsValue::from)
        .expect("rebuild");
    assert_eq!(rebuilt.state_hash().ok(), a.state_hash().ok());
}

#[wasm_bindgen_test]
fn replica_dedups_buffers_and_never_passes_a_gap() {
    let (a, log) = authority_with_work();
    let mut r = Replica::new("g1").map_err(JsValue::from).expect("replica");
    let offer = |r: &mut Replica, i: usize| {
        let o = r
            .offer(js_sys::Uint8Array::from(log[i].as_slice()).into())
            .map_err(JsValue::from)
            .expect("offer");
        (
            prop_str(&o, "result"),
            prop(&o, "cursor").as_f64().unwrap_or(-1.0),
        )
    };
    assert_eq!(offer(&mut r, 2), ("buffered".into(), 0.0));
    assert_eq!(offer(&mut r, 0), ("applied".into(), 1.0));
    assert_eq!(offer(&mut r, 2), ("duplicate".into(), 1.0));
    assert_eq!(
        offer(&mut r, 1),
        ("applied".into(), 3.0),
        "filling the gap drains the buffer"
    );
    assert_eq!(offer(&mut r, 0), ("duplicate".into(), 3.0));
    assert_eq!(r.state_hash().ok(), a.state_hash().ok());
}

#[wasm_bindgen_test]
fn replica_rejects_a_tampered_event_as_a_value() {
    let (_, log) = authority_with_work();
    let mut r = Replica::new("g1").map_err(JsValue::from).expect("replica");
    let mut ev: serde_json::Value = serde_wasm_bindgen::from_value(
        decode_event(&log[0])
            .map_err(JsValue::from)
            .expect("decodes"),
    )
    .expect("json");
    ev["at"] = json!(999);
    let o = r
        .offer(to_js(&ev).expect("js"))
        .map_err(JsValue::from)
        .expect("offer");
    assert_eq!(prop_str(&o, "result"), "rejected");
    assert_eq!(prop_str(&prop(&o, "error"), "code"), "LOG_CORRUPT");
    assert_eq!(r.cursor(), 0.0);
    let err = JsValue::from(verify_event(to_js(&ev).expect("js")).expect_err("corrupt"));
    assert_eq!(
        (name_of(&err), code_of(&err)),
        ("CodecError".into(), "LOG_CORRUPT".into())
    );
}

/// An event given as an object in its JSON form is read by the core's readers of stored
/// events: it encodes to the stored bytes, and what they refuse is `MALFORMED`, named.
#[wasm_bindgen_test]
fn an_event_object_is_read_by_the_readers_of_stored_events() {
    use mwp_wasm::codec::encode_event;
    let (_, log) = authority_with_work();
    for bytes in &log {
        let object = decode_event(bytes).map_err(JsValue::from).expect("decodes");
        let encoded = encode_event(object)
            .map_err(JsValue::from)
            .expect("encodes");
        assert_eq!(&encoded, bytes);
    }
    let ev: serde_json::Value = serde_wasm_bindgen::from_value(
        decode_event(&log[0])
            .map_err(JsValue::from)
            .expect("decodes"),
    )
    .expect("json");
    let message_of = |err: &JsValue| {
        js_sys::Reflect::get(err, &"message".into())
            .ok()
            .and_then(|m| m.as_string())
            .unwrap_or_default()
    };
    let mut missing = ev.clone();
    missing.as_object_mut().expect("a map").remove("seq");
    let mut float = ev.clone();
    float["at"] = json!(1.5);
    let mut unknown = ev.clone();
    unknown["kind"]["unknown"] = json!(1);
    for (bad, what) in [
        (missing, "missing field `seq`"),
        (float, "floats are not allowed"),
        (unknown, "unknown field `unknown`"),
    ] {
        let err = JsValue::from(encode_event(to_js(&bad).expect("js")).expect_err(what));
        assert_eq!(code_of(&err), "MALFORMED", "{}", message_of(&err));
        assert!(message_of(&err).contains(what), "{}", message_of(&err));
    }
}

#[wasm_bindgen_test]
fn snapshots_build_verify_and_restore_and_refuse_tampering() {
    let (a, _) = authority_with_work();
    let snap = a
        .snapshot(Some(key("@authority")))
        .map_err(JsValue::from)
        .expect("snapshot");
    let header = verify_snapshot(&snap, &public("@authority"), "acme", "g1", 3.0)
        .map_err(JsValue::from)
        .expect("valid");
    assert_eq!(prop(&header, "seq").as_f64(), Some(3.0));
    let mut r = Replica::new("g1").map_err(JsValue::from).expect("replica");
    r.restore(&snap, &public("@authority"), "acme", 0.0)
        .map_err(JsValue::from)
        .expect("restores");
    assert_eq!(r.cursor(), 3.0);
    assert_eq!(r.state_hash().ok(), a.state_hash().ok());
    // Wrong key, wrong group, too old, flipped byte: SNAPSHOT_INVALID, nothing changes.
    let err = JsValue::from(
        verify_snapshot(&snap, &public("bob"), "acme", "g1", 0.0).expect_err("untrusted"),
    );
    assert_eq!(
        (name_of(&err), code_of(&err)),
        ("SnapshotError".into(), "SNAPSHOT_INVALID".into())
    );
    assert!(verify_snapshot(&snap, &public("@authority"), "acme", "g2", 0.0).is_err());
    assert!(verify_snapshot(&snap, &public("@authority"), "acme", "g1", 4.0).is_err());
    let mut bad = snap.clone();
    let last = bad.len() - 3;
    bad[last] ^= 1;
    let mut r2 = Replica::new("g1").map_err(JsValue::from).expect("replica");
    let err = JsValue::from(
        r2.restore(&bad, &public("@authority"), "acme", 0.0)
            .expect_err("tampered"),
    );
    assert_eq!(code_of(&err), "SNAPSHOT_INVALID");
    assert_eq!(r2.cursor(), 0.0);
    // A snapshot built from the state bytes is the same snapshot.
    let state = a
        .state_cbor()
        .map_err(JsValue::from)
        .expect("state")
        .expect("open");
    assert_eq!(
        build_snapshot(&state, &key("@authority"))
            .map_err(JsValue::from)
            .expect("build"),
        snap
    );
}

#[wasm_bindgen_test]
fn canonical_codec_round_trips_and_refuses_floats() {
    let v = to_js(&json!({"b": [1, 2, {"x": null}], "a": true, "aa": "s"})).expect("js");
    let bytes = canonical_encode(v).map_err(JsValue::from).expect("encodes");
    // Keys sorted by encoded bytes: "a" < "b" < "aa".
    assert_eq!(&bytes[..4], &[0xa3, 0x61, b'a', 0xf5]);
    let back: serde_json::Value = serde_wasm_bindgen::from_value(
        canonical_decode(&bytes, None)
            .map_err(JsValue::from)
            .expect("decodes"),
    )
    .expect("json");
    assert_eq!(
        back,
        json!({"a": true, "b": [1, 2, {"x": null}], "aa": "s"})
    );
    let err = JsValue::from(canonical_encode(JsValue::from_f64(1.5)).expect_err("float"));
    assert_eq!(
        (name_of(&err), code_of(&err)),
        ("CodecError".into(), "MALFORMED".into())
    );
    // Non-canonical input (a two-byte integer for 1) is refused unless asked to be lenient.
    assert!(canonical_decode(&[0x18, 0x01], None).is_err());
    assert!(canonical_decode(&[0x18, 0x01], Some(false)).is_ok());
}

#[wasm_bindgen_test]
fn transcripts_run_and_vectors_match_the_native_ones() {
    let text = include_str!("../../tests/vectors/lifecycle.jsonl");
    let out = mwp_wasm::transcript::run_transcript(text)
        .map_err(JsValue::from)
        .expect("runs");
    assert_eq!(prop(&out, "failed").as_bool(), Some(false));
    let vectors = [
        (
            "approvals",
            include_str!("../../tests/vectors/approvals.jsonl"),
            include_str!("../../tests/vectors/approvals.out.jsonl"),
        ),
        (
            "effects",
            include_str!("../../tests/vectors/effects.jsonl"),
            include_str!("../../tests/vectors/effects.out.jsonl"),
        ),
        (
            "expand",
            include_str!("../../tests/vectors/expand.jsonl"),
            include_str!("../../tests/vectors/expand.out.jsonl"),
        ),
        (
            "idempotency",
            include_str!("../../tests/vectors/idempotency.jsonl"),
            include_str!("../../tests/vectors/idempotency.out.jsonl"),
        ),
        (
            "leases_and_fencing",
            include_str!("../../tests/vectors/leases_and_fencing.jsonl"),
            include_str!("../../tests/vectors/leases_and_fencing.out.jsonl"),
        ),
        (
            "lifecycle",
            include_str!("../../tests/vectors/lifecycle.jsonl"),
            include_str!("../../tests/vectors/lifecycle.out.jsonl"),
        ),
        (
            "malformed",
            include_str!("../../tests/vectors/malformed.jsonl"),
            include_str!("../../tests/vectors/malformed.out.jsonl"),
        ),
        (
            "membership",
            include_str!("../../tests/vectors/membership.jsonl"),
            include_str!("../../tests/vectors/membership.out.jsonl"),
        ),
        (
            "redaction",
            include_str!("../../tests/vectors/redaction.jsonl"),
            include_str!("../../tests/vectors/redaction.out.jsonl"),
        ),
        (
            "retries_and_budgets",
            include_str!("../../tests/vectors/retries_and_budgets.jsonl"),
            include_str!("../../tests/vectors/retries_and_budgets.out.jsonl"),
        ),
        (
            "weak_keys",
            include_str!("../../tests/vectors/weak_keys.jsonl"),
            include_str!("../../tests/vectors/weak_keys.out.jsonl"),
        ),
    ];
    for (name, input, expected) in vectors {
        let lines = mwp_wasm::vectors::vector_lines(input).expect("runs");
        let want: Vec<&str> = expected.lines().collect();
        assert_eq!(lines.len(), want.len(), "{name}: line count");
        for (i, (got, want)) in lines.iter().zip(want).enumerate() {
            assert_eq!(got, want, "{name}: line {}", i + 1);
        }
    }
}

/// A length field near `u32::MAX` in the bytes after damage must not wrap an offset on this
/// 32-bit target: the scan ends in a torn tail instead of trapping (the Node/Deno store scans
/// its segments through this code).
#[wasm_bindgen_test]
fn a_hostile_length_after_damage_does_not_trap_on_32_bits() {
    use mwp_core::log_format::{encode_record, scan_slice, FileHeader, ScanSpec, SEGMENT_MAGIC};
    let mut f = FileHeader {
        magic: SEGMENT_MAGIC,
        first_seq: 1,
        prev: mwp_core::Hash([0; 32]),
        group: mwp_core::Id::new("g1").expect("a literal id"),
    }
    .encode()
    .to_vec();
    encode_record(&mut f, 1, 1, b"ok");
    let mut bad = Vec::new();
    encode_record(&mut bad, 2, 2, b"payload");
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    f.extend(bad);
    f.extend((u32::MAX - 8).to_le_bytes());
    f.extend(3u64.to_le_bytes());
    f.extend(3u64.to_le_bytes());
    f.extend(0u32.to_le_bytes());
    let spec = ScanSpec {
        file_len: 0,
        first_seq: 1,
        contiguous: true,
        may_be_torn: true,
        reserve: true,
    };
    let (records, end) = scan_slice(&f, spec, &|_| None).expect("a torn tail, not damage");
    assert_eq!(records.len(), 1);
    assert!(end.torn.is_some());
}

#[wasm_bindgen_test]
fn a_planned_export_reads_back_verified_and_heads_mark_provisional_events() {
    use mwp_wasm::head::{plan_export, sign_head, verify_fork_proof, StaticReader};
    let (a, log) = authority_with_work();
    let authority = key("@authority");
    let pinned = public("@authority");
    let head = sign_head("acme", "g1", 3.0, &a.head(), 9000.0, &authority)
        .map_err(JsValue::from)
        .expect("signed");
    let mut batch = Vec::new();
    for e in &log {
        frames::push(&mut batch, e).expect("framed");
    }
    let x = plan_export(None, &batch, None, head.clone(), &pinned, Some(2.0))
        .map_err(JsValue::from)
        .expect("planned");
    let mut files = std::collections::BTreeMap::new();
    for f in js_sys::Array::from(&js_sys::Reflect::get(&x, &"files".into()).unwrap()).iter() {
        let path = prop_str(&f, "path");
        let bytes = js_sys::Uint8Array::new(&js_sys::Reflect::get(&f, &"bytes".into()).unwrap());
        files.insert(path, bytes.to_vec());
    }
    let head_file = js_sys::Uint8Array::new(&js_sys::Reflect::get(&x, &"headFile".into()).unwrap());
    files.insert("head.json".to_owned(), head_file.to_vec());
    let mut reader = StaticReader::new("g1", &pinned, Some("genesis".into()))
        .map_err(JsValue::from)
        .expect("reader");
    while let Some(path) = reader.poll_fetch() {
        reader
            .handle_fetched(&path, &files[&path], Some(true))
            .map_err(JsValue::from)
            .expect("accepted");
    }
    let r = reader.into_replica().map_err(JsValue::from).expect("done");
    assert_eq!((r.cursor(), r.verified_through()), (3.0, 3.0));
    assert!(!r.is_provisional(3.0).unwrap() && r.is_provisional(4.0).unwrap());

    // A fresh replica: provisional until a head verifies; a second head at seq 3 naming
    // another id is a FORK whose proof verifies.
    let mut fresh = Replica::new("g1").map_err(JsValue::from).expect("replica");
    for e in &log {
        fresh
            .offer(js_sys::Uint8Array::from(&e[..]).into())
            .expect("offered");
    }
    assert_eq!(fresh.verified_through(), 0.0);
    let offered = fresh
        .offer_head(head, &pinned)
        .map_err(JsValue::from)
        .expect("verified");
    assert_eq!(prop_str(&offered, "result"), "verified");
    let other = sign_head("acme", "g1", 3.0, &"ab".repeat(32), 9001.0, &authority)
        .unwrap_or_else(|_| panic!("signed"));
    let err = fresh
        .offer_head(other, &pinned)
        .err()
        .map(JsValue::from)
        .expect("FORK");
    assert_eq!(code_of(&err), "FORK");
    let details = js_sys::Reflect::get(&err, &"details".into()).unwrap();
    let proof = hex::decode(prop_str(&details, "proof")).expect("hex proof");
    let fork = verify_fork_proof(&proof, Some(pinned))
        .map_err(JsValue::from)
        .expect("a proof");
    assert_eq!(prop_str(&fork, "kind"), "heads");
}
