//! `mwp tail --server URL --group G [--after N]`: follows a group's live tail (the SSE
//! stream of docs/http.md) and prints every event.
//!
//! When the stream ends or the connection drops, it reconnects with `Last-Event-ID` set to
//! the last seq printed, waiting longer between failed attempts (up to 5 s). Every event must
//! be the next seq and chain to the one before it: a gap (say a server restored from an
//! older copy answers seq 9 after seq 6) or a fork is an error naming the expected and the
//! received seq, exit 1; nothing is ever skipped.

use std::io::{BufRead, BufReader, Read};
use std::time::Duration;

use clap::Args;
use mwp_core::{Code, Error, Event, Hash};
use serde_json::json;

use super::super::{Failure, Outcome, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK};
use super::{id, OutputArgs, ServerArgs};

/// `mwp tail` arguments.
#[derive(Debug, Args)]
pub struct TailArgs {
    /// The server.
    #[command(flatten)]
    pub server: ServerArgs,
    /// The group.
    #[arg(long, env = "MWP_GROUP")]
    pub group: String,
    /// Start after this seq (0: from the first event).
    #[arg(long, default_value_t = 0)]
    pub after: u64,
    /// Stop (exit 0) once the event with this seq is printed; without it, follow forever.
    #[arg(long, value_name = "SEQ")]
    pub until: Option<u64>,
    /// How to print.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Where the tail is: the last seq printed and its event ID.
#[derive(Debug, Clone, Copy)]
pub struct Position {
    /// Seq of the last event printed (the `after` given, before any).
    pub seq: u64,
    /// Its ID, when this tail printed it (or the zero hash before seq 1).
    pub id: Option<Hash>,
}

/// Checks that `event` continues `pos`: the next seq, chained to the last event, and
/// intact. Returns the new position.
pub fn follow(pos: Position, event: &Event) -> Result<Position, Failure> {
    let expected = pos.seq.saturating_add(1);
    if event.seq != expected {
        return Err(Failure::new(
            EXIT_FAILED,
            format!(
                "gap in the live tail: expected seq {expected}, received seq {}; nothing was skipped (resume with --after {})",
                event.seq, pos.seq
            ),
        ));
    }
    if let Some(prev) = pos.id {
        if event.prev != prev {
            return Err(Failure::new(
                EXIT_FAILED,
                format!(
                    "seq {} does not chain: its prev is {}, but seq {} was {prev}",
                    event.seq, event.prev, pos.seq
                ),
            ));
        }
    }
    event.verify().map_err(|e| {
        Failure::new(
            EXIT_FAILED,
            format!("seq {} does not verify: {e}", event.seq),
        )
    })?;
    Ok(Position {
        seq: event.seq,
        id: Some(event.id),
    })
}

/// How one connection ended.
enum End {
    /// The stream closed or the connection dropped: reconnect.
    Dropped(String),
    /// `--until` reached.
    Done,
}

/// Runs `mwp tail`.
pub fn run(args: &TailArgs) -> Outcome {
    let group = id(&args.group, "--group")?;
    let client = args.server.client()?;
    let json = args.output.json();
    let mut pos = Position {
        seq: args.after,
        id: (args.after == 0).then_some(Hash::ZERO),
    };
    if args.until.is_some_and(|u| u <= pos.seq) {
        return Ok(EXIT_OK);
    }
    let mut connected_once = false;
    let mut wait = Duration::from_millis(100);
    loop {
        let resume = connected_once.then_some(pos.seq);
        let why = match client.stream(&group, pos.seq, resume) {
            Ok(body) => {
                connected_once = true;
                wait = Duration::from_millis(100);
                match read_stream(BufReader::new(body), &mut pos, args.until, json)? {
                    End::Done => return Ok(EXIT_OK),
                    End::Dropped(why) => why,
                }
            }
            // Not reachable: retry once it has been reached before; else say so.
            Err(e)
                if e.code == Code::Storage
                    && !e.details.contains_key("status")
                    && connected_once =>
            {
                e.message
            }
            Err(e) if e.code == Code::CursorTooOld && connected_once => {
                return Err(gap_failure(&pos, &e));
            }
            Err(e) => return Err(super::server_failure(&format!("cannot follow {group}"), &e)),
        };
        eprintln!(
            "mwp: the live tail of {group} ended ({why}); reconnecting after seq {} in {} ms",
            pos.seq,
            wait.as_millis()
        );
        std::thread::sleep(wait);
        wait = (wait * 2).min(Duration::from_secs(5));
    }
}

fn gap_failure(pos: &Position, e: &Error) -> Failure {
    Failure::new(
        EXIT_FAILED,
        format!(
            "the server no longer serves seq {} and on ({e}); the tail cannot go on without a gap",
            pos.seq + 1
        ),
    )
}

/// Reads one connection's messages (SSE: `id:`, `event:`, `data:` lines, a blank line ends
/// a message, `:` lines are comments) and prints each event.
///
/// A message is bounded by [`MAX_MESSAGE_BYTES`]: a longer line or message is not from an
/// mwp server and ends the tail (`EXIT_FAILED`) before it can take unbounded memory.
fn read_stream(
    mut reader: impl BufRead,
    pos: &mut Position,
    until: Option<u64>,
    json: bool,
) -> Result<End, Failure> {
    let (mut kind, mut data) = (String::new(), String::new());
    let mut raw = Vec::new();
    loop {
        raw.clear();
        let limit = MAX_MESSAGE_BYTES.saturating_sub(data.len()) as u64 + 1;
        match (&mut reader).take(limit).read_until(b'\n', &mut raw) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => return Ok(End::Dropped(e.to_string())),
        }
        if raw.len() as u64 == limit && raw.last() != Some(&b'\n') {
            return Err(Failure::new(
                EXIT_FAILED,
                format!(
                    "the stream sent a message longer than {MAX_MESSAGE_BYTES} bytes after seq {}: not an mwp event",
                    pos.seq
                ),
            ));
        }
        let Ok(text) = std::str::from_utf8(&raw) else {
            return Err(Failure::new(
                EXIT_BAD_INPUT,
                format!(
                    "the stream sent bytes that are not UTF-8 after seq {}",
                    pos.seq
                ),
            ));
        };
        let line = text.trim_end_matches('\n').trim_end_matches('\r');
        if !line.is_empty() {
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => value.clone_into(&mut kind),
                "data" => {
                    if !data.is_empty() {
                        data.push('\n');
                    }
                    data.push_str(value);
                }
                _ => {}
            }
            continue;
        }
        if data.is_empty() {
            kind.clear();
            continue;
        }
        if kind == "error" {
            let e: Error = serde_json::from_str(&data)
                .unwrap_or_else(|_| Error::new(Code::Storage, data.clone()));
            if e.code == Code::CursorTooOld {
                return Err(gap_failure(pos, &e));
            }
            return Err(Failure::new(
                EXIT_FAILED,
                format!(
                    "the live tail ended with an error after seq {}: {e}",
                    pos.seq
                ),
            ));
        }
        let event: Event = serde_json::from_str(&data).map_err(|e| {
            Failure::new(
                EXIT_BAD_INPUT,
                format!(
                    "the stream sent something that is not an mwp event after seq {}: {e}",
                    pos.seq
                ),
            )
        })?;
        *pos = follow(*pos, &event)?;
        let value = json!(event);
        super::print(json, &value, || human(&event))?;
        if until.is_some_and(|u| event.seq >= u) {
            return Ok(End::Done);
        }
        kind.clear();
        data.clear();
    }
    Ok(End::Dropped("the server closed the stream".into()))
}

