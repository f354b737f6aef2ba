//! Model test: random command sequences from several actors against a small reference model.
//!
//! The model below is written from SPEC §3–§5 alone, for a subset of commands (create, claim,
//! start, renew, checkpoint, submit, fail, cancel, tick, replace_session). It predicts each
//! command's outcome class (accepted, accepted as evidence, duplicate, or the rejection code)
//! and the resulting work items (state, revision, epoch, attempts, backoff, lease). Sequences
//! mix valid commands with stale, duplicated, conflicting, tampered and wrong-session ones,
//! and advance time.
//!
//! Beyond agreeing with the model, every run checks: seq is gapless from 1 and every `prev`
//! links; a duplicate returns the byte-identical receipt (canonical CBOR); a rejection leaves
//! the state hash unchanged; replaying the log (`MemoryGroup::rebuild`) gives the live hash.

use std::collections::BTreeMap;

use mwp_core::canonical;
use mwp_core::command::{
    Cancel, Checkpoint, ClaimWork, Contract, CreateWork, Fail, MemberSpec, OpenGroup, RenewLease,
    ReplaceSession, Risk, Role, StartWork, Submit, Tick,
};
use mwp_core::crypto::Hash;
use mwp_core::lease::LeaseId;
use mwp_core::memory::MemoryGroup;
use mwp_core::{Body, Code, Command, Decision, Id, SecretKey, WorkState};
use proptest::prelude::*;
use sha2::{Digest, Sha256};

const ACTORS: [&str; 4] = ["alice", "bob", "carol", "rita"];
const ROLES: [Role; 4] = [Role::Owner, Role::Worker, Role::Worker, Role::Reviewer];
const AUTHORITY: usize = 4;
const WORK: usize = 4;
const BUDGET: u64 = 10;
/// Times move in steps of this size, so commands often land exactly on a deadline.
const TICK_MS: u64 = 10;

fn id(s: &str) -> Id {
    Id::new(s).expect("test IDs are valid")
}

fn actor_name(a: usize) -> &'static str {
    if a == AUTHORITY {
        "@authority"
    } else {
        ACTORS[a]
    }
}

fn work_id(w: usize) -> Id {
    id(&format!("w{w}"))
}

/// The lease ID of SPEC §5, computed here without the core: the first 16 bytes of
/// `sha256(canonical CBOR [group, work, epoch])`.
fn lease_id(work: usize, epoch: u64) -> LeaseId {
    let mut cbor = vec![0x83, 0x62, b'g', b'1', 0x62, b'w', b'0' + work as u8];
    match epoch {
        0..=23 => cbor.push(epoch as u8),
        24..=255 => cbor.extend([0x18, epoch as u8]),
        _ => panic!("the model stays below 256 epochs"),
    }
    let digest = Sha256::digest(&cbor);
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest[..16]);
    LeaseId(id)
}

// ---------------------------------------------------------------------------------------------
// The reference model.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    Queued,
    Leased,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl St {
    fn core(self) -> WorkState {
        match self {
            St::Queued => WorkState::Queued,
            St::Leased => WorkState::Leased,
            St::Running => WorkState::Running,
            St::Succeeded => WorkState::Succeeded,
            St::Failed => WorkState::Failed,
            St::Cancelled => WorkState::Cancelled,
        }
    }
    fn terminal(self) -> bool {
        matches!(self, St::Succeeded | St::Failed | St::Cancelled)
    }
}

#[derive(Debug, Clone)]
struct MLease {
    epoch: u64,
    holder: usize,
    session: u64,
    start_by: u64,
    expires_at: u64,
}

#[derive(Debug, Clone)]
struct MPast {
    epoch: u64,
    holder: usize,
    expired: bool,
}

#[derive(Debug, Clone)]
struct MWork {
    state: St,
    after: Option<usize>,
    max_attempts: u32,
    base: u64,
    cap: u64,
    attempts: u32,
    not_before: u64,
    epoch: u64,
    lease: Option<MLease>,
    past: Vec<MPast>,
    revision: u64,
}

impl MWork {
    /// Ends the current lease; `expired` says whether by time.
    fn end_lease(&mut self, expired: bool, to: St) {
        if let Some(l) = self.lease.take() {
            self.past.push(MPast {
                epoch: l.epoch,
                holder: l.holder,
                expired,
            });
        }
        self.state = to;
        self.revision += 1;
    }
}

/// A command as the model sees it.
#[derive(Debug, Clone, PartialEq)]
enum MBody {
    Create {
        work: usize,
        after: Option<usize>,
        max_attempts: u32,
        base: u64,
    },
    Claim {
        work: usize,
        lease_ms: u64,
        start_within_ms: u64,
    },
    Start {
        work: usize,
        epoch: u64,
    },
    Renew {
        work: usize,
        epoch: u64,
        lease_ms: u64,
    },
    Checkpoint {
        work: usize,
        epoch: u64,
    },
    Submit {
        work: usize,
        epoch: u64,
    },
    Fail {
        work: usize,
        epoch: u64,
        retryable: bool,
    },
    Cancel {
        work: usize,
    },
    Tick,
    ReplaceSession,
}

