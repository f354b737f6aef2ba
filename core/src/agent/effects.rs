//! The effect journal: each effect from its request to its settlement, checked against the
//! authority's view, dispatched when that is safe, and surfaced when its outcome is unknown.

use serde_json::json;

use super::{binding, refuse, Agent, Binding, Dispatch, EffectEntry, JournalStatus, Link, Notice};
use crate::command::{Body, EffectMode, ReconcileEffect, SettleEffect};
use crate::crypto::Hash;
use crate::effect::effect_key;
use crate::error::{Code, Result};
use crate::id::Id;
use crate::opaque::Opaque;
use crate::work::EffectStatus;

impl Agent {
    pub(super) fn put_effect(&mut self, e: EffectEntry) {
        self.staged.effects.push(e.clone());
        self.effects.insert(e.key, e);
    }

    pub(super) fn set_status(&mut self, key: &Hash, status: JournalStatus) {
        if let Some(mut e) = self.effects.get(key).cloned() {
            if e.status != status {
                e.status = status;
                self.put_effect(e);
            }
        }
    }

    pub(super) fn authority_status(&self, e: &EffectEntry) -> Option<EffectStatus> {
        self.replica
            .state()?
            .work
            .get(&e.work)?
            .effects
            .get(&e.key)
            .map(|x| x.status)
    }

    pub(super) fn effect_key_of(&self, work: &Id, epoch: Option<u64>, op: &Id) -> Option<Hash> {
        let mission = &self.replica.state()?.mission;
        Some(effect_key(mission, work, epoch?, op))
    }

    pub(super) fn no_open_effects(&self, work: &Id, epoch: u64) -> Result<()> {
        if let Some(e) = self
            .effects
            .values()
            .find(|e| &e.work == work && e.epoch == epoch && e.status != JournalStatus::Closed)
        {
            return Err(refuse(
                Code::EffectUnsettled,
                format!(
                    "effect {} (key {}) on {work} is not settled yet",
                    e.op, e.key
                ),
            )
            .with("key", e.key.to_hex()));
        }
        Ok(())
    }

    /// Level-triggered: the journal against the authority's view of each effect.
    pub(super) fn sync_effects(&mut self, now_ms: u64) {
        let open: Vec<EffectEntry> = self
            .effects
            .values()
            .filter(|e| e.status != JournalStatus::Closed)
            .cloned()
            .collect();
        for e in open {
            let authority = self.authority_status(&e);
            let intent_queued = self.outbox.values().any(|o| {
                matches!(&o.command.body, Body::IntendEffect(i) if i.work == e.work && i.op == e.op)
                    && o.binding.epoch == Some(e.epoch)
            });
            match (authority, e.status) {
                (Some(EffectStatus::Intended), JournalStatus::Requested) => {
                    self.set_status(&e.key, JournalStatus::Intended)
                }
                (Some(EffectStatus::Settled | EffectStatus::Reconciled), _) => {
                    self.set_status(&e.key, JournalStatus::Closed)
                }
                // The lease ended with a repeatable effect unsettled: nothing to settle.
                (Some(EffectStatus::Abandoned), _) => {
                    self.set_status(&e.key, JournalStatus::Closed)
                }
                // The lease ended with an undeclared effect unsettled.
                (Some(EffectStatus::Unknown), JournalStatus::Observed) => {
                    self.ensure_reconcile(now_ms, &e)
                }
                (
                    Some(EffectStatus::Unknown),
                    JournalStatus::Requested | JournalStatus::Intended,
                ) => {
                    // Never dispatched by us: it did not happen.
                    let mut e = e.clone();
                    e.status = JournalStatus::Observed;
                    e.happened = Some(false);
                    e.outcome = Some(json!({"happened": false}).into());
                    e.receipt = Some(json!({"dispatched": false}).into());
                    self.put_effect(e.clone());
                    self.ensure_reconcile(now_ms, &e);
                }
                (
                    Some(EffectStatus::Unknown),
                    JournalStatus::Dispatched | JournalStatus::Uncertain,
                ) => {
                    if e.status == JournalStatus::Dispatched {
                        self.set_status(&e.key, JournalStatus::Uncertain);
                    }
                    self.surface(&e);
                }
                (Some(EffectStatus::Intended), JournalStatus::Observed) => {
                    self.ensure_settle(now_ms, &e)
                }
                // The intent never landed, is no longer queued, and its epoch is over.
                (None, JournalStatus::Requested)
                    if !intent_queued
                        && self
                            .replica
                            .state()
                            .and_then(|s| s.work.get(&e.work))
                            .is_some_and(|w| w.epoch > e.epoch || w.state.is_terminal()) =>
                {
                    self.set_status(&e.key, JournalStatus::Closed)
                }
                _ => {}
            }
        }
    }

