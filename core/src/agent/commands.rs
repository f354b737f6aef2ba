//! Application commands: what the program doing the work decides. Each is checked against
//! the driver's bookkeeping, made, signed and put in the outbox.

use serde_json::json;

use super::{binding, not_found, refuse, Agent, Binding, EffectEntry, JournalStatus, Link};
use crate::command::{
    Body, Charge, Checkpoint, EffectMode, Fail, IntendEffect, ReplaceSession, Risk, Submit,
};
use crate::crypto::Hash;
use crate::effect::effect_key;
use crate::error::{Code, Result};
use crate::id::Id;
use crate::opaque::Opaque;
use crate::work::EffectStatus;

#[cfg(doc)]
use super::Notice;

impl Agent {
    /// Submits the result of running work under the held lease. If the authority has
    /// already expired or revoked that lease, the result is recorded as evidence
    /// ([`Notice::Evidence`]); once the driver has seen the lease lost, `FENCED`.
    pub fn submit(&mut self, now_ms: u64, work: &Id, result: impl Into<Opaque>) -> Result<Id> {
        self.touch(now_ms);
        let lease = self.result_lease(now_ms, work)?;
        self.no_open_effects(work, lease.epoch)?;
        let body = Body::Submit(Submit {
            work: work.clone(),
            lease: lease.id,
            result: result.into(),
        });
        let action = self.make(now_ms, body, None, binding(&lease, None))?;
        self.drive(now_ms);
        Ok(action)
    }

    /// Reports a failure of running work.
    pub fn fail(
        &mut self,
        now_ms: u64,
        work: &Id,
        error: impl Into<Opaque>,
        retryable: bool,
    ) -> Result<Id> {
        self.touch(now_ms);
        let lease = self.result_lease(now_ms, work)?;
        self.no_open_effects(work, lease.epoch)?;
        let body = Body::Fail(Fail {
            work: work.clone(),
            lease: lease.id,
            error: error.into(),
            retryable,
        });
        let action = self.make(now_ms, body, None, binding(&lease, None))?;
        self.drive(now_ms);
        Ok(action)
    }

    /// Records progress and releases the lease.
    pub fn checkpoint(&mut self, now_ms: u64, work: &Id, data: impl Into<Opaque>) -> Result<Id> {
        self.touch(now_ms);
        let lease = self.running_lease(now_ms, work)?;
        self.no_open_effects(work, lease.epoch)?;
        let body = Body::Checkpoint(Checkpoint {
            work: work.clone(),
            lease: lease.id,
            data: data.into(),
        });
        let action = self.make(now_ms, body, None, binding(&lease, None))?;
        self.drive(now_ms);
        Ok(action)
    }

    /// Charges cost, with optional checkpoint data.
    pub fn charge(
        &mut self,
        now_ms: u64,
        work: &Id,
        cost: u64,
        data: Option<Opaque>,
    ) -> Result<Id> {
        self.touch(now_ms);
        let lease = self.running_lease(now_ms, work)?;
        let body = Body::Charge(Charge {
            work: work.clone(),
            lease: lease.id,
            cost,
            data,
        });
        let action = self.make(now_ms, body, None, binding(&lease, None))?;
        self.drive(now_ms);
        Ok(action)
    }

    /// Records the intent of an effect; it is dispatched ([`Agent::poll_dispatch`]) only
    /// once the intent is accepted. Returns the effect key. While the authority is
    /// unreachable only read-only, reversible effects of low-risk work may be intended.
    pub fn intend_effect(
        &mut self,
        now_ms: u64,
        work: &Id,
        op: &Id,
        mode: EffectMode,
        irreversible: bool,
        target: impl Into<Opaque>,
    ) -> Result<Hash> {
        let target = target.into();
        self.touch(now_ms);
        let lease = self.running_lease(now_ms, work)?;
        let (mission, high_risk) = {
            let s = self.state()?;
            let w = s.work.get(work).ok_or_else(|| not_found(work))?;
            (s.mission.clone(), w.contract.risk == Risk::High)
        };
        if self.link != Link::Up && (mode != EffectMode::ReadOnly || irreversible || high_risk) {
            return Err(refuse(
                Code::InvalidState,
                format!(
                    "the authority is unreachable: only read-only, reversible effects of low-risk work may be intended offline, not {op}"
                ),
            )
            .with("reason", "offline"));
        }
        let key = effect_key(&mission, work, lease.epoch, op);
        if self.effects.contains_key(&key) {
            return Err(refuse(
                Code::AlreadyExists,
                format!(
                    "effect {op} was already intended under epoch {} (key {key})",
                    lease.epoch
                ),
            )
            .with("key", key.to_hex()));
        }
        let body = Body::IntendEffect(IntendEffect {
            work: work.clone(),
            lease: lease.id,
            op: op.clone(),
            mode,
            irreversible,
            target: target.clone(),
        });
        self.make(now_ms, body, None, binding(&lease, Some(op.clone())))?;
        self.put_effect(EffectEntry {
            key,
            work: work.clone(),
            epoch: lease.epoch,
            lease: lease.id,
            op: op.clone(),
            mode,
            irreversible,
            high_risk,
            target,
            status: JournalStatus::Requested,
            dispatches: 0,
            dispatched_at: None,
            happened: None,
            outcome: None,
            receipt: None,
        });
        self.drive(now_ms);
        Ok(key)
    }

    /// Says what happened to an uncertain effect, found out from its target. If the lease
    /// is still held: `happened` settles it; not happened makes it dispatchable again (no
    /// longer blind). If the authority already marked it unknown: `reconcile_effect`.
    pub fn resolve_effect(
        &mut self,
        now_ms: u64,
        key: &Hash,
        happened: bool,
        receipt: impl Into<Opaque>,
    ) -> Result<()> {
        let receipt = receipt.into();
        self.touch(now_ms);
        let Some(mut e) = self.effects.get(key).cloned() else {
            return Err(refuse(
                Code::NotFound,
                format!("no effect with key {key} in the journal"),
            ));
        };
        if !matches!(
            e.status,
            JournalStatus::Uncertain | JournalStatus::Dispatched
        ) {
            return Err(refuse(
                Code::InvalidState,
                format!("effect {key} is not uncertain; nothing to resolve"),
            ));
        }
        let authority = self.authority_status(&e);
        match (authority, happened) {
            (Some(EffectStatus::Intended), false) => {
                e.status = JournalStatus::Intended;
                e.dispatched_at = None;
            }
            _ => {
                e.status = JournalStatus::Observed;
                e.happened = Some(happened);
                e.outcome = Some(json!({ "happened": happened }).into());
                e.receipt = Some(receipt);
            }
        }
        self.surfaced.remove(key);
        let work = e.work.clone();
        self.put_effect(e);
        self.dirty.insert(work);
        self.drive(now_ms);
        Ok(())
    }

    /// Starts a new session epoch: every lease of the old one is revoked when it lands, and
    /// commands waiting in the outbox are rebased onto the new one.
    pub fn replace_session(&mut self, now_ms: u64) -> Result<Id> {
        self.touch(now_ms);
        self.meta.session += 1;
        let body = Body::ReplaceSession(ReplaceSession {});
        let action = match self.make(now_ms, body, None, Binding::default()) {
            Ok(a) => a,
            Err(e) => {
                self.meta.session -= 1;
                return Err(e);
            }
        };
        self.staged.meta = Some(self.meta);
        self.mark_all_dirty();
        self.drive(now_ms);
        Ok(action)
    }
}
