//! `mwp transcript FILE`: runs a transcript (SPEC §12) on any [`AuthorityService`].
//!
//! [`ServiceHost`] adapts a service to the transcript runner: commands go to the service, and
//! the states the runner reports come from a replica per group that follows the service's
//! events. So every transcript run also checks that the store's log rebuilds its decisions.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use mwp_core::id::AUTHORITY_ACTOR;
use mwp_core::replica::{Offer, Replica};
use mwp_core::snapshot::Snapshot;
use mwp_core::transcript::{Host, Runner};
use mwp_core::{Code, Command, Decision, Error, GroupState, Id, Result, SecretKey, WorkState};

use super::store::StoreUrl;
use super::{Failure, Outcome, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK};
use crate::memory_service::MemoryService;
use crate::service::AuthorityService;

/// Reopens a service from its storage (the transcript's `{"op": "restart"}`). It is called
/// after the host dropped its handle, so a store that locks its directory can open it again.
pub type Reopen = Box<dyn FnMut() -> Result<Arc<dyn AuthorityService>>>;

/// A transcript host over an [`AuthorityService`].
pub struct ServiceHost {
    /// `None` only while reopening.
    service: Option<Arc<dyn AuthorityService>>,
    reopen: Reopen,
    replicas: BTreeMap<Id, Replica>,
}

impl ServiceHost {
    /// A host over `service`; `reopen` drops it and opens it again from storage.
    pub fn new(service: Arc<dyn AuthorityService>, reopen: Reopen) -> Self {
        ServiceHost {
            service: Some(service),
            reopen,
            replicas: BTreeMap::new(),
        }
    }

    /// A host over a fresh in-memory service keyed for transcripts.
    pub fn memory() -> Self {
        let service = Arc::new(MemoryService::for_transcripts());
        let memory = Arc::clone(&service);
        ServiceHost::new(
            service,
            Box::new(move || {
                memory.restart()?;
                Ok(memory.clone() as Arc<dyn AuthorityService>)
            }),
        )
    }

    fn service(&self) -> Result<&Arc<dyn AuthorityService>> {
        self.service
            .as_ref()
            .ok_or_else(|| Error::new(Code::Storage, "the store could not be reopened"))
    }

    /// Brings the replica of `group` up to the service's head.
    fn follow(&mut self, group: &Id) -> Result<()> {
        let service = Arc::clone(self.service()?);
        let replica = self
            .replicas
            .entry(group.clone())
            .or_insert_with(|| Replica::new(group.clone()));
        loop {
            let events = match service.events(group, replica.cursor(), 1000) {
                Ok(events) => events,
                Err(e) if e.code == Code::CursorTooOld => {
                    let bytes = service.latest_snapshot(group)?;
                    let snap = Snapshot::from_cbor(&bytes)?;
                    let trusted = service.authority_key();
                    let org = snap.org.clone();
                    replica.restore(&snap, &trusted, &org, replica.cursor())?;
                    continue;
                }
                Err(e) if e.code == Code::NotFound => return Ok(()),
                Err(e) => return Err(e),
            };
            if events.is_empty() {
                return Ok(());
            }
            for event in events {
                if let Offer::Rejected(e) = replica.offer(event) {
                    return Err(e);
                }
            }
        }
    }
}

impl Host for ServiceHost {
    fn submit(&mut self, cmd: &Command, now_ms: u64) -> Result<Decision> {
        let decision = self.service()?.submit(cmd, now_ms)?;
        if matches!(decision, Decision::Accepted(_)) {
            self.follow(&cmd.group).map_err(|e| {
                Error::corrupt(format!(
                    "the accepted event could not be replayed from the store: {e}"
                ))
            })?;
        }
        Ok(decision)
    }

    fn restart(&mut self) -> Result<()> {
        // Drop every handle first: the reopened store must read only what was made durable.
        self.service = None;
        self.replicas.clear();
        let service = (self.reopen)()?;
        self.service = Some(Arc::clone(&service));
        for group in service.groups()? {
            self.follow(&group)?;
        }
        Ok(())
    }

