//! `mwp replica FILE` (SPEC §11): the pure core, `replica::run_lines`.

use mwp_core::replica::run_lines;
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
