//! Inputs: events, answers, look-ups, replay errors, snapshots, connectivity, timers, effect
//! outcomes and durable commits. Each ends with `drive`.

use super::{Agent, Flight, JournalStatus, Link, Notice, Transmit};
use crate::crypto::Hash;
use crate::error::Error;
use crate::event::Event;
use crate::id::Id;
use crate::lease::LeaseId;
use crate::opaque::Opaque;
use crate::receipt::Receipt;
use crate::replica::Offer;
use crate::snapshot::SnapshotRef;

impl Agent {
    /// Events delivered (any order, repeats allowed).
    pub fn handle_events(&mut self, now_ms: u64, events: impl IntoIterator<Item = Event>) {
        self.touch(now_ms);
        for event in events {
            match self.replica.offer(event) {
                Offer::Applied {
                    write_set, dropped, ..
                } => {
                    self.absorb(write_set);
                    for e in dropped {
                        self.notices.push_back(Notice::Corrupt(e));
                        self.want_sync = true;
                    }
                }
                Offer::Buffered => self.want_sync = true,
                Offer::Duplicate => {}
                Offer::Rejected(e) => {
                    self.notices.push_back(Notice::Corrupt(e));
                    self.want_sync = true;
                }
            }
        }
        self.drive(now_ms);
    }

    /// The answer to a command this agent sent: its receipt (also for a Duplicate) or the
    /// error. An answer for an action the outbox no longer holds is ignored.
    pub fn handle_answer(&mut self, now_ms: u64, action: &Id, answer: Result<Receipt, Error>) {
        self.touch(now_ms);
        if let Some(base) = self.base_of(action) {
            match answer {
                Ok(receipt) => self.landed(&base, receipt),
                Err(error) => self.rejected(now_ms, &base, error),
            }
        }
        self.drive(now_ms);
    }

    /// The answer to a receipt look-up: `Some` means the command landed; `None` that it did
    /// not (it is then rebased and sent).
    pub fn handle_lookup(&mut self, now_ms: u64, action: &Id, receipt: Option<Receipt>) {
        self.touch(now_ms);
        if let Some(base) = self.base_of(action) {
            if matches!(self.flight.get(&base), Some(Flight::Lookup(_))) {
                match receipt {
                    Some(r) => self.landed(&base, r),
                    None => self.rebase_when_current(now_ms, &base),
                }
            }
        }
        self.drive(now_ms);
    }

    /// A replay request failed. `CURSOR_TOO_OLD` makes the agent fetch the snapshot it
    /// names.
    pub fn handle_fetch_error(&mut self, now_ms: u64, error: &Error) {
        self.touch(now_ms);
        if let Some(r) = SnapshotRef::from_error(error) {
            if r.seq >= self.replica.cursor() && self.snapshot_pending.is_none() {
                self.snapshot_pending = Some((r.clone(), now_ms));
                self.transmits.push_back(Transmit::FetchSnapshot(r));
            }
        }
        self.drive(now_ms);
    }

    /// A fetched snapshot. It is validated against the configured authority key, org and
    /// group, and must not be older than the cursor; on failure nothing changes
    /// ([`Notice::Corrupt`]). A snapshot nobody asked for any more (a repeated delivery, or
    /// the replica caught up past it meanwhile) is ignored.
    pub fn handle_snapshot(&mut self, now_ms: u64, bytes: &[u8]) {
        self.touch(now_ms);
        let cursor = self.replica.cursor();
        match self.snapshot_pending.take() {
            Some((r, _)) if r.seq >= cursor => {}
            _ => {
                self.want_sync = true;
                self.drive(now_ms);
                return;
            }
        }
        match self.replica.restore_bytes(
            bytes,
            &self.config.authority_key,
            &self.config.org,
            cursor,
        ) {
            Ok(ws) => {
                self.checkpoints.clear();
                self.absorb(ws);
                self.mark_all_dirty();
                self.want_sync = true;
                self.last_fetch = None;
            }
            Err(e) => self.notices.push_back(Notice::Corrupt(e)),
        }
        self.drive(now_ms);
    }

    /// The host's view of the link to the authority changed.
    pub fn handle_connectivity(&mut self, now_ms: u64, up: bool) {
        match (self.link, up) {
            (Link::Up, false) => self.link = Link::Down(Some(now_ms)),
            (Link::Down(_), true) => {
                self.link = Link::Up;
                // Suspended work may go on: announce it again.
                let suspended: Vec<LeaseId> =
                    std::mem::take(&mut self.suspended).into_iter().collect();
                for id in suspended {
                    self.announced.remove(&id);
                    if let Some(l) = self.held.values().find(|l| l.id == id) {
                        self.dirty.insert(l.work.clone());
                    }
                }
                // Reconcile every outbox entry before anything else is sent.
                for (base, f) in self.flight.iter_mut() {
                    if self.outbox.contains_key(base) {
                        *f = Flight::Lookup(None);
                    }
                }
                self.want_sync = true;
                self.last_fetch = None;
            }
            _ => {}
        }
        self.drive(now_ms);
    }

    /// A timer set by [`Agent::poll_timeout`] fired (early or late calls are harmless).
    pub fn handle_timeout(&mut self, now_ms: u64) {
        self.touch(now_ms);
        self.drive(now_ms);
    }

    /// The outcome of a dispatched effect was observed. `receipt` is the target's own
    /// receipt, recorded by `settle_effect`.
    pub fn handle_effect_outcome(
        &mut self,
        now_ms: u64,
        key: &Hash,
        outcome: impl Into<Opaque>,
        receipt: impl Into<Opaque>,
    ) {
        let (outcome, receipt) = (outcome.into(), receipt.into());
        self.touch(now_ms);
        if let Some(e) = self.effects.get(key) {
            if matches!(
                e.status,
                JournalStatus::Dispatched | JournalStatus::Uncertain
            ) {
                let mut e = e.clone();
                e.status = JournalStatus::Observed;
                e.happened = Some(true);
                e.outcome = Some(outcome);
                e.receipt = Some(receipt);
                self.dirty.insert(e.work.clone());
                self.put_effect(e);
            }
        }
        self.drive(now_ms);
    }

    /// The host committed write set `serial` (and every one before it).
    pub fn handle_committed(&mut self, now_ms: u64, serial: u64) {
        if serial > self.committed && serial <= self.flushed {
            self.committed = serial;
            let done: Vec<u64> = self
                .flushed_cursors
                .range(..=serial)
                .map(|(s, _)| *s)
                .collect();
            for s in done {
                if let Some(c) = self.flushed_cursors.remove(&s) {
                    self.durable_cursor = self.durable_cursor.max(c);
                }
            }
            if self.durable_cursor > self.acked && self.link == Link::Up {
                self.acked = self.durable_cursor;
                self.transmits.push_front(Transmit::Ack {
                    cursor: self.durable_cursor,
                });
            }
        }
        self.drive(now_ms);
    }
}