#[derive(Debug, Clone)]
struct MCmd {
    actor: usize,
    action: String,
    session: u64,
    expect: Option<u64>,
    body: MBody,
    tampered: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Applied,
    Evidence,
    Duplicate,
    Rejected(Code),
}

#[derive(Debug, Clone)]
struct Model {
    now: u64,
    seq: u64,
    sessions: [u64; 4],
    work: BTreeMap<usize, MWork>,
    /// Content bytes of every accepted command, by (actor, action).
    receipts: BTreeMap<(usize, String), Vec<u8>>,
}

impl Model {
    fn new() -> Self {
        Model {
            now: 0,
            seq: 1,
            sessions: [1; 4],
            work: BTreeMap::new(),
            receipts: BTreeMap::new(),
        }
    }

    fn session_of(&self, actor: usize) -> u64 {
        if actor == AUTHORITY {
            1
        } else {
            self.sessions[actor]
        }
    }

    fn due(&self, w: &MWork) -> bool {
        w.lease.as_ref().is_some_and(|l| {
            l.expires_at <= self.now || (w.state == St::Leased && l.start_by <= self.now)
        })
    }

    /// Predicts the outcome of `cmd` (whose canonical content is `content`) and, if it is
    /// accepted, applies it.
    fn step(&mut self, cmd: &MCmd, content: &[u8]) -> Class {
        use Code::*;
        // 2. Signature.
        if cmd.tampered {
            return Class::Rejected(BadSignature);
        }
        // 3. Idempotency.
        if let Some(c) = self.receipts.get(&(cmd.actor, cmd.action.clone())) {
            return if c.as_slice() == content {
                Class::Duplicate
            } else {
                Class::Rejected(ActionIdCollision)
            };
        }
        // 4. Role and session.
        let role = ROLES.get(cmd.actor).copied();
        let allowed = match &cmd.body {
            MBody::Tick => cmd.actor == AUTHORITY,
            _ if cmd.actor == AUTHORITY => false,
            MBody::Create { .. } | MBody::Claim { .. } => {
                matches!(role, Some(Role::Owner | Role::Worker))
            }
            MBody::Cancel { .. } => matches!(role, Some(Role::Owner | Role::Reviewer)),
            _ => true,
        };
        if !allowed {
            return Class::Rejected(NotPermitted);
        }
        let current = self.session_of(cmd.actor);
        let session_ok = match cmd.body {
            MBody::ReplaceSession => cmd.session > current,
            _ => cmd.session == current,
        };
        if !session_ok {
            return Class::Rejected(WrongSession);
        }
        // 5. Revisions (only work commands carry `expect` here).
        let target = match &cmd.body {
            MBody::Create { work, .. }
            | MBody::Claim { work, .. }
            | MBody::Start { work, .. }
            | MBody::Renew { work, .. }
            | MBody::Checkpoint { work, .. }
            | MBody::Submit { work, .. }
            | MBody::Fail { work, .. }
            | MBody::Cancel { work } => Some(*work),
            MBody::Tick | MBody::ReplaceSession => None,
        };
        if let (Some(w), Some(expect)) = (target, cmd.expect) {
            let rev = self.work.get(&w).map_or(0, |w| w.revision);
            if expect != rev {
                return Class::Rejected(RevisionMismatch);
            }
        }
        if cmd.expect.is_none() && matches!(cmd.body, MBody::Claim { .. } | MBody::Renew { .. }) {
            return Class::Rejected(CasRequired);
        }
        // 6. Fencing.
        let lease_ref = match &cmd.body {
            MBody::Start { work, epoch }
            | MBody::Renew { work, epoch, .. }
            | MBody::Checkpoint { work, epoch }
            | MBody::Submit { work, epoch }
            | MBody::Fail { work, epoch, .. } => Some((*work, *epoch)),
            _ => None,
        };
        if let Some((work, epoch)) = lease_ref {
            let Some(w) = self.work.get(&work) else {
                return Class::Rejected(NotFound);
            };
            let late = matches!(cmd.body, MBody::Submit { .. } | MBody::Fail { .. });
            let verdict: Result<bool, Code> =
                match (&w.lease, w.past.iter().find(|p| p.epoch == epoch)) {
                    (Some(l), _) if l.epoch == epoch => {
                        if l.holder != cmd.actor || l.session != cmd.session {
                            Err(Fenced)
                        } else {
                            let missed = w.state == St::Leased && self.now >= l.start_by;
                            if self.now < l.expires_at && !missed {
                                Ok(false)
                            } else if late {
                                Ok(true)
                            } else {
                                Err(LeaseExpired)
                            }
                        }
                    }
                    (_, Some(p)) => {
                        if p.holder != cmd.actor {
                            Err(Fenced)
                        } else if late {
                            Ok(true)
                        } else if p.expired {
                            Err(LeaseExpired)
                        } else {
                            Err(Fenced)
                        }
                    }
                    _ => Err(Fenced),
                };
            match verdict {
                Err(code) => return Class::Rejected(code),
                Ok(true) => {
                    self.accept(cmd, content);
                    return Class::Evidence;
                }
                Ok(false) => {}
            }
        }
        // 7. Domain rules.
        let now = self.now;
        match cmd.body.clone() {
            MBody::Create {
                work,
                after,
                max_attempts,
                base,
            } => {
                if self.work.contains_key(&work) {
                    return Class::Rejected(AlreadyExists);
                }
                if after.is_some_and(|a| !self.work.contains_key(&a)) {
                    return Class::Rejected(NotFound);
                }
                self.work.insert(
                    work,
                    MWork {
                        state: St::Queued,
                        after,
                        max_attempts,
                        base,
                        cap: base * 3,
                        attempts: 0,
                        not_before: 0,
                        epoch: 0,
                        lease: None,
                        past: Vec::new(),
                        revision: 1,
                    },
                );
            }
            MBody::Claim {
                work,
                lease_ms,
                start_within_ms,
            } => {
                let dep_ok = |m: &Model, a: Option<usize>| {
                    a.is_none_or(|a| m.work.get(&a).is_some_and(|d| d.state == St::Succeeded))
                };
                let Some(w) = self.work.get(&work) else {
                    return Class::Rejected(NotFound);
                };
                if w.state == St::Failed && w.attempts >= w.max_attempts {
                    return Class::Rejected(AttemptsExhausted);
                }
                if w.state != St::Queued {
                    return Class::Rejected(InvalidState);
                }
                if !dep_ok(self, w.after) {
                    return Class::Rejected(DependenciesPending);
                }
                if now < w.not_before {
                    return Class::Rejected(NotYet);
                }
                let session = cmd.session;
                let w = self.work.get_mut(&work).expect("checked above");
                w.epoch += 1;
                w.lease = Some(MLease {
                    epoch: w.epoch,
                    holder: cmd.actor,
                    session,
                    start_by: now + start_within_ms,
                    expires_at: now + lease_ms,
                });
                w.state = St::Leased;
                w.revision += 1;
            }
            MBody::Start { work, .. } => {
                let w = self.work.get_mut(&work).expect("fenced above");
                if w.state != St::Leased {
                    return Class::Rejected(InvalidState);
                }
                w.state = St::Running;
                w.revision += 1;
            }
            MBody::Renew { work, lease_ms, .. } => {
                let w = self.work.get_mut(&work).expect("fenced above");
                if !matches!(w.state, St::Leased | St::Running) {
                    return Class::Rejected(InvalidState);
                }
                if let Some(l) = w.lease.as_mut() {
                    l.expires_at = now + lease_ms;
                }
                w.revision += 1;
            }
            MBody::Checkpoint { work, .. } | MBody::Submit { work, .. } => {
                let w = self.work.get_mut(&work).expect("fenced above");
                if w.state != St::Running {
                    return Class::Rejected(InvalidState);
                }
                let to = if matches!(cmd.body, MBody::Submit { .. }) {
                    St::Succeeded
                } else {
                    St::Queued
                };
                w.end_lease(false, to);
            }
            MBody::Fail {
                work, retryable, ..
            } => {
                let w = self.work.get_mut(&work).expect("fenced above");
                if w.state != St::Running {
                    return Class::Rejected(InvalidState);
                }
                w.attempts += 1;
                let backoff = (w.base << (w.attempts - 1)).min(w.cap);
                if retryable && w.attempts < w.max_attempts && BUDGET > 0 {
                    w.not_before = now + backoff;
                    w.end_lease(false, St::Queued);
                } else {
                    w.end_lease(false, St::Failed);
                }
            }
            MBody::Cancel { work } => {
                let Some(w) = self.work.get_mut(&work) else {
                    return Class::Rejected(NotFound);
                };
                if w.state.terminal() {
                    return Class::Rejected(InvalidState);
                }
                w.end_lease(false, St::Cancelled);
            }
            MBody::Tick => {
                let due: Vec<usize> = self
                    .work
                    .iter()
                    .filter(|(_, w)| self.due(w))
                    .map(|(k, _)| *k)
                    .collect();
                if due.is_empty() {
                    return Class::Rejected(NotYet);
                }
                for k in due {
                    let w = self.work.get_mut(&k).expect("listed");
                    w.end_lease(true, St::Queued);
                }
            }
            MBody::ReplaceSession => {
                let actor = cmd.actor;
                for w in self.work.values_mut() {
                    if w.lease
                        .as_ref()
                        .is_some_and(|l| l.holder == actor && l.session < cmd.session)
                    {
                        w.end_lease(false, St::Queued);
                    }
                }
                self.sessions[actor] = cmd.session;
            }
        }
        self.accept(cmd, content);
        Class::Applied
    }

