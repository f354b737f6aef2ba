//! Effect keys and settlement rules (SPEC §5, effects), shared by the authority's checks
//! (`accept`), the Group state (`GroupState::apply`) and the agent's journal.
//!
//! An effect is named by a stable key derived from where it was intended, so the same
//! operation under the same ownership epoch always has the same key: the target can use it
//! as its idempotency key, and the authority and every agent compute it alike. An intended
//! effect is settled by its lease holder (`settle_effect`); one whose lease ends first is
//! abandoned if repeating it does no harm, and of unknown outcome otherwise, which only
//! `reconcile_effect` settles.

use crate::canonical;
use crate::command::EffectMode;
use crate::crypto::Hash;
use crate::id::Id;
use crate::work::EffectStatus;

/// The stable effect key: `hex(sha256(canonical CBOR [mission, work, epoch, op]))`.
pub fn effect_key(mission: &Id, work: &Id, epoch: u64, op: &Id) -> Hash {
    Hash(
        canonical::hash(&(mission, work, epoch, op))
            .expect("a tuple of IDs and an integer always encodes"),
    )
}

/// Effects of a work item that may not be dispatched again without reconciliation.
pub fn blocks_redispatch(mode: EffectMode, status: EffectStatus) -> bool {
    mode == EffectMode::Undeclared && status == EffectStatus::Unknown
}

/// Where an effect still `intended` stands once its lease is revoked or expires: a
/// repeatable one (`read_only`, `keyed`) is abandoned, safe to issue again; an `undeclared`
/// one is of unknown outcome until `reconcile_effect` settles it.
pub fn status_at_lease_end(mode: EffectMode) -> EffectStatus {
    match mode {
        EffectMode::Undeclared => EffectStatus::Unknown,
        _ => EffectStatus::Abandoned,
    }
}
