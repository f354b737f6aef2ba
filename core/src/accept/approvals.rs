//! Rules of approvals (SPEC §5): requests and decisions, and the granted approval that
//! high-risk work and irreversible effects need.

use super::{err, event, Ctx, Outcome};
use crate::command::{DecideApproval, RequestApproval};
use crate::error::{Code, Result};
use crate::event::EventKind;
use crate::id::Id;
use crate::state::ApprovalState;

impl<'a> Ctx<'a> {
    /// `request_approval`: a new approval, for an existing item.
    pub(super) fn request_approval(&self, b: &RequestApproval) -> Result<Outcome> {
        let st = self.state;
        if st.approvals.contains_key(&b.approval) {
            return Err(err(
                Code::AlreadyExists,
                format!("approval {} exists already", b.approval),
            ));
        }
        self.item(&b.work)?;
        event(
            format!("approval:{}", b.approval),
            EventKind::ApprovalRequested(b.clone()),
        )
    }

    /// `decide_approval`: a pending approval.
    pub(super) fn decide_approval(&self, b: &DecideApproval) -> Result<Outcome> {
        let st = self.state;
        let Some(a) = st.approvals.get(&b.approval) else {
            return Err(err(
                Code::NotFound,
                format!("approval {} does not exist", b.approval),
            ));
        };
        if a.state != ApprovalState::Pending {
            return Err(err(
                Code::InvalidState,
                format!("approval {} was already decided", b.approval),
            ));
        }
        event(
            format!("approval:{}", b.approval),
            EventKind::ApprovalDecided(b.clone()),
        )
    }

    pub(super) fn has_granted_approval(&self, work: &Id) -> bool {
        self.state
            .approvals
            .values()
            .any(|a| &a.work == work && a.state == ApprovalState::Granted)
    }

    pub(super) fn require_approval(&self, work: &Id, why: &str) -> Result<()> {
        if self.has_granted_approval(work) {
            Ok(())
        } else {
            Err(err(
                Code::ApprovalRequired,
                format!("{why}: request an approval naming {work} and have it granted first"),
            ))
        }
    }
}
