//! A deterministic simulation of one authority and several agents (in the manner of quinn's
//! `Pair` and str0m's `progress`): a virtual clock, a delivery channel that drops, repeats,
//! delays and reorders messages in both directions, agent crashes and restarts at arbitrary
//! points (also between handing out a write set and committing it), authority outages and
//! per-agent partitions, lease expiries (the harness plays the host and submits `tick` signed
//! by `@authority` when the core's next deadline passes), effects whose dispatch or outcome
//! is lost, and a replay window that forces late agents through `CURSOR_TOO_OLD` and a
//! snapshot restore.
//!
//! Every run is a function of its seed. [`run`] drives a mission with dependencies to
//! completion (every work item terminal), then heals every fault and lets the agents
//! converge; after every step it checks the invariants listed on [`Violation`]. The trace
//! hash covers every message, decision and output, so running a seed twice must give the same
//! hash.

use std::collections::{BTreeMap, BTreeSet};

use mwp_core::agent::{Agent, AgentImage, Config, Dispatch, JournalStatus, Notice, Transmit};
use mwp_core::command::EffectMode;
use mwp_core::crypto::Hash;
use mwp_core::memory::MemoryAuthority;
use mwp_core::snapshot::{Snapshot, SnapshotRef};
use mwp_core::work::EffectStatus;
use mwp_core::{
    Body, Command, Decision, Error, Event, EventKind, GroupState, Id, Receipt, SecretKey, WorkState,
};
use serde_json::json;

use crate::fixtures::{id, Rng};

/// An invariant the simulation found broken, with the seed and time.
#[derive(Debug, Clone)]
pub struct Violation {
    /// Seed.
    pub seed: u64,
    /// Virtual time.
    pub at: u64,
    /// What broke.
    pub what: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "seed {} at {} ms: {}", self.seed, self.at, self.what)
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Hash of the whole trace.
    pub trace: Hash,
    /// Virtual time at which the mission completed.
    pub completed_at: u64,
    /// Events in the log.
    pub events: u64,
    /// Steps taken.
    pub steps: u64,
    /// Counters of what happened (crashes, outages, restores, …).
    pub stats: BTreeMap<&'static str, u64>,
}

/// One planned effect of a work item.
#[derive(Debug, Clone)]
struct Op {
    op: Id,
    mode: EffectMode,
    irreversible: bool,
}

/// What the application does with a work item.
#[derive(Debug, Clone)]
struct Plan {
    ops: Vec<Op>,
    /// Fail (retryable) while fewer attempts than this were used.
    fail_first: u32,
    charge: u64,
}

/// The application's volatile job for one running work item.
#[derive(Debug, Clone)]
struct Job {
    next_at: u64,
    paused: bool,
    charged: bool,
}

struct Slot {
    name: Id,
    key: SecretKey,
    config: Config,
    agent: Option<Agent>,
    image: AgentImage,
    partitioned: bool,
    /// Link state last told to the agent.
    told_up: Option<bool>,
    jobs: BTreeMap<Id, Job>,
    restart_at: Option<u64>,
    start_at: u64,
    checked: (u64, Hash),
}

enum Reply {
    Event(Box<Event>),
    Answer(Id, Box<Result<Receipt, Error>>),
    Lookup(Id, Option<Box<Receipt>>),
    FetchError(Box<Error>),
    Snapshot(Vec<u8>),
    Outcome(Hash),
}

enum Msg {
    ToAuth(usize, Box<Transmit>),
    ToAgent(usize, Reply),
}

#[derive(Debug, Clone)]
enum Action {
    Crash(usize),
    Outage(bool),
    Partition(usize, bool),
    Resolve(usize, Hash),
    Reconcile(Id, Hash),
    Snapshot,
    /// The planner's rule answers for a trigger (and the planner may crash around it).
    Dispose(usize, u64),
}

/// Fault rates for one seed (per mille).
#[derive(Debug, Clone)]
struct Faults {
    drop: u64,
    dup: u64,
    max_delay: u64,
    crash_mid_commit: u64,
    dispatch_lost: u64,
    outcome_lost: u64,
    replace_session_on_restart: u64,
}

struct World {
    seed: u64,
    rng: Rng,
    now: u64,
    auth: MemoryAuthority,
    org: Id,
    group: Id,
    auth_up: bool,
    hashes: Vec<Hash>,
    ids: Vec<Hash>,
    net: BTreeMap<(u64, u64), Msg>,
    schedule: BTreeMap<(u64, u64), Action>,
    n: u64,
    slots: Vec<Slot>,
    plans: BTreeMap<Id, Plan>,
    faults: Faults,
    healed: bool,
    /// Executions of each effect key at the target.
    executed: BTreeMap<Hash, u32>,
    /// Executions of each undeclared (work, op).
    undeclared_runs: BTreeMap<(Id, Id), u32>,
    /// Undeclared keys resolved as not happened since their last dispatch.
    cleared: BTreeSet<Hash>,
    dispatched: BTreeSet<Hash>,
    reconciling: BTreeSet<Hash>,
    snapshot: Option<(SnapshotRef, Vec<u8>)>,
    trace: Vec<u8>,
    stats: BTreeMap<&'static str, u64>,
    operator_n: u64,
    /// The planner's slot.
    planner: usize,
    /// Triggers the planner knew undisposed when it last restarted: none of the claims or
    /// starts it makes after that restart may be decided while one of them lacks a
    /// disposition in the log.
    restart_pending: BTreeSet<u64>,
    /// Actions the planner made before its last restart (sent, or in its outbox then): their
    /// copies may still be in flight or resent, and they were decided before the restart.
    planner_earlier: BTreeSet<Id>,
    /// Actions the planner sent since its last restart.
    planner_sent: BTreeSet<Id>,
}

type Check = Result<(), Violation>;

impl World {
    fn fail(&self, what: impl Into<String>) -> Violation {
        Violation {
            seed: self.seed,
            at: self.now,
            what: what.into(),
        }
    }

    fn log(&mut self, line: impl AsRef<str>) {
        self.trace
            .extend_from_slice(self.now.to_string().as_bytes());
        self.trace.push(b' ');
        self.trace.extend_from_slice(line.as_ref().as_bytes());
        self.trace.push(b'\n');
    }

