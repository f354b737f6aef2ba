//! `mwp replica FILE`: offers events (JSON lines, in the order given) to a fresh replica and
//! prints each answer, then the final cursor and state hash (SPEC §11).
//!
//! The replica's group is the group of the first event that decodes; events of another group
//! are rejected by the replica. A line that is not an event is answered `rejected` with
//! `seq: null` and the reason, and changes nothing.

use std::io::Write;
use std::path::Path;

use mwp_core::replica::{Offer, Replica};
use mwp_core::{Error, Event};
use serde_json::{json, Value};

use super::{Failure, Outcome, EXIT_BAD_INPUT, EXIT_OK, EXIT_UNAVAILABLE};

/// Offers every non-blank line of `text` in order; returns one output line per offer and
/// the closing `{"cursor", "state_hash"}` line.
pub fn run_lines(text: &str) -> (Vec<Value>, Value) {
    let mut replica: Option<Replica> = None;
    let mut out = Vec::new();
    for (n, line) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        let offer = n + 1;
        let event = match serde_json::from_str::<Event>(line) {
            Ok(e) => e,
            Err(e) => {
                let err = Error::malformed(format!("line {offer} is not an event: {e}"));
                let cursor = replica.as_ref().map_or(0, Replica::cursor);
                out.push(json!({"offer": offer, "seq": null, "result": "rejected", "cursor": cursor, "error": err}));
                continue;
            }
        };
        let replica = replica.get_or_insert_with(|| Replica::new(event.group.clone()));
        let seq = event.seq;
        let answer = replica.offer(event);
        let mut line = json!({"offer": offer, "seq": seq, "result": answer.name(), "cursor": replica.cursor()});
        if let Offer::Rejected(e) = &answer {
            line["error"] = json!(e);
        }
        out.push(line);
    }
    let (cursor, hash) = match &replica {
        Some(r) => (r.cursor(), r.state_hash()),
        None => (0, Ok(mwp_core::Hash::ZERO)),
    };
    let last = match hash {
        Ok(h) => json!({"cursor": cursor, "state_hash": h}),
        Err(e) => json!({"cursor": cursor, "state_hash": null, "error": e}),
    };
    (out, last)
}

/// Runs `mwp replica FILE`.
pub fn run(file: &Path) -> Outcome {
    let text = std::fs::read_to_string(file).map_err(|e| {
        Failure::new(
            EXIT_BAD_INPUT,
            format!("cannot read events {}: {e}", file.display()),
        )
    })?;
    let (lines, last) = run_lines(&text);
    let mut stdout = std::io::stdout().lock();
    lines
        .iter()
        .chain(std::iter::once(&last))
        .try_for_each(|l| writeln!(stdout, "{l}"))
        .and_then(|()| stdout.flush())
        .map_err(|e| Failure::new(EXIT_UNAVAILABLE, format!("cannot write the output: {e}")))?;
    Ok(EXIT_OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events() -> Vec<String> {
        let text = include_str!("../../../tests/transcripts/lifecycle.jsonl");
        let (lines, failed) = mwp_core::transcript::run_in_memory(text);
        assert!(!failed);
        lines
            .iter()
            .filter_map(|l| l.get("event"))
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn reordered_and_repeated_events_reach_the_same_state() {
        let ev = events();
        let in_order = ev.join("\n");
        let (_, straight) = run_lines(&in_order);
        let mut shuffled = ev.clone();
        shuffled.swap(1, 2);
        shuffled.insert(0, ev[0].clone());
        let (lines, last) = run_lines(&shuffled.join("\n"));
        assert_eq!(last, straight);
        assert_eq!(lines[0]["result"], "applied");
        assert_eq!(lines[1]["result"], "duplicate");
        assert_eq!(lines[2]["result"], "buffered");
        assert_eq!(lines[2]["cursor"], 1);
        assert_eq!(lines[3]["result"], "applied");
        assert_eq!(lines[3]["cursor"], 3);
    }

    #[test]
    fn a_line_that_is_not_an_event_is_rejected_and_changes_nothing() {
        let ev = events();
        let text = format!("{}\nnot json\n{}", ev[0], ev[1]);
        let (lines, last) = run_lines(&text);
        assert_eq!(lines[1]["result"], "rejected");
        assert_eq!(lines[1]["seq"], Value::Null);
        assert_eq!(lines[1]["error"]["code"], "MALFORMED");
        assert_eq!(last["cursor"], 2);
    }

    #[test]
    fn a_tampered_event_is_rejected() {
        let ev = events();
        let tampered = ev[1].replacen("\"at\":", "\"at\":1", 1);
        let (lines, last) = run_lines(&format!("{}\n{tampered}", ev[0]));
        assert_eq!(lines[1]["result"], "rejected");
        assert_eq!(last["cursor"], 1);
    }
}
