//! Leases: which ones this agent holds (as of its replica), the claims that get them, the
//! starts and renewals that keep them, and the grace period of an outage.

use std::collections::BTreeSet;

use super::{binding, refuse, Agent, Binding, Link, Notice};
use crate::command::{Body, ClaimWork, RenewLease, Risk, StartWork};
use crate::error::{Code, Result};
use crate::id::Id;
use crate::lease::{Lease, LeaseEnd};
use crate::state::ApprovalState;
use crate::work::WorkState;

impl Agent {
    /// The lease this agent holds on running `work`, usable now.
    pub(super) fn running_lease(&self, now_ms: u64, work: &Id) -> Result<Lease> {
        let lease =
            self.held.get(work).cloned().ok_or_else(|| {
                refuse(Code::Fenced, format!("this agent holds no lease on {work}"))
            })?;
        let s = self.state()?;
        if s.work.get(work).map(|w| w.state) != Some(WorkState::Running) {
            return Err(refuse(
                Code::InvalidState,
                format!("work {work} is not running"),
            ));
        }
        if now_ms >= lease.expires_at || self.expired_locally.contains(&lease.id) {
            return Err(refuse(
                Code::LeaseExpired,
                format!(
                    "lease {} on {work} expired at {}",
                    lease.id, lease.expires_at
                ),
            ));
        }
        self.within_grace(now_ms, &lease)?;
        Ok(lease)
    }

    /// The lease a result is reported under: the one held on `work`. Once the driver has
    /// seen that lease revoked or expired it no longer holds it, and a result is refused
    /// (`FENCED`); a result sent before the loss was known lands as evidence.
    pub(super) fn result_lease(&self, now_ms: u64, work: &Id) -> Result<Lease> {
        if let Some(l) = self.held.get(work) {
            self.within_grace(now_ms, l)?;
            let s = self.state()?;
            if s.work.get(work).map(|w| w.state) != Some(WorkState::Running) {
                return Err(refuse(
                    Code::InvalidState,
                    format!("work {work} is not running"),
                ));
            }
            return Ok(l.clone());
        }
        Err(refuse(
            Code::Fenced,
            format!("this agent holds no lease on {work}"),
        ))
    }

    pub(super) fn within_grace(&self, now_ms: u64, lease: &Lease) -> Result<()> {
        if let Link::Down(since) = self.link {
            let since = since.unwrap_or(now_ms);
            if now_ms >= since.saturating_add(self.config.grace_ms)
                || self.suspended.contains(&lease.id)
            {
                return Err(refuse(
                    Code::InvalidState,
                    format!(
                        "the authority has been unreachable since {since}, longer than the grace period of {} ms; work on {} is suspended",
                        self.config.grace_ms, lease.work
                    ),
                )
                .with("reason", "grace_period_over"));
            }
        }
        Ok(())
    }

    /// Whether `work` is held, being claimed, claimed with its event not applied yet, or
    /// recently refused.
    pub(super) fn claim_blocked(&self, now_ms: u64, work: &Id) -> bool {
        let waiting = self.claim_wait.get(work).is_some_and(|(rev, until)| {
            now_ms < *until
                && (*rev == 0
                    || self
                        .replica
                        .state()
                        .is_some_and(|s| s.revision_of(&format!("work:{work}")) < *rev))
        });
        waiting
            || self.held.contains_key(work)
            || self
                .claimed_at
                .get(work)
                .is_some_and(|s| *s > self.replica.cursor())
            || self
                .outbox
                .values()
                .any(|o| matches!(&o.command.body, Body::ClaimWork(c) if &c.work == work))
    }

    pub(super) fn claim_slots(&self) -> usize {
        let claiming = self
            .outbox
            .values()
            .filter(|e| matches!(e.command.body, Body::ClaimWork(_)))
            .count();
        let pending = self
            .claimed_at
            .iter()
            .filter(|(w, s)| **s > self.replica.cursor() && !self.held.contains_key(*w))
            .count();
        self.config
            .capacity
            .saturating_sub(self.held.len() + claiming + pending)
    }