    fn state(&self, group: &Id) -> Option<GroupState> {
        self.replicas.get(group)?.state().cloned()
    }

    fn work_state(&self, group: &Id, work: &Id) -> Option<WorkState> {
        Some(self.replicas.get(group)?.state()?.work.get(work)?.state)
    }

    /// The service's own ticks at `now_ms`, as its tick loop would send them.
    fn advance(&mut self, group: &Id, now_ms: u64) -> Result<Vec<Decision>> {
        let done = crate::service::advance(&**self.service()?, group, now_ms)?;
        self.follow(group)?;
        Ok(done)
    }
}

/// Runs the transcript in `file` on a fresh authority of the kind `url` names.
pub fn run(file: &Path, url: &StoreUrl) -> Outcome {
    // Read and checked whole before any store is opened: a transcript that cannot be read
    // changes nothing on disk.
    let unreadable = |e: String| {
        Failure::new(
            EXIT_BAD_INPUT,
            format!("cannot read transcript {}: {e}", file.display()),
        )
    };
    let bytes = super::input::read(file, super::input::MAX_TRANSCRIPT_BYTES)
        .map_err(|e| unreadable(e.to_string()))?;
    let text = super::input::text(&bytes).map_err(unreadable)?;
    let mut host = match url {
        StoreUrl::Memory => ServiceHost::memory(),
        other => {
            // Transcripts name the transcript key of `@authority` (SPEC §12).
            if let StoreUrl::File(dir) = other {
                let used = std::fs::read_dir(dir)
                    .map(|mut d| d.next().is_some())
                    .unwrap_or(false);
                if used {
                    return Err(Failure::new(
                        EXIT_BAD_INPUT,
                        format!("{} is not empty; a transcript runs on a fresh authority: name a new directory", dir.display()),
                    ));
                }
            }
            let options = super::store::Options {
                authority_key: Some(SecretKey::for_transcript(AUTHORITY_ACTOR)),
                create: true,
                ..Default::default()
            };
            let service = super::store::open(other, &options)?;
            let reopen_url = other.clone();
            ServiceHost::new(
                service,
                Box::new(move || {
                    super::store::open(&reopen_url, &options)
                        .map_err(|f| Error::new(Code::Storage, f.message))
                }),
            )
        }
    };
    let failed = run_text(&mut host, text, &mut std::io::stdout().lock()).map_err(|e| {
        Failure::new(
            super::EXIT_UNAVAILABLE,
            format!("cannot write the output: {e}"),
        )
    })?;
    Ok(if failed { EXIT_FAILED } else { EXIT_OK })
}

/// Runs transcript text on `host`, writing one JSON line per step; returns whether any
/// step failed its `expect`.
pub fn run_text(host: &mut dyn Host, text: &str, out: &mut dyn Write) -> std::io::Result<bool> {
    let mut runner = Runner::new(host);
    for line in text.lines() {
        for v in runner.run_line(line) {
            writeln!(out, "{v}")?;
        }
    }
    out.flush()?;
    Ok(runner.failed())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIFECYCLE: &str = include_str!("../../../tests/transcripts/lifecycle.jsonl");

    #[test]
    fn the_service_host_answers_like_the_memory_reference() {
        let (reference, ref_failed) = mwp_core::transcript::run_in_memory(LIFECYCLE);
        let mut host = ServiceHost::memory();
        let mut out = Vec::new();
        let failed = run_text(&mut host, LIFECYCLE, &mut out).expect("writes");
        let ours: Vec<serde_json::Value> = String::from_utf8(out)
            .expect("utf-8")
            .lines()
            .map(|l| serde_json::from_str(l).expect("json"))
            .collect();
        assert!(!ref_failed);
        assert!(!failed);
        assert_eq!(ours, reference);
    }

    #[test]
    fn a_failed_expect_is_reported() {
        let text = LIFECYCLE.replacen(
            "\"outcome\": \"accepted\", \"seq\": 1",
            "\"outcome\": \"rejected\", \"seq\": 1",
            1,
        );
        let mut host = ServiceHost::memory();
        let failed = run_text(&mut host, &text, &mut Vec::new()).expect("writes");
        assert!(failed);
    }
}
