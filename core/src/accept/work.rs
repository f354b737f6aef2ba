//! Rules of work items (SPEC §5): creation and expansion, claims, starts and renewals, results,
//! cancellation and reassignment, budgets (check 8) and the tick that expires leases.

use super::{err, event, Ctx, Outcome};
use crate::command::{
    Block, Cancel, Charge, Checkpoint, ClaimWork, CreateWork, Expand, Fail, Reassign, RenewLease,
    ResolveBlock, Risk, StartWork, Submit,
};
use crate::error::{Code, Error, Result};
use crate::event::{
    EventKind, LeaseRenewed, LeasesExpired, Revocation, WorkCancelled, WorkCharged, WorkClaimed,
    WorkFailed, WorkReassigned,
};
use crate::id::Id;
use crate::lease::{Lease, LeaseId};
use crate::work::{WorkItem, WorkState};

impl<'a> Ctx<'a> {
    /// `create_work`: a new item whose dependencies exist.
    pub(super) fn create_work(&self, b: &CreateWork) -> Result<Outcome> {
        self.check_new_work(&b.work, &b.after, &[])?;
        event(
            WorkItem::aggregate(&b.work),
            EventKind::WorkCreated(b.clone()),
        )
    }

    /// `claim_work`: a queued item with its dependencies done, its time come, its deadline not
    /// passed and attempts left: a new lease.
    pub(super) fn claim_work(&self, b: &ClaimWork) -> Result<Outcome> {
        let st = self.state;
        let now = self.now_ms;
        let w = self.item(&b.work)?;
        // An item that failed for good after its last attempt names the specific
        // reason rather than its state (SPEC §5: "attempts left").
        if w.state == WorkState::Failed && w.attempts >= w.contract.max_attempts {
            return Err(err(
                Code::AttemptsExhausted,
                format!(
                    "work {} used all {} attempts and failed",
                    b.work, w.contract.max_attempts
                ),
            )
            .with("attempts", w.attempts));
        }
        self.need_state(&b.work, w, &[WorkState::Queued])?;
        if let Some(dep) = w.after.iter().find(|a| {
            st.work
                .get(*a)
                .is_none_or(|d| d.state != WorkState::Succeeded)
        }) {
            return Err(err(
                Code::DependenciesPending,
                format!("work {} waits for {dep} to succeed", b.work),
            )
            .with("pending", dep.as_str()));
        }
        if now < w.not_before {
            return Err(err(
                Code::NotYet,
                format!(
                    "work {} may be claimed from {} (now {now})",
                    b.work, w.not_before
                ),
            )
            .with("not_before", w.not_before));
        }
        if let Some(deadline) = w.contract.deadline_at.filter(|d| now >= *d) {
            return Err(err(
                Code::DeadlinePassed,
                format!("work {} had to be claimed before {deadline}", b.work),
            ));
        }
        if w.attempts >= w.contract.max_attempts {
            return Err(err(
                Code::AttemptsExhausted,
                format!(
                    "work {} used all {} attempts",
                    b.work, w.contract.max_attempts
                ),
            ));
        }
        let epoch = w.epoch + 1;
        let lease = Lease {
            id: LeaseId::derive(&st.group, &b.work, epoch),
            work: b.work.clone(),
            holder: self.cmd.actor.clone(),
            session: self.cmd.session,
            epoch,
            granted_at: now,
            start_by: now.saturating_add(b.start_within_ms),
            expires_at: now.saturating_add(b.lease_ms),
        };
        event(
            WorkItem::aggregate(&b.work),
            EventKind::WorkClaimed(WorkClaimed {
                work: b.work.clone(),
                lease_ms: b.lease_ms,
                start_within_ms: b.start_within_ms,
                lease,
                checkpoint: w.checkpoint.map(|c| c.seq),
            }),
        )
    }

    /// `start_work`: a leased item; high-risk work needs a granted approval.
    pub(super) fn start_work(&self, b: &StartWork) -> Result<Outcome> {
        let w = self.item(&b.work)?;
        self.need_state(&b.work, w, &[WorkState::Leased])?;
        if w.contract.risk == Risk::High {
            self.require_approval(&b.work, "high-risk work needs a granted approval to start")?;
        }
        event(
            WorkItem::aggregate(&b.work),
            EventKind::WorkStarted(b.clone()),
        )
    }

    /// `renew_lease`: a leased or running item: the lease runs `lease_ms` from now.
    pub(super) fn renew_lease(&self, b: &RenewLease) -> Result<Outcome> {
        let now = self.now_ms;
        let w = self.item(&b.work)?;
        self.need_state(&b.work, w, &[WorkState::Leased, WorkState::Running])?;
        event(
            WorkItem::aggregate(&b.work),
            EventKind::LeaseRenewed(LeaseRenewed {
                work: b.work.clone(),
                lease: b.lease,
                lease_ms: b.lease_ms,
                expires_at: now.saturating_add(b.lease_ms),
            }),
        )
    }