    /// Level-triggered: which leases this agent holds, as of its replica.
    pub(super) fn sync_leases(&mut self, now_ms: u64) {
        let dirty = std::mem::take(&mut self.dirty);
        let Some(state) = self.replica.state() else {
            self.dirty = dirty;
            return;
        };
        let me = &self.config.actor;
        let session = self.meta.session;
        let mut gained = Vec::new();
        let mut lost = Vec::new();
        for work in &dirty {
            let item = state.work.get(work);
            let now_held = item.and_then(|w| {
                w.lease
                    .as_ref()
                    .filter(|l| &l.holder == me && l.session == session)
            });
            match (self.held.get(work), now_held) {
                (Some(old), Some(new)) if old.id == new.id => {
                    if old != new {
                        gained.push(new.clone());
                    }
                }
                (old, new) => {
                    if let Some(old) = old {
                        let end = item
                            .and_then(|w| w.past_leases.iter().rev().find(|p| p.id == old.id))
                            .map(|p| p.end);
                        let to = item.map_or(WorkState::Queued, |w| w.state);
                        lost.push((old.clone(), end, to));
                    }
                    if let Some(new) = new {
                        gained.push(new.clone());
                    }
                }
            }
        }
        let running: BTreeSet<Id> = dirty
            .iter()
            .filter(|w| state.work.get(*w).map(|i| i.state) == Some(WorkState::Running))
            .cloned()
            .collect();
        for (old, end, to) in lost {
            self.held.remove(&old.work);
            self.claimed_at.remove(&old.work);
            let notice = match end {
                Some(LeaseEnd::Released) => Notice::Released {
                    work: old.work.clone(),
                    lease: old.id,
                    state: to,
                },
                Some(LeaseEnd::Expired) => Notice::LeaseLost {
                    work: old.work.clone(),
                    lease: old.id,
                    reason: "expired",
                },
                Some(LeaseEnd::Revoked) => Notice::LeaseLost {
                    work: old.work.clone(),
                    lease: old.id,
                    reason: "revoked",
                },
                None => Notice::LeaseLost {
                    work: old.work.clone(),
                    lease: old.id,
                    reason: "session_replaced",
                },
            };
            if !self.expired_locally.contains(&old.id) || matches!(notice, Notice::Released { .. })
            {
                self.notices.push_back(notice);
            }
            self.expired_locally.remove(&old.id);
            self.announced.remove(&old.id);
        }
        for l in gained {
            self.claimed_at.remove(&l.work);
            self.claim_wait.remove(&l.work);
            self.held.insert(l.work.clone(), l);
        }
        // Leases whose time passed locally: stop before the authority says so.
        let expired: Vec<Lease> = self
            .held
            .values()
            .filter(|l| now_ms >= l.expires_at && !self.expired_locally.contains(&l.id))
            .cloned()
            .collect();
        for l in expired {
            self.expired_locally.insert(l.id);
            self.announced.remove(&l.id);
            self.notices.push_back(Notice::LeaseLost {
                work: l.work.clone(),
                lease: l.id,
                reason: "expired_locally",
            });
        }
        for work in running {
            let Some(l) = self.held.get(&work) else {
                continue;
            };
            if self.announced.contains(&l.id) || self.expired_locally.contains(&l.id) {
                continue;
            }
            self.announced.insert(l.id);
            self.notices.push_back(Notice::Run {
                work: work.clone(),
                lease: l.id,
                epoch: l.epoch,
                checkpoint: self.checkpoints.get(&work).cloned(),
                resumed: !self.started_here.contains(&l.id),
            });
        }
    }

    /// Suspends running work once the grace period is over.
    pub(super) fn grace(&mut self, now_ms: u64) {
        let Link::Down(Some(since)) = self.link else {
            return;
        };
        if now_ms < since.saturating_add(self.config.grace_ms) {
            return;
        }
        let leases: Vec<Lease> = self.held.values().cloned().collect();
        for l in leases {
            if self.suspended.insert(l.id) {
                self.notices.push_back(Notice::Suspended { work: l.work });
            }
        }
    }