    fn accept(&mut self, cmd: &MCmd, content: &[u8]) {
        self.seq += 1;
        self.receipts
            .insert((cmd.actor, cmd.action.clone()), content.to_vec());
    }
}

// ---------------------------------------------------------------------------------------------
// Generated operations.

/// Which lease a lease command names, resolved against the model when the command is made.
#[derive(Debug, Clone, Copy)]
enum LeasePick {
    Current,
    Previous,
    Next,
}

/// Which actor sends a lease command.
#[derive(Debug, Clone, Copy)]
enum ActorPick {
    Holder,
    Any(usize),
}

/// Which work item a command targets, resolved against the model when the command is made.
#[derive(Debug, Clone, Copy)]
enum WorkPick {
    /// The n-th item holding a lease (any item if none does).
    Busy(usize),
    /// The n-th item that is queued (any item if none is).
    Ready(usize),
    /// Any item ID, existing or not.
    Any(usize),
}

/// What `expect` a command carries.
#[derive(Debug, Clone, Copy)]
enum ExpectPick {
    Current,
    Absent,
    Off(u64),
}

/// A twist applied to a fresh command.
#[derive(Debug, Clone, Copy)]
enum Twist {
    None,
    Tamper,
    SessionAhead,
    SessionBehind,
}

#[derive(Debug, Clone)]
enum Op {
    Create {
        actor: usize,
        work: usize,
        after: Option<usize>,
        max_attempts: u32,
        base: u64,
    },
    Claim {
        actor: usize,
        work: WorkPick,
        lease_ms: u64,
        start_within_ms: u64,
        expect: ExpectPick,
    },
    Lease {
        /// 0–4: start, renew, checkpoint, submit, fail; anything else: the natural next step.
        kind: u8,
        actor: ActorPick,
        work: WorkPick,
        lease: LeasePick,
        lease_ms: u64,
        retryable: bool,
        expect: ExpectPick,
    },
    Cancel {
        actor: usize,
        work: usize,
    },
    Tick,
    ReplaceSession {
        actor: usize,
        ahead: u64,
    },
    Advance(u64),
    /// Re-send an earlier command, byte for byte.
    Resend(usize),
    /// Reuse an earlier command's actor and action ID for new content.
    Conflict(usize),
}

