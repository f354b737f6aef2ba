//! `mwp replay --data DIR --group G [--after N]`: a group's events as JSON lines, with a
//! progress bar on stderr when it is a terminal.

use std::io::Write;

use indicatif::{ProgressBar, ProgressStyle};
use mwp_core::Id;

use super::store::{self, StoreUrl};
use super::{Failure, Outcome, EXIT_BAD_INPUT, EXIT_OK, EXIT_UNAVAILABLE};
use crate::service::AuthorityService;

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
    service: &dyn AuthorityService,
    group: &Id,
    after: u64,
    out: &mut dyn Write,
    bar: &ProgressBar,
) -> Result<u64, Failure> {
    let mut cursor = after;
    let mut written = 0;
    loop {
        let events = service
            .events(group, cursor, PAGE)
            .map_err(|e| Failure::from_error(&format!("cannot read the events of {group}"), &e))?;
        let Some(last) = events.last() else {
            return Ok(written);
        };
        cursor = last.seq;
        for event in &events {
            serde_json::to_writer(&mut *out, event)
                .map_err(std::io::Error::from)
                .and_then(|()| out.write_all(b"\n"))
                .map_err(|e| {
                    Failure::new(EXIT_UNAVAILABLE, format!("cannot write the output: {e}"))
                })?;
        }
        written += events.len() as u64;
        bar.inc(events.len() as u64);
    }
}

/// Runs `mwp replay`.
pub fn run(url: &StoreUrl, group: &str, after: u64) -> Outcome {
    let group =
        Id::new(group).map_err(|e| Failure::new(EXIT_BAD_INPUT, format!("--group: {e}")))?;
    let read_only = store::Options {
        read_only: true,
        ..store::Options::default()
    };
    let service = store::open(url, &read_only)?;
    let head = service
        .head_seq(&group)
        .map_err(|e| Failure::from_error("cannot read the head", &e))?;
    let bar = progress(head.saturating_sub(after), "replay");
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let result = replay(service.as_ref(), &group, after, &mut out, &bar);
    bar.finish_and_clear();
    result?;
    out.flush()
        .map_err(|e| Failure::new(EXIT_UNAVAILABLE, format!("cannot write the output: {e}")))?;
    Ok(EXIT_OK)
}
