//! Rules of the Group and its members (SPEC §5): who joins, leaves and changes role, session
//! replacement, and the Group's own redaction and archive.

use super::{err, event, Ctx, Outcome};
use crate::command::{AddMember, Archive, ChangeRole, Redact, RemoveMember, Role};
use crate::error::{Code, Error, Result};
use crate::event::{EventKind, MemberRemoved, SessionReplaced};
use crate::id::Id;
use crate::state::Member;
use crate::work::WorkState;

impl<'a> Ctx<'a> {
    /// `add_member`: a member who is not one already, within the member limit.
    pub(super) fn add_member(&self, b: &AddMember) -> Result<Outcome> {
        let st = self.state;
        if st.members.get(&b.actor).is_some_and(|m| !m.removed) {
            return Err(err(
                Code::AlreadyExists,
                format!("{} is already a member", b.actor),
            ));
        }
        let active = st.members.values().filter(|m| !m.removed).count();
        if active >= self.limits.max_members {
            return Err(Error::malformed(format!(
                "the group has {active} members; the limit is {}",
                self.limits.max_members
            ))
            .with("limit", self.limits.max_members));
        }
        event("members".into(), EventKind::MemberAdded(b.clone()))
    }

    /// `remove_member`: an active member but the last owner; the leases it holds are revoked.
    pub(super) fn remove_member(&self, b: &RemoveMember) -> Result<Outcome> {
        let st = self.state;
        let m = self.member(&b.actor)?;
        if m.role == Role::Owner && self.owners() == 1 {
            return Err(err(
                Code::InvalidState,
                format!("{} is the last owner; add another owner first", b.actor),
            ));
        }
        let revoked = st
            .work
            .iter()
            .filter(|(_, w)| w.lease.as_ref().is_some_and(|l| l.holder == b.actor))
            .filter_map(|(id, w)| self.revocation(id, w))
            .collect();
        event(
            "members".into(),
            EventKind::MemberRemoved(MemberRemoved {
                actor: b.actor.clone(),
                revoked,
            }),
        )
    }

    /// `change_role`: an active member; the last owner stays an owner.
    pub(super) fn change_role(&self, b: &ChangeRole) -> Result<Outcome> {
        let m = self.member(&b.actor)?;
        if m.role == Role::Owner && b.role != Role::Owner && self.owners() == 1 {
            return Err(err(
                Code::InvalidState,
                format!("{} is the last owner; add another owner first", b.actor),
            ));
        }
        event("members".into(), EventKind::RoleChanged(b.clone()))
    }

    /// `replace_session`: the sender's leases of older sessions are revoked.
    pub(super) fn replace_session(&self) -> Result<Outcome> {
        let st = self.state;
        let revoked = st
            .work
            .iter()
            .filter(|(_, w)| {
                w.lease
                    .as_ref()
                    .is_some_and(|l| l.holder == self.cmd.actor && l.session < self.cmd.session)
            })
            .filter_map(|(id, w)| self.revocation(id, w))
            .collect();
        event(
            "group".into(),
            EventKind::SessionReplaced(SessionReplaced {
                session: self.cmd.session,
                revoked,
            }),
        )
    }

    /// `redact`: a seq in the log, not redacted yet.
    pub(super) fn redact(&self, b: &Redact) -> Result<Outcome> {
        let st = self.state;
        if b.seq == 0 || b.seq > st.seq {
            return Err(err(
                Code::NotFound,
                format!("seq {} is not in the log (1..={})", b.seq, st.seq),
            ));
        }
        if st.redacted.contains(&b.seq) {
            return Err(err(
                Code::AlreadyExists,
                format!("seq {} is already redacted", b.seq),
            ));
        }
        event("group".into(), EventKind::EventRedacted(b.clone()))
    }

    /// `archive`: no work is leased or running.
    pub(super) fn archive(&self, b: &Archive) -> Result<Outcome> {
        let st = self.state;
        if let Some((id, w)) = st
            .work
            .iter()
            .find(|(_, w)| matches!(w.state, WorkState::Leased | WorkState::Running))
        {
            return Err(err(
                Code::InvalidState,
                format!(
                    "work {id} is {}; cancel or reassign it before archiving",
                    w.state.as_str()
                ),
            ));
        }
        event("group".into(), EventKind::GroupArchived(b.clone()))
    }

    pub(super) fn member(&self, actor: &Id) -> Result<&'a Member> {
        self.state
            .members
            .get(actor)
            .filter(|m| !m.removed)
            .ok_or_else(|| err(Code::NotFound, format!("{actor} is not a member")))
    }

    pub(super) fn owners(&self) -> usize {
        self.state
            .members
            .values()
            .filter(|m| !m.removed && m.role == Role::Owner)
            .count()
    }
}
