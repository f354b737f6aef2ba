//! A native host of the core's agent driver ([`mwp_core::agent::Agent`]) over HTTP.
//!
//! An [`HttpAgent`] is an [`Agent`] plus what the driver leaves to its host:
//!
//! * **durable storage**: every write set the driver hands out is appended whole to the
//!   agent's journal file ([`Journal`], the agent side's store in [`crate::store`]: the file
//!   store's record framing on its storage backend, fsynced) before
//!   [`Agent::handle_committed`] is called. The driver sends nothing and dispatches nothing
//!   while a write set is uncommitted, so whatever left the agent is in the file first;
//! * **the network**: each [`Transmit`] is carried out with the blocking
//!   [`Client`] of `mwp serve` and its answer fed back (`handle_answer`, `handle_events`,
//!   `handle_fetch_error`, `handle_lookup`, `handle_snapshot`);
//! * **effects**: each [`Dispatch`] is handed to a function of the caller, which performs it
//!   and says what happened (or that nobody knows yet);
//! * **the clock**: the caller passes `now_ms` (the authority's clock,
//!   [`crate::server::now_ms`]) and calls [`HttpAgent::pump`] again by
//!   [`Agent::poll_timeout`].
//!
//! A crash is dropping the `HttpAgent`; a restart is [`HttpAgent::open`] on the same file,
//! which replays the committed write sets into an
//! [`AgentImage`](mwp_core::agent::AgentImage) and calls
//! [`Agent::restore`]. Nothing else survives, which is the point.

use std::path::Path;

use mwp_core::agent::{Agent, Config, Dispatch, Notice, Transmit};
use mwp_core::opaque::Opaque;
use mwp_core::{Code, Receipt, Result, SecretKey};

use crate::server::client::Client;
pub use crate::store::agent_journal::Journal;

/// Events asked for per replay request.
const PAGE: usize = 500;

/// What the caller's effect function says about a dispatched effect: its outcome and the
/// target's receipt, or `None` when the outcome is not known (yet).
pub type Observed = Option<(Opaque, Opaque)>;

/// An agent driven by [`Agent`], talking to `mwp serve` over HTTP, committing to a
/// [`Journal`]. See the module doc.
#[derive(Debug)]
pub struct HttpAgent {
    agent: Agent,
    client: Client,
    journal: Journal,
    duplicates: Vec<Receipt>,
    lose_answers: usize,
    lost: Vec<Receipt>,
}

impl HttpAgent {
    /// Opens the agent whose journal is at `path` (a fresh one if there is no file yet;
    /// [`Journal::open`]) against the server at `base`. It goes online at the first [`HttpAgent::pump`],
    /// so what the application does first (say [`Agent::replace_session`] after a crash)
    /// comes before anything the restored agent would send.
    pub fn open(
        config: Config,
        key: SecretKey,
        base: &str,
        path: impl AsRef<Path>,
    ) -> Result<HttpAgent> {
        let (journal, image) = Journal::open(path)?;
        let agent = Agent::restore(config, key, &image)?;
        Ok(HttpAgent {
            agent,
            client: Client::new(base),
            journal,
            duplicates: Vec::new(),
            lose_answers: 0,
            lost: Vec::new(),
        })
    }

    /// The driver, to read its replica, leases and journal.
    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// The driver, for application commands (`submit`, `checkpoint`, …) and settings.
    pub fn agent_mut(&mut self) -> &mut Agent {
        &mut self.agent
    }

    /// Receipts of the commands answered as a Duplicate (sent again after a lost answer),
    /// oldest first.
    pub fn duplicates(&self) -> &[Receipt] {
        &self.duplicates
    }

    /// Drops the answers to the next `n` commands after the server has acted on them, as a
    /// network that loses answers would; the driver sends them again after `resend_ms`.
    pub fn lose_answers(&mut self, n: usize) {
        self.lose_answers += n;
    }

    /// Receipts of answers dropped by [`HttpAgent::lose_answers`], oldest first.
    pub fn lost(&self) -> &[Receipt] {
        &self.lost
    }