    fn count(&mut self, what: &'static str) {
        *self.stats.entry(what).or_default() += 1;
    }

    fn state(&self) -> &GroupState {
        self.auth
            .group(&self.group)
            .and_then(|g| g.state())
            .expect("the group is open")
    }

    fn link_up(&self, i: usize) -> bool {
        self.auth_up && !self.slots[i].partitioned
    }

    fn send(&mut self, msg: Msg) {
        let (drop, dup, delay) = if self.healed {
            (0, 0, 5)
        } else {
            (self.faults.drop, self.faults.dup, self.faults.max_delay)
        };
        if self.rng.chance(drop) {
            self.count("dropped");
            return;
        }
        let copies = if self.rng.chance(dup) { 2 } else { 1 };
        for c in 0..copies {
            let at = self.now + self.rng.range(1, delay.max(1));
            self.n += 1;
            let m = if c == 0 {
                Some(msg_clone(&msg))
            } else {
                self.count("repeated");
                Some(msg_clone(&msg))
            };
            if let Some(m) = m {
                self.net.insert((at, self.n), m);
            }
        }
    }

    fn at(&mut self, t: u64, a: Action) {
        self.n += 1;
        self.schedule.insert((t, self.n), a);
    }

    /// Submits a command to the authority and checks the fencing invariant.
    fn decide(&mut self, cmd: &Command) -> Result<Result<Decision, Error>, Violation> {
        // What the fencing invariant needs from the state before the decision.
        let pre = self
            .auth
            .group(&self.group)
            .and_then(|g| g.state())
            .map(|s| {
                let session = s.members.get(&cmd.actor).map(|m| m.session);
                let lease = cmd
                    .body
                    .work()
                    .and_then(|w| s.work.get(w))
                    .and_then(|w| w.lease.clone());
                (session, lease)
            });
        // The simulation sees a rejection as the error the agent is answered with.
        let d = self
            .auth
            .submit(cmd, self.now)
            .and_then(Decision::into_result);
        self.log(format!(
            "auth {} {} {} -> {}",
            cmd.actor,
            cmd.action,
            cmd.body.type_name(),
            match &d {
                Ok(Decision::Accepted(e)) => format!("accepted {}", e.seq),
                Ok(Decision::Duplicate(r)) => format!("duplicate {}", r.seq),
                Ok(Decision::Rejected(r)) => r.code.to_string(),
                Err(e) => e.code.to_string(),
            }
        ));
        if let (Ok(Decision::Accepted(e)), Some((session, lease_before))) = (&d, &pre) {
            // No command is accepted under a stale session or lease, except as evidence.
            let evidence = matches!(e.kind, EventKind::EvidenceRecorded(_));
            if !cmd.actor.is_authority()
                && !matches!(cmd.body, Body::ReplaceSession(_))
                && *session != Some(cmd.session)
            {
                return Err(self.fail(format!(
                    "{} accepted under session {} (current {session:?})",
                    cmd.action, cmd.session
                )));
            }
            if let (Some(_), Some(lease)) = (cmd.body.work(), cmd.body.lease()) {
                let fresh = lease_before.as_ref().is_some_and(|l| {
                    &l.id == lease
                        && l.holder == cmd.actor
                        && l.session == cmd.session
                        && self.now < l.expires_at
                });
                if !fresh && !evidence {
                    return Err(self.fail(format!(
                        "{} {} accepted under a stale lease {lease}",
                        cmd.action,
                        cmd.body.type_name()
                    )));
                }
            }
        }
        if self
            .slots
            .get(self.planner)
            .is_some_and(|p| p.name == cmd.actor)
            && matches!(cmd.body, Body::ClaimWork(_) | Body::StartWork(_))
            && !self.planner_earlier.contains(&cmd.action)
        {
            let s = self.state();
            if let Some(t) = self
                .restart_pending
                .iter()
                .find(|t| !s.expansions.contains_key(t))
            {
                return Err(self.fail(format!(
                    "the planner sent {} {} before the disposition of trigger {t}, pending at its restart",
                    cmd.action,
                    cmd.body.type_name()
                )));
            }
        }
        if let Ok(Decision::Accepted(e)) = &d {
            if let EventKind::WorkExpanded(x) = &e.kind {
                // No expansion without a durable trigger, and never two for one.
                let s = self.state();
                if !s.terminal.contains_key(&x.trigger) || x.trigger >= e.seq {
                    return Err(self.fail(format!(
                        "expansion at seq {} names trigger {}, not an earlier terminal event",
                        e.seq, x.trigger
                    )));
                }
                for nw in &x.work {
                    self.plans.insert(
                        nw.work.clone(),
                        Plan {
                            ops: Vec::new(),
                            fail_first: 0,
                            charge: 0,
                        },
                    );
                }
            }
            self.after_append()?;
        }
        Ok(d)
    }

    /// Records the new events' hashes and pushes them to every connected agent.
    fn after_append(&mut self) -> Check {
        let events = self
            .auth
            .events(&self.group, self.ids.len() as u64 - 1, usize::MAX)
            .map_err(|e| self.fail(format!("log unreadable: {e}")))?;
        if events.len() > 1 {
            return Err(self.fail("one decision appended more than one event"));
        }
        for e in events {
            self.ids.push(e.id);
            if e.seq as usize + 1 != self.ids.len() {
                return Err(self.fail("authority log has a gap"));
            }
            for i in 0..self.slots.len() {
                if self.link_up(i) && self.slots[i].agent.is_some() {
                    self.send(Msg::ToAgent(i, Reply::Event(Box::new(e.clone()))));
                }
            }
        }
        if self.hashes.len() < self.ids.len() {
            let h = self.state().hash().map_err(|e| self.fail(e.to_string()))?;
            self.hashes.push(h);
        }
        // The authority's next deadline comes from an index that apply keeps: it must be
        // what reading every work item gives.
        let state = self.state();
        let scanned = state
            .work
            .iter()
            .filter_map(|(_, w)| {
                let l = w.lease.as_ref()?;
                Some(match w.state {
                    WorkState::Leased => l.start_by.min(l.expires_at),
                    _ => l.expires_at,
                })
            })
            .min();
        if state.next_deadline() != scanned {
            return Err(self.fail(format!(
                "next deadline {:?}, but the work items say {scanned:?}",
                state.next_deadline()
            )));
        }
        Ok(())
    }

