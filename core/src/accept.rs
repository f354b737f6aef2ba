//! `accept`: how the authority decides a Command (SPEC §3). Read this file top-down.
//!
//! [`accept`] is a pure function of the Group state, the command and the time. It runs the
//! checks in the order of SPEC §3 and stops at the first failure:
//!
//! 1. decode and limits (`MALFORMED`), org and group (`WRONG_GROUP`);
//! 2. signature (`UNKNOWN_ACTOR`, `BAD_SIGNATURE`);
//! 3. idempotency: a known (actor, action) is a `Duplicate` or `ACTION_ID_COLLISION`;
//! 4. archive, role and session (`GROUP_ARCHIVED`, `NOT_PERMITTED`, `WRONG_SESSION`);
//! 5. revisions (`REVISION_MISMATCH`, `CAS_REQUIRED`);
//! 6. fencing: late `submit`/`fail` become evidence; anything else `FENCED`/`LEASE_EXPIRED`;
//! 7. domain rules of SPEC §5 (`Ctx::decide`);
//! 8. budgets (`BUDGET_EXCEEDED`).
//!
//! An accepted command yields exactly one [`Event`]; the caller makes it durable, then applies
//! it with [`GroupState::apply`] and hands out [`Event::receipt`].

use crate::canonical;
use crate::command::{Body, Command, EffectMode, Risk, Role};
use crate::crypto::{Hash, PublicKey};
use crate::error::{Code, Error, Rejection, Result};
use crate::event::{
    EffectIntended, EffectReconciled, EffectSettled, Event, EventKind, EvidenceOf,
    EvidenceRecorded, GroupOpened, LeaseRenewed, LeasesExpired, MemberRemoved, Revocation,
    SessionReplaced, WorkCancelled, WorkCharged, WorkClaimed, WorkFailed, WorkReassigned,
};
use crate::id::Id;
use crate::lease::{Lease, LeaseEnd, LeaseId};
use crate::limits::Limits;
use crate::receipt::Receipt;
use crate::state::{ApprovalState, GroupState, Member};
use crate::work::{EffectStatus, WorkItem, WorkState};

/// What the authority answers to a command.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// A new event; its receipt is [`Event::receipt`]. Not yet durable.
    Accepted(Box<Event>),
    /// The command was already accepted: the original receipt, byte for byte.
    Duplicate(Receipt),
    /// The command was refused by a check of SPEC §3; nothing changed.
    Rejected(Rejection),
}

impl Decision {
    /// The decision with a rejection turned into its [`Error`]: for callers that answer a
    /// refused command the way they answer a failure (a CLI exit, an HTTP error body).
    pub fn into_result(self) -> Result<Decision> {
        match self {
            Decision::Rejected(r) => Err(r.into_error()),
            d => Ok(d),
        }
    }
}

/// Decides `cmd` against `state` (`None` before `open_group`) at `now_ms`.
///
/// A refused command is `Ok(Decision::Rejected(_))`; `Err` is kept for what is not a
/// decision: a state that does not encode (a bug or corruption).
pub fn accept(
    state: Option<&GroupState>,
    cmd: &Command,
    now_ms: u64,
    limits: &Limits,
) -> Result<Decision> {
    as_decision(decide_command(state, cmd, now_ms, limits, None))
}

/// Rejections (the codes of the checks) become values; anything else stays an error.
fn as_decision(decided: Result<Decision>) -> Result<Decision> {
    match decided {
        Ok(d) => Ok(d),
        Err(e) => e.into_rejection().map(Decision::Rejected),
    }
}

/// [`accept`] for a host that checked the signature before taking its lock, so that
/// signature checks of concurrent commands run in parallel: the caller has seen
/// `cmd.verify(verified_key)` return `true`. Step 2 skips the check when the actor's
/// registered key is `verified_key`, and verifies as usual otherwise (the key changed, or the
/// caller guessed wrong). Every answer is the one [`accept`] gives.
pub fn accept_preverified(
    state: Option<&GroupState>,
    cmd: &Command,
    now_ms: u64,
    limits: &Limits,
    verified_key: &PublicKey,
) -> Result<Decision> {
    as_decision(decide_command(
        state,
        cmd,
        now_ms,
        limits,
        Some(verified_key),
    ))
}