fn expect_pick() -> impl Strategy<Value = ExpectPick> {
    prop_oneof![
        8 => Just(ExpectPick::Current),
        1 => Just(ExpectPick::Absent),
        1 => (1u64..3).prop_map(ExpectPick::Off),
    ]
}

fn work_pick() -> impl Strategy<Value = WorkPick> {
    prop_oneof![
        6 => (0usize..WORK).prop_map(WorkPick::Busy),
        3 => (0usize..WORK).prop_map(WorkPick::Ready),
        1 => (0usize..WORK).prop_map(WorkPick::Any),
    ]
}

fn create() -> impl Strategy<Value = Op> {
    (
        0usize..4,
        0usize..WORK,
        prop::option::of(0usize..WORK),
        1u32..4,
        1u64..6,
    )
        .prop_map(|(actor, work, after, max_attempts, base)| Op::Create {
            actor,
            work,
            after: after.filter(|a| *a != work),
            max_attempts,
            base: base * TICK_MS,
        })
}

/// Up to 100 operations, the first few creating work so that the rest has something to do.
fn ops() -> impl Strategy<Value = Vec<(Op, Twist)>> {
    (
        prop::collection::vec(create(), 1..=4),
        prop::collection::vec(op(), 0..=96),
    )
        .prop_map(|(creates, rest)| {
            let mut all: Vec<(Op, Twist)> = creates.into_iter().map(|c| (c, Twist::None)).collect();
            all.extend(rest);
            all
        })
}

