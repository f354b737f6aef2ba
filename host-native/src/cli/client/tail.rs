//! `mwp tail --server URL --group G [--after N]`: follows a group's live tail (the SSE
//! stream of docs/http.md) and prints every event.
//!
//! When the stream ends, the connection drops, or nothing (not even the server's keep-alive
//! comment, every 15 s) arrives for `--idle-timeout` seconds, it reconnects with
//! `Last-Event-ID` set to the last seq printed, waiting longer between failed attempts (up to
//! 5 s). Every event must be of the group, the next seq, and chain to the one before it: a
//! gap (say a server restored from an older copy answers seq 9 after seq 6), a fork or
//! another group's event is an error naming the expected and the received, exit 1; nothing
//! is ever skipped.
//!
//! The server's `event: head` messages (signed heads, SPEC §8a) print nothing: each must
//! decode, name this group, verify under `--authority-key` when one is pinned, and, when it
//! is at the last seq printed, name that event's id (another id is a fork, exit 1).

use std::io::{BufRead, BufReader, Read};
use std::time::Duration;

use clap::Args;
use mwp_core::chain::Break;
use mwp_core::head::SignedHead;
use mwp_core::{Code, Error, Event, Id, PublicKey};
use serde_json::json;

use super::super::{Failure, Outcome, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK};
use super::{id, OutputArgs, ServerArgs};
use crate::server::client::{printable, MAX_QUOTED_CHARS};

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
    /// The authority's public key, 64 hex digits: the signed heads the tail sends must
    /// verify under it (without it they are checked against the events only).
    #[arg(long, value_name = "HEX")]
    pub authority_key: Option<String>,
    /// Reconnect when nothing arrives for this long (the server sends a keep-alive every
    /// 15 s); also the longest wait for the answer to a connection.
    #[arg(long, value_name = "SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub idle_timeout: u64,
    /// How to print.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Where the tail is: the last seq printed and its event ID, when this tail printed it (or
/// the zero hash before seq 1). The core's reader position ([`mwp_core::chain`]).
pub use mwp_core::chain::Position;

/// Checks that `event` continues `pos` in `group`: of the group, the next seq, chained to
/// the last event ([`Position::check`]), and intact. Returns the new position.
pub fn follow(pos: Position, event: &Event, group: &Id) -> Result<Position, Failure> {
    let broken = |message| Failure::new(EXIT_FAILED, message);
    match pos.check(group, event) {
        Ok(()) => {}
        Err(Break::Group) => {
            return Err(broken(format!(
                "the server sent an event of group {} (seq {}) after seq {} of {group}",
                event.group, event.seq, pos.seq
            )))
        }
        Err(Break::Seq { expected, received }) => {
            return Err(broken(format!(
                "gap in the history: expected seq {expected}, received seq {received}; nothing was skipped (resume with --after {})",
                pos.seq
            )))
        }
        Err(Break::Prev {
            seq,
            expected,
            received,
        }) => {
            return Err(broken(format!(
                "seq {seq} does not chain: its prev is {received}, but seq {} was {expected}",
                pos.seq
            )))
        }
    }
    event.verify().map_err(|e| {
        Failure::new(
            EXIT_FAILED,
            format!("seq {} does not verify: {e}", event.seq),
        )
    })?;
    Ok(Position::at(event.seq, event.id))
}

/// What the tail's `event: head` messages are checked against.
#[derive(Debug, Clone, Copy)]
pub struct HeadPin<'a> {
    /// The group followed.
    pub group: &'a Id,
    /// The pinned authority key, if any.
    pub key: Option<&'a PublicKey>,
}