fn decide_command(
    state: Option<&GroupState>,
    cmd: &Command,
    now_ms: u64,
    limits: &Limits,
    verified_key: Option<&PublicKey>,
) -> Result<Decision> {
    // 1. Decode and limits; org and group. Payload rules first: they name the field.
    if cmd.session == 0 {
        return Err(Error::malformed("`session` must be at least 1"));
    }
    cmd.body.check(limits)?;
    let content = cmd.content_bytes()?;
    if content.len() > limits.max_command_bytes {
        return Err(Error::malformed(format!(
            "command is {} bytes; the limit is {} bytes",
            content.len(),
            limits.max_command_bytes
        ))
        .with("limit", limits.max_command_bytes));
    }
    let content_hash = Hash::of(&content);
    let Some(state) = state else {
        return open_group(cmd, &content, content_hash, now_ms, verified_key);
    };
    if cmd.org != state.org || cmd.group != state.group {
        return Err(Error::new(
            Code::WrongGroup,
            format!(
                "command is for {}/{} but this is group {}/{}",
                cmd.org, cmd.group, state.org, state.group
            ),
        ));
    }

    // 2. Signature.
    let member = actor_member(state, &cmd.actor)?;
    let key = member.map_or(state.authority_key, |m| m.key);
    if verified_key != Some(&key) {
        let verified = match member {
            Some(m) => m.verify(&content, &cmd.sig),
            None => state.authority_key.verify(&content, &cmd.sig),
        };
        if !verified {
            return Err(bad_signature(&key, cmd));
        }
    }

    // 3. Idempotency.
    if let Some(receipt) = state.receipt(cmd.actor.as_str(), cmd.action.as_str()) {
        if receipt.content_hash == content_hash {
            return Ok(Decision::Duplicate(receipt));
        }
        return Err(Error::new(
            Code::ActionIdCollision,
            format!(
                "action {} of {} was already used for different content (seq {}); use a new action ID",
                cmd.action, cmd.actor, receipt.seq
            ),
        )
        .with("seq", receipt.seq));
    }

    // 4. Archive, role, session.
    if state.archived {
        return Err(Error::new(
            Code::GroupArchived,
            format!(
                "group {} is archived and accepts no more commands",
                state.group
            ),
        ));
    }
    check_role(state, cmd)?;
    check_session(state, cmd)?;

    // 5. Revisions.
    let aggregate = target_aggregate(&cmd.body);
    let current = state.revision_of(&aggregate);
    if let Some(expect) = cmd.expect {
        if expect != current {
            return Err(Error::new(
                Code::RevisionMismatch,
                format!("{aggregate} is at revision {current}, not {expect}; re-read and retry with expect {current}"),
            )
            .with("aggregate", aggregate.as_str())
            .with("current", current));
        }
    } else if is_cas(&cmd.body) {
        return Err(Error::new(
            Code::CasRequired,
            format!(
                "{} is compare-and-set: send `expect` with the current revision of {aggregate} ({current})",
                cmd.body.type_name()
            ),
        )
        .with("aggregate", aggregate.as_str())
        .with("current", current));
    }

    let ctx = Ctx {
        state,
        cmd,
        now_ms,
        content_hash,
        limits,
    };

    // 6. Fencing.
    if let Some(evidence) = ctx.fence()? {
        return ctx.seal("group".to_owned(), evidence);
    }

    // 7 and 8. Domain rules and budgets.
    match ctx.decide()? {
        Outcome::Event(aggregate, kind) => ctx.seal(aggregate, kind),
        Outcome::Duplicate(receipt) => Ok(Decision::Duplicate(receipt)),
    }
}

