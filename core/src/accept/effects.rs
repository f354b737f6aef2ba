//! Rules of effects (SPEC §5): intents, settlements and reconciliations, and the rule that
//! a lease is not released with an effect unsettled. Keys are `crate::effect::effect_key`.

use super::{err, event, Ctx, Outcome};
use crate::command::{IntendEffect, ReconcileEffect, Risk, SettleEffect};
use crate::effect::effect_key;
use crate::error::{Code, Result};
use crate::event::{EffectIntended, EffectReconciled, EffectSettled, EventKind};
use crate::id::Id;
use crate::work::{EffectStatus, WorkItem, WorkState};

impl<'a> Ctx<'a> {
    /// `intend_effect`: a running item, an effect not intended yet under this epoch; irreversible
    /// effects and effects of high-risk work need a granted approval.
    pub(super) fn intend_effect(&self, b: &IntendEffect) -> Result<Outcome> {
        let st = self.state;
        let w = self.running(&b.work)?;
        let key = effect_key(&st.mission, &b.work, w.epoch, &b.op);
        if w.effects.contains_key(&key) {
            return Err(err(
                Code::AlreadyExists,
                format!(
                    "effect {} was already intended under epoch {} (key {key})",
                    b.op, w.epoch
                ),
            )
            .with("key", key.to_hex()));
        }
        if b.irreversible {
            self.require_approval(&b.work, "an irreversible effect needs a granted approval")?;
        }
        if w.contract.risk == Risk::High {
            self.require_approval(&b.work, "effects of high-risk work need a granted approval")?;
        }
        event(
            WorkItem::aggregate(&b.work),
            EventKind::EffectIntended(EffectIntended {
                work: b.work.clone(),
                lease: b.lease,
                op: b.op.clone(),
                mode: b.mode,
                irreversible: b.irreversible,
                target: b.target.clone(),
                key,
            }),
        )
    }

    /// `settle_effect`: an effect intended under the current epoch and not settled yet.
    pub(super) fn settle_effect(&self, b: &SettleEffect) -> Result<Outcome> {
        let st = self.state;
        let w = self.running(&b.work)?;
        let key = effect_key(&st.mission, &b.work, w.epoch, &b.op);
        let Some(e) = w.effects.get(&key) else {
            return Err(err(
                Code::NotFound,
                format!(
                    "no effect {} was intended on {} under epoch {}",
                    b.op, b.work, w.epoch
                ),
            ));
        };
        if e.status != EffectStatus::Intended {
            return Err(err(
                Code::InvalidState,
                format!("effect {} is already settled", b.op),
            ));
        }
        event(
            WorkItem::aggregate(&b.work),
            EventKind::EffectSettled(EffectSettled {
                work: b.work.clone(),
                lease: b.lease,
                op: b.op.clone(),
                outcome: b.outcome.clone(),
                receipt: b.receipt.clone(),
                key,
            }),
        )
    }

    /// `reconcile_effect`: an effect of unknown outcome; the item is queued again once none is
    /// left.
    pub(super) fn reconcile_effect(&self, b: &ReconcileEffect) -> Result<Outcome> {
        let w = self.item(&b.work)?;
        let Some(e) = w.effects.get(&b.key) else {
            return Err(err(
                Code::NotFound,
                format!("work {} has no effect with key {}", b.work, b.key),
            ));
        };
        if e.status != EffectStatus::Unknown {
            return Err(err(
                Code::InvalidState,
                format!(
                    "effect {} is not of unknown outcome; only unknown outcomes are reconciled",
                    b.key
                ),
            ));
        }
        let still_unknown = w.unknown().filter(|(k, _)| **k != b.key).count();
        let to = (still_unknown == 0 && w.state == WorkState::Waiting).then_some(WorkState::Queued);
        event(
            WorkItem::aggregate(&b.work),
            EventKind::EffectReconciled(EffectReconciled {
                work: b.work.clone(),
                key: b.key,
                happened: b.happened,
                receipt: b.receipt.clone(),
                to,
            }),
        )
    }

    pub(super) fn ensure_unsettled_none(&self, work: &Id, w: &WorkItem) -> Result<()> {
        if let Some((key, e)) = w.unsettled().next() {
            return Err(err(
                Code::EffectUnsettled,
                format!(
                    "effect {} (key {key}) on {work} has no settlement; settle_effect first",
                    e.op
                ),
            )
            .with("key", key.to_hex()));
        }
        Ok(())
    }
}