    pub(super) fn plan_leases(&mut self, now_ms: u64) {
        let Some(state) = self.replica.state() else {
            return;
        };
        // A planner starts nothing new while a disposition is outstanding.
        let hold_starts = self.dispositions_outstanding();
        let mut todo = Vec::new();
        for (work, l) in &self.held {
            if self.expired_locally.contains(&l.id) {
                continue;
            }
            let Some(item) = state.work.get(work) else {
                continue;
            };
            let pending =
                |pred: &dyn Fn(&Body) -> bool| self.outbox.values().any(|o| pred(&o.command.body));
            match item.state {
                // A start that landed before its event arrived is not sent again.
                WorkState::Leased
                    if now_ms < l.start_by
                        && !hold_starts
                        && !self.started_here.contains(&l.id)
                        && !pending(&|b| matches!(b, Body::StartWork(s) if s.lease == l.id)) =>
                {
                    let approved = item.contract.risk == Risk::Low
                        || state
                            .approvals
                            .values()
                            .any(|a| &a.work == work && a.state == ApprovalState::Granted);
                    if approved {
                        todo.push((
                            Body::StartWork(StartWork {
                                work: work.clone(),
                                lease: l.id,
                            }),
                            None,
                            l.clone(),
                        ));
                    }
                }
                WorkState::Running
                    if l.expires_at.saturating_sub(self.config.renew_margin_ms) <= now_ms
                        && !pending(&|b| matches!(b, Body::RenewLease(r) if r.lease == l.id)) =>
                {
                    todo.push((
                        Body::RenewLease(RenewLease {
                            work: work.clone(),
                            lease: l.id,
                            lease_ms: self.config.lease_ms,
                        }),
                        Some(item.revision),
                        l.clone(),
                    ));
                }
                _ => {}
            }
        }
        for (body, expect, lease) in todo {
            if let Err(e) = self.make(now_ms, body, expect, binding(&lease, None)) {
                self.notices.push_back(Notice::Corrupt(e));
            }
        }
    }

    pub(super) fn plan_claims(&mut self, now_ms: u64) {
        self.claim_wait.retain(|_, (_, until)| now_ms < *until);
        let mut slots = self.claim_slots();
        if slots == 0 || self.snapshot_pending.is_some() {
            return;
        }
        let Some(state) = self.replica.state() else {
            return;
        };
        if state.archived
            || state
                .members
                .get(&self.config.actor)
                .is_none_or(|m| m.removed || m.session != self.meta.session)
        {
            return;
        }
        let me = self.config.actor.as_str();
        let mut candidates: Vec<([u8; 32], Id, u64)> = self
            .replica
            .frontier(now_ms)
            .filter(|e| !self.claim_blocked(now_ms, &e.work))
            .filter_map(|e| {
                let w = state.work.get(&e.work)?;
                let approved = w.contract.risk == Risk::Low
                    || state
                        .approvals
                        .values()
                        .any(|a| a.work == e.work && a.state == ApprovalState::Granted);
                approved.then(|| {
                    let order = crate::canonical::sha256(format!("{me}/{}", e.work).as_bytes());
                    (order, e.work.clone(), w.revision)
                })
            })
            .collect();
        candidates.sort();
        for (_, work, revision) in candidates {
            if slots == 0 {
                break;
            }
            let body = Body::ClaimWork(ClaimWork {
                work: work.clone(),
                lease_ms: self.config.lease_ms,
                start_within_ms: self.config.start_within_ms,
            });
            let b = Binding {
                work: Some(work.clone()),
                ..Binding::default()
            };
            match self.make(now_ms, body, Some(revision), b) {
                Ok(_) => slots -= 1,
                Err(e) => self.notices.push_back(Notice::Corrupt(e)),
            }
        }
    }
}