    /// `checkpoint`: a running item with every effect settled; releases the lease.
    pub(super) fn checkpoint(&self, b: &Checkpoint) -> Result<Outcome> {
        let w = self.running(&b.work)?;
        self.ensure_unsettled_none(&b.work, w)?;
        event(
            WorkItem::aggregate(&b.work),
            EventKind::WorkCheckpointed(b.clone()),
        )
    }

    /// `block`: a running item with every effect settled; releases the lease.
    pub(super) fn block(&self, b: &Block) -> Result<Outcome> {
        let w = self.running(&b.work)?;
        self.ensure_unsettled_none(&b.work, w)?;
        event(
            WorkItem::aggregate(&b.work),
            EventKind::WorkBlocked(b.clone()),
        )
    }

    /// `resolve_block`: a blocked item, for the need it is blocked on.
    pub(super) fn resolve_block(&self, b: &ResolveBlock) -> Result<Outcome> {
        let w = self.item(&b.work)?;
        self.need_state(&b.work, w, &[WorkState::Blocked])?;
        if w.needs.as_ref().map(|n| &n.key) != Some(&b.key) {
            return Err(err(
                Code::NotFound,
                format!(
                    "work {} is not blocked on {}; it needs {}",
                    b.work,
                    b.key,
                    w.needs
                        .as_ref()
                        .map_or("nothing".to_owned(), |n| n.key.to_string())
                ),
            ));
        }
        event(
            WorkItem::aggregate(&b.work),
            EventKind::BlockResolved(b.clone()),
        )
    }

    /// `submit`: a running item with every effect settled.
    pub(super) fn submit(&self, b: &Submit) -> Result<Outcome> {
        let w = self.running(&b.work)?;
        self.ensure_unsettled_none(&b.work, w)?;
        event(
            WorkItem::aggregate(&b.work),
            EventKind::WorkSucceeded(b.clone()),
        )
    }

    /// `fail`: a running item with every effect settled: queued again after its backoff if it may
    /// be retried, failed otherwise.
    pub(super) fn fail(&self, b: &Fail) -> Result<Outcome> {
        let now = self.now_ms;
        let w = self.running(&b.work)?;
        self.ensure_unsettled_none(&b.work, w)?;
        let attempt = w.attempts.saturating_add(1);
        let backoff = w.backoff_ms(attempt);
        let retry_at = now.saturating_add(backoff);
        let retry = b.retryable
            && attempt < w.contract.max_attempts
            && w.spent < w.contract.cost_budget
            && w.contract.deadline_at.is_none_or(|d| retry_at < d);
        let (to, not_before) = if retry {
            (WorkState::Queued, Some(retry_at))
        } else {
            (WorkState::Failed, None)
        };
        event(
            WorkItem::aggregate(&b.work),
            EventKind::WorkFailed(WorkFailed {
                work: b.work.clone(),
                lease: b.lease,
                error: b.error.clone(),
                retryable: b.retryable,
                attempt,
                to,
                not_before,
            }),
        )
    }

    /// `cancel`: any item not terminal; its lease is revoked.
    pub(super) fn cancel(&self, b: &Cancel) -> Result<Outcome> {
        let w = self.item(&b.work)?;
        if w.state.is_terminal() {
            return Err(err(
                Code::InvalidState,
                format!("work {} is already {}", b.work, w.state.as_str()),
            )
            .with("state", w.state.as_str()));
        }
        event(
            WorkItem::aggregate(&b.work),
            EventKind::WorkCancelled(WorkCancelled {
                work: b.work.clone(),
                reason: b.reason.clone(),
                revoked: w.lease.as_ref().map(|l| l.id),
            }),
        )
    }

    /// `reassign`: a leased or running item: its lease is revoked.
    pub(super) fn reassign(&self, b: &Reassign) -> Result<Outcome> {
        let w = self.item(&b.work)?;
        self.need_state(&b.work, w, &[WorkState::Leased, WorkState::Running])?;
        let revoked = self
            .revocation(&b.work, w)
            .expect("leased and running items hold a lease");
        event(
            WorkItem::aggregate(&b.work),
            EventKind::WorkReassigned(WorkReassigned {
                work: b.work.clone(),
                reason: b.reason.clone(),
                revoked,
            }),
        )
    }

