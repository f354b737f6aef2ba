//! The memory host: an in-memory authority that keeps each Group's log as encoded events and
//! its latest signed snapshot, and rebuilds every index from the log. It is the reference
//! host, not a mock: the transcript runner, the property tests and the simulation run on it.
//! Every decision is the [`Authority`] driver's; this module only keeps what it is told to.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::authority::{Authority, Commit, Config, Policy, Replay, Step};
use crate::command::Command;
use crate::crypto::{Hash, SecretKey};
use crate::error::{Code, Error, Result};
use crate::event::Event;
use crate::id::{Id, AUTHORITY_ACTOR};
use crate::limits::Limits;
use crate::state::GroupState;
use crate::Decision;

/// A signed snapshot kept for a group: its seq, state hash and canonical CBOR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSnapshot {
    /// The seq it is at.
    pub seq: u64,
    /// The hash of the state it holds.
    pub state_hash: Hash,
    /// Its canonical CBOR.
    pub bytes: Vec<u8>,
}

/// One Group: its log (canonical CBOR per event), its latest snapshot and its driver.
#[derive(Debug, Clone)]
pub struct MemoryGroup {
    driver: Authority,
    log: Vec<Vec<u8>>,
    snapshot: Option<StoredSnapshot>,
}

impl Default for MemoryGroup {
    /// A group under [`MemoryAuthority::new`]'s key and policy: the transcript key of
    /// `@authority` (SPEC §12), default limits.
    fn default() -> Self {
        MemoryGroup::new(Arc::clone(MemoryAuthority::new().config()))
    }
}

impl From<Authority> for MemoryGroup {
    /// A group not open yet, kept in memory under `driver`'s key and policy (keyed or
    /// [`Authority::keyless`]); the driver's state is dropped, since the log starts empty.
    fn from(driver: Authority) -> Self {
        MemoryGroup {
            driver: driver.with_state(None),
            log: Vec::new(),
            snapshot: None,
        }
    }
}

impl MemoryGroup {
    /// A group that is not open yet, under `config`.
    pub fn new(config: Arc<Config>) -> Self {
        MemoryGroup {
            driver: Authority::new(config),
            log: Vec::new(),
            snapshot: None,
        }
    }

    /// The state, once the group is open.
    pub fn state(&self) -> Option<&GroupState> {
        self.driver.state()
    }

    /// The driver (what it would do next: [`Authority::next_wake`], …).
    pub fn driver(&self) -> &Authority {
        &self.driver
    }

    /// The encoded events, seq 1 first.
    pub fn log(&self) -> &[Vec<u8>] {
        &self.log
    }

    /// The latest signed snapshot kept, if any.
    pub fn latest_snapshot(&self) -> Option<&StoredSnapshot> {
        self.snapshot.as_ref()
    }

    /// Decides one command and keeps what an accepted one commits.
    pub fn submit(&mut self, cmd: &Command, now_ms: u64) -> Result<Decision> {
        let step = self.driver.handle_command(cmd, now_ms)?;
        self.persist(step)
    }

    /// Sends the authority's own `tick` if one is due at `now_ms`
    /// ([`Authority::poll_tick`]): the tick and its decision, or `None`.
    pub fn tick(&mut self, now_ms: u64) -> Result<Option<(Command, Decision)>> {
        let Some(tick) = self.driver.poll_tick(now_ms)? else {
            return Ok(None);
        };
        let decision = self.submit(&tick, now_ms)?;
        Ok(Some((tick, decision)))
    }

    fn persist(&mut self, step: Step) -> Result<Decision> {
        let Step::Accepted(commit) = step else {
            return Ok(step.into_decision());
        };
        let Commit {
            event,
            bytes,
            erase,
            snapshot,
            // Nothing of an in-memory log outlives the process: there is no history to seal
            // (its hosts set no archival policy).
            seal: _,
        } = commit;
        self.log.push(bytes);
        if let Some(seq) = erase {
            self.erase(seq)?;
        }
        // A keyless driver's due snapshot stays unsigned: its callers sign with their key.
        if let Some(due) = snapshot.filter(|d| d.signable()) {
            let (bytes, state_hash) = due.sign_stored()?;
            self.snapshot = Some(StoredSnapshot {
                seq: due.seq(),
                state_hash,
                bytes,
            });
        }
        Ok(Decision::Accepted(event))
    }

    /// Appends an event decided elsewhere (a host that wrote it itself): the log, the state,
    /// then the redaction of the target's stored values.
    pub fn append(&mut self, event: &Event) -> Result<()> {
        let bytes = event.to_cbor()?;
        // `apply` checks before it changes anything: on error the state is untouched.
        self.driver.handle_logged(event)?;
        self.log.push(bytes);
        if let crate::event::EventKind::EventRedacted(r) = &event.kind {
            self.erase(r.seq)?;
        }
        Ok(())
    }

    fn erase(&mut self, seq: u64) -> Result<()> {
        let index = usize::try_from(seq - 1).map_err(|_| Error::corrupt("seq out of range"))?;
        let Some(bytes) = self.log.get(index) else {
            return Err(Error::corrupt(format!("seq {seq} is not in the log")));
        };
        let mut event = Event::from_cbor(bytes)?;
        event.redact()?;
        self.log[index] = event.to_cbor()?;
        Ok(())
    }