fn op() -> impl Strategy<Value = (Op, Twist)> {
    let actor = 0usize..4;
    let work = 0usize..WORK;
    let claimer = prop_oneof![9 => 1usize..3, 1 => 0usize..4];
    let claim = (claimer, work_pick(), 1u64..30, 1u64..20, expect_pick()).prop_map(
        |(actor, work, lease_ms, start_within_ms, expect)| Op::Claim {
            actor,
            work,
            lease_ms: lease_ms * TICK_MS,
            start_within_ms: start_within_ms * TICK_MS,
            expect,
        },
    );
    let lease_pick = prop_oneof![
        8 => Just(LeasePick::Current),
        1 => Just(LeasePick::Previous),
        1 => Just(LeasePick::Next),
    ];
    let actor_pick = prop_oneof![
        8 => Just(ActorPick::Holder),
        2 => (0usize..4).prop_map(ActorPick::Any),
    ];
    let lease_cmd = (
        0u8..10,
        actor_pick,
        work_pick(),
        lease_pick,
        (1u64..30).prop_map(|n| n * TICK_MS),
        any::<bool>(),
        expect_pick(),
    )
        .prop_map(
            |(kind, actor, work, lease, lease_ms, retryable, expect)| Op::Lease {
                kind,
                actor,
                work,
                lease,
                lease_ms,
                retryable,
                expect,
            },
        );
    let twist = prop_oneof![
        37 => Just(Twist::None),
        1 => Just(Twist::Tamper),
        1 => Just(Twist::SessionAhead),
        1 => Just(Twist::SessionBehind),
    ];
    let op = prop_oneof![
        2 => create(),
        4 => claim,
        12 => lease_cmd,
        1 => (actor.clone(), work).prop_map(|(actor, work)| Op::Cancel { actor, work }),
        2 => Just(Op::Tick),
        1 => (actor, 0u64..3).prop_map(|(actor, ahead)| Op::ReplaceSession { actor, ahead }),
        3 => (0u64..15).prop_map(|n| Op::Advance(n * TICK_MS)),
        2 => any::<usize>().prop_map(Op::Resend),
        1 => any::<usize>().prop_map(Op::Conflict),
    ];
    (op, twist)
}

// ---------------------------------------------------------------------------------------------
// The harness.

struct Harness {
    group: MemoryGroup,
    model: Model,
    keys: Vec<SecretKey>,
    /// Every command made so far, with its model form.
    sent: Vec<(MCmd, Command)>,
    /// Canonical receipt bytes by (actor, action), as first returned.
    receipts: BTreeMap<(String, String), Vec<u8>>,
    next_action: u64,
}

fn contract(max_attempts: u32, base: u64) -> Contract {
    Contract {
        max_attempts,
        backoff_base_ms: base,
        backoff_max_ms: base * 3,
        cost_budget: BUDGET,
        deadline_at: None,
        risk: Risk::Low,
    }
}

fn core_body(b: &MBody, action: &str) -> Body {
    match b {
        MBody::Create {
            work,
            after,
            max_attempts,
            base,
        } => Body::CreateWork(CreateWork {
            work: work_id(*work),
            contract: contract(*max_attempts, *base),
            after: after.iter().map(|a| work_id(*a)).collect(),
            spec: serde_json::json!({"made_by": action}).into(),
        }),
        MBody::Claim {
            work,
            lease_ms,
            start_within_ms,
        } => Body::ClaimWork(ClaimWork {
            work: work_id(*work),
            lease_ms: *lease_ms,
            start_within_ms: *start_within_ms,
        }),
        MBody::Start { work, epoch } => Body::StartWork(StartWork {
            work: work_id(*work),
            lease: lease_id(*work, *epoch),
        }),
        MBody::Renew {
            work,
            epoch,
            lease_ms,
        } => Body::RenewLease(RenewLease {
            work: work_id(*work),
            lease: lease_id(*work, *epoch),
            lease_ms: *lease_ms,
        }),
        MBody::Checkpoint { work, epoch } => Body::Checkpoint(Checkpoint {
            work: work_id(*work),
            lease: lease_id(*work, *epoch),
            data: serde_json::json!({"at": action}).into(),
        }),
        MBody::Submit { work, epoch } => Body::Submit(Submit {
            work: work_id(*work),
            lease: lease_id(*work, *epoch),
            result: serde_json::json!({"ok": true}).into(),
        }),
        MBody::Fail {
            work,
            epoch,
            retryable,
        } => Body::Fail(Fail {
            work: work_id(*work),
            lease: lease_id(*work, *epoch),
            error: serde_json::json!("boom").into(),
            retryable: *retryable,
        }),
        MBody::Cancel { work } => Body::Cancel(Cancel {
            work: work_id(*work),
            reason: serde_json::Value::Null.into(),
        }),
        MBody::Tick => Body::Tick(Tick {}),
        MBody::ReplaceSession => Body::ReplaceSession(ReplaceSession {}),
    }
}

impl Harness {
    fn new() -> Self {
        let keys: Vec<SecretKey> = (0..=AUTHORITY)
            .map(|a| SecretKey::for_transcript(actor_name(a)))
            .collect();
        let members = (0..4)
            .map(|a| MemberSpec {
                actor: id(ACTORS[a]),
                role: ROLES[a],
                key: keys[a].public(),
            })
            .collect();
        let open = Command::signed(
            id("acme"),
            id("g1"),
            id("alice"),
            id("open"),
            1,
            None,
            Body::OpenGroup(OpenGroup {
                mission: id("m1"),
                title: serde_json::json!("model").into(),
                members,
                authority_key: keys[AUTHORITY].public(),
            }),
            &keys[0],
        )
        .expect("signs");
        let mut group = MemoryGroup::default();
        let d = group.submit(&open, 0).expect("genesis");
        assert!(matches!(d, Decision::Accepted(_)));
        Harness {
            group,
            model: Model::new(),
            keys,
            sent: Vec::new(),
            receipts: BTreeMap::new(),
            next_action: 0,
        }
    }