/// Checks a signed head the tail sent at `pos`: it decodes, is of the group, verifies under
/// the pinned key, and names the id of the last event printed when it is at its seq.
pub fn check_head(pos: Position, data: &str, pin: HeadPin<'_>) -> Result<SignedHead, Failure> {
    let head = SignedHead::from_json(data).map_err(|e| {
        Failure::new(
            EXIT_BAD_INPUT,
            format!(
                "the stream sent a head that is not an mwp signed head after seq {}: {e}",
                pos.seq
            ),
        )
    })?;
    if &head.group != pin.group {
        return Err(Failure::new(
            EXIT_FAILED,
            format!(
                "the stream sent a signed head of group {}, not {}",
                head.group, pin.group
            ),
        ));
    }
    if let Some(key) = pin.key {
        head.verify(key, pin.group).map_err(|e| {
            Failure::new(
                EXIT_FAILED,
                format!("the signed head at seq {} does not verify: {e}", head.seq),
            )
        })?;
    }
    if let (true, Some(id)) = (head.seq == pos.seq, pos.id) {
        if head.id != id {
            return Err(Failure::new(
                EXIT_FAILED,
                format!(
                    "fork: the signed head names {} at seq {}, but the tail printed {id} there",
                    head.id, head.seq
                ),
            ));
        }
    }
    Ok(head)
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
    let key = args
        .authority_key
        .as_deref()
        .map(PublicKey::from_hex)
        .transpose()
        .map_err(|e| Failure::new(EXIT_BAD_INPUT, format!("--authority-key: {e}")))?;
    let pin = HeadPin {
        group: &group,
        key: key.as_ref(),
    };
    let client = args.server.client()?;
    let json = args.output.json();
    let mut pos = Position::after(args.after);
    if args.until.is_some_and(|u| u <= pos.seq) {
        return Ok(EXIT_OK);
    }
    let idle = Duration::from_secs(args.idle_timeout);
    let mut connected_once = false;
    let mut wait = Duration::from_millis(100);
    loop {
        let resume = connected_once.then_some(pos.seq);
        let why = match client.stream_idle(&group, pos.seq, resume, idle) {
            Ok(body) => {
                connected_once = true;
                wait = Duration::from_millis(100);
                match read_stream(BufReader::new(body), &mut pos, args.until, json, pin)? {
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
            pos.next_seq()
        ),
    )
}

/// Reads one connection's messages (SSE: `id:`, `event:`, `data:` lines, a blank line ends
/// a message, `:` lines are comments) and prints each event; `event: head` messages are
/// checked ([`check_head`]) and print nothing.
///
/// A message is bounded by [`MAX_MESSAGE_BYTES`]: a longer line or message is not from an
/// mwp server and ends the tail (`EXIT_FAILED`) before it can take unbounded memory.
fn read_stream(
    mut reader: impl BufRead,
    pos: &mut Position,
    until: Option<u64>,
    json: bool,
    pin: HeadPin<'_>,
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
            let e = Error::from_answer(data.as_bytes())
                .unwrap_or_else(|| Error::new(Code::Storage, printable(&data, MAX_QUOTED_CHARS)));
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
        if kind == "head" {
            check_head(*pos, &data, pin)?;
            kind.clear();
            data.clear();
            continue;
        }
        let event: Event = serde_json::from_str(&data).map_err(|e| {
            Failure::new(
                EXIT_BAD_INPUT,
                format!(
                    "the stream sent something that is not an mwp event after seq {}: {}",
                    pos.seq,
                    mwp_core::canonical::text_refusal(data.as_bytes(), &e)
                ),
            )
        })?;
        *pos = follow(*pos, &event, pin.group)?;
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
    let kind = event.kind.type_name();
    format!(
        "seq {:<6} {:<20} by {:<12} {} rev {}",
        event.seq, kind, event.actor, event.aggregate, event.revision
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use mwp_core::{Hash, SecretKey};

    fn events() -> Vec<Event> {
        let text = include_str!("../../../../tests/transcripts/lifecycle.jsonl");
        let (lines, _) = mwp_core::transcript::run_in_memory(text);
        lines
            .iter()
            .filter_map(|l| l.get("event"))
            .map(|e| serde_json::from_value(e.clone()).expect("event"))
            .collect()
    }

    fn g1() -> Id {
        Id::new("g1").expect("id")
    }

    fn pin(group: &Id) -> HeadPin<'_> {
        HeadPin { group, key: None }
    }

    fn head_message(head: &SignedHead) -> String {
        format!("event: head\ndata: {}\n\n", json!(head))
    }

    #[test]
    fn heads_print_nothing_verify_under_the_pin_and_a_fork_is_an_error() {
        let ev = events();
        let key = SecretKey::for_transcript("@authority");
        let sign = |seq: u64, id: Hash, k: &SecretKey| {
            SignedHead::sign(&Id::new("acme").expect("id"), &g1(), seq, id, 5, k).expect("signs")
        };
        let good = sign(2, ev[1].id, &key);
        let text = format!(
            "{}{}{}",
            sse(&[&ev[0], &ev[1]]),
            head_message(&good),
            sse(&[&ev[2]])
        );
        let public = key.public();
        let pinned = HeadPin {
            group: &g1(),
            key: Some(&public),
        };
        let mut pos = Position {
            seq: 0,
            id: Some(Hash::ZERO),
        };
        assert!(matches!(
            read_stream(text.as_bytes(), &mut pos, None, true, pinned),
            Ok(End::Dropped(_))
        ));
        assert_eq!(pos.seq, 3, "the head was no event");
        // Another key, another id at the last seq, another group, not a head: each refused.
        let at2 = Position {
            seq: 2,
            id: Some(ev[1].id),
        };
        let other = SecretKey::for_transcript("mallory");
        let forged = json!(sign(2, ev[1].id, &other)).to_string();
        let e = check_head(at2, &forged, pinned).expect_err("another key");
        assert!(e.message.contains("does not verify"), "{}", e.message);
        let forked = json!(sign(2, ev[0].id, &key)).to_string();
        let e = check_head(at2, &forked, pin(&g1())).expect_err("fork");
        assert!(e.message.contains("fork"), "{}", e.message);
        let g2 = Id::new("g2").expect("id");
        let e = check_head(at2, &json!(good).to_string(), pin(&g2)).expect_err("group");
        assert!(e.message.contains("not g2"), "{}", e.message);
        let e = check_head(at2, "{\"seq\": 2}", pin(&g1())).expect_err("not a head");
        assert_eq!(e.exit, EXIT_BAD_INPUT);
        // A head ahead of the tail is kept quiet.
        check_head(at2, &json!(sign(9, ev[0].id, &key)).to_string(), pinned).expect("ahead");
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
        let err = match read_stream(text.as_bytes(), &mut pos, None, true, pin(&g1())) {
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
    fn an_event_of_another_group_is_an_error() {
        let ev = events();
        let pos = Position {
            seq: 0,
            id: Some(Hash::ZERO),
        };
        let g2 = Id::new("g2").expect("id");
        let err = follow(pos, &ev[0], &g2).expect_err("another group");
        assert_eq!(err.exit, EXIT_FAILED);
        assert!(err.message.contains("of group g1"), "{}", err.message);
    }

    #[test]
    fn an_event_that_does_not_chain_is_an_error() {
        let ev = events();
        let pos = Position {
            seq: 1,
            id: Some(Hash::ZERO),
        };
        let err = follow(pos, &ev[1], &g1()).expect_err("does not chain");
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
            read_stream(text.as_bytes(), &mut pos, Some(2), true, pin(&g1())),
            Ok(End::Done)
        ));
        let mut pos = Position {
            seq: 0,
            id: Some(Hash::ZERO),
        };
        assert!(matches!(
            read_stream(text.as_bytes(), &mut pos, None, true, pin(&g1())),
            Ok(End::Dropped(_))
        ));
        assert_eq!(pos.seq, 2);
    }

    #[test]
    fn an_integer_out_of_range_in_an_event_is_named_as_written() {
        let ev = events();
        let text = json!(ev[0]).to_string();
        let seq = format!("\"seq\":{}", ev[0].seq);
        assert!(text.contains(&seq), "{text}");
        let hostile = text.replacen(&seq, "\"seq\":-9223372036854775809", 1);
        let stream = format!("id: 1\ndata: {hostile}\n\n");
        let mut pos = Position {
            seq: 0,
            id: Some(Hash::ZERO),
        };
        let err = match read_stream(stream.as_bytes(), &mut pos, None, true, pin(&g1())) {
            Err(f) => f,
            Ok(_) => panic!("an integer out of range was taken"),
        };
        assert_eq!(err.exit, EXIT_BAD_INPUT);
        assert!(
            err.message
                .contains("integer out of range: -9223372036854775809 is not from"),
            "{}",
            err.message
        );
        assert_eq!(pos.seq, 0);
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
            match read_stream(text, &mut pos, None, true, pin(&g1())) {
                Err(f) => assert_eq!(f.exit, EXIT_FAILED, "{}", f.message),
                _ => panic!("an oversized message was accepted"),
            }
        }
    }
}