    // ----- agents -----

    fn spawn(&mut self, i: usize) -> Check {
        let slot = &mut self.slots[i];
        let mut agent = Agent::restore(slot.config.clone(), slot.key.clone(), &slot.image)
            .map_err(|e| Violation {
                seed: self.seed,
                at: self.now,
                what: format!("{} does not reopen from its image: {e}", slot.name),
            })?;
        // Reopening is replay: the projection equals the authority's state at its cursor.
        let cursor = agent.replica().cursor();
        let hash = agent
            .replica()
            .state_hash()
            .map_err(|e| self.fail(e.to_string()))?;
        if Some(&hash) != self.hashes.get(cursor as usize) {
            return Err(self.fail(format!(
                "{} reopened at seq {cursor} with a different state",
                self.slots[i].name
            )));
        }
        let replace = self.rng.chance(self.faults.replace_session_on_restart) && cursor > 0;
        let now = self.now;
        if replace {
            self.count("session_replaced");
            let _ = agent.replace_session(now);
        }
        if i == self.planner {
            let sent = std::mem::take(&mut self.planner_sent);
            self.planner_earlier.extend(sent);
            self.planner_earlier.extend(agent.outbox().keys().cloned());
            let known = agent.replica().state();
            let durable = agent.durable_cursor();
            self.restart_pending = known
                .map(|s| {
                    s.terminal
                        .range(..=durable)
                        .map(|(t, _)| *t)
                        .filter(|t| !s.expansions.contains_key(t))
                        .collect()
                })
                .unwrap_or_default();
            if !self.restart_pending.is_empty() {
                self.count("planner_restarts_with_pending");
            }
        }
        let name = self.slots[i].name.clone();
        self.log(format!(
            "{name} starts at cursor {cursor} session {}",
            agent.session()
        ));
        self.slots[i].agent = Some(agent);
        self.slots[i].told_up = None;
        self.slots[i].checked = (cursor, hash);
        self.tell_link(i);
        self.pump(i)
    }

    fn crash(&mut self, i: usize) {
        if self.slots[i].agent.take().is_some() {
            self.count("crashes");
            let name = self.slots[i].name.clone();
            self.log(format!("{name} crashes"));
            self.slots[i].jobs.clear();
            let down = self.rng.range(20, 600);
            self.slots[i].restart_at = Some(self.now + down);
        }
    }

    fn tell_link(&mut self, i: usize) {
        let up = self.link_up(i);
        let now = self.now;
        let slot = &mut self.slots[i];
        if slot.told_up == Some(up) {
            return;
        }
        if let Some(a) = slot.agent.as_mut() {
            slot.told_up = Some(up);
            a.handle_connectivity(now, up);
        }
    }

    /// Drains an agent's outputs: commits write sets (or crashes before committing),
    /// sends transmits, performs dispatches and hands notices to the application.
    fn pump(&mut self, i: usize) -> Check {
        for _ in 0..10_000 {
            let now = self.now;
            let Some(agent) = self.slots[i].agent.as_mut() else {
                return Ok(());
            };
            if let Some(ws) = agent.poll_write_set() {
                if !self.healed && self.rng.chance(self.faults.crash_mid_commit) {
                    self.log(format!(
                        "{} crashes before committing write set {}",
                        self.slots[i].name, ws.serial
                    ));
                    self.crash(i);
                    return Ok(());
                }
                let serial = ws.serial;
                let first = ws.applied.first().map(|a| a.seq);
                let name = self.slots[i].name.clone();
                self.slots[i].image.commit(&ws).map_err(|e| Violation {
                    seed: self.seed,
                    at: now,
                    what: format!("{name}: write set {serial} does not commit: {e}"),
                })?;
                self.log(format!(
                    "{name} commits {serial} cursor {} first {first:?}",
                    ws.cursor
                ));
                if let Some(a) = self.slots[i].agent.as_mut() {
                    a.handle_committed(now, serial);
                }
                continue;
            }
            if let Some(t) = agent.poll_transmit() {
                self.transmit(i, t);
                continue;
            }
            if let Some(d) = agent.poll_dispatch() {
                self.dispatch(i, d)?;
                continue;
            }
            if let Some(n) = agent.poll_notice() {
                self.notice(i, n)?;
                continue;
            }
            return Ok(());
        }
        Err(self.fail("an agent produced output without end"))
    }

    fn transmit(&mut self, i: usize, t: Transmit) {
        let line = match &t {
            Transmit::Command(c) => format!(
                "{} sends {} {}",
                self.slots[i].name,
                c.action,
                c.body.type_name()
            ),
            other => format!("{} sends {other:?}", self.slots[i].name),
        };
        self.log(line);
        if let (Transmit::Command(c), true) = (&t, i == self.planner) {
            self.planner_sent.insert(c.action.clone());
        }
        if self.link_up(i) {
            self.send(Msg::ToAuth(i, Box::new(t)));
        }
    }