    fn fresh_action(&mut self) -> String {
        self.next_action += 1;
        format!("a{}", self.next_action)
    }

    fn make(&self, m: &MCmd) -> Command {
        let mut cmd = Command::signed(
            id("acme"),
            id("g1"),
            id(actor_name(m.actor)),
            id(&m.action),
            m.session,
            m.expect,
            core_body(&m.body, &m.action),
            &self.keys[m.actor],
        )
        .expect("signs");
        if m.tampered {
            cmd.sig.0[7] ^= 0x20;
        }
        cmd
    }

    fn pick_work(&self, pick: WorkPick) -> usize {
        let matching = |f: &dyn Fn(&MWork) -> bool, n: usize| {
            let ids: Vec<usize> = self
                .model
                .work
                .iter()
                .filter(|(_, w)| f(w))
                .map(|(k, _)| *k)
                .collect();
            if ids.is_empty() {
                n % WORK
            } else {
                ids[n % ids.len()]
            }
        };
        match pick {
            WorkPick::Busy(n) => matching(&|w| w.lease.is_some(), n),
            WorkPick::Ready(n) => matching(&|w| w.state == St::Queued, n),
            WorkPick::Any(n) => n % WORK,
        }
    }

    fn expect_for(&self, work: usize, pick: ExpectPick) -> Option<u64> {
        let rev = self.model.work.get(&work).map_or(0, |w| w.revision);
        match pick {
            ExpectPick::Current => Some(rev),
            ExpectPick::Absent => None,
            ExpectPick::Off(d) => Some(rev + d),
        }
    }

    /// Turns a generated op into a model command (or `None` for time and nothing to resend).
    fn build(&mut self, op: &Op, twist: Twist) -> Option<(MCmd, Option<Command>)> {
        let (actor, body, expect) = match op {
            Op::Advance(ms) => {
                self.model.now += ms;
                return None;
            }
            Op::Resend(i) => {
                if self.sent.is_empty() {
                    return None;
                }
                let (m, c) = self.sent[i % self.sent.len()].clone();
                return Some((m, Some(c)));
            }
            Op::Conflict(i) => {
                if self.sent.is_empty() {
                    return None;
                }
                let (mut m, _) = self.sent[i % self.sent.len()].clone();
                // Same actor and action, other content.
                m.body = match m.body {
                    MBody::Claim {
                        work,
                        lease_ms,
                        start_within_ms,
                    } => MBody::Claim {
                        work,
                        lease_ms: lease_ms + 1,
                        start_within_ms,
                    },
                    _ => MBody::Cancel { work: 0 },
                };
                if m.actor == AUTHORITY {
                    m.body = MBody::Tick;
                    m.session += 1;
                }
                m.tampered = false;
                let c = self.make(&m);
                return Some((m, Some(c)));
            }
            Op::Create {
                actor,
                work,
                after,
                max_attempts,
                base,
            } => (
                *actor,
                MBody::Create {
                    work: *work,
                    after: *after,
                    max_attempts: *max_attempts,
                    base: *base,
                },
                None,
            ),
            Op::Claim {
                actor,
                work,
                lease_ms,
                start_within_ms,
                expect,
            } => {
                let work = self.pick_work(*work);
                (
                    *actor,
                    MBody::Claim {
                        work,
                        lease_ms: *lease_ms,
                        start_within_ms: *start_within_ms,
                    },
                    self.expect_for(work, *expect),
                )
            }
            Op::Lease {
                kind,
                actor,
                work,
                lease,
                lease_ms,
                retryable,
                expect,
            } => {
                let work = &self.pick_work(*work);
                let w = self.model.work.get(work);
                let current = w.map_or(1, |w| w.epoch.max(1));
                let epoch = match lease {
                    LeasePick::Current => current,
                    LeasePick::Previous => current.saturating_sub(1).max(1),
                    LeasePick::Next => current + 1,
                };
                let holder = w
                    .and_then(|w| w.lease.as_ref().map(|l| l.holder))
                    .or_else(|| w.and_then(|w| w.past.last().map(|p| p.holder)));
                let actor = match actor {
                    ActorPick::Holder => holder.unwrap_or(1),
                    ActorPick::Any(a) => *a,
                };
                let (work, lease_ms, retryable) = (*work, *lease_ms, *retryable);
                let kind = match (kind, w.map(|w| w.state)) {
                    (0..=4, _) => *kind,
                    (_, Some(St::Leased)) => 0,
                    (5, Some(St::Running)) => 1,
                    (6, Some(St::Running)) => 2,
                    (7 | 8, Some(St::Running)) => 3,
                    _ => 4,
                };
                let (body, expect) = match kind {
                    0 => (MBody::Start { work, epoch }, None),
                    1 => (
                        MBody::Renew {
                            work,
                            epoch,
                            lease_ms,
                        },
                        self.expect_for(work, *expect),
                    ),
                    2 => (MBody::Checkpoint { work, epoch }, None),
                    3 => (MBody::Submit { work, epoch }, None),
                    _ => (
                        MBody::Fail {
                            work,
                            epoch,
                            retryable,
                        },
                        None,
                    ),
                };
                (actor, body, expect)
            }
            Op::Cancel { actor, work } => (*actor, MBody::Cancel { work: *work }, None),
            Op::Tick => (AUTHORITY, MBody::Tick, None),
            Op::ReplaceSession { actor, ahead } => {
                let s = self.model.session_of(*actor) + ahead;
                let m = MCmd {
                    actor: *actor,
                    action: self.fresh_action(),
                    session: s,
                    expect: None,
                    body: MBody::ReplaceSession,
                    tampered: matches!(twist, Twist::Tamper),
                };
                return Some((m, None));
            }
        };
        let mut session = self.model.session_of(actor);
        match twist {
            Twist::SessionAhead => session += 1,
            Twist::SessionBehind if session > 1 => session -= 1,
            _ => {}
        }
        let m = MCmd {
            actor,
            action: self.fresh_action(),
            session,
            expect,
            body,
            tampered: matches!(twist, Twist::Tamper),
        };
        Some((m, None))
    }