/// The genesis command: checks 2–5 against the body's own member list.
fn open_group(
    cmd: &Command,
    content: &[u8],
    content_hash: Hash,
    now_ms: u64,
    verified_key: Option<&PublicKey>,
) -> Result<Decision> {
    let Body::OpenGroup(g) = &cmd.body else {
        return Err(Error::new(
            Code::NotFound,
            format!(
                "group {} has not been opened; its first command must be open_group",
                cmd.group
            ),
        ));
    };
    let Some(me) = g.members.iter().find(|m| m.actor == cmd.actor) else {
        return Err(Error::new(
            Code::UnknownActor,
            format!(
                "{} is not listed among the members it opens the group with",
                cmd.actor
            ),
        ));
    };
    if verified_key != Some(&me.key) {
        verify(&me.key, content, cmd)?;
    }
    if me.role != Role::Owner {
        return Err(Error::new(
            Code::NotPermitted,
            format!("{} must be listed as an owner to open the group", cmd.actor),
        ));
    }
    if cmd.session != 1 {
        return Err(Error::new(
            Code::WrongSession,
            format!("every member starts at session 1, not {}", cmd.session),
        )
        .with("current", 1));
    }
    if let Some(expect) = cmd.expect.filter(|e| *e != 0) {
        return Err(Error::new(
            Code::RevisionMismatch,
            format!("group does not exist yet (revision 0), not revision {expect}"),
        )
        .with("aggregate", "group")
        .with("current", 0));
    }
    let kind = EventKind::GroupOpened(GroupOpened {
        org: cmd.org.clone(),
        mission: g.mission.clone(),
        title: g.title.clone(),
        members: g.members.clone(),
        authority_key: g.authority_key,
    });
    let event = Event::seal(
        cmd.group.clone(),
        1,
        now_ms,
        cmd.actor.clone(),
        cmd.action.clone(),
        content_hash,
        "group".to_owned(),
        1,
        Hash::ZERO,
        kind,
    )?;
    Ok(Decision::Accepted(Box::new(event)))
}

/// The sender's membership, or `None` for `@authority` (whose key is the group's
/// `authority_key`); `UNKNOWN_ACTOR` for anyone else.
fn actor_member<'s>(state: &'s GroupState, actor: &Id) -> Result<Option<&'s Member>> {
    if actor.is_authority() {
        return Ok(None);
    }
    state.members.get(actor).map(Some).ok_or_else(|| {
        Error::new(
            Code::UnknownActor,
            format!("{actor} is not a member of group {}", state.group),
        )
    })
}

fn verify(key: &PublicKey, content: &[u8], cmd: &Command) -> Result<()> {
    if key.verify(content, &cmd.sig) {
        Ok(())
    } else {
        Err(bad_signature(key, cmd))
    }
}

fn bad_signature(key: &PublicKey, cmd: &Command) -> Error {
    Error::new(
        Code::BadSignature,
        format!(
            "signature does not verify under {}'s registered key {key}; sign the canonical CBOR of every field but sig",
            cmd.actor
        ),
    )
}

/// The aggregate whose revision `expect` refers to.
pub fn target_aggregate(body: &Body) -> String {
    match body {
        Body::OpenGroup(_)
        | Body::ReplaceSession(_)
        | Body::Expand(_)
        | Body::Redact(_)
        | Body::Archive(_)
        | Body::Tick(_) => "group".to_owned(),
        Body::AddMember(_) | Body::RemoveMember(_) | Body::ChangeRole(_) => "members".to_owned(),
        Body::RequestApproval(b) => format!("approval:{}", b.approval),
        Body::DecideApproval(b) => format!("approval:{}", b.approval),
        _ => match body.work() {
            Some(w) => WorkItem::aggregate(w),
            None => "group".to_owned(),
        },
    }
}

/// Commands that must carry `expect` (SPEC §2, "CAS").
pub fn is_cas(body: &Body) -> bool {
    matches!(
        body,
        Body::AddMember(_)
            | Body::RemoveMember(_)
            | Body::ChangeRole(_)
            | Body::ClaimWork(_)
            | Body::RenewLease(_)
            | Body::DecideApproval(_)
    )
}