    fn dispatch(&mut self, i: usize, d: Dispatch) -> Check {
        self.count("dispatches");
        self.log(format!(
            "{} dispatches {} {} attempt {}",
            self.slots[i].name, d.work, d.op, d.attempt
        ));
        let state = self.state();
        let Some(w) = state.work.get(&d.work) else {
            return Err(self.fail("dispatch for unknown work"));
        };
        let Some(e) = w.effects.get(&d.key) else {
            return Err(self.fail(format!(
                "{} dispatched before its intent was accepted",
                d.op
            )));
        };
        // Settled or abandoned at the authority: a repeatable effect may still be sent again
        // by an agent that has not heard yet, an undeclared one never.
        if d.mode == EffectMode::Undeclared && e.status != EffectStatus::Intended {
            return Err(self.fail(format!(
                "undeclared effect {} dispatched after it was {:?}",
                d.op, e.status
            )));
        }
        let unreconciled = w
            .effects
            .iter()
            .find(|(k, x)| {
                **k != d.key
                    && x.op == d.op
                    && x.mode == EffectMode::Undeclared
                    && x.status == EffectStatus::Unknown
            })
            .map(|(k, _)| *k);
        if d.mode == EffectMode::Undeclared {
            // Never dispatched blind: a second dispatch only after reconciliation said it did
            // not happen; never while an earlier epoch's attempt is unreconciled.
            if self.dispatched.contains(&d.key) && !self.cleared.remove(&d.key) {
                return Err(self.fail(format!(
                    "undeclared effect {} re-dispatched before reconciliation",
                    d.op
                )));
            }
            if let Some(k) = unreconciled {
                return Err(self.fail(format!("{} dispatched while key {k} is unreconciled", d.op)));
            }
        }
        self.dispatched.insert(d.key);
        if self.rng.chance(self.faults.dispatch_lost) && !self.healed {
            self.count("dispatch_lost");
            return Ok(());
        }
        let n = self.executed.entry(d.key).or_default();
        let first = *n == 0;
        if d.mode == EffectMode::Keyed && !first {
            // The target honours the key: no second execution.
        } else {
            *n += 1;
        }
        if d.mode == EffectMode::Undeclared {
            let runs = self
                .undeclared_runs
                .entry((d.work.clone(), d.op.clone()))
                .or_default();
            *runs += 1;
            if *runs > 1 {
                return Err(self.fail(format!(
                    "undeclared effect {} of {} executed twice",
                    d.op, d.work
                )));
            }
        }
        if self.rng.chance(self.faults.outcome_lost) && !self.healed {
            self.count("outcome_lost");
            return Ok(());
        }
        self.send(Msg::ToAgent(i, Reply::Outcome(d.key)));
        Ok(())
    }

    fn notice(&mut self, i: usize, n: Notice) -> Check {
        let name = self.slots[i].name.clone();
        self.log(format!("{name} notice {n:?}"));
        match n {
            Notice::Run { work, .. } => {
                let at = self.now + self.rng.range(5, 60);
                self.slots[i].jobs.insert(
                    work,
                    Job {
                        next_at: at,
                        paused: false,
                        charged: false,
                    },
                );
            }
            Notice::Released { work, .. } | Notice::LeaseLost { work, .. } => {
                self.slots[i].jobs.remove(&work);
            }
            Notice::Suspended { work } => {
                if let Some(j) = self.slots[i].jobs.get_mut(&work) {
                    j.paused = true;
                }
            }
            Notice::Uncertain { key, .. } => {
                self.count("uncertain");
                let t = self.now + self.rng.range(10, 200);
                self.at(t, Action::Resolve(i, key));
            }
            Notice::Corrupt(e) => return Err(self.fail(format!("{name} saw a corrupt input: {e}"))),
            Notice::Evidence { .. } => self.count("evidence"),
            Notice::Rejected { .. } => self.count("rejected"),
            Notice::Dropped { .. } => self.count("dropped_commands"),
            Notice::Plan { trigger, .. } => {
                let t = self.now + self.rng.range(1, 40);
                self.at(t, Action::Dispose(i, trigger));
            }
        }
        Ok(())
    }

    /// The application's next step on a running work item.
    fn job_step(&mut self, i: usize, work: &Id) -> Check {
        let now = self.now;
        let plan = self.plans[work].clone();
        let retry = now + self.rng.range(10, 40);
        let slot = &mut self.slots[i];
        let Some(agent) = slot.agent.as_mut() else {
            return Ok(());
        };
        let Some(job) = slot.jobs.get_mut(work) else {
            return Ok(());
        };
        job.next_at = retry;
        if job.paused {
            return Ok(());
        }
        let Some(lease) = agent.leases().get(work).cloned() else {
            return Ok(());
        };
        let Some(item) = agent.replica().state().and_then(|s| s.work.get(work)) else {
            return Ok(());
        };
        let attempts = item.attempts;
        let effects: Vec<_> = item.effects.values().cloned().collect();
        for op in &plan.ops {
            let done = effects.iter().any(|e| {
                e.op == op.op
                    && (e.status == EffectStatus::Settled
                        || (e.status == EffectStatus::Reconciled && e.happened == Some(true)))
            });
            if done {
                continue;
            }
            let mine = agent
                .effects()
                .values()
                .find(|e| e.work == *work && e.epoch == lease.epoch && e.op == op.op);
            match mine {
                Some(e) if e.status == JournalStatus::Closed => continue,
                Some(_) => return Ok(()),
                None => {
                    let r = agent.intend_effect(
                        now,
                        work,
                        &op.op,
                        op.mode,
                        op.irreversible,
                        json!({"op": op.op}),
                    );
                    self.log(format!(
                        "{} intends {work} {} -> {:?}",
                        self.slots[i].name,
                        op.op,
                        r.as_ref().map(|_| ()).map_err(|e| e.code)
                    ));
                    return self.pump(i);
                }
            }
        }
        let slot = &mut self.slots[i];
        let (Some(agent), Some(job)) = (slot.agent.as_mut(), slot.jobs.get_mut(work)) else {
            return Ok(());
        };
        if plan.charge > 0 && !job.charged {
            let r = agent.charge(now, work, plan.charge, Some(json!({"progress": 1}).into()));
            job.charged = r.is_ok();
        } else if attempts < plan.fail_first {
            let _ = agent.fail(now, work, json!({"error": "flaky"}), true);
        } else {
            let _ = agent.submit(now, work, json!({"done": work}));
        }
        self.pump(i)
    }

    // ----- the authority side -----

