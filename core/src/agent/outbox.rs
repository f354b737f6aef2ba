//! The outbox: commands are made and kept until their receipt is known, sent and resent,
//! reconciled by receipt look-up after an outage or a restart, and rebased when they did not
//! land. Also the fetch of new events.

use super::{
    Agent, Binding, Flight, JournalStatus, Link, Notice, OutboxChange, OutboxEntry, Transmit,
};
use crate::command::{Body, Command};
use crate::error::{Code, Error, Result};
use crate::id::Id;
use crate::receipt::{Disposition, Receipt};

impl Agent {
    /// Makes, signs and puts a command in the outbox; on error nothing changed.
    pub(super) fn make(
        &mut self,
        now_ms: u64,
        body: Body,
        expect: Option<u64>,
        binding: Binding,
    ) -> Result<Id> {
        self.make_as(now_ms, None, body, expect, binding)
    }

    /// [`Agent::make`] under a given action ID (`None`: the next `a-<n>`).
    pub(super) fn make_as(
        &mut self,
        now_ms: u64,
        action: Option<Id>,
        body: Body,
        expect: Option<u64>,
        binding: Binding,
    ) -> Result<Id> {
        let numbered = action.is_none();
        let action = match action {
            Some(a) => a,
            None => Id::new(format!("a-{}", self.meta.next_action))
                .map_err(|e| Error::malformed(e.to_string()))?,
        };
        let cmd = Command::signed(
            self.config.org.clone(),
            self.config.group.clone(),
            self.config.actor.clone(),
            action.clone(),
            self.meta.session,
            expect,
            body,
            &self.key,
        )?;
        cmd.check(&self.config.limits)?;
        if numbered {
            self.meta.next_action += 1;
            self.staged.meta = Some(self.meta);
        }
        self.flight.insert(action.clone(), Flight::Unsent);
        self.put_outbox(OutboxEntry {
            base: action.clone(),
            rebases: 0,
            command: cmd,
            binding,
            made_at: now_ms,
            offline: self.link != Link::Up,
        });
        Ok(action)
    }

    pub(super) fn put_outbox(&mut self, e: OutboxEntry) {
        self.staged.outbox.push(OutboxChange::Put(e.clone()));
        self.outbox.insert(e.base.clone(), e);
    }

    pub(super) fn remove_outbox(&mut self, base: &Id) -> Option<OutboxEntry> {
        self.flight.remove(base);
        let e = self.outbox.remove(base)?;
        self.staged
            .outbox
            .push(OutboxChange::Remove { base: base.clone() });
        Some(e)
    }

    pub(super) fn base_of(&self, action: &Id) -> Option<Id> {
        self.outbox
            .iter()
            .find(|(_, e)| &e.command.action == action)
            .map(|(b, _)| b.clone())
    }

    /// A receipt for an outbox entry: it landed.
    pub(super) fn landed(&mut self, base: &Id, receipt: Receipt) {
        let Some(entry) = self.remove_outbox(base) else {
            return;
        };
        if receipt.seq > self.replica.cursor() {
            self.want_sync = true;
        }
        if receipt.disposition == Disposition::Evidence {
            self.notices.push_back(Notice::Evidence {
                action: receipt.action.clone(),
                receipt: receipt.clone(),
            });
        }
        match &entry.command.body {
            Body::ClaimWork(c) => {
                self.claimed_at.insert(c.work.clone(), receipt.seq);
            }
            Body::StartWork(s) => {
                self.started_here.insert(s.lease);
            }
            Body::IntendEffect(i) => {
                if let Some(k) = self.effect_key_of(&i.work, entry.binding.epoch, &i.op) {
                    if self.effects.get(&k).map(|e| e.status) == Some(JournalStatus::Requested) {
                        self.set_status(&k, JournalStatus::Intended);
                    }
                }
            }
            Body::SettleEffect(s) => {
                if let Some(k) = self.effect_key_of(&s.work, entry.binding.epoch, &s.op) {
                    self.set_status(&k, JournalStatus::Closed);
                }
            }
            Body::ReconcileEffect(r) => self.set_status(&r.key, JournalStatus::Closed),
            _ => {}
        }
        if let Some(w) = entry.command.body.work() {
            self.dirty.insert(w.clone());
        }
    }

