//! Replicas (SPEC §7): rebuild a Group's state from events delivered at least once, in any
//! order. Duplicates are recognised, early events wait in a bounded buffer, and the cursor
//! never passes a gap.

use std::collections::BTreeMap;

use crate::crypto::{Hash, PublicKey};
use crate::error::{Code, Error, Result};
use crate::event::Event;
use crate::id::Id;
use crate::limits::Limits;
use crate::snapshot::Snapshot;
use crate::state::GroupState;

/// The answer to [`Replica::offer`].
#[derive(Debug, Clone, PartialEq)]
pub enum Offer {
    /// Already applied (seq ≤ cursor) or already buffered.
    Duplicate,
    /// Early: kept until the gap before it is filled.
    Buffered,
    /// Applied, with every buffered event it unblocked; `cursor` is the new cursor.
    Applied {
        /// Highest contiguous seq applied.
        cursor: u64,
        /// The events applied, in seq order (the offered one first).
        events: Vec<Event>,
    },
    /// Not applied and not kept.
    Rejected(Error),
}

impl Offer {
    /// `applied`, `duplicate`, `buffered` or `rejected`.
    pub fn name(&self) -> &'static str {
        match self {
            Offer::Duplicate => "duplicate",
            Offer::Buffered => "buffered",
            Offer::Applied { .. } => "applied",
            Offer::Rejected(_) => "rejected",
        }
    }
}

/// One Group's replica.
#[derive(Debug, Clone)]
pub struct Replica {
    group: Id,
    state: Option<GroupState>,
    buffer: BTreeMap<u64, Event>,
    limits: Limits,
}

impl Replica {
    /// An empty replica of `group`.
    pub fn new(group: Id) -> Self {
        Replica {
            group,
            state: None,
            buffer: BTreeMap::new(),
            limits: Limits::default(),
        }
    }

    /// An empty replica with the given limits.
    pub fn with_limits(group: Id, limits: Limits) -> Self {
        Replica {
            limits,
            ..Replica::new(group)
        }
    }

    /// A replica resumed from a state (restored from a snapshot or a local projection).
    pub fn from_state(state: GroupState) -> Self {
        Replica {
            group: state.group.clone(),
            state: Some(state),
            buffer: BTreeMap::new(),
            limits: Limits::default(),
        }
    }

    /// Restores from a snapshot after validating it (SPEC §8). On error nothing changes.
    pub fn restore(
        &mut self,
        snapshot: &Snapshot,
        trusted: &PublicKey,
        org: &Id,
        requested_cursor: u64,
    ) -> Result<()> {
        let state = snapshot.verify(trusted, org, &self.group, requested_cursor)?;
        self.state = Some(state.clone());
        let cursor = self.cursor();
        self.buffer.retain(|seq, _| *seq > cursor);
        Ok(())
    }

    /// The group.
    pub fn group(&self) -> &Id {
        &self.group
    }

    /// Highest contiguous seq applied: what an ACK carries.
    pub fn cursor(&self) -> u64 {
        self.state.as_ref().map_or(0, |s| s.seq)
    }

    /// Id of the event at the cursor.
    pub fn head(&self) -> Hash {
        self.state.as_ref().map_or(Hash::ZERO, |s| s.head)
    }

    /// The state, once the genesis event is applied.
    pub fn state(&self) -> Option<&GroupState> {
        self.state.as_ref()
    }

    /// Hash of the state (of nothing before genesis).
    pub fn state_hash(&self) -> Result<Hash> {
        match &self.state {
            Some(s) => s.hash(),
            None => Ok(Hash::ZERO),
        }
    }

    /// Number of early events waiting.
    pub fn buffered(&self) -> usize {
        self.buffer.len()
    }

    /// Offers one delivered event.
    pub fn offer(&mut self, event: Event) -> Offer {
        if event.group != self.group {
            return Offer::Rejected(Error::corrupt(format!(
                "event seq {} belongs to group {}, not {}",
                event.seq, event.group, self.group
            )));
        }
        let cursor = self.cursor();
        if event.seq <= cursor {
            return Offer::Duplicate;
        }
        if self
            .buffer
            .get(&event.seq)
            .is_some_and(|b| b.id == event.id)
        {
            return Offer::Duplicate;
        }
        if let Err(e) = event.verify() {
            return Offer::Rejected(e);
        }
        if event.seq > cursor + 1 {
            if self.buffer.contains_key(&event.seq) {
                // A different event claims the same seq: keep the first; the chain decides.
                return Offer::Rejected(Error::corrupt(format!(
                    "a different event with seq {} is already buffered",
                    event.seq
                )));
            }
            if self.buffer.len() >= self.limits.max_buffered_events {
                return Offer::Rejected(
                    Error::new(
                        Code::Malformed,
                        format!(
                            "buffer holds {} early events, the limit; deliver seq {} first",
                            self.buffer.len(),
                            cursor + 1
                        ),
                    )
                    .with("limit", self.limits.max_buffered_events),
                );
            }
            self.buffer.insert(event.seq, event);
            return Offer::Buffered;
        }
        if let Err(e) = GroupState::apply_to(&mut self.state, &event) {
            return Offer::Rejected(e);
        }
        let mut events = vec![event];
        while let Some(next) = self.buffer.remove(&(self.cursor() + 1)) {
            if GroupState::apply_to(&mut self.state, &next).is_err() {
                // A buffered event that does not chain is dropped; the true one will be
                // delivered again.
                break;
            }
            events.push(next);
        }
        Offer::Applied {
            cursor: self.cursor(),
            events,
        }
    }
}