    fn serve(&mut self, i: usize, t: Transmit) -> Check {
        if !self.auth_up {
            return Ok(());
        }
        let name = self.slots[i].name.clone();
        match t {
            Transmit::Command(cmd) => {
                let action = cmd.action.clone();
                let answer = match self.decide(&cmd)? {
                    Ok(Decision::Accepted(e)) => Ok(e.receipt()),
                    Ok(Decision::Duplicate(r)) => Ok(r),
                    Ok(Decision::Rejected(r)) => Err(r.into_error()),
                    Err(e) => Err(e),
                };
                self.send(Msg::ToAgent(i, Reply::Answer(action, Box::new(answer))));
            }
            Transmit::FetchEvents { after } => {
                if let Some((r, _)) = self.snapshot.as_ref().filter(|(r, _)| after < r.seq) {
                    let e = r.cursor_too_old(after, r.seq);
                    self.count("cursor_too_old");
                    self.send(Msg::ToAgent(i, Reply::FetchError(Box::new(e))));
                    return Ok(());
                }
                let events = self
                    .auth
                    .events(&self.group, after, 16)
                    .map_err(|e| self.fail(e.to_string()))?;
                for e in events {
                    self.send(Msg::ToAgent(i, Reply::Event(Box::new(e))));
                }
            }
            Transmit::LookupReceipt { action } => {
                let r = self
                    .state()
                    .receipt(name.as_str(), action.as_str())
                    .map(Box::new);
                self.send(Msg::ToAgent(i, Reply::Lookup(action, r)));
            }
            Transmit::FetchSnapshot(r) => {
                if let Some((_, bytes)) = self.snapshot.as_ref().filter(|(s, _)| s.seq == r.seq) {
                    let bytes = bytes.clone();
                    self.send(Msg::ToAgent(i, Reply::Snapshot(bytes)));
                }
            }
            Transmit::Ack { .. } => {}
        }
        Ok(())
    }

    fn deliver(&mut self, i: usize, r: Reply) -> Check {
        let now = self.now;
        if !self.link_up(i) && !matches!(r, Reply::Outcome(_)) {
            self.log(format!("-> {} lost: link down", self.slots[i].name));
            return Ok(());
        }
        let what = match &r {
            Reply::Event(e) => format!("event {}", e.seq),
            Reply::Answer(a, r) => format!(
                "answer {a} {}",
                r.as_ref()
                    .as_ref()
                    .map_or_else(|e| e.code.to_string(), |r| r.seq.to_string())
            ),
            Reply::Lookup(a, r) => format!("lookup {a} {}", r.is_some()),
            Reply::FetchError(e) => format!("fetch error {}", e.code),
            Reply::Snapshot(_) => "snapshot".to_owned(),
            Reply::Outcome(k) => format!("outcome {k}"),
        };
        let name = self.slots[i].name.clone();
        let alive = self.slots[i].agent.is_some();
        self.log(format!("-> {name} {what} (alive {alive})"));
        if matches!(r, Reply::Snapshot(_)) && self.slots[i].agent.is_some() {
            self.count("restores");
        }
        let Some(agent) = self.slots[i].agent.as_mut() else {
            return Ok(());
        };
        match r {
            Reply::Event(e) => agent.handle_events(now, [*e]),
            Reply::Answer(a, r) => agent.handle_answer(now, &a, *r),
            Reply::Lookup(a, r) => agent.handle_lookup(now, &a, r.map(|r| *r)),
            Reply::FetchError(e) => agent.handle_fetch_error(now, &e),
            Reply::Snapshot(b) => agent.handle_snapshot(now, &b),
            Reply::Outcome(k) => agent.handle_effect_outcome(
                now,
                &k,
                json!({"ok": true}),
                json!({"target_receipt": k}),
            ),
        }
        self.pump(i)
    }

    fn perform(&mut self, a: Action) -> Check {
        self.log(format!("action {a:?}"));
        match a {
            Action::Crash(i) => self.crash(i),
            Action::Outage(down) => {
                if !self.healed || !down {
                    self.auth_up = !down;
                    if down {
                        self.count("outages");
                    }
                }
                for i in 0..self.slots.len() {
                    self.tell_link(i);
                    self.pump(i)?;
                }
            }
            Action::Partition(i, on) => {
                if !self.healed || !on {
                    self.slots[i].partitioned = on;
                    if on {
                        self.count("partitions");
                    }
                }
                self.tell_link(i);
                self.pump(i)?;
            }
            Action::Resolve(i, key) => {
                let now = self.now;
                let happened = self.executed.get(&key).copied().unwrap_or(0) > 0;
                if let Some(agent) = self.slots[i].agent.as_mut() {
                    let uncertain = agent.effects().get(&key).is_some_and(|e| {
                        matches!(
                            e.status,
                            JournalStatus::Uncertain | JournalStatus::Dispatched
                        )
                    });
                    if uncertain
                        && agent
                            .resolve_effect(now, &key, happened, json!({"checked": true}))
                            .is_ok()
                        && !happened
                    {
                        self.cleared.insert(key);
                    }
                }
                self.pump(i)?;
            }
            Action::Reconcile(work, key) => {
                self.reconciling.remove(&key);
                if self.auth_up {
                    let happened = self.executed.get(&key).copied().unwrap_or(0) > 0;
                    self.operator_n += 1;
                    let cmd = Command::signed(
                        self.org.clone(),
                        self.group.clone(),
                        id("rita"),
                        id(&format!("r-{}", self.operator_n)),
                        1,
                        None,
                        serde_json::from_value(
                            json!({"type": "reconcile_effect", "work": work, "key": key,
                            "happened": happened, "receipt": {"by": "rita"}}),
                        )
                        .expect("well-formed body"),
                        &SecretKey::for_transcript("rita"),
                    )
                    .map_err(|e| self.fail(e.to_string()))?;
                    let _ = self.decide(&cmd)?;
                }
            }
            Action::Dispose(i, trigger) => self.dispose(i, trigger)?,
            Action::Snapshot => {
                let state = self.state().clone();
                let bytes = Snapshot::build_cbor(&state, &SecretKey::for_transcript("@authority"))
                    .map_err(|e| self.fail(e.to_string()))?;
                let snap = Snapshot::from_cbor(&bytes).map_err(|e| self.fail(e.to_string()))?;
                self.snapshot = Some((snap.reference("/v1/groups/g/snapshots/latest"), bytes));
                self.count("snapshots");
            }
        }
        Ok(())
    }

