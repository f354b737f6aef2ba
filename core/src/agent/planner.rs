//! The planner side of the driver (SPEC §7, "Dynamic graphs"): terminal outcomes become new
//! work through `expand`, each trigger disposed of exactly once, pending dispositions first.
//!
//! An agent configured with `planner: true` disposes of every terminal work event of its
//! Group. The pending set is derived from what is durable, never kept beside it: a trigger is
//! pending while it is a terminal event the replica applied *and committed* (`seq ≤` the
//! durable cursor: the outcome is durable before it may create work), the authority's log
//! records no disposition for it, and no `expand` for it waits in the outbox. Each pending
//! trigger is surfaced once per incarnation as [`Notice::Plan`]; the application answers with
//! [`Agent::dispose`], the rule's answer: the items to create, or none (the empty
//! disposition, so the rule is never asked again).
//!
//! While any disposition is outstanding (pending, or in the outbox and not yet in the log)
//! the planner makes no claim and starts no new lease. After a restart that is what makes
//! "terminal events that landed before their disposition are replayed before any new work
//! launches" hold. The `expand` is made under the action ID `expand-<trigger>`, so a crash
//! between the rule's answer and the accepted command resends the same body under the same
//! ID: it lands once, or as a Duplicate.

use super::{binding_none, Agent, Notice};
use crate::command::{Body, Expand, NewWork};
use crate::error::{Code, Error, Result};
use crate::id::Id;

impl Agent {
    /// Triggers (terminal event seqs) still lacking a disposition, in seq order: applied and
    /// durable here, undisposed in the log, and not waiting in the outbox.
    pub fn pending_dispositions(&self) -> Vec<u64> {
        if !self.config.planner {
            return Vec::new();
        }
        let Some(state) = self.replica.state() else {
            return Vec::new();
        };
        state
            .terminal
            .range(..=self.durable_cursor)
            .map(|(seq, _)| *seq)
            .filter(|seq| !state.expansions.contains_key(seq) && !self.expand_queued(*seq))
            .collect()
    }

    /// Whether any disposition is outstanding: a terminal event applied here (durable or
    /// not yet) without a disposition in the log. A planner claims and starts nothing new
    /// meanwhile.
    pub(super) fn dispositions_outstanding(&self) -> bool {
        if !self.config.planner {
            return false;
        }
        let Some(state) = self.replica.state() else {
            return false;
        };
        // Applied terminal events count before they are durable: the hold starts with the
        // outcome, not with the commit that makes it askable.
        state
            .terminal
            .keys()
            .any(|seq| !state.expansions.contains_key(seq))
    }

    fn expand_queued(&self, trigger: u64) -> bool {
        self.outbox
            .values()
            .any(|o| matches!(&o.command.body, Body::Expand(x) if x.trigger == trigger))
    }

    /// Surfaces each pending trigger once per incarnation.
    pub(super) fn plan_dispositions(&mut self) {
        for trigger in self.pending_dispositions() {
            if self.asked.insert(trigger) {
                let work = self
                    .replica
                    .state()
                    .and_then(|s| s.terminal.get(&trigger))
                    .cloned()
                    .expect("a pending trigger is a terminal event");
                self.notices.push_back(Notice::Plan { trigger, work });
            }
        }
    }

    /// The rule's answer for a pending trigger: the items to create (empty: the empty
    /// disposition). The `expand` goes to the outbox under the action ID `expand-<trigger>`.
    /// `NOT_FOUND` when `trigger` is not a pending trigger of this planner.
    pub fn dispose(&mut self, now_ms: u64, trigger: u64, work: Vec<NewWork>) -> Result<Id> {
        self.touch(now_ms);
        if !self.pending_dispositions().contains(&trigger) {
            return Err(Error::new(
                Code::NotFound,
                format!(
                    "seq {trigger} is not a terminal event awaiting this planner's disposition"
                ),
            ));
        }
        let action =
            Id::new(format!("expand-{trigger}")).map_err(|e| Error::malformed(e.to_string()))?;
        let body = Body::Expand(Expand { trigger, work });
        let action = self.make_as(now_ms, Some(action), body, None, binding_none())?;
        self.drive(now_ms);
        Ok(action)
    }
}