fn check_role(state: &GroupState, cmd: &Command) -> Result<()> {
    let denied = |why: String| Err(Error::new(Code::NotPermitted, why));
    let kind = cmd.body.type_name();
    if cmd.actor.is_authority() {
        return match cmd.body {
            Body::Tick(_) => Ok(()),
            _ => denied(format!("@authority only sends tick, not {kind}")),
        };
    }
    if matches!(cmd.body, Body::Tick(_)) {
        return denied(format!("only @authority may send tick, not {}", cmd.actor));
    }
    let member = state
        .members
        .get(&cmd.actor)
        .expect("actor_member found the member");
    if member.removed {
        // A removed member's late results are still recorded as evidence (check 6).
        return match cmd.body {
            Body::Submit(_) | Body::Fail(_) => Ok(()),
            _ => denied(format!("{} was removed from the group", cmd.actor)),
        };
    }
    use Role::*;
    let allowed: &[Role] = match &cmd.body {
        Body::OpenGroup(_) => &[Owner, Worker, Reviewer, Observer],
        Body::AddMember(_)
        | Body::RemoveMember(_)
        | Body::ChangeRole(_)
        | Body::Redact(_)
        | Body::Archive(_) => &[Owner],
        Body::ReplaceSession(_) => &[Owner, Worker, Reviewer, Observer],
        Body::CreateWork(_) | Body::ClaimWork(_) | Body::Expand(_) => &[Owner, Worker],
        Body::ResolveBlock(_) | Body::Cancel(_) | Body::Reassign(_) | Body::DecideApproval(_) => {
            &[Owner, Reviewer]
        }
        Body::ReconcileEffect(_) => &[Owner, Reviewer, Worker],
        Body::RequestApproval(_) => &[Owner, Worker, Reviewer],
        // Made under a lease: whoever holds it (check 6 decides).
        _ => &[Owner, Worker, Reviewer, Observer],
    };
    if allowed.contains(&member.role) {
        Ok(())
    } else {
        denied(format!(
            "{kind} needs role {}; {} is {:?}",
            allowed
                .iter()
                .map(|r| format!("{r:?}").to_lowercase())
                .collect::<Vec<_>>()
                .join(" or "),
            cmd.actor,
            member.role
        ))
    }
}

fn check_session(state: &GroupState, cmd: &Command) -> Result<()> {
    let current = if cmd.actor.is_authority() {
        1
    } else {
        state.members.get(&cmd.actor).map_or(1, |m| m.session)
    };
    let ok = match cmd.body {
        Body::ReplaceSession(_) => cmd.session > current,
        _ => cmd.session == current,
    };
    if ok {
        return Ok(());
    }
    let want = if matches!(cmd.body, Body::ReplaceSession(_)) {
        format!("a session above {current}")
    } else {
        format!("session {current}")
    };
    Err(Error::new(
        Code::WrongSession,
        format!(
            "{} is at session {current}; this command carries {} but needs {want}",
            cmd.actor, cmd.session
        ),
    )
    .with("current", current))
}

/// A decided domain outcome.
enum Outcome {
    /// Append an event to this aggregate.
    Event(String, EventKind),
    /// An idempotent disposition already recorded.
    Duplicate(Receipt),
}

struct Ctx<'a> {
    state: &'a GroupState,
    cmd: &'a Command,
    now_ms: u64,
    content_hash: Hash,
    limits: &'a Limits,
}

fn err(code: Code, message: impl Into<String>) -> Error {
    Error::new(code, message)
}

impl<'a> Ctx<'a> {
    fn seal(&self, aggregate: String, kind: EventKind) -> Result<Decision> {
        let revision = self.state.revision_of(&aggregate) + 1;
        let event = Event::seal(
            self.state.group.clone(),
            self.state.seq + 1,
            self.now_ms,
            self.cmd.actor.clone(),
            self.cmd.action.clone(),
            self.content_hash,
            aggregate,
            revision,
            self.state.head,
            kind,
        )?;
        Ok(Decision::Accepted(Box::new(event)))
    }