    /// An error for an outbox entry.
    pub(super) fn rejected(&mut self, now_ms: u64, base: &Id, error: Error) {
        match error.code {
            // The authority could not decide: keep it and try again.
            Code::Storage => {
                self.flight.insert(base.clone(), Flight::Sent(now_ms));
                return;
            }
            // Made under an older session than ours: rebase onto the current one (a
            // Duplicate would have been answered before the session check, so it did not
            // land).
            Code::WrongSession
                if self
                    .outbox
                    .get(base)
                    .is_some_and(|e| e.command.session < self.meta.session) =>
            {
                self.flight
                    .insert(base.clone(), Flight::Lookup(Some(now_ms)));
                self.rebase_when_current(now_ms, base);
                return;
            }
            Code::WrongSession if !self.session_current() => {
                // Our replace_session has not landed yet: wait for it.
                self.flight.insert(base.clone(), Flight::Sent(now_ms));
                return;
            }
            _ => {}
        }
        let Some(entry) = self.remove_outbox(base) else {
            return;
        };
        if let Body::IntendEffect(i) = &entry.command.body {
            if let Some(k) = self.effect_key_of(&i.work, entry.binding.epoch, &i.op) {
                if self.effects.get(&k).map(|e| e.status) == Some(JournalStatus::Requested) {
                    self.set_status(&k, JournalStatus::Closed);
                }
            }
        }
        if let Body::ClaimWork(c) = &entry.command.body {
            // The replica was behind (or the clocks differ): wait for it to catch up before
            // claiming this item again, instead of repeating the same stale claim.
            let used = entry.command.expect.unwrap_or(0);
            let current = error
                .details
                .get("current")
                .and_then(|v| v.as_u64())
                .unwrap_or(0);
            let until = match error.details.get("not_before").and_then(|v| v.as_u64()) {
                Some(t) => (0, t),
                None => (
                    current.max(used + 1),
                    now_ms.saturating_add(self.config.sync_ms),
                ),
            };
            self.claim_wait.insert(c.work.clone(), until);
        }
        if matches!(
            error.code,
            Code::RevisionMismatch | Code::Fenced | Code::LeaseExpired
        ) {
            self.want_sync = true;
        }
        if let Some(w) = entry.command.body.work() {
            self.dirty.insert(w.clone());
        }
        // A refused disposition leaves its trigger pending: the planner is asked again.
        if let Body::Expand(x) = &entry.command.body {
            self.asked.remove(&x.trigger);
        }
        self.notices.push_back(Notice::Rejected {
            action: entry.command.action.clone(),
            command: entry.command.body.type_name(),
            error,
        });
    }

    /// Whether the authority (as far as the replica knows) has this agent at its current
    /// session.
    pub(super) fn session_current(&self) -> bool {
        self.replica
            .state()
            .and_then(|s| s.members.get(&self.config.actor))
            .is_some_and(|m| m.session == self.meta.session)
    }

    /// Rebases an entry known not to have landed — but a content change (a new session)
    /// only once the new session is current at the authority, so the old command can no
    /// longer land beside the rebased one; until then it is looked up again later.
    pub(super) fn rebase_when_current(&mut self, now_ms: u64, base: &Id) {
        let stale = self
            .outbox
            .get(base)
            .is_some_and(|e| e.command.session != self.meta.session);
        let replacing = self
            .outbox
            .get(base)
            .is_some_and(|e| matches!(e.command.body, Body::ReplaceSession(_)));
        if stale && !replacing && !self.session_current() {
            self.flight
                .insert(base.clone(), Flight::Lookup(Some(now_ms)));
            return;
        }
        self.rebase(base);
    }

