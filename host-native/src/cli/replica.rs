//! `mwp replica FILE`: offers events (JSON lines, in the order given) to a fresh replica and
//! prints each answer, then the final cursor and state hash (SPEC §11).
//!
//! The replica's group is the group of the first event that decodes (or of a signed head that
//! verifies before any event); events of another group are rejected by the replica. A line that is not an event is answered `rejected` with
//! `seq: null` and the reason, and changes nothing. A signed head (`"schema": "mwp.head.v1"`)
//! is checked under `--authority-key HEX` and answered `verified`, `ahead`, `stale` or
//! `rejected`; with a key or a head the final line also carries `verified_through`.

use std::io::Write;
use std::path::Path;

use mwp_core::PublicKey;
use serde_json::{json, Value};

use super::{Failure, Outcome, EXIT_BAD_INPUT, EXIT_OK, EXIT_UNAVAILABLE};

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

/// Runs `mwp replica FILE [--authority-key HEX]`.
pub fn run(file: &Path, authority_key: Option<&str>) -> Outcome {
    let trusted = match authority_key {
        Some(hex) => Some(super::export::parse_key(hex, "--authority-key")?),
        None => None,
    };
    let text = std::fs::read_to_string(file).map_err(|e| {
        Failure::new(
            EXIT_BAD_INPUT,
            format!("cannot read events {}: {e}", file.display()),
        )
    })?;
    let (lines, last) = run_lines(&text, trusted.as_ref());
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