    fn item(&self, work: &Id) -> Result<&'a WorkItem> {
        self.state.work.get(work).ok_or_else(|| {
            err(
                Code::NotFound,
                format!("work {work} does not exist in group {}", self.state.group),
            )
        })
    }

    /// Check 6. `Ok(Some(kind))` is a late result to record as evidence.
    fn fence(&self) -> Result<Option<EventKind>> {
        let (Some(work), Some(lease)) = (self.cmd.body.work(), self.cmd.body.lease()) else {
            return Ok(None);
        };
        let w = self.item(work)?;
        let late = matches!(self.cmd.body, Body::Submit(_) | Body::Fail(_));
        let actor = &self.cmd.actor;
        let stale = match w.find_lease(lease) {
            None | Some((None, None)) => {
                return Err(err(
                    Code::Fenced,
                    format!("lease {lease} was never granted on work {work}"),
                ))
            }
            Some((Some(cur), _)) => {
                if &cur.holder != actor || cur.session != self.cmd.session {
                    return Err(err(
                        Code::Fenced,
                        format!(
                            "lease {lease} on {work} is held by {} session {}",
                            cur.holder, cur.session
                        ),
                    ));
                }
                // A lease not started by `start_by` is over, as `tick` would find: only a
                // late result is still recorded (as evidence).
                let start_missed = w.state == WorkState::Leased && self.now_ms >= cur.start_by;
                if start_missed && !late {
                    return Err(err(
                        Code::LeaseExpired,
                        format!(
                            "lease {lease} had to start before {}; it is now {}",
                            cur.start_by, self.now_ms
                        ),
                    ));
                }
                if self.now_ms < cur.expires_at && !start_missed {
                    return Ok(None);
                }
                LeaseEnd::Expired
            }
            Some((None, Some(past))) => {
                if &past.holder != actor {
                    return Err(err(
                        Code::Fenced,
                        format!(
                            "lease {lease} on {work} was held by {}, not {actor}",
                            past.holder
                        ),
                    ));
                }
                past.end
            }
        };
        if late {
            return Ok(Some(self.evidence(work, *lease)));
        }
        let epoch = w.epoch;
        Err(match stale {
            LeaseEnd::Expired => err(
                Code::LeaseExpired,
                format!("lease {lease} on {work} expired; claim the work again"),
            ),
            _ => err(
                Code::Fenced,
                format!("lease {lease} on {work} is no longer current (ownership epoch is {epoch}); claim the work again"),
            ),
        }
        .with("epoch", epoch))
    }

    fn evidence(&self, work: &Id, lease: LeaseId) -> EventKind {
        let mut e = EvidenceRecorded {
            of: EvidenceOf::Submit,
            work: work.clone(),
            lease,
            result: None,
            error: None,
            retryable: None,
        };
        match &self.cmd.body {
            Body::Submit(s) => e.result = Some(s.result.clone()),
            Body::Fail(f) => {
                e.of = EvidenceOf::Fail;
                e.error = Some(f.error.clone());
                e.retryable = Some(f.retryable);
            }
            _ => {}
        }
        EventKind::EvidenceRecorded(e)
    }

    fn need_state(&self, work: &Id, w: &WorkItem, allowed: &[WorkState]) -> Result<()> {
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

    fn has_granted_approval(&self, work: &Id) -> bool {
        self.state
            .approvals
            .values()
            .any(|a| &a.work == work && a.state == ApprovalState::Granted)
    }

    fn require_approval(&self, work: &Id, why: &str) -> Result<()> {
        if self.has_granted_approval(work) {
            Ok(())
        } else {
            Err(err(
                Code::ApprovalRequired,
                format!("{why}: request an approval naming {work} and have it granted first"),
            ))
        }
    }

    /// Where each revocable lease goes when revoked.
    fn revocation(&self, work: &Id, w: &WorkItem) -> Option<Revocation> {
        w.lease.as_ref().map(|l| Revocation {
            work: work.clone(),
            lease: l.id,
            to: w.state_after_losing_lease(),
        })
    }

    fn ensure_unsettled_none(&self, work: &Id, w: &WorkItem) -> Result<()> {
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

    /// Checks 7 and 8: the rules of SPEC §5.
    fn decide(&self) -> Result<Outcome> {
        let st = self.state;
        let now = self.now_ms;
        let ev = |agg: String, kind| Ok(Outcome::Event(agg, kind));
        match &self.cmd.body {
            Body::OpenGroup(_) => Err(err(
                Code::AlreadyExists,
                format!("group {} is already open", st.group),
            )),
            Body::AddMember(b) => {
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
                ev("members".into(), EventKind::MemberAdded(b.clone()))
            }
            Body::RemoveMember(b) => {
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
                ev(
                    "members".into(),
                    EventKind::MemberRemoved(MemberRemoved {
                        actor: b.actor.clone(),
                        revoked,
                    }),
                )
            }
            Body::ChangeRole(b) => {
                let m = self.member(&b.actor)?;
                if m.role == Role::Owner && b.role != Role::Owner && self.owners() == 1 {
                    return Err(err(
                        Code::InvalidState,
                        format!("{} is the last owner; add another owner first", b.actor),
                    ));
                }
                ev("members".into(), EventKind::RoleChanged(b.clone()))
            }
            Body::ReplaceSession(_) => {
                let revoked = st
                    .work
                    .iter()
                    .filter(|(_, w)| {
                        w.lease.as_ref().is_some_and(|l| {
                            l.holder == self.cmd.actor && l.session < self.cmd.session
                        })
                    })
                    .filter_map(|(id, w)| self.revocation(id, w))
                    .collect();
                ev(
                    "group".into(),
                    EventKind::SessionReplaced(SessionReplaced {
                        session: self.cmd.session,
                        revoked,
                    }),
                )
            }
            Body::CreateWork(b) => {
                self.check_new_work(&b.work, &b.after, &[])?;
                ev(
                    WorkItem::aggregate(&b.work),
                    EventKind::WorkCreated(b.clone()),
                )
            }
            Body::ClaimWork(b) => {
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
                ev(
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
            Body::StartWork(b) => {
                let w = self.item(&b.work)?;
                self.need_state(&b.work, w, &[WorkState::Leased])?;
                if w.contract.risk == Risk::High {
                    self.require_approval(
                        &b.work,
                        "high-risk work needs a granted approval to start",
                    )?;
                }
                ev(
                    WorkItem::aggregate(&b.work),
                    EventKind::WorkStarted(b.clone()),
                )
            }
            Body::RenewLease(b) => {
                let w = self.item(&b.work)?;
                self.need_state(&b.work, w, &[WorkState::Leased, WorkState::Running])?;
                ev(
                    WorkItem::aggregate(&b.work),
                    EventKind::LeaseRenewed(LeaseRenewed {
                        work: b.work.clone(),
                        lease: b.lease,
                        lease_ms: b.lease_ms,
                        expires_at: now.saturating_add(b.lease_ms),
                    }),
                )
            }
            Body::Checkpoint(b) => {
                let w = self.running(&b.work)?;
                self.ensure_unsettled_none(&b.work, w)?;
                ev(
                    WorkItem::aggregate(&b.work),
                    EventKind::WorkCheckpointed(b.clone()),
                )
            }
            Body::Block(b) => {
                let w = self.running(&b.work)?;
                self.ensure_unsettled_none(&b.work, w)?;
                ev(
                    WorkItem::aggregate(&b.work),
                    EventKind::WorkBlocked(b.clone()),
                )
            }
            Body::ResolveBlock(b) => {
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
                ev(
                    WorkItem::aggregate(&b.work),
                    EventKind::BlockResolved(b.clone()),
                )
            }
            Body::Submit(b) => {
                let w = self.running(&b.work)?;
                self.ensure_unsettled_none(&b.work, w)?;
                ev(
                    WorkItem::aggregate(&b.work),
                    EventKind::WorkSucceeded(b.clone()),
                )
            }
            Body::Fail(b) => {
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
                ev(
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
            Body::Cancel(b) => {
                let w = self.item(&b.work)?;
                if w.state.is_terminal() {
                    return Err(err(
                        Code::InvalidState,
                        format!("work {} is already {}", b.work, w.state.as_str()),
                    )
                    .with("state", w.state.as_str()));
                }
                ev(
                    WorkItem::aggregate(&b.work),
                    EventKind::WorkCancelled(WorkCancelled {
                        work: b.work.clone(),
                        reason: b.reason.clone(),
                        revoked: w.lease.as_ref().map(|l| l.id),
                    }),
                )
            }
            Body::Reassign(b) => {
                let w = self.item(&b.work)?;
                self.need_state(&b.work, w, &[WorkState::Leased, WorkState::Running])?;
                let revoked = self
                    .revocation(&b.work, w)
                    .expect("leased and running items hold a lease");
                ev(
                    WorkItem::aggregate(&b.work),
                    EventKind::WorkReassigned(WorkReassigned {
                        work: b.work.clone(),
                        reason: b.reason.clone(),
                        revoked,
                    }),
                )
            }
            Body::IntendEffect(b) => {
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
                    self.require_approval(
                        &b.work,
                        "an irreversible effect needs a granted approval",
                    )?;
                }
                if w.contract.risk == Risk::High {
                    self.require_approval(
                        &b.work,
                        "effects of high-risk work need a granted approval",
                    )?;
                }
                ev(
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
            Body::SettleEffect(b) => {
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
                ev(
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
            Body::ReconcileEffect(b) => {
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
                        format!("effect {} is not of unknown outcome; only unknown outcomes are reconciled", b.key),
                    ));
                }
                let still_unknown = w.unknown().filter(|(k, _)| **k != b.key).count();
                let to = (still_unknown == 0 && w.state == WorkState::Waiting)
                    .then_some(WorkState::Queued);
                ev(
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
            Body::Charge(b) => {
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
                ev(
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
            Body::RequestApproval(b) => {
                if st.approvals.contains_key(&b.approval) {
                    return Err(err(
                        Code::AlreadyExists,
                        format!("approval {} exists already", b.approval),
                    ));
                }
                self.item(&b.work)?;
                ev(
                    format!("approval:{}", b.approval),
                    EventKind::ApprovalRequested(b.clone()),
                )
            }
            Body::DecideApproval(b) => {
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
                ev(
                    format!("approval:{}", b.approval),
                    EventKind::ApprovalDecided(b.clone()),
                )
            }
            Body::Expand(b) => {
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
                ev("group".into(), EventKind::WorkExpanded(b.clone()))
            }
            Body::Redact(b) => {
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
                ev("group".into(), EventKind::EventRedacted(b.clone()))
            }
            Body::Archive(b) => {
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
                ev("group".into(), EventKind::GroupArchived(b.clone()))
            }
            Body::Tick(_) => {
                let expired: Vec<Revocation> = st
                    .work
                    .iter()
                    .filter(|(_, w)| {
                        w.lease.as_ref().is_some_and(|l| {
                            l.expires_at <= now
                                || (w.state == WorkState::Leased && l.start_by <= now)
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
                ev(
                    "group".into(),
                    EventKind::LeasesExpired(LeasesExpired { expired }),
                )
            }
        }
    }

    fn member(&self, actor: &Id) -> Result<&'a crate::state::Member> {
        self.state
            .members
            .get(actor)
            .filter(|m| !m.removed)
            .ok_or_else(|| err(Code::NotFound, format!("{actor} is not a member")))
    }

    fn owners(&self) -> usize {
        self.state
            .members
            .values()
            .filter(|m| !m.removed && m.role == Role::Owner)
            .count()
    }

    /// The item, which must be `running` (commands made under a lease).
    fn running(&self, work: &Id) -> Result<&'a WorkItem> {
        let w = self.item(work)?;
        self.need_state(work, w, &[WorkState::Running])?;
        Ok(w)
    }

    /// A new item must not exist; its dependencies must exist or be created alongside.
    fn check_new_work(&self, work: &Id, after: &[Id], alongside: &[&Id]) -> Result<()> {
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
}

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
