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

/// A line that is not an event is read by the event's one reader (`Event`'s `Deserialize`,
/// the readers of stored events), rejected with `seq: null` and named, and changes nothing:
/// the replica goes on from where it was.
#[test]
fn a_line_that_is_not_an_event_is_named_and_changes_nothing() {
    let s = rich();
    let events = s.events();
    let first = serde_json::to_value(&events[0]).unwrap();
    let edited = |edit: &dyn Fn(&mut Value)| {
        let mut v = first.clone();
        edit(&mut v);
        serde_json::to_string(&v).unwrap()
    };
    let cases: Vec<(String, &str)> = vec![
        (
            edited(&|v| {
                v.as_object_mut().unwrap().remove("seq");
            }),
            "missing field `seq`",
        ),
        (
            edited(&|v| v["colour"] = json!("red")),
            "unknown field `colour`",
        ),
        (edited(&|v| v["at"] = json!(1.5)), "floats are not allowed"),
        (
            edited(&|v| v["kind"]["title"] = json!({"a": [1.5]})),
            "floats are not allowed",
        ),
        (
            edited(&|v| v["kind"]["type"] = json!("group_closed")),
            "unknown event type \"group_closed\"",
        ),
        (
            serde_json::to_string(&first)
                .unwrap()
                .replacen("\"seq\":", "\"seq\":1,\"seq\":", 1),
            "duplicate map key `seq`",
        ),
        ("[1, 2]".to_owned(), "expected a map"),
        ("{\"id\": ".to_owned(), "EOF"),
    ];
    let mut lines: Vec<String> = cases.iter().map(|(line, _)| line.clone()).collect();
    lines.push(serde_json::to_string(&events[0]).unwrap());
    let out = run_lines(&lines.join("\n"));
    for (got, (_, what)) in out.iter().zip(&cases) {
        assert_eq!(got["result"], "rejected", "{got}");
        assert_eq!(got["seq"], Value::Null, "{got}");
        assert_eq!(got["cursor"], json!(0), "{got}");
        assert_eq!(got["error"]["code"], "MALFORMED", "{got}");
        let message = got["error"]["message"].as_str().unwrap();
        assert!(message.contains("is not an event: "), "{got}");
        assert!(message.contains(what), "{what}: {got}");
    }
    assert_eq!(out[cases.len()]["result"], "applied");
    assert_eq!(out.last().unwrap()["cursor"], json!(1));
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

/// A head line that is rejected before any event changes nothing: it does not name the
/// replica's group, so the events that follow are applied as if it were not there.
#[test]
fn a_rejected_head_before_any_event_does_not_name_the_group() {
    let s = rich();
    let authority = SecretKey::for_transcript("@authority");
    let mut forged: Value = serde_json::from_str(&head_line(2, &authority)).unwrap();
    forged["group"] = json!("elsewhere");
    let events: Vec<String> = s
        .events()
        .iter()
        .map(|e| serde_json::to_string(e).unwrap())
        .collect();
    let text = format!("{forged}\n{}", events.join("\n"));
    let out = run_lines_with(&text, Some(&authority.public()));
    assert_eq!(out[0]["result"], "rejected");
    assert_eq!(out[0]["error"]["code"], "HEAD_INVALID");
    let without = run_lines_with(&events.join("\n"), Some(&authority.public()));
    for (got, want) in out[1..].iter().zip(&without) {
        assert_eq!(got["result"], want["result"], "{got}");
        assert_eq!(got["cursor"], want["cursor"], "{got}");
    }
    assert_eq!(out.last(), without.last());
    // A head that verifies may name the group before any event, as before.
    let text = format!("{}\n{}", head_line(2, &authority), events.join("\n"));
    let out = run_lines_with(&text, Some(&authority.public()));
    assert_eq!(out[0]["result"], "ahead");
    let (last, want) = (out.last().unwrap(), without.last().unwrap());
    assert_eq!(last["state_hash"], want["state_hash"]);
    assert_eq!(last["verified_through"], 3);
}

/// A rejected line changes nothing, the replica's group included: a forged event of another
/// group (its id does not verify) put before the real history does not name the group, and
/// the history after it still applies. An intact event names it, even when it is buffered.
#[test]
fn a_rejected_first_event_does_not_name_the_group() {
    let s = rich();
    let events = s.events();
    let line = |e: &mwp_core::Event| serde_json::to_string(e).unwrap();
    let mut forged = events[0].clone();
    forged.group = mwp_core::Id::new("evil").unwrap();
    let mut lines = vec![line(&forged)];
    lines.extend(events.iter().map(line));
    let out = run_lines(&lines.join("\n"));
    assert_eq!(out[0]["result"], "rejected", "{}", out[0]);
    assert_eq!(out[0]["error"]["code"], "LOG_CORRUPT", "{}", out[0]);
    assert!(out[1..events.len() + 1]
        .iter()
        .all(|v| v["result"] == "applied"));
    let last = out.last().unwrap();
    assert_eq!(last["cursor"], json!(events.len()));
    assert_eq!(last["state_hash"], json!(s.hashes()[events.len()]));
    // The same with the forged event ahead of the cursor (it would be buffered if intact).
    let mut forged = events[3].clone();
    forged.group = mwp_core::Id::new("evil").unwrap();
    let mut lines = vec![line(&forged)];
    lines.extend(events.iter().map(line));
    let out = run_lines(&lines.join("\n"));
    assert_eq!(out[0]["result"], "rejected", "{}", out[0]);
    assert_eq!(out.last().unwrap()["cursor"], json!(events.len()));
}