    /// `charge`: check 8: a running item, within its cost budget.
    pub(super) fn charge(&self, b: &Charge) -> Result<Outcome> {
        let w = self.running(&b.work)?;
        let spent = w
            .spent
            .checked_add(b.cost)
            .filter(|s| *s <= w.contract.cost_budget);
        let Some(spent) = spent else {
            return Err(err(
                Code::BudgetExceeded,
                format!(
                    "charging {} on {} would exceed its budget: {} of {} spent",
                    b.cost, b.work, w.spent, w.contract.cost_budget
                ),
            )
            .with("spent", w.spent)
            .with("budget", w.contract.cost_budget));
        };
        event(
            WorkItem::aggregate(&b.work),
            EventKind::WorkCharged(WorkCharged {
                work: b.work.clone(),
                lease: b.lease,
                cost: b.cost,
                data: b.data.clone(),
                spent,
            }),
        )
    }

    /// `expand`: a terminal work event as trigger, expanded once (the same list again is a
    /// duplicate).
    pub(super) fn expand(&self, b: &Expand) -> Result<Outcome> {
        let st = self.state;
        let work_hash = crate::state::expansion_hash(&b.work)?;
        if let Some(x) = st.expansions.get(&b.trigger) {
            if x.work_hash == work_hash {
                let receipt = st
                    .receipt(x.actor.as_str(), x.action.as_str())
                    .expect("every recorded expansion has its receipt");
                return Ok(Outcome::Duplicate(receipt));
            }
            return Err(err(
                Code::DispositionConflict,
                format!(
                    "trigger {} was already expanded with a different work list",
                    b.trigger
                ),
            ));
        }
        if !st.terminal.contains_key(&b.trigger) {
            return Err(err(
                Code::NotFound,
                format!(
                    "seq {} is not a terminal work event; expand needs one as its trigger",
                    b.trigger
                ),
            ));
        }
        let listed: Vec<&Id> = b.work.iter().map(|w| &w.work).collect();
        for w in &b.work {
            self.check_new_work(&w.work, &w.after, &listed)?;
        }
        event("group".into(), EventKind::WorkExpanded(b.clone()))
    }

    /// `tick`: expires every lease whose time has passed, or that was not started by `start_by`.
    pub(super) fn tick(&self) -> Result<Outcome> {
        let st = self.state;
        let now = self.now_ms;
        let expired: Vec<Revocation> = st
            .work
            .iter()
            .filter(|(_, w)| {
                w.lease.as_ref().is_some_and(|l| {
                    l.expires_at <= now || (w.state == WorkState::Leased && l.start_by <= now)
                })
            })
            .filter_map(|(id, w)| self.revocation(id, w))
            .collect();
        if expired.is_empty() {
            let mut e = err(Code::NotYet, "no lease is due to expire");
            if let Some(next) = st.next_deadline() {
                e = Error::new(
                    Code::NotYet,
                    format!("no lease is due to expire; the next deadline is {next}"),
                )
                .with("next_deadline", next);
            }
            return Err(e);
        }
        event(
            "group".into(),
            EventKind::LeasesExpired(LeasesExpired { expired }),
        )
    }

    /// The item, which must be `running` (commands made under a lease).
    pub(super) fn running(&self, work: &Id) -> Result<&'a WorkItem> {
        let w = self.item(work)?;
        self.need_state(work, w, &[WorkState::Running])?;
        Ok(w)
    }

    pub(super) fn need_state(&self, work: &Id, w: &WorkItem, allowed: &[WorkState]) -> Result<()> {
        if allowed.contains(&w.state) {
            return Ok(());
        }
        Err(err(
            Code::InvalidState,
            format!(
                "{} needs work {work} {}; it is {}",
                self.cmd.body.type_name(),
                allowed
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(" or "),
                w.state.as_str()
            ),
        )
        .with("state", w.state.as_str()))
    }

    /// A new item must not exist; its dependencies must exist or be created alongside.
    pub(super) fn check_new_work(&self, work: &Id, after: &[Id], alongside: &[&Id]) -> Result<()> {
        if self.state.work.contains_key(work) {
            return Err(err(
                Code::AlreadyExists,
                format!("work {work} exists already"),
            ));
        }
        if let Some(missing) = after
            .iter()
            .find(|a| !self.state.work.contains_key(*a) && !alongside.contains(a))
        {
            return Err(err(
                Code::NotFound,
                format!("work {work} depends on {missing}, which does not exist"),
            ));
        }
        Ok(())
    }

    /// Where each revocable lease goes when revoked.
    pub(super) fn revocation(&self, work: &Id, w: &WorkItem) -> Option<Revocation> {
        w.lease.as_ref().map(|l| Revocation {
            work: work.clone(),
            lease: l.id,
            to: w.state_after_losing_lease(),
        })
    }
}