    /// Commits every write set the driver has staged, and nothing else: what comes first in
    /// every turn of [`HttpAgent::pump`] (and all a host gets done if it crashes right after).
    pub fn commit(&mut self, now_ms: u64) -> Result<()> {
        while let Some(ws) = self.agent.poll_write_set() {
            self.journal.append(&ws)?;
            self.agent.handle_committed(now_ms, ws.serial);
        }
        Ok(())
    }

    /// Feeds the clock to the driver, then drains its outputs: commits every write set,
    /// carries out every transmit (feeding the answers back), hands every dispatch to
    /// `effect` and reports what it observed. Returns the notices for the application.
    /// A journal that cannot be written is an error: the agent must stop (a crash).
    pub fn pump(
        &mut self,
        now_ms: u64,
        effect: &mut dyn FnMut(&Dispatch) -> Observed,
    ) -> Result<Vec<Notice>> {
        if self.agent.online() {
            self.agent.handle_timeout(now_ms);
        } else {
            self.agent.handle_connectivity(now_ms, true);
        }
        let mut notices = Vec::new();
        loop {
            if self.agent.uncommitted() {
                self.commit(now_ms)?;
            } else if let Some(t) = self.agent.poll_transmit() {
                self.transmit(now_ms, t);
            } else if let Some(d) = self.agent.poll_dispatch() {
                if let Some((outcome, receipt)) = effect(&d) {
                    self.agent
                        .handle_effect_outcome(now_ms, &d.key, outcome, receipt);
                }
            } else if let Some(n) = self.agent.poll_notice() {
                notices.push(n);
            } else {
                return Ok(notices);
            }
        }
    }

    /// Delivers the events up to `seq` (as far as the server has them), so an answer is
    /// never ahead of the replica: the driver decides on an accepted command's consequences
    /// (a started lease, a renewed one) from events, and with a synchronous transport the
    /// answer would otherwise always come first.
    fn catch_up(&mut self, now_ms: u64, seq: u64) {
        let group = self.agent.config().group.clone();
        while self.agent.replica().cursor() < seq {
            match self
                .client
                .events(&group, self.agent.replica().cursor(), PAGE)
            {
                Ok(events) if !events.is_empty() => self.agent.handle_events(now_ms, events),
                _ => return,
            }
        }
    }

    /// Carries out one transmit. An unreachable server is no answer: the driver asks again
    /// after `resend_ms` / `sync_ms`.
    fn transmit(&mut self, now_ms: u64, t: Transmit) {
        let group = self.agent.config().group.clone();
        match t {
            Transmit::Command(cmd) => {
                let answer = self.client.submit(&cmd);
                if answer.as_ref().is_err_and(|e| e.code == Code::Storage) {
                    return;
                }
                if self.lose_answers > 0 {
                    if let Ok(s) = &answer {
                        self.lose_answers -= 1;
                        self.lost.push(s.receipt.clone());
                        return;
                    }
                }
                match &answer {
                    Ok(s) if s.duplicate => self.duplicates.push(s.receipt.clone()),
                    _ => {}
                }
                if let Ok(s) = &answer {
                    self.catch_up(now_ms, s.receipt.seq);
                }
                self.agent
                    .handle_answer(now_ms, &cmd.action, answer.map(|s| s.receipt));
            }
            Transmit::FetchEvents { after } => match self.client.events(&group, after, PAGE) {
                Ok(events) => self.agent.handle_events(now_ms, events),
                Err(e) if e.code == Code::Storage => {}
                Err(e) => self.agent.handle_fetch_error(now_ms, &e),
            },
            Transmit::LookupReceipt { action } => {
                let actor = self.agent.config().actor.clone();
                match self.client.receipt(&group, &actor, &action) {
                    Ok(r) => self.agent.handle_lookup(now_ms, &action, Some(r)),
                    Err(e) if e.code == Code::NotFound => {
                        self.agent.handle_lookup(now_ms, &action, None)
                    }
                    Err(_) => {}
                }
            }
            Transmit::FetchSnapshot(r) => {
                if let Ok(bytes) = self.client.fetch(&r.location, "application/cbor") {
                    self.agent.handle_snapshot(now_ms, &bytes);
                }
            }
            // The server keeps no per-agent acknowledgements.
            Transmit::Ack { .. } => {}
        }
    }
}