    /// Events after `after`, at most `limit`, decoded and verified; `CURSOR_TOO_OLD` past
    /// the online window ([`Authority::check_replay`]).
    pub fn events(&mut self, after: u64, limit: usize) -> Result<Vec<Event>> {
        loop {
            let latest = self.snapshot.as_ref().map(|s| (s.seq, s.state_hash));
            match self.driver.check_replay(after, latest) {
                Replay::Serve => break,
                Replay::NeedSnapshot => {
                    self.take_snapshot()?;
                }
                Replay::TooOld(e) => return Err(e),
            }
        }
        self.logged(after, limit)
    }

    /// The stored events after `after`, at most `limit`, decoded, whatever the window.
    pub fn logged(&self, after: u64, limit: usize) -> Result<Vec<Event>> {
        let start = usize::try_from(after)
            .unwrap_or(usize::MAX)
            .min(self.log.len());
        self.log[start..]
            .iter()
            .take(limit)
            .map(|b| Event::from_cbor(b))
            .collect()
    }

    /// Signs a snapshot of the state now and keeps it as the latest.
    pub fn take_snapshot(&mut self) -> Result<&StoredSnapshot> {
        let (bytes, state_hash) = self.driver.snapshot_stored()?;
        let seq = self.driver.head();
        Ok(self.snapshot.insert(StoredSnapshot {
            seq,
            state_hash,
            bytes,
        }))
    }

    /// Drops the state and rebuilds it from the log (the kept snapshot is storage: it stays),
    /// verifying every event.
    pub fn rebuild(&mut self) -> Result<()> {
        let mut driver = self.driver.with_state(None);
        for bytes in &self.log {
            let event = Event::from_cbor_verified(bytes)?;
            driver.handle_logged(&event)?;
        }
        self.driver = driver;
        Ok(())
    }
}

/// An authority over any number of Groups, in memory.
#[derive(Debug, Clone)]
pub struct MemoryAuthority {
    groups: BTreeMap<Id, MemoryGroup>,
    config: Arc<Config>,
}

impl Default for MemoryAuthority {
    fn default() -> Self {
        MemoryAuthority::new()
    }
}

impl MemoryAuthority {
    /// An empty authority with default limits, signing with the transcript key of
    /// `@authority` (SPEC §12): the key a transcript's `open_group` names.
    pub fn new() -> Self {
        MemoryAuthority::with_limits(Limits::default())
    }

    /// [`MemoryAuthority::new`] with the given limits.
    pub fn with_limits(limits: Limits) -> Self {
        MemoryAuthority::with_config(Config::new(
            SecretKey::for_transcript(AUTHORITY_ACTOR),
            Policy {
                limits,
                ..Policy::default()
            },
        ))
    }

    /// An empty authority with the given key and policy.
    pub fn with_config(config: Arc<Config>) -> Self {
        MemoryAuthority {
            groups: BTreeMap::new(),
            config,
        }
    }

    /// The key and policy.
    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// Decides one command for the group it names.
    pub fn submit(&mut self, cmd: &Command, now_ms: u64) -> Result<Decision> {
        match self.groups.get_mut(&cmd.group) {
            Some(g) => g.submit(cmd, now_ms),
            None => {
                let mut g = MemoryGroup::new(Arc::clone(&self.config));
                let d = g.submit(cmd, now_ms)?;
                if g.state().is_some() {
                    self.groups.insert(cmd.group.clone(), g);
                }
                Ok(d)
            }
        }
    }

    /// Whatever the authority does by itself in `group` at `now_ms`: every `tick` that is
    /// due, in order, with its decision.
    pub fn advance(&mut self, group: &Id, now_ms: u64) -> Result<Vec<Decision>> {
        let g = self.group_mut(group)?;
        let mut done = Vec::new();
        while let Some((_, decision)) = g.tick(now_ms)? {
            let accepted = matches!(decision, Decision::Accepted(_));
            done.push(decision);
            if !accepted {
                break;
            }
        }
        Ok(done)
    }

    /// A group.
    pub fn group(&self, group: &Id) -> Option<&MemoryGroup> {
        self.groups.get(group)
    }

    /// A group, to change; `NOT_FOUND` if it does not exist.
    pub fn group_mut(&mut self, group: &Id) -> Result<&mut MemoryGroup> {
        self.groups.get_mut(group).ok_or_else(|| not_found(group))
    }

    /// The groups, in ID order.
    pub fn groups(&self) -> impl Iterator<Item = (&Id, &MemoryGroup)> {
        self.groups.iter()
    }

    /// Rebuilds every group's state from its log.
    pub fn restart(&mut self) -> Result<()> {
        self.groups.values_mut().try_for_each(MemoryGroup::rebuild)
    }

    /// Events of a group after `after` (see [`MemoryGroup::events`]).
    pub fn events(&mut self, group: &Id, after: u64, limit: usize) -> Result<Vec<Event>> {
        self.group_mut(group)?.events(after, limit)
    }

    /// The earliest time any group's authority has something to do by itself, among groups
    /// not in `skip`: (group, time).
    pub fn next_wake(&self, skip: &[Id]) -> Option<(Id, u64)> {
        self.groups
            .iter()
            .filter(|(g, _)| !skip.contains(g))
            .filter_map(|(g, m)| Some((g.clone(), m.driver.next_wake()?)))
            .min_by_key(|(_, at)| *at)
    }
}

/// `NOT_FOUND` for a group this authority does not hold.
pub fn not_found(group: &Id) -> Error {
    Error::new(
        Code::NotFound,
        format!("group {group} does not exist here; open it with an open_group command first"),
    )
}
