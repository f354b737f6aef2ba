//! Receipts: what the sender of an accepted command gets back, forever the same bytes.

use serde::{Deserialize, Serialize};

use crate::crypto::Hash;
use crate::event::{Event, EventKind};
use crate::id::Id;

/// Whether the command changed the work item or was recorded as evidence only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Disposition {
    /// The command took effect.
    Applied,
    /// A late result under a stale lease, recorded without changing the work item.
    Evidence,
}

/// A receipt (SPEC §3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Receipt {
    /// Group.
    pub group: Id,
    /// Seq of the event.
    pub seq: u64,
    /// Id of the event.
    pub event_id: Hash,
    /// Sender.
    pub actor: Id,
    /// Action ID.
    pub action: Id,
    /// Content hash of the command.
    pub content_hash: Hash,
    /// Aggregate of the event.
    pub aggregate: compact_str::CompactString,
    /// Its revision after the event.
    pub revision: u64,
    /// Applied or evidence.
    pub disposition: Disposition,
    /// Acceptance time.
    pub at: u64,
}

impl Receipt {
    /// The receipt an event gives.
    pub fn of(event: &Event) -> Receipt {
        Receipt {
            group: event.group.clone(),
            seq: event.seq,
            event_id: event.id,
            actor: event.actor.clone(),
            action: event.action.clone(),
            content_hash: event.content_hash,
            aggregate: event.aggregate.clone(),
            revision: event.revision,
            disposition: match event.kind {
                EventKind::EvidenceRecorded(_) => Disposition::Evidence,
                _ => Disposition::Applied,
            },
            at: event.at,
        }
    }
}