    /// Runs one op; returns the command's body and outcome class, or a description of the
    /// first disagreement.
    fn run(&mut self, op: &Op, twist: Twist) -> Result<Option<(MBody, Class)>, String> {
        let Some((m, prebuilt)) = self.build(op, twist) else {
            return Ok(None);
        };
        let cmd = match prebuilt {
            Some(c) => c,
            None => self.make(&m),
        };
        let content = cmd.content_bytes().map_err(|e| e.to_string())?;
        let before = self.group.state().expect("open").clone();
        let predicted = self.model.step(&m, &content);
        // Rejections are values; an `Err` is not a decision at all.
        let decided = self
            .group
            .submit(&cmd, self.model.now)
            .map_err(|e| format!("{m:?}: not a decision: {e}"))?;
        let after = self.group.state().expect("open");
        let got = match &decided {
            Decision::Accepted(e) if e.receipt().disposition == mwp_core::Disposition::Evidence => {
                Class::Evidence
            }
            Decision::Accepted(_) => Class::Applied,
            Decision::Duplicate(_) => Class::Duplicate,
            Decision::Rejected(r) => Class::Rejected(r.code),
        };
        if got != predicted {
            return Err(format!(
                "{m:?} at {}: model says {predicted:?}, core says {decided:?}",
                self.model.now
            ));
        }
        let key = (actor_name(m.actor).to_owned(), m.action.clone());
        match &decided {
            Decision::Accepted(event) => {
                if event.seq != before.seq + 1 || event.prev != before.head {
                    return Err(format!(
                        "event seq {} does not follow {}",
                        event.seq, before.seq
                    ));
                }
                let bytes = canonical::to_vec(&event.receipt()).map_err(|e| e.to_string())?;
                self.receipts.insert(key, bytes);
                self.sent.push((m.clone(), cmd.clone()));
            }
            Decision::Duplicate(r) => {
                let bytes = canonical::to_vec(r).map_err(|e| e.to_string())?;
                if self.receipts.get(&key) != Some(&bytes) {
                    return Err(format!("duplicate of {key:?} is not byte-identical"));
                }
            }
            Decision::Rejected(_) => {
                let hash_before = before.hash().map_err(|e| e.to_string())?;
                let hash_after = after.hash().map_err(|e| e.to_string())?;
                if hash_after != hash_before
                    || *after != before
                    || self.group.log().len() as u64 != before.seq
                {
                    return Err(format!("rejected {m:?} changed the state"));
                }
                if !matches!(op, Op::Resend(_)) {
                    self.sent.push((m.clone(), cmd.clone()));
                }
            }
        }
        self.compare()?;
        Ok(Some((m.body, got)))
    }