    pub(super) fn surface(&mut self, e: &EffectEntry) {
        if e.mode == EffectMode::Undeclared && self.surfaced.insert(e.key) {
            self.notices.push_back(Notice::Uncertain {
                key: e.key,
                work: e.work.clone(),
                op: e.op.clone(),
            });
        }
    }

    pub(super) fn queued_for(&self, pred: impl Fn(&Body) -> bool) -> bool {
        self.outbox.values().any(|o| pred(&o.command.body))
    }

    pub(super) fn ensure_settle(&mut self, now_ms: u64, e: &EffectEntry) {
        if self.queued_for(|b| matches!(b, Body::SettleEffect(s) if s.work == e.work && s.op == e.op && s.lease == e.lease)) {
            return;
        }
        let Some(lease) = self.held.get(&e.work).filter(|l| l.id == e.lease).cloned() else {
            return;
        };
        let body = Body::SettleEffect(SettleEffect {
            work: e.work.clone(),
            lease: lease.id,
            op: e.op.clone(),
            outcome: e
                .outcome
                .clone()
                .unwrap_or_else(|| json!({"happened": true}).into()),
            receipt: e.receipt.clone().unwrap_or_else(Opaque::null),
        });
        if let Err(err) = self.make(now_ms, body, None, binding(&lease, Some(e.op.clone()))) {
            self.notices.push_back(Notice::Corrupt(err));
        }
    }

    pub(super) fn ensure_reconcile(&mut self, now_ms: u64, e: &EffectEntry) {
        if self.queued_for(|b| matches!(b, Body::ReconcileEffect(r) if r.key == e.key)) {
            return;
        }
        let body = Body::ReconcileEffect(ReconcileEffect {
            work: e.work.clone(),
            key: e.key,
            happened: e.happened.unwrap_or(true),
            receipt: e.receipt.clone().unwrap_or_else(Opaque::null),
        });
        let b = Binding {
            work: Some(e.work.clone()),
            epoch: Some(e.epoch),
            lease: None,
            op: Some(e.op.clone()),
        };
        if let Err(err) = self.make(now_ms, body, None, b) {
            self.notices.push_back(Notice::Corrupt(err));
        }
    }

    /// Whether the effect may be dispatched now.
    pub(super) fn may_dispatch(&self, now_ms: u64, e: &EffectEntry) -> bool {
        let Some(l) = self.held.get(&e.work) else {
            return false;
        };
        if l.id != e.lease
            || now_ms >= l.expires_at
            || self.expired_locally.contains(&l.id)
            || self.suspended.contains(&l.id)
            || self.authority_status(e) != Some(EffectStatus::Intended)
        {
            return false;
        }
        match self.link {
            Link::Up => true,
            Link::Down(since) => {
                e.mode == EffectMode::ReadOnly
                    && !e.irreversible
                    && !e.high_risk
                    && now_ms < since.unwrap_or(now_ms).saturating_add(self.config.grace_ms)
            }
        }
    }

    pub(super) fn plan_effects(&mut self, now_ms: u64) {
        let open: Vec<EffectEntry> = self
            .effects
            .values()
            .filter(|e| {
                matches!(
                    e.status,
                    JournalStatus::Intended | JournalStatus::Dispatched | JournalStatus::Uncertain
                )
            })
            .cloned()
            .collect();
        for mut e in open {
            let timed_out = e.status == JournalStatus::Dispatched
                && e.dispatched_at
                    .is_some_and(|t| now_ms >= t.saturating_add(self.config.effect_timeout_ms));
            if timed_out {
                e.status = JournalStatus::Uncertain;
                self.put_effect(e.clone());
                self.surface(&e);
            }
            if e.status == JournalStatus::Uncertain {
                self.surface(&e);
            }
            let go = match e.status {
                JournalStatus::Intended => true,
                // A repeatable effect whose outcome is unknown is simply sent again.
                JournalStatus::Uncertain => e.repeatable(),
                _ => false,
            };
            if go && self.may_dispatch(now_ms, &e) {
                e.status = JournalStatus::Dispatched;
                e.dispatches += 1;
                e.dispatched_at = Some(now_ms);
                self.dispatches.push_back(Dispatch {
                    key: e.key,
                    work: e.work.clone(),
                    op: e.op.clone(),
                    mode: e.mode,
                    irreversible: e.irreversible,
                    target: e.target.clone(),
                    attempt: e.dispatches,
                });
                self.put_effect(e);
            }
        }
    }
}
