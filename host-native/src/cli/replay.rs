//! `mwp replay --data DIR --group G [--after N]` (or `--server URL`): a group's events as
//! JSON lines, with a progress bar on stderr when it is a terminal.
//!
//! Every event read must continue the ones printed before it, as in `mwp tail`
//! ([`super::client::tail::follow`]): of the group, the next seq, chained to the one before
//! and intact. A source that answers anything else (a page that repeats, skips or goes
//! back, another group's event, an event that does not hash to its id) stops the replay
//! with exit 1 naming the expected and the received, after the events before it: it can
//! neither loop forever nor print a history with a hole in it.

use std::io::Write;

use indicatif::{ProgressBar, ProgressStyle};
use mwp_core::Id;

use super::client::source::{Source, SourceArgs};
use super::client::tail::{follow, Position};
use super::{Failure, Outcome, EXIT_BAD_INPUT, EXIT_OK, EXIT_UNAVAILABLE};

/// Events fetched per call.
const PAGE: usize = 1000;

/// A progress bar for `total` items on stderr (hidden when stderr is not a terminal).
pub fn progress(total: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(total);
    let style = ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ({per_sec}, {eta})")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    bar.set_style(style);
    bar.set_message(what.to_owned());
    bar
}

/// Writes the events of `group` after `after` to `out`; returns how many.
pub fn replay(
    source: &Source,
    group: &Id,
    after: u64,
    out: &mut dyn Write,
    bar: &ProgressBar,
) -> Result<u64, Failure> {
    // The chain is known from seq 1 on; after another seq, from the first event read.
    let mut pos = Position::after(after);
    let mut written = 0;
    loop {
        let events = source.events(group, pos.seq, PAGE)?;
        if events.is_empty() {
            return Ok(written);
        }
        for event in &events {
            pos = follow(pos, event, group)?;
            serde_json::to_writer(&mut *out, event)
                .map_err(std::io::Error::from)
                .and_then(|()| out.write_all(b"\n"))
                .map_err(|e| {
                    Failure::new(EXIT_UNAVAILABLE, format!("cannot write the output: {e}"))
                })?;
            written += 1;
            bar.inc(1);
        }
    }
}

/// Runs `mwp replay`.
pub fn run(source: &SourceArgs, group: &str, after: u64) -> Outcome {
    let group =
        Id::new(group).map_err(|e| Failure::new(EXIT_BAD_INPUT, format!("--group: {e}")))?;
    let source = source.open()?;
    let head = match &source {
        Source::Store(service) => service
            .head_seq(&group)
            .map_err(|e| Failure::from_error("cannot read the head", &e))?,
        // Only for the progress bar: a server may not let this reader list groups.
        Source::Server(_) => source
            .groups()
            .ok()
            .and_then(|gs| gs.into_iter().find(|(g, _)| *g == group))
            .map_or(0, |(_, head)| head),
    };
    let bar = progress(head.saturating_sub(after), "replay");
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let result = replay(&source, &group, after, &mut out, &bar);
    bar.finish_and_clear();
    result?;
    out.flush()
        .map_err(|e| Failure::new(EXIT_UNAVAILABLE, format!("cannot write the output: {e}")))?;
    Ok(EXIT_OK)
}