    /// Compares the model's work items with the core's.
    fn compare(&self) -> Result<(), String> {
        let s = self.group.state().expect("open");
        if s.seq != self.model.seq {
            return Err(format!("seq: core {}, model {}", s.seq, self.model.seq));
        }
        if s.work.len() != self.model.work.len() {
            return Err(format!(
                "{} items in core, {} in model",
                s.work.len(),
                self.model.work.len()
            ));
        }
        for (k, mw) in &self.model.work {
            let Some(w) = s.work.get(&work_id(*k)) else {
                return Err(format!("w{k} missing in core"));
            };
            let core = (
                w.state,
                w.revision,
                w.epoch,
                w.attempts,
                w.not_before,
                w.lease
                    .as_ref()
                    .map(|l| (l.holder.to_string(), l.session, l.start_by, l.expires_at)),
            );
            let model = (
                mw.state.core(),
                mw.revision,
                mw.epoch,
                mw.attempts,
                mw.not_before,
                mw.lease.as_ref().map(|l| {
                    (
                        ACTORS[l.holder].to_owned(),
                        l.session,
                        l.start_by,
                        l.expires_at,
                    )
                }),
            );
            if core != model {
                return Err(format!("w{k}: core {core:?}, model {model:?}"));
            }
            if let Some(l) = &w.lease {
                if l.id != lease_id(*k, l.epoch) {
                    return Err(format!(
                        "w{k}: lease id is not sha256([group, work, epoch])"
                    ));
                }
            }
        }
        // The next deadline, which the core reads from an index that apply keeps.
        let model_deadline = self
            .model
            .work
            .values()
            .filter_map(|w| {
                let l = w.lease.as_ref()?;
                Some(match w.state.core() {
                    WorkState::Leased => l.start_by.min(l.expires_at),
                    _ => l.expires_at,
                })
            })
            .min();
        if s.next_deadline() != model_deadline {
            return Err(format!(
                "next deadline: core {:?}, model {model_deadline:?}",
                s.next_deadline()
            ));
        }
        Ok(())
    }

    /// The log alone rebuilds the live state, and its chain is intact.
    fn check_log(&self) -> Result<(), String> {
        let live = self
            .group
            .state()
            .expect("open")
            .hash()
            .map_err(|e| e.to_string())?;
        let mut replayed = self.group.clone();
        replayed.rebuild().map_err(|e| e.to_string())?;
        let again = replayed
            .state()
            .expect("open")
            .hash()
            .map_err(|e| e.to_string())?;
        if live != again {
            return Err("replayed state hash differs from the live one".into());
        }
        let mut prev = Hash::ZERO;
        for (i, bytes) in self.group.log().iter().enumerate() {
            let e = mwp_core::Event::from_cbor(bytes).map_err(|e| e.to_string())?;
            if e.seq != i as u64 + 1 || e.prev != prev {
                return Err(format!("log record {i} has seq {} prev {}", e.seq, e.prev));
            }
            prev = e.id;
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, max_shrink_iters: 2000, ..ProptestConfig::default() })]

    #[test]
    fn core_agrees_with_the_model(ops in ops()) {
        let mut h = Harness::new();
        for (op, twist) in &ops {
            if let Err(e) = h.run(op, *twist) {
                prop_assert!(false, "{}", e);
            }
        }
        if let Err(e) = h.check_log() {
            prop_assert!(false, "{}", e);
        }
    }
}

/// The model and the generator reach the interesting outcomes: a model test whose commands
/// were all rejected early would prove little.
#[test]
fn generated_sequences_reach_every_outcome() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    // A fixed seed: what this test checks is the generator's reach, so it must not depend on
    // the luck of one run (exhausting attempts needs several failed claims in one sequence).
    let mut runner = TestRunner::deterministic();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..300 {
        let ops = ops().new_tree(&mut runner).expect("generates").current();
        let mut h = Harness::new();
        for (op, twist) in &ops {
            let Some((body, class)) = h.run(op, *twist).expect("core agrees with the model") else {
                continue;
            };
            *seen.entry(format!("{class:?}")).or_default() += 1;
            if class == Class::Applied {
                let name = format!("{body:?}");
                let name = name.split([' ', '{']).next().unwrap_or("").to_owned();
                *seen.entry(format!("applied {name}")).or_default() += 1;
            }
        }
    }
    let want = [
        "Applied",
        "Evidence",
        "Duplicate",
        "Rejected(BadSignature)",
        "Rejected(ActionIdCollision)",
        "Rejected(WrongSession)",
        "Rejected(RevisionMismatch)",
        "Rejected(CasRequired)",
        "Rejected(Fenced)",
        "Rejected(LeaseExpired)",
        "Rejected(InvalidState)",
        "Rejected(NotYet)",
        "Rejected(NotPermitted)",
        "Rejected(DependenciesPending)",
        "Rejected(AttemptsExhausted)",
        "applied Create",
        "applied Claim",
        "applied Start",
        "applied Renew",
        "applied Checkpoint",
        "applied Submit",
        "applied Fail",
        "applied Cancel",
        "applied Tick",
        "applied ReplaceSession",
    ];
    let missing: Vec<_> = want.iter().filter(|w| !seen.contains_key(**w)).collect();
    assert!(
        missing.is_empty(),
        "never reached: {missing:?}; seen {seen:?}"
    );
}