    /// The host's jobs: tick when a lease deadline passed; the reviewer reconciles items
    /// waiting on unknown effects.
    fn authority_duties(&mut self) -> Check {
        if !self.auth_up {
            return Ok(());
        }
        if self.state().next_deadline().is_some_and(|d| d <= self.now) {
            self.operator_n += 1;
            let cmd = Command::signed(
                self.org.clone(),
                self.group.clone(),
                Id::authority(),
                id(&format!("tick-{}", self.operator_n)),
                1,
                None,
                serde_json::from_value(json!({"type": "tick"})).expect("well-formed body"),
                &SecretKey::for_transcript("@authority"),
            )
            .map_err(|e| self.fail(e.to_string()))?;
            if let Ok(Decision::Accepted(_)) = self.decide(&cmd)? {
                self.count("ticks");
            }
        }
        let unknown: Vec<(Id, Hash)> = self
            .state()
            .work
            .iter()
            .flat_map(|(w, item)| item.unknown().map(move |(k, _)| (w.clone(), *k)))
            .collect();
        for (w, k) in unknown {
            if self.reconciling.insert(k) {
                let t = self.now + self.rng.range(20, 300);
                self.at(t, Action::Reconcile(w, k));
            }
        }
        Ok(())
    }

    fn check_agents(&mut self) -> Check {
        for i in 0..self.slots.len() {
            let Some(agent) = self.slots[i].agent.as_ref() else {
                continue;
            };
            let r = agent.replica();
            let cursor = r.cursor();
            let head = r.head();
            if cursor as usize >= self.ids.len() {
                return Err(self.fail(format!(
                    "{} is at seq {cursor}, past the log",
                    self.slots[i].name
                )));
            }
            if r.head() != self.ids[cursor as usize] {
                return Err(self.fail(format!(
                    "{} head at {cursor} is not the authority's event",
                    self.slots[i].name
                )));
            }
            if agent.durable_cursor() > self.slots[i].image.replica.cursor {
                return Err(self.fail("an ACK would claim more than is durable"));
            }
            if (cursor, head) != self.slots[i].checked {
                let h = r.state_hash().map_err(|e| self.fail(e.to_string()))?;
                if h != self.hashes[cursor as usize] {
                    return Err(self.fail(format!(
                        "{} state at seq {cursor} differs from the authority's",
                        self.slots[i].name
                    )));
                }
                self.slots[i].checked = (cursor, head);
            }
        }
        Ok(())
    }

    fn done(&self) -> bool {
        let s = self.state();
        self.plans
            .keys()
            .all(|w| s.work.get(w).is_some_and(|i| i.state.is_terminal()))
            && s.terminal.keys().all(|t| s.expansions.contains_key(t))
    }

    /// The planner's rule, a function of the trigger alone (so asking again gives the same
    /// answer): a succeeded top-level item fans out into 0–2 follow-ups; everything else gets
    /// the empty disposition.
    fn rule(&self, trigger: u64) -> Vec<serde_json::Value> {
        let s = self.state();
        let Some(work) = s.terminal.get(&trigger) else {
            return Vec::new();
        };
        let succeeded = s
            .work
            .get(work)
            .is_some_and(|w| w.state == WorkState::Succeeded);
        if !succeeded || work.as_str().contains('-') {
            return Vec::new();
        }
        let n = Hash::of(work.as_str().as_bytes()).0[0] % 3;
        (0..n)
            .map(|c| {
                json!({"work": format!("{work}-c{c}"), "after": [], "spec": {"from": trigger},
                "contract": {"max_attempts": 8, "backoff_base_ms": 20, "backoff_max_ms": 200,
                             "cost_budget": 50, "risk": "low"}})
            })
            .collect()
    }

    /// The planner answers for `trigger`; before healing it may crash before answering,
    /// after answering but before committing, or after committing and sending.
    fn dispose(&mut self, i: usize, trigger: u64) -> Check {
        let now = self.now;
        let pending = self.slots[i]
            .agent
            .as_ref()
            .is_some_and(|a| a.pending_dispositions().contains(&trigger));
        if !pending {
            return Ok(());
        }
        let durable = self.slots[i]
            .agent
            .as_ref()
            .map_or(0, Agent::durable_cursor);
        if durable < trigger {
            return Err(self.fail(format!(
                "the planner was asked about trigger {trigger} beyond its durable cursor {durable}"
            )));
        }
        let roll = if self.healed { 9 } else { self.rng.below(10) };
        if roll == 0 {
            self.count("planner_crash_before_answer");
            self.crash(i);
            return Ok(());
        }
        let work: Vec<mwp_core::command::NewWork> =
            serde_json::from_value(serde_json::Value::Array(self.rule(trigger)))
                .map_err(|e| self.fail(e.to_string()))?;
        let agent = self.slots[i].agent.as_mut().expect("checked above");
        if let Err(e) = agent.dispose(now, trigger, work) {
            return Err(self.fail(format!("dispose {trigger}: {e}")));
        }
        self.count("dispositions_made");
        match roll {
            1 => {
                self.count("planner_crash_before_commit");
                self.crash(i);
                Ok(())
            }
            2 => {
                self.pump(i)?;
                self.count("planner_crash_after_send");
                self.crash(i);
                Ok(())
            }
            _ => self.pump(i),
        }
    }

    fn converged(&self) -> bool {
        let head = self.ids.len() as u64 - 1;
        self.slots.iter().all(|s| {
            s.agent.as_ref().is_some_and(|a| {
                a.replica().cursor() == head && !a.uncommitted() && a.outbox().is_empty()
            })
        })
    }

    fn next_time(&self) -> Option<u64> {
        let mut t: Option<u64> = None;
        let mut at = |x: u64| t = Some(t.map_or(x, |t| t.min(x)));
        if let Some(((x, _), _)) = self.net.first_key_value() {
            at(*x);
        }
        if let Some(((x, _), _)) = self.schedule.first_key_value() {
            at(*x);
        }
        for s in &self.slots {
            match &s.agent {
                Some(a) => {
                    if let Some(x) = a.poll_timeout() {
                        at(x.max(self.now + 1));
                    }
                    for j in s.jobs.values() {
                        at(j.next_at);
                    }
                }
                None => at(s.restart_at.unwrap_or(s.start_at)),
            }
        }
        if self.auth_up {
            if let Some(d) = self.state().next_deadline() {
                at(d.max(self.now));
            }
        }
        t
    }