    /// Rebases an outbox entry that did not land on the current session and fencing
    /// fields; a changed content gets the action `<base>~<n>`; then it is re-signed.
    pub(super) fn rebase(&mut self, base: &Id) {
        let Some(mut entry) = self.outbox.get(base).cloned() else {
            return;
        };
        let drop = |this: &mut Self, entry: &OutboxEntry, reason: String| {
            this.remove_outbox(&entry.base);
            if let Body::IntendEffect(i) = &entry.command.body {
                if let Some(k) = this.effect_key_of(&i.work, entry.binding.epoch, &i.op) {
                    this.set_status(&k, JournalStatus::Closed);
                }
            }
            this.notices.push_back(Notice::Dropped {
                action: entry.command.action.clone(),
                reason,
            });
        };
        let mut cmd = entry.command.clone();
        let old = match cmd.content_bytes() {
            Ok(b) => b,
            Err(e) => return drop(self, &entry, e.to_string()),
        };
        cmd.session = self.meta.session;
        match &cmd.body {
            // Claims and renewals are remade from fresh state by the driver.
            Body::ClaimWork(_) | Body::RenewLease(_) | Body::StartWork(_) => {
                return drop(
                    self,
                    &entry,
                    "claims, starts and renewals are remade, not rebased".into(),
                );
            }
            Body::ReplaceSession(_) => {}
            body => {
                if let (Some(work), Some(lease)) = (body.work(), body.lease()) {
                    let current = self.held.get(work).is_some_and(|l| &l.id == lease);
                    let late_result = matches!(body, Body::Submit(_) | Body::Fail(_));
                    if !current && !late_result {
                        return drop(
                            self,
                            &entry,
                            format!("lease {lease} on {work} is no longer held"),
                        );
                    }
                }
            }
        }
        let changed = cmd.content_bytes().map_or(true, |b| b != old);
        if changed {
            entry.rebases += 1;
            match Id::new(format!("{}~{}", entry.base, entry.rebases)) {
                Ok(a) => cmd.action = a,
                Err(e) => return drop(self, &entry, e.to_string()),
            }
        }
        if let Err(e) = cmd.sign(&self.key) {
            return drop(self, &entry, e.to_string());
        }
        entry.command = cmd;
        self.flight.insert(entry.base.clone(), Flight::Unsent);
        self.put_outbox(entry);
    }

    pub(super) fn plan_sends(&mut self, now_ms: u64) {
        let resend = self.config.resend_ms;
        let mut out = Vec::new();
        for (base, entry) in &self.outbox {
            let f = self.flight.get(base).copied().unwrap_or(Flight::Unsent);
            let next = match f {
                Flight::Unsent => Some((
                    Transmit::Command(entry.command.clone()),
                    Flight::Sent(now_ms),
                )),
                Flight::Sent(t) if now_ms >= t.saturating_add(resend) => Some((
                    Transmit::Command(entry.command.clone()),
                    Flight::Sent(now_ms),
                )),
                Flight::Lookup(None) => Some((
                    Transmit::LookupReceipt {
                        action: entry.command.action.clone(),
                    },
                    Flight::Lookup(Some(now_ms)),
                )),
                Flight::Lookup(Some(t)) if now_ms >= t.saturating_add(resend) => Some((
                    Transmit::LookupReceipt {
                        action: entry.command.action.clone(),
                    },
                    Flight::Lookup(Some(now_ms)),
                )),
                _ => None,
            };
            if let Some((t, f)) = next {
                out.push((base.clone(), t, f));
            }
        }
        for (base, t, f) in out {
            self.flight.insert(base, f);
            self.transmits.push_back(t);
        }
    }

    pub(super) fn plan_sync(&mut self, now_ms: u64) {
        if let Some((r, asked)) = &self.snapshot_pending {
            // The snapshot (or the request) may have been lost: ask again.
            if now_ms >= asked.saturating_add(self.config.resend_ms) {
                let r = r.clone();
                self.snapshot_pending = Some((r.clone(), now_ms));
                self.transmits.push_back(Transmit::FetchSnapshot(r));
            }
            return;
        }
        let due = self
            .last_fetch
            .is_none_or(|t| now_ms >= t.saturating_add(self.config.sync_ms));
        let soon = self.last_fetch.is_none_or(|t| {
            now_ms >= t.saturating_add(self.config.resend_ms.min(self.config.sync_ms))
        });
        if due || (self.want_sync && soon) {
            self.want_sync = false;
            self.last_fetch = Some(now_ms);
            self.transmits.push_back(Transmit::FetchEvents {
                after: self.replica.cursor(),
            });
        }
    }
}
