//! Outputs: write sets to persist, messages for the authority, effects to perform, notices
//! for the application, and the next deadline.

use super::{Agent, Dispatch, Flight, JournalStatus, Link, Notice, Transmit};
use crate::replica::WriteSet;

impl Agent {
    /// The next write set to persist whole; then call [`Agent::handle_committed`].
    pub fn poll_write_set(&mut self) -> Option<WriteSet> {
        if self.staged.is_empty() {
            return None;
        }
        let mut ws = std::mem::take(&mut self.staged);
        self.flushed += 1;
        ws.serial = self.flushed;
        ws.group = Some(self.config.group.clone());
        ws.cursor = self.replica.cursor();
        self.flushed_cursors.insert(ws.serial, ws.cursor);
        Some(ws)
    }

    /// The next message for the authority. Nothing while a write set is not committed.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        if let Some(Transmit::Ack { .. }) = self.transmits.front() {
            return self.transmits.pop_front();
        }
        if self.uncommitted() {
            return None;
        }
        self.transmits.pop_front()
    }

    /// The next effect to perform. Nothing while a write set is not committed.
    pub fn poll_dispatch(&mut self) -> Option<Dispatch> {
        if self.uncommitted() {
            return None;
        }
        self.dispatches.pop_front()
    }

    /// The next notice for the application.
    pub fn poll_notice(&mut self) -> Option<Notice> {
        self.notices.pop_front()
    }

    /// When [`Agent::handle_timeout`] should be called next (a time ≤ now means now).
    pub fn poll_timeout(&self) -> Option<u64> {
        let mut next: Option<u64> = None;
        let mut at = |t: u64| next = Some(next.map_or(t, |n| n.min(t)));
        let online = self.link == Link::Up;
        if let Link::Down(Some(since)) = self.link {
            if !self.held.is_empty() {
                at(since.saturating_add(self.config.grace_ms));
            }
        }
        for l in self.held.values() {
            if !self.expired_locally.contains(&l.id) {
                at(l.expires_at);
                if online {
                    at(l.expires_at.saturating_sub(self.config.renew_margin_ms));
                }
            }
        }
        for e in self.effects.values() {
            if let (JournalStatus::Dispatched, Some(t)) = (e.status, e.dispatched_at) {
                at(t.saturating_add(self.config.effect_timeout_ms));
            }
        }
        if online {
            for f in self.flight.values() {
                match f {
                    Flight::Sent(t) | Flight::Lookup(Some(t)) => {
                        at(t.saturating_add(self.config.resend_ms))
                    }
                    Flight::Unsent | Flight::Lookup(None) => {}
                }
            }
            match &self.snapshot_pending {
                Some((_, asked)) => at(asked.saturating_add(self.config.resend_ms)),
                None => at(self
                    .last_fetch
                    .map_or(0, |t| t.saturating_add(self.config.sync_ms))),
            }
            if self.claim_slots() > 0 {
                for (_, until) in self.claim_wait.values() {
                    at(*until);
                }
                if let Some(t) = self.replica.queue().values().map(|e| e.not_before).min() {
                    at(t);
                }
            }
        }
        next
    }
}
