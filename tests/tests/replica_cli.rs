//! `mwp replica FILE` (SPEC §11): the pure core, `replica::run_lines`.

use mwp_core::head::SignedHead;
use mwp_core::replica::{run_lines, run_lines_with};
use mwp_core::SecretKey;
use mwp_tests::fixtures::rich;
use serde_json::{json, Value};

#[test]
fn one_line_per_offer_then_cursor_and_state_hash() {
    let s = rich();
    let events = s.events();
    let hashes = s.hashes();
    let line = |i: usize| serde_json::to_string(&events[i]).unwrap();
    let mut tampered = events[3].clone();
    tampered.at += 1;
    let text = [
        line(1),                                   // early: buffered
        line(0),                                   // applied, drains 2
        line(0),                                   // duplicate
        String::new(),                             // blank: skipped, not counted
        "{not an event".to_owned(),                // rejected, seq null
        serde_json::to_string(&tampered).unwrap(), // rejected: id does not verify
        line(2),                                   // applied
        line(1),                                   // duplicate
        line(5),                                   // buffered (gap at 4)
    ]
    .join("\n");
    let out = run_lines(&text);
    let expect = [
        (1, json!(2), "buffered", 0),
        (2, json!(1), "applied", 2),
        (3, json!(1), "duplicate", 2),
        (4, Value::Null, "rejected", 2),
        (5, json!(4), "rejected", 2),
        (6, json!(3), "applied", 3),
        (7, json!(2), "duplicate", 3),
        (8, json!(6), "buffered", 3),
    ];
    assert_eq!(out.len(), expect.len() + 1);
    for (got, (n, seq, result, cursor)) in out.iter().zip(expect) {
        assert_eq!(got["offer"], json!(n), "{got}");
        assert_eq!(got["seq"], seq, "{got}");
        assert_eq!(got["result"], result, "{got}");
        assert_eq!(got["cursor"], json!(cursor), "{got}");
        assert_eq!(got.get("error").is_some(), result == "rejected", "{got}");
    }
    assert_eq!(out[3]["error"]["code"], "MALFORMED");
    assert_eq!(out[4]["error"]["code"], "LOG_CORRUPT");
    let last = out.last().unwrap();
    assert_eq!(last, &json!({"cursor": 3, "state_hash": hashes[3]}));
}

#[test]
fn a_whole_log_in_any_order_ends_at_the_authoritys_hash() {
    let s = rich();
    let mut lines: Vec<String> = s
        .events()
        .iter()
        .map(|e| serde_json::to_string(e).unwrap())
        .collect();
    lines.reverse();
    let dup = lines[..5].to_vec();
    lines.extend(dup);
    let out = run_lines(&lines.join("\n"));
    let last = out.last().unwrap();
    assert_eq!(last["cursor"], json!(s.state().seq));
    assert_eq!(last["state_hash"], json!(s.state().hash().unwrap()));
    assert_eq!(
        out.iter().filter(|l| l["result"] == "applied").count(),
        1,
        "one apply drains everything"
    );
    assert_eq!(out.iter().filter(|l| l["result"] == "duplicate").count(), 5);
}

#[test]
fn empty_input_gives_only_the_summary() {
    assert_eq!(
        run_lines(""),
        vec![json!({"cursor": 0, "state_hash": "0".repeat(64)})]
    );
}

/// A signed head of the rich scenario's event `i` (0-based), under `key`.
fn head_line(i: usize, key: &SecretKey) -> String {
    let s = rich();
    let e = &s.events()[i];
    let head = SignedHead::sign(&s.org, &s.group, e.seq, e.id, 1, key).unwrap();
    serde_json::to_string(&head).unwrap()
}

#[test]
fn without_heads_or_a_key_the_output_is_unchanged() {
    let s = rich();
    let text: Vec<String> = s
        .events()
        .iter()
        .map(|e| serde_json::to_string(e).unwrap())
        .collect();
    let text = text.join("\n");
    assert_eq!(run_lines_with(&text, None), run_lines(&text));
    assert!(run_lines(&text)
        .last()
        .unwrap()
        .get("verified_through")
        .is_none());
    // With a key, the summary says how far the replica is verified (no head: 0).
    let key = SecretKey::for_transcript("@authority").public();
    let with_key = run_lines_with(&text, Some(&key));
    assert_eq!(with_key.last().unwrap()["verified_through"], 0);
    assert_eq!(
        with_key[..with_key.len() - 1],
        run_lines(&text)[..with_key.len() - 1]
    );
}

#[test]
fn head_lines_are_verified_ahead_stale_or_rejected() {
    let s = rich();
    let authority = SecretKey::for_transcript("@authority");
    let key = authority.public();
    let line = |i: usize| serde_json::to_string(&s.events()[i]).unwrap();
    let mut forged: serde_json::Value = serde_json::from_str(&head_line(2, &authority)).unwrap();
    forged["seq"] = json!(2);
    let text = [
        line(0),
        line(1),
        line(2),
        head_line(2, &authority), // verified through 3
        head_line(4, &authority), // ahead
        head_line(1, &SecretKey::for_transcript("mallory")), // rejected: another key
        forged.to_string(),       // rejected: altered after signing
        line(3),
        line(4), // reaches the pending head: verified through 5
    ]
    .join("\n");
    let out = run_lines_with(&text, Some(&key));
    assert_eq!(
        out[3],
        json!({"offer": 4, "head": 3, "result": "verified", "verified_through": 3})
    );
    assert_eq!(
        out[4],
        json!({"offer": 5, "head": 5, "result": "ahead", "verified_through": 3})
    );
    assert_eq!(out[5]["result"], "rejected");
    assert_eq!(out[5]["error"]["code"], "HEAD_INVALID");
    assert_eq!(out[6]["result"], "rejected");
    assert_eq!(out[8]["cursor"], 5);
    assert_eq!(out.last().unwrap()["verified_through"], 5);

    // A head line without a key is an error line; the summary then carries verified_through.
    let out = run_lines_with(&head_line(0, &authority), None);
    assert_eq!(out[0]["result"], "rejected");
    assert_eq!(out[0]["error"]["code"], "HEAD_INVALID");
    assert_eq!(out[1]["verified_through"], 0);
}
