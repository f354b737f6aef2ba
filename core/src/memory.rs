//! The memory host: an in-memory authority that keeps each Group's log as encoded events and
//! rebuilds every index from it. It is the reference host, not a mock: the transcript runner,
//! the property tests and the simulation run on it.

use std::collections::BTreeMap;

use crate::accept::{accept, Decision};
use crate::command::Command;
use crate::error::{Code, Error, Result};
use crate::event::{Event, EventKind};
use crate::id::Id;
use crate::limits::Limits;
use crate::state::GroupState;

/// One Group: its log (canonical CBOR per event) and the state built from it.
#[derive(Debug, Clone, Default)]
pub struct MemoryGroup {
    log: Vec<Vec<u8>>,
    state: Option<GroupState>,
}

impl MemoryGroup {
    /// The state, once the group is open.
    pub fn state(&self) -> Option<&GroupState> {
        self.state.as_ref()
    }

    /// The encoded events, seq 1 first.
    pub fn log(&self) -> &[Vec<u8>] {
        &self.log
    }

    /// Decides and, if accepted, appends and applies one command.
    pub fn submit(&mut self, cmd: &Command, now_ms: u64, limits: &Limits) -> Result<Decision> {
        let decision = accept(self.state.as_ref(), cmd, now_ms, limits)?;
        if let Decision::Accepted(event) = &decision {
            self.append(event)?;
        }
        Ok(decision)
    }

    /// Appends an accepted event: the log first, then the state, then redaction of the
    /// target's stored values.
    pub fn append(&mut self, event: &Event) -> Result<()> {
        let bytes = event.to_cbor()?;
        // `apply` checks before it changes anything: on error the state is untouched.
        GroupState::apply_to(&mut self.state, event)?;
        self.log.push(bytes);
        if let EventKind::EventRedacted(r) = &event.kind {
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

    /// Events after `after`, at most `limit`, decoded and verified.
    pub fn events(&self, after: u64, limit: usize) -> Result<Vec<Event>> {
        let start = usize::try_from(after)
            .unwrap_or(usize::MAX)
            .min(self.log.len());
        self.log[start..]
            .iter()
            .take(limit)
            .map(|b| Event::from_cbor(b))
            .collect()
    }

    /// Drops the state and rebuilds it from the log, verifying every event.
    pub fn rebuild(&mut self) -> Result<()> {
        let mut state = None;
        for bytes in &self.log {
            let event = Event::from_cbor_verified(bytes)?;
            GroupState::apply_to(&mut state, &event)?;
        }
        self.state = state;
        Ok(())
    }
}

/// An authority over any number of Groups, in memory.
#[derive(Debug, Clone, Default)]
pub struct MemoryAuthority {
    groups: BTreeMap<Id, MemoryGroup>,
    limits: Limits,
}

impl MemoryAuthority {
    /// An empty authority with default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty authority with the given limits.
    pub fn with_limits(limits: Limits) -> Self {
        MemoryAuthority {
            groups: BTreeMap::new(),
            limits,
        }
    }

    /// Decides one command for the group it names.
    pub fn submit(&mut self, cmd: &Command, now_ms: u64) -> Result<Decision> {
        let limits = self.limits.clone();
        match self.groups.get_mut(&cmd.group) {
            Some(g) => g.submit(cmd, now_ms, &limits),
            None => {
                let mut g = MemoryGroup::default();
                let d = g.submit(cmd, now_ms, &limits)?;
                self.groups.insert(cmd.group.clone(), g);
                Ok(d)
            }
        }
    }

    /// A group.
    pub fn group(&self, group: &Id) -> Option<&MemoryGroup> {
        self.groups.get(group)
    }

    /// Rebuilds every group's state from its log.
    pub fn restart(&mut self) -> Result<()> {
        self.groups.values_mut().try_for_each(MemoryGroup::rebuild)
    }

    /// Events of a group after `after`.
    pub fn events(&self, group: &Id, after: u64, limit: usize) -> Result<Vec<Event>> {
        self.groups
            .get(group)
            .ok_or_else(|| Error::new(Code::NotFound, format!("group {group} does not exist")))?
            .events(after, limit)
    }
}