/// Largest live-tail message read: no event is larger than a log record.
const MAX_MESSAGE_BYTES: usize = mwp_core::log_format::MAX_RECORD_LEN as usize;

fn human(event: &Event) -> String {
    let kind = serde_json::to_value(&event.kind)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_owned))
        .unwrap_or_default();
    format!(
        "seq {:<6} {:<20} by {:<12} {} rev {}",
        event.seq, kind, event.actor, event.aggregate, event.revision
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use mwp_core::Id;

    fn events() -> Vec<Event> {
        let text = include_str!("../../../../tests/transcripts/lifecycle.jsonl");
        let (lines, _) = mwp_core::transcript::run_in_memory(text);
        lines
            .iter()
            .filter_map(|l| l.get("event"))
            .map(|e| serde_json::from_value(e.clone()).expect("event"))
            .collect()
    }

    fn sse(events: &[&Event]) -> String {
        events
            .iter()
            .map(|e| format!("id: {}\ndata: {}\n\n:keep-alive\n\n", e.seq, json!(e)))
            .collect()
    }

    #[test]
    fn a_gap_is_an_error_naming_both_seqs() {
        let ev = events();
        assert_eq!(ev[0].group, Id::new("g1").expect("id"));
        let mut pos = Position {
            seq: 0,
            id: Some(Hash::ZERO),
        };
        let text = sse(&[&ev[0], &ev[2]]);
        let err = match read_stream(text.as_bytes(), &mut pos, None, true) {
            Err(f) => f,
            Ok(_) => panic!("a gap must fail"),
        };
        assert_eq!(err.exit, EXIT_FAILED);
        assert!(
            err.message.contains("expected seq 2, received seq 3"),
            "{}",
            err.message
        );
        assert_eq!(pos.seq, 1);
    }

    #[test]
    fn an_event_that_does_not_chain_is_an_error() {
        let ev = events();
        let pos = Position {
            seq: 1,
            id: Some(Hash::ZERO),
        };
        let err = follow(pos, &ev[1]).expect_err("does not chain");
        assert!(err.message.contains("does not chain"), "{}", err.message);
    }

    #[test]
    fn until_stops_and_a_closed_stream_asks_to_reconnect() {
        let ev = events();
        let mut pos = Position {
            seq: 0,
            id: Some(Hash::ZERO),
        };
        let text = sse(&[&ev[0], &ev[1]]);
        assert!(matches!(
            read_stream(text.as_bytes(), &mut pos, Some(2), true),
            Ok(End::Done)
        ));
        let mut pos = Position {
            seq: 0,
            id: Some(Hash::ZERO),
        };
        assert!(matches!(
            read_stream(text.as_bytes(), &mut pos, None, true),
            Ok(End::Dropped(_))
        ));
        assert_eq!(pos.seq, 2);
    }

    #[test]
    fn a_message_longer_than_any_event_ends_the_tail_without_reading_it_all() {
        // An endless `data:` line, and an endless run of short `data:` lines: both refused
        // once they pass the bound, each having read at most one bound's worth.
        let mut long_line = b"data: ".to_vec();
        long_line.resize(40 << 20, b'x');
        let many_lines =
            "data: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n".repeat(600_000);
        for text in [&long_line[..], many_lines.as_bytes()] {
            let mut pos = Position {
                seq: 0,
                id: Some(Hash::ZERO),
            };
            match read_stream(text, &mut pos, None, true) {
                Err(f) => assert_eq!(f.exit, EXIT_FAILED, "{}", f.message),
                _ => panic!("an oversized message was accepted"),
            }
        }
    }
}
