//! `mwp replica FILE`: offers events (JSON lines, in the order given) to a fresh replica and
//! prints each answer, then the final cursor and state hash (SPEC §11).
//!
//! The replica's group is the group of the first event the replica does not reject (or of a
//! signed head that verifies before any event); events of another group are rejected by the
//! replica. A line that is not an event (or not UTF-8) is answered `rejected` with
//! `seq: null` and the reason, and changes nothing. A signed head (`"schema": "mwp.head.v1"`)
//! is checked under `--authority-key HEX` and answered `verified`, `ahead`, `stale` or
//! `rejected`; with a key or a head the final line also carries `verified_through`.

use std::io::Write;
use std::path::Path;

use mwp_core::replica::LineReplica;
use mwp_core::PublicKey;
use serde_json::{json, Value};

use super::{input, Failure, Outcome, EXIT_BAD_INPUT, EXIT_OK, EXIT_UNAVAILABLE};

/// Offers every non-blank line of `text` in order; returns one output line per offer and
/// the closing `{"cursor", "state_hash"}` line. Signed-head lines are checked under `trusted`
/// (the core's [`mwp_core::replica::run_lines_with`]).
pub fn run_lines(text: &str, trusted: Option<&PublicKey>) -> (Vec<Value>, Value) {
    let mut out = mwp_core::replica::run_lines_with(text, trusted);
    let mut last = out.pop().unwrap_or_else(|| json!({"cursor": 0}));
    if last.get("state_hash").is_none() {
        last["state_hash"] = Value::Null;
    }
    (out, last)
}

/// Runs `mwp replica FILE [--authority-key HEX]`: FILE is read a line at a time, each line
/// answered as it is read. A line that is not UTF-8 is answered `rejected` as any line that is
/// not an event; a line longer than [`input::MAX_EVENT_LINE_BYTES`] (longer than any event),
/// or a FILE that cannot be read, stops the command with exit 2 naming FILE and the line.
pub fn run(file: &Path, authority_key: Option<&str>) -> Outcome {
    let trusted = match authority_key {
        Some(hex) => Some(super::export::parse_key(hex, "--authority-key")?),
        None => None,
    };
    let unreadable = |line: Option<u64>, e: std::io::Error| {
        let at = line.map_or(String::new(), |l| format!(" line {l}"));
        Failure::new(
            EXIT_BAD_INPUT,
            format!("cannot read events {}{at}: {e}", file.display()),
        )
    };
    let mut reader = std::io::BufReader::new(input::open(file).map_err(|e| unreadable(None, e))?);
    let mut lines = LineReplica::new(trusted.as_ref());
    let mut stdout = std::io::stdout().lock();
    let write_failed =
        |e: std::io::Error| Failure::new(EXIT_UNAVAILABLE, format!("cannot write the output: {e}"));
    let mut number = 0u64;
    while let Some(line) = input::next_line(&mut reader, input::MAX_EVENT_LINE_BYTES)
        .map_err(|e| unreadable(Some(number + 1), e))?
    {
        number += 1;
        let answer = match std::str::from_utf8(&line) {
            Ok(text) => lines.offer_line(text),
            Err(e) => Some(lines.offer_unreadable(&format!(
                "it is not UTF-8 text (byte {} of the line)",
                e.valid_up_to() + 1
            ))),
        };
        if let Some(answer) = answer {
            writeln!(stdout, "{answer}").map_err(write_failed)?;
        }
    }
    let mut last = lines.finish();
    if last.get("state_hash").is_none() {
        last["state_hash"] = Value::Null;
    }
    writeln!(stdout, "{last}")
        .and_then(|()| stdout.flush())
        .map_err(write_failed)?;
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
        let (_, straight) = run_lines(&in_order, None);
        let mut shuffled = ev.clone();
        shuffled.swap(1, 2);
        shuffled.insert(0, ev[0].clone());
        let (lines, last) = run_lines(&shuffled.join("\n"), None);
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
        let (lines, last) = run_lines(&text, None);
        assert_eq!(lines[1]["result"], "rejected");
        assert_eq!(lines[1]["seq"], Value::Null);
        assert_eq!(lines[1]["error"]["code"], "MALFORMED");
        assert_eq!(last["cursor"], 2);
    }

    #[test]
    fn a_tampered_event_is_rejected() {
        let ev = events();
        let tampered = ev[1].replacen("\"at\":", "\"at\":1", 1);
        let (lines, last) = run_lines(&format!("{}\n{tampered}", ev[0]), None);
        assert_eq!(lines[1]["result"], "rejected");
        assert_eq!(last["cursor"], 1);
    }
}
