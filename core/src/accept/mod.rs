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
//! 7. domain rules of SPEC §5 (`Ctx::decide`), one per body, grouped by what they are about:
//!    `members.rs` (the Group and its members), `work.rs` (work items and leases),
//!    `effects.rs` (effects) and `approvals.rs` (approvals);
//! 8. budgets (`BUDGET_EXCEEDED`, with `charge` in `work.rs`).
//!
//! Checks 1–6 are in this file, in that order. An accepted command yields exactly one
//! [`Event`]; the caller makes it durable, then applies it with [`GroupState::apply`] and
//! hands out [`Event::receipt`]. Effect keys are [`crate::effect::effect_key`].

mod approvals;
mod effects;
mod members;
mod work;

use crate::command::{Body, Command, Role, Verified};
use crate::crypto::{Hash, PublicKey};
use crate::error::{Code, Error, Rejection, Result};
use crate::event::{Event, EventKind, EvidenceOf, EvidenceRecorded, GroupOpened};
use crate::id::Id;
use crate::lease::{LeaseEnd, LeaseId};
use crate::limits::Limits;
use crate::receipt::Receipt;
use crate::state::{GroupState, Member};
use crate::work::{WorkItem, WorkState};

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
        Some(Checked {
            key: verified_key,
            content: None,
        }),
    ))
}

/// [`accept_preverified`] for a command the core verified ([`Command::verify_once`]): its
/// content bytes are taken as they were verified instead of being encoded again. Every
/// answer is the one [`accept`] gives.
pub fn accept_verified(
    state: Option<&GroupState>,
    verified: &Verified<'_>,
    now_ms: u64,
    limits: &Limits,
) -> Result<Decision> {
    as_decision(decide_command(
        state,
        verified.command(),
        now_ms,
        limits,
        Some(Checked {
            key: verified.key(),
            content: Some(verified.content()),
        }),
    ))
}

/// What a host checked before the decision: the key the signature verified under, and, when
/// the core verified it, the content bytes it verified.
#[derive(Clone, Copy)]
struct Checked<'a> {
    key: &'a PublicKey,
    content: Option<&'a [u8]>,
}

fn decide_command(
    state: Option<&GroupState>,
    cmd: &Command,
    now_ms: u64,
    limits: &Limits,
    checked: Option<Checked<'_>>,
) -> Result<Decision> {
    // 1. Decode and limits; org and group. Payload rules first: they name the field.
    if cmd.session == 0 {
        return Err(Error::malformed("`session` must be at least 1"));
    }
    cmd.body.check(limits)?;
    let encoded;
    let content = match checked.and_then(|c| c.content) {
        Some(content) => content,
        None => {
            encoded = cmd.content_bytes()?;
            &encoded[..]
        }
    };
    let verified_key = checked.map(|c| c.key);
    if content.len() > limits.max_command_bytes {
        return Err(Error::malformed(format!(
            "command is {} bytes; the limit is {} bytes",
            content.len(),
            limits.max_command_bytes
        ))
        .with("limit", limits.max_command_bytes));
    }
    let content_hash = Hash::of(content);
    let Some(state) = state else {
        return open_group(cmd, content, content_hash, now_ms, verified_key);
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
            Some(m) => m.verify(content, &cmd.sig),
            None => state.authority_key.verify(content, &cmd.sig),
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

/// An event for `aggregate`: the outcome of a rule that passed.
fn event(aggregate: String, kind: EventKind) -> Result<Outcome> {
    Ok(Outcome::Event(aggregate, kind))
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

    /// Checks 7 and 8: the rules of SPEC §5, by body (`members.rs`, `work.rs`, `effects.rs`,
    /// `approvals.rs`).
    fn decide(&self) -> Result<Outcome> {
        match &self.cmd.body {
            Body::OpenGroup(_) => Err(err(
                Code::AlreadyExists,
                format!("group {} is already open", self.state.group),
            )),
            Body::AddMember(b) => self.add_member(b),
            Body::RemoveMember(b) => self.remove_member(b),
            Body::ChangeRole(b) => self.change_role(b),
            Body::ReplaceSession(_) => self.replace_session(),
            Body::CreateWork(b) => self.create_work(b),
            Body::ClaimWork(b) => self.claim_work(b),
            Body::StartWork(b) => self.start_work(b),
            Body::RenewLease(b) => self.renew_lease(b),
            Body::Checkpoint(b) => self.checkpoint(b),
            Body::Block(b) => self.block(b),
            Body::ResolveBlock(b) => self.resolve_block(b),
            Body::Submit(b) => self.submit(b),
            Body::Fail(b) => self.fail(b),
            Body::Cancel(b) => self.cancel(b),
            Body::Reassign(b) => self.reassign(b),
            Body::IntendEffect(b) => self.intend_effect(b),
            Body::SettleEffect(b) => self.settle_effect(b),
            Body::ReconcileEffect(b) => self.reconcile_effect(b),
            Body::Charge(b) => self.charge(b),
            Body::RequestApproval(b) => self.request_approval(b),
            Body::DecideApproval(b) => self.decide_approval(b),
            Body::Expand(b) => self.expand(b),
            Body::Redact(b) => self.redact(b),
            Body::Archive(b) => self.archive(b),
            Body::Tick(_) => self.tick(),
        }
    }
}