    /// One step: advance the clock to the next due thing and do everything due then.
    fn step(&mut self) -> Check {
        let Some(t) = self.next_time() else {
            return Err(self.fail("nothing left to happen but the mission is not done"));
        };
        self.now = self.now.max(t);
        let now = self.now;
        while let Some(entry) = self.schedule.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let a = entry.remove();
            self.perform(a)?;
        }
        for i in 0..self.slots.len() {
            let due = self.slots[i].agent.is_none()
                && self.slots[i].restart_at.unwrap_or(self.slots[i].start_at) <= now;
            if due {
                self.slots[i].restart_at = None;
                self.slots[i].start_at = u64::MAX;
                self.spawn(i)?;
            }
        }
        while let Some(entry) = self.net.first_entry() {
            if entry.key().0 > now {
                break;
            }
            match entry.remove() {
                Msg::ToAuth(i, t) => self.serve(i, *t)?,
                Msg::ToAgent(i, r) => self.deliver(i, r)?,
            }
        }
        self.authority_duties()?;
        for i in 0..self.slots.len() {
            let due = self.slots[i]
                .agent
                .as_ref()
                .and_then(Agent::poll_timeout)
                .is_some_and(|x| x <= now);
            if due {
                if let Some(a) = self.slots[i].agent.as_mut() {
                    a.handle_timeout(now);
                }
                self.pump(i)?;
            }
            let jobs: Vec<Id> = self.slots[i]
                .jobs
                .iter()
                .filter(|(_, j)| j.next_at <= now)
                .map(|(w, _)| w.clone())
                .collect();
            for w in jobs {
                self.job_step(i, &w)?;
            }
        }
        self.check_agents()
    }
}

fn msg_clone(m: &Msg) -> Msg {
    match m {
        Msg::ToAuth(i, t) => Msg::ToAuth(*i, t.clone()),
        Msg::ToAgent(i, r) => Msg::ToAgent(
            *i,
            match r {
                Reply::Event(e) => Reply::Event(e.clone()),
                Reply::Answer(a, r) => Reply::Answer(a.clone(), r.clone()),
                Reply::Lookup(a, r) => Reply::Lookup(a.clone(), r.clone()),
                Reply::FetchError(e) => Reply::FetchError(e.clone()),
                Reply::Snapshot(b) => Reply::Snapshot(b.clone()),
                Reply::Outcome(k) => Reply::Outcome(*k),
            },
        ),
    }
}

/// Builds the world of a seed: the group, the mission and the fault schedule.
fn world(seed: u64) -> Result<World, Violation> {
    let mut rng = Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 0x5eed);
    let faults = Faults {
        drop: rng.range(0, 150),
        dup: rng.range(0, 100),
        max_delay: rng.range(2, 60),
        crash_mid_commit: rng.range(0, 15),
        dispatch_lost: rng.range(0, 150),
        outcome_lost: rng.range(0, 300),
        replace_session_on_restart: rng.range(0, 500),
    };
    let mut w = World {
        seed,
        rng,
        now: 0,
        auth: MemoryAuthority::new(),
        org: id("acme"),
        group: id("g"),
        auth_up: true,
        hashes: vec![Hash::ZERO],
        ids: vec![Hash::ZERO],
        net: BTreeMap::new(),
        schedule: BTreeMap::new(),
        n: 0,
        slots: Vec::new(),
        plans: BTreeMap::new(),
        faults,
        healed: false,
        executed: BTreeMap::new(),
        undeclared_runs: BTreeMap::new(),
        cleared: BTreeSet::new(),
        dispatched: BTreeSet::new(),
        reconciling: BTreeSet::new(),
        snapshot: None,
        trace: Vec::new(),
        stats: BTreeMap::new(),
        operator_n: 0,
        planner: 1,
        restart_pending: BTreeSet::new(),
        planner_earlier: BTreeSet::new(),
        planner_sent: BTreeSet::new(),
    };
    let workers = ["bob", "carol", "dave"];
    let key = |a: &str| SecretKey::for_transcript(a).public().to_hex();
    let mut members = vec![
        json!({"actor": "alice", "role": "owner", "key": key("alice")}),
        json!({"actor": "rita", "role": "reviewer", "key": key("rita")}),
    ];
    members.extend(
        workers
            .iter()
            .map(|a| json!({"actor": a, "role": "worker", "key": key(a)})),
    );
    let mut n = 0;
    let mut owner =
        |w: &mut World, actor: &str, expect: Option<u64>, body: serde_json::Value| -> Check {
            n += 1;
            let cmd = Command::signed(
                w.org.clone(),
                w.group.clone(),
                id(actor),
                id(&format!("setup-{n}")),
                1,
                expect,
                serde_json::from_value(body).expect("well-formed body"),
                &SecretKey::for_transcript(actor),
            )
            .map_err(|e| w.fail(e.to_string()))?;
            match w.decide(&cmd)? {
                Ok(Decision::Accepted(_)) => Ok(()),
                other => Err(w.fail(format!("setup command refused: {other:?}"))),
            }
        };
    owner(
        &mut w,
        "alice",
        None,
        json!({"type": "open_group", "mission": "m", "title": {"seed": seed},
        "members": members, "authority_key": key("@authority")}),
    )?;
    let works = w.rng.range(3, 6);
    for k in 0..works {
        let name = id(&format!("w{k}"));
        let mut after = Vec::new();
        for d in 0..k {
            if w.rng.chance(350) {
                after.push(format!("w{d}"));
            }
        }
        let high = w.rng.chance(200);
        let mut ops = Vec::new();
        for o in 0..w.rng.below(3) {
            let mode = match w.rng.below(3) {
                0 => EffectMode::ReadOnly,
                1 => EffectMode::Keyed,
                _ => EffectMode::Undeclared,
            };
            ops.push(Op {
                op: id(&format!("op{o}")),
                mode,
                irreversible: high && w.rng.chance(300),
            });
        }
        let plan = Plan {
            ops,
            fail_first: if w.rng.chance(250) {
                w.rng.range(1, 2) as u32
            } else {
                0
            },
            charge: if w.rng.chance(300) {
                w.rng.range(1, 5)
            } else {
                0
            },
        };
        owner(
            &mut w,
            "alice",
            None,
            json!({"type": "create_work", "work": name, "after": after,
            "contract": {"max_attempts": 8, "backoff_base_ms": 20, "backoff_max_ms": 200,
                         "cost_budget": 50, "risk": if high { "high" } else { "low" }},
            "spec": {"ops": plan.ops.len(), "fail_first": plan.fail_first}}),
        )?;
        if high {
            let ap = format!("ap-{name}");
            owner(
                &mut w,
                "alice",
                None,
                json!({"type": "request_approval", "approval": ap, "work": name, "reason": {}}),
            )?;
            owner(
                &mut w,
                "rita",
                Some(1),
                json!({"type": "decide_approval", "approval": ap, "grant": true}),
            )?;
        }
        w.plans.insert(name, plan);
    }
    let authority_key = SecretKey::for_transcript("@authority").public();
    for (k, a) in workers.iter().enumerate() {
        let mut config = Config::new(w.org.clone(), w.group.clone(), id(a), authority_key);
        config.capacity = w.rng.range(1, 2) as usize;
        config.lease_ms = 400;
        config.start_within_ms = 150;
        config.renew_margin_ms = 150;
        config.grace_ms = 300;
        config.resend_ms = 100;
        config.sync_ms = 200;
        config.effect_timeout_ms = 120;
        config.planner = k == 1;
        // The last worker joins late when the replay window is cut, so it must restore.
        let start_at = if k == 2 && w.rng.chance(500) {
            w.rng.range(800, 2500)
        } else {
            0
        };
        w.slots.push(Slot {
            name: id(a),
            key: SecretKey::for_transcript(a),
            config,
            agent: None,
            image: AgentImage::default(),
            partitioned: false,
            told_up: None,
            jobs: BTreeMap::new(),
            restart_at: None,
            start_at,
            checked: (0, Hash::ZERO),
        });
        for _ in 0..w.rng.below(3) {
            let t = w.rng.range(0, 3000);
            w.at(t, Action::Crash(k));
        }
        if w.rng.chance(300) {
            let t = w.rng.range(0, 3000);
            let len = w.rng.range(50, 900);
            w.at(t, Action::Partition(k, true));
            w.at(t + len, Action::Partition(k, false));
        }
    }
    for _ in 0..w.rng.below(3) {
        let t = w.rng.range(0, 3000);
        let len = w.rng.range(50, 900);
        w.at(t, Action::Outage(true));
        w.at(t + len, Action::Outage(false));
    }
    if w.slots[2].start_at > 0 {
        let t = w.rng.range(200, 700);
        w.at(t, Action::Snapshot);
    }
    Ok(w)
}

/// Runs seed `seed`: the mission to completion, then convergence after healing. `Err`
/// names the first invariant broken (or a stop: no completion within the step budget).
pub fn run(seed: u64) -> Result<Outcome, Violation> {
    let mut w = world(seed)?;
    let r = drive(&mut w);
    if r.is_err() && std::env::var_os("MWP_SIM_DUMP").is_some() {
        eprintln!("{}", String::from_utf8_lossy(&w.trace));
    }
    r
}

fn drive(w: &mut World) -> Result<Outcome, Violation> {
    let budget = 200_000u64;
    let mut steps = 0u64;
    while !w.done() {
        steps += 1;
        if steps > budget || w.now > 120_000 {
            return Err(w.fail(format!(
                "stopped: mission not complete after {steps} steps ({} events; states {:?})",
                w.ids.len() - 1,
                w.state()
                    .work
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.state))
                    .collect::<Vec<_>>()
            )));
        }
        w.step()?;
    }
    let completed_at = w.now;
    let events = w.ids.len() as u64 - 1;
    // Heal: no more faults; every agent comes back and catches up.
    w.healed = true;
    w.schedule.retain(|_, a| !matches!(a, Action::Crash(_)));
    let heal_at = w.now + 1;
    w.at(heal_at, Action::Outage(false));
    for i in 0..w.slots.len() {
        w.at(heal_at, Action::Partition(i, false));
        if w.slots[i].agent.is_none() {
            w.slots[i].restart_at = Some(heal_at);
        }
    }
    let mut settle = 0;
    while !w.converged() {
        settle += 1;
        steps += 1;
        if settle > 50_000 {
            let head = w.ids.len() - 1;
            let why: Vec<String> = w
                .slots
                .iter()
                .map(|s| match &s.agent {
                    None => format!("{}: down", s.name),
                    Some(a) => format!(
                        "{}: cursor {} of {head}, uncommitted {}, online {}, outbox {:?}",
                        s.name,
                        a.replica().cursor(),
                        a.uncommitted(),
                        a.online(),
                        a.outbox()
                            .values()
                            .map(|e| (e.command.action.to_string(), e.command.body.type_name()))
                            .collect::<Vec<_>>()
                    ),
                })
                .collect();
            return Err(w.fail(format!("agents did not converge after healing: {why:?}")));
        }
        w.step()?;
    }
    // Every terminal event got exactly one disposition.
    let log = w
        .auth
        .events(&w.group, 0, usize::MAX)
        .map_err(|e| w.fail(e.to_string()))?;
    let mut disposed: BTreeMap<u64, u32> = BTreeMap::new();
    for e in &log {
        if let EventKind::WorkExpanded(x) = &e.kind {
            *disposed.entry(x.trigger).or_default() += 1;
        }
    }
    for t in w.state().terminal.keys() {
        if disposed.get(t) != Some(&1) {
            return Err(w.fail(format!(
                "terminal event {t} has {} dispositions, not one",
                disposed.get(t).copied().unwrap_or(0)
            )));
        }
    }
    w.stats.insert("expansions", disposed.len() as u64);
    // Reopening every agent from what it committed gives the authority's state again.
    for i in 0..w.slots.len() {
        w.crash(i);
        w.spawn(i)?;
    }
    let stats = std::mem::take(&mut w.stats);
    let mut trace = std::mem::take(&mut w.trace);
    trace.extend_from_slice(format!("{stats:?}").as_bytes());
    Ok(Outcome {
        trace: Hash::of(&trace),
        completed_at,
        events,
        steps,
        stats,
    })
}
