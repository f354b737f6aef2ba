//! The agent driver (SPEC §7), rule by rule, over a perfect in-process link.

use mwp_core::agent::{Agent, AgentImage, Config, JournalStatus, Notice, Transmit};
use mwp_core::command::EffectMode;
use mwp_core::snapshot::Snapshot;
use mwp_core::{Code, Decision, Disposition, Error, Hash, Id, SecretKey};
use mwp_tests::fixtures::{contract, id, Scenario};
use serde_json::json;

/// One agent wired to a scenario's authority.
struct Rig {
    s: Scenario,
    agent: Agent,
    image: AgentImage,
    notices: Vec<Notice>,
    sent: Vec<Transmit>,
    dispatched: Vec<mwp_core::agent::Dispatch>,
    /// Deliver answers to commands (false: they are lost).
    answers: bool,
    /// The link is up.
    up: bool,
    /// Deliver a command's events before its answer, as a live tail would (false: right
    /// after it, as a host that fetches once it has the receipt).
    events_first: bool,
}

fn config(s: &Scenario, actor: &str) -> Config {
    let mut c = Config::new(
        s.org.clone(),
        s.group.clone(),
        id(actor),
        SecretKey::for_transcript("@authority").public(),
    );
    c.lease_ms = 10_000;
    c.start_within_ms = 1_000;
    c.renew_margin_ms = 2_000;
    c.grace_ms = 3_000;
    c.resend_ms = 500;
    c.sync_ms = 1_000;
    c.effect_timeout_ms = 1_000;
    c
}

impl Rig {
    fn new(s: Scenario, actor: &str) -> Rig {
        Rig::with(s, actor, true)
    }

    fn with(s: Scenario, actor: &str, events_first: bool) -> Rig {
        let c = config(&s, actor);
        Rig::configured(s, c, events_first)
    }

    /// A rig whose agent is the Group's planner.
    fn planner(s: Scenario, actor: &str) -> Rig {
        let mut c = config(&s, actor);
        c.planner = true;
        Rig::configured(s, c, true)
    }

    fn configured(s: Scenario, c: Config, events_first: bool) -> Rig {
        let actor = c.actor.to_string();
        let agent = Agent::new(c, SecretKey::for_transcript(&actor)).unwrap();
        let mut r = Rig {
            s,
            agent,
            image: AgentImage::default(),
            notices: vec![],
            sent: vec![],
            dispatched: vec![],
            answers: true,
            up: true,
            events_first,
        };
        let now = r.s.now;
        r.agent.handle_connectivity(now, true);
        r.pump();
        r
    }

    /// Commits write sets, carries transmits (while up), collects dispatches and notices,
    /// until nothing moves.
    fn pump(&mut self) {
        for _ in 0..1000 {
            let now = self.s.now;
            if let Some(ws) = self.agent.poll_write_set() {
                self.image.commit(&ws).unwrap();
                self.agent.handle_committed(now, ws.serial);
                continue;
            }
            if let Some(t) = self.agent.poll_transmit() {
                self.sent.push(t.clone());
                if self.up {
                    self.serve(t);
                }
                continue;
            }
            if let Some(d) = self.agent.poll_dispatch() {
                self.dispatched.push(d);
                continue;
            }
            if let Some(n) = self.agent.poll_notice() {
                self.notices.push(n);
                continue;
            }
            return;
        }
        panic!("the agent does not settle");
    }

    fn serve(&mut self, t: Transmit) {
        let now = self.s.now;
        match t {
            Transmit::Command(cmd) => {
                let answer = match self.s.submit(&cmd) {
                    Ok(Decision::Accepted(e)) => Ok(e.receipt()),
                    Ok(Decision::Duplicate(r)) => Ok(r),
                    Ok(Decision::Rejected(r)) => Err(r.into_error()),
                    Err(e) => Err(e),
                };
                if self.events_first {
                    self.push_events();
                }
                if self.answers {
                    self.agent.handle_answer(now, &cmd.action, answer);
                }
                if !self.events_first {
                    self.push_events();
                }
            }
            Transmit::FetchEvents { .. } => self.push_events(),
            Transmit::LookupReceipt { action } => {
                let r = self
                    .s
                    .state()
                    .receipt(self.agent.config().actor.as_str(), action.as_str());
                self.agent.handle_lookup(now, &action, r);
            }
            Transmit::FetchSnapshot(_) | Transmit::Ack { .. } => {}
        }
    }

    fn push_events(&mut self) {
        let now = self.s.now;
        let after = self.agent.replica().cursor();
        let events = self
            .s
            .auth
            .events(&self.s.group, after, usize::MAX)
            .unwrap();
        self.agent.handle_events(now, events);
    }

    fn advance(&mut self, ms: u64) {
        self.s.now += ms;
        let now = self.s.now;
        self.agent.handle_timeout(now);
        self.pump();
    }

    fn link(&mut self, up: bool) {
        self.up = up;
        let now = self.s.now;
        self.agent.handle_connectivity(now, up);
        self.pump();
    }

    fn crash_and_restore(&mut self) {
        let config = self.agent.config().clone();
        let key = SecretKey::for_transcript(config.actor.as_str());
        self.agent = Agent::restore(config, key, &self.image).unwrap();
        self.notices.clear();
        let now = self.s.now;
        self.agent.handle_connectivity(now, self.up);
        self.pump();
    }

    fn commands(&self, kind: &str) -> Vec<mwp_core::Command> {
        self.sent
            .iter()
            .filter_map(|t| match t {
                Transmit::Command(c) if c.body.type_name() == kind => Some(c.clone()),
                _ => None,
            })
            .collect()
    }

    fn running(&self) -> Vec<Id> {
        self.notices
            .iter()
            .filter_map(|n| match n {
                Notice::Run { work, .. } => Some(work.clone()),
                _ => None,
            })
            .collect()
    }
}

fn group_with(works: &[(&str, &[&str])]) -> Scenario {
    let mut s = Scenario::open("g1");
    for (w, after) in works {
        s.ok(
            "alice",
            None,
            json!({"type": "create_work", "work": w, "contract": contract(3, "low"),
                                   "after": after, "spec": {}}),
        );
    }
    s
}

#[test]
fn claims_the_frontier_starts_runs_and_releases_on_submit() {
    let mut r = Rig::new(group_with(&[("w1", &[]), ("w2", &["w1"])]), "bob");
    assert_eq!(r.running(), vec![id("w1")], "only the frontier is claimed");
    assert_eq!(r.commands("claim_work").len(), 1);
    assert_eq!(r.commands("start_work").len(), 1);
    let now = r.s.now;
    r.agent.submit(now, &id("w1"), json!({"ok": true})).unwrap();
    r.pump();
    assert!(r
        .notices
        .iter()
        .any(|n| matches!(n, Notice::Released { work, state, .. }
        if work == &id("w1") && *state == mwp_core::WorkState::Succeeded)));
    // Its success is durable and unblocks w2, which is claimed next.
    assert_eq!(r.running(), vec![id("w1"), id("w2")]);
    assert_eq!(r.image.replica.cursor, r.s.state().seq);
}

#[test]
fn a_receipt_that_arrives_before_its_event_does_not_make_the_command_again() {
    let s = group_with(&[("w1", &[])]);
    let r = Rig::with(s, "bob", false);
    // The claim is answered before its event arrives; the start likewise: one of each (the
    // start used to be made again between its receipt and its event).
    let commands: Vec<&str> = r
        .sent
        .iter()
        .filter_map(|t| match t {
            Transmit::Command(c) => Some(c.body.type_name()),
            _ => None,
        })
        .collect();
    assert_eq!(
        commands,
        ["claim_work", "start_work"],
        "{:?} {:?}",
        r.notices,
        r.sent
    );
    assert!(
        !r.notices
            .iter()
            .any(|n| matches!(n, Notice::Rejected { .. })),
        "{:?}",
        r.notices
    );
    assert_eq!(r.running(), vec![id("w1")]);
}

#[test]
fn nothing_is_sent_or_dispatched_before_its_write_set_is_committed() {
    let s = group_with(&[("w1", &[])]);
    let mut agent = Agent::new(config(&s, "bob"), SecretKey::for_transcript("bob")).unwrap();
    agent.handle_connectivity(s.now, true);
    // Events arrive; a claim is planned: it sits in a staged write set.
    agent.handle_events(s.now, s.events());
    assert!(agent.uncommitted());
    assert_eq!(agent.poll_transmit(), None);
    let ws = agent.poll_write_set().unwrap();
    assert!(ws.outbox.iter().any(|o| matches!(o, mwp_core::agent::OutboxChange::Put(e) if e.command.body.type_name() == "claim_work")));
    // Handed out but not committed: still nothing.
    assert_eq!(agent.poll_transmit(), None);
    agent.handle_committed(s.now, ws.serial);
    let mut kinds = vec![];
    while let Some(t) = agent.poll_transmit() {
        kinds.push(match t {
            Transmit::Command(c) => c.body.type_name().to_owned(),
            other => format!("{other:?}"),
        });
    }
    assert!(kinds.iter().any(|k| k == "claim_work"), "{kinds:?}");
    // The ACK carries the durable cursor.
    assert!(
        kinds
            .iter()
            .any(|k| k == &format!("Ack {{ cursor: {} }}", ws.cursor)),
        "{kinds:?}"
    );
}

fn intend(r: &mut Rig, work: &str, op: &str, mode: EffectMode) -> Hash {
    let now = r.s.now;
    let k = r
        .agent
        .intend_effect(now, &id(work), &id(op), mode, false, json!({"op": op}))
        .unwrap();
    r.pump();
    k
}

#[test]
fn an_effect_is_dispatched_only_after_its_intent_is_accepted_and_recorded() {
    let mut r = Rig::new(group_with(&[("w1", &[])]), "bob");
    r.answers = false;
    r.up = false; // the intent does not reach the authority yet
    let key = intend(&mut r, "w1", "e1", EffectMode::Keyed);
    assert!(r.dispatched.is_empty());
    assert_eq!(r.agent.effects()[&key].status, JournalStatus::Requested);
    r.up = true;
    r.answers = true;
    r.advance(600); // resend
    assert_eq!(r.dispatched.len(), 1);
    assert_eq!(r.dispatched[0].key, key);
    // The dispatch was durable before it was handed out.
    assert_eq!(r.image.effects[&key].status, JournalStatus::Dispatched);
    let now = r.s.now;
    r.agent
        .handle_effect_outcome(now, &key, json!({"ok": 1}), json!({"rcpt": 1}));
    r.pump();
    assert_eq!(r.commands("settle_effect").len(), 1);
    assert_eq!(r.agent.effects()[&key].status, JournalStatus::Closed);
    let now = r.s.now;
    r.agent.submit(now, &id("w1"), json!({})).unwrap();
}

#[test]
fn an_uncertain_undeclared_effect_is_surfaced_and_never_dispatched_blind() {
    let mut r = Rig::new(group_with(&[("w1", &[])]), "bob");
    let key = intend(&mut r, "w1", "u1", EffectMode::Undeclared);
    assert_eq!(r.dispatched.len(), 1);
    // No outcome comes back.
    for _ in 0..5 {
        r.advance(700);
    }
    assert_eq!(r.dispatched.len(), 1, "never dispatched again");
    let uncertain = r
        .notices
        .iter()
        .filter(|n| matches!(n, Notice::Uncertain { key: k, .. } if *k == key))
        .count();
    assert_eq!(uncertain, 1);
    let now = r.s.now;
    let e = r.agent.submit(now, &id("w1"), json!({})).unwrap_err();
    assert_eq!(e.code, Code::EffectUnsettled);
    // Somebody finds out it did not happen: now it may be dispatched again (not blind).
    r.agent
        .resolve_effect(now, &key, false, json!({"checked": true}))
        .unwrap();
    r.pump();
    assert_eq!(r.dispatched.len(), 2);
    for _ in 0..3 {
        r.advance(700);
    }
    // This time it is found to have happened: settled with that outcome.
    let now = r.s.now;
    r.agent
        .resolve_effect(now, &key, true, json!({"checked": 2}))
        .unwrap();
    r.pump();
    assert_eq!(r.commands("settle_effect").len(), 1);
    assert_eq!(r.agent.effects()[&key].status, JournalStatus::Closed);
}

#[test]
fn a_repeatable_effect_with_unknown_outcome_is_sent_again_with_the_same_key() {
    let mut r = Rig::new(group_with(&[("w1", &[])]), "bob");
    let key = intend(&mut r, "w1", "k1", EffectMode::Keyed);
    r.advance(1_100);
    assert_eq!(r.dispatched.len(), 2);
    assert!(r.dispatched.iter().all(|d| d.key == key));
    assert_eq!(r.dispatched[1].attempt, 2);
    assert!(!r
        .notices
        .iter()
        .any(|n| matches!(n, Notice::Uncertain { .. })));
}

#[test]
fn a_crash_after_dispatch_leaves_the_effect_uncertain() {
    let mut r = Rig::new(group_with(&[("w1", &[])]), "bob");
    let key = intend(&mut r, "w1", "u1", EffectMode::Undeclared);
    assert_eq!(r.dispatched.len(), 1);
    r.crash_and_restore();
    assert!(r
        .notices
        .iter()
        .any(|n| matches!(n, Notice::Uncertain { key: k, .. } if *k == key)));
    assert!(r
        .notices
        .iter()
        .any(|n| matches!(n, Notice::Run { resumed: true, .. })));
    r.advance(2_000);
    assert_eq!(
        r.dispatched.len(),
        1,
        "not dispatched again after the restart"
    );
}

#[test]
fn restart_rebuilds_from_the_last_committed_write_set() {
    let mut r = Rig::new(group_with(&[("w1", &[]), ("w2", &[])]), "bob");
    let now = r.s.now;
    r.up = false;
    r.agent
        .checkpoint(now, &id("w1"), json!({"half": 1}))
        .unwrap();
    r.pump();
    let (hash, cursor, outbox) = (
        r.agent.replica().state_hash().unwrap(),
        r.agent.replica().cursor(),
        r.agent.outbox().clone(),
    );
    r.crash_and_restore();
    assert_eq!(r.agent.replica().state_hash().unwrap(), hash);
    assert_eq!(r.agent.replica().cursor(), cursor);
    assert_eq!(r.agent.outbox(), &outbox);
    // Reconnected, the checkpoint waiting in the outbox is looked up before it is sent.
    let before = r.sent.len();
    r.link(true);
    let after: Vec<&Transmit> = r.sent[before..].iter().collect();
    let lookup = after
        .iter()
        .position(|t| matches!(t, Transmit::LookupReceipt { .. }))
        .unwrap();
    let send = after
        .iter()
        .position(|t| matches!(t, Transmit::Command(c) if c.body.type_name() == "checkpoint"))
        .unwrap();
    assert!(lookup < send, "{after:?}");
    assert!(r.agent.outbox().is_empty());
}

#[test]
fn offline_no_claims_no_starts_no_visible_effects_and_grace_is_bounded() {
    let mut r = Rig::new(group_with(&[("w1", &[])]), "bob");
    r.s.ok("alice", None, json!({"type": "create_work", "work": "w2", "contract": contract(3, "low"), "after": [], "spec": {}}));
    r.link(false);
    r.push_events(); // events still reach the replica (e.g. from a peer)
    r.pump();
    let claims = r.commands("claim_work").len();
    r.advance(100);
    assert_eq!(
        r.commands("claim_work").len(),
        claims,
        "no new claim while offline"
    );
    let now = r.s.now;
    let e = r
        .agent
        .intend_effect(
            now,
            &id("w1"),
            &id("k"),
            EffectMode::Keyed,
            false,
            json!({}),
        )
        .unwrap_err();
    assert_eq!(e.details["reason"], "offline");
    r.agent
        .intend_effect(
            now,
            &id("w1"),
            &id("ro"),
            EffectMode::ReadOnly,
            false,
            json!({}),
        )
        .unwrap();
    r.agent.charge(now, &id("w1"), 1, None).unwrap();
    r.pump();
    assert!(
        r.dispatched.is_empty(),
        "the read-only intent is not accepted yet"
    );
    r.advance(3_000);
    assert!(r
        .notices
        .iter()
        .any(|n| matches!(n, Notice::Suspended { work } if work == &id("w1"))));
    let now = r.s.now;
    let e = r.agent.charge(now, &id("w1"), 1, None).unwrap_err();
    assert_eq!(e.details["reason"], "grace_period_over");
    // Back online: the buffered commands are reconciled and sent; claims resume.
    r.link(true);
    assert!(r.agent.outbox().is_empty(), "{:?}", r.agent.outbox());
    assert_eq!(r.s.state().work.get("w1").expect("w1 exists").spent, 1);
    // The read-only effect may now be dispatched; once w1 is done, w2 is claimed.
    assert_eq!(r.dispatched.len(), 1);
    let key = r.dispatched[0].key;
    let now = r.s.now;
    r.agent
        .handle_effect_outcome(now, &key, json!({}), json!({}));
    r.pump();
    r.agent.submit(now, &id("w1"), json!({})).unwrap();
    r.pump();
    assert!(r.commands("claim_work").len() > claims);
    assert!(r.running().contains(&id("w2")));
}

#[test]
fn a_command_that_landed_is_found_by_lookup_and_not_sent_again() {
    let mut r = Rig::new(group_with(&[("w1", &[])]), "bob");
    r.answers = false; // the receipt is lost
    let now = r.s.now;
    r.agent.submit(now, &id("w1"), json!({"ok": 1})).unwrap();
    r.pump();
    assert_eq!(r.commands("submit").len(), 1);
    r.link(false);
    r.answers = true;
    r.link(true);
    assert!(r
        .sent
        .iter()
        .any(|t| matches!(t, Transmit::LookupReceipt { .. })));
    assert_eq!(r.commands("submit").len(), 1, "found by lookup, not resent");
    assert!(r.agent.outbox().is_empty());
}

#[test]
fn offline_commands_are_rebased_on_a_new_session_with_a_tilde_action_and_re_signed() {
    let mut r = Rig::new(group_with(&[("w1", &[])]), "bob");
    r.link(false);
    let now = r.s.now;
    let action = r.agent.submit(now, &id("w1"), json!({"ok": 1})).unwrap();
    let session = r.agent.replace_session(now).unwrap();
    r.pump();
    assert_eq!(r.agent.session(), 2);
    r.link(true);
    for _ in 0..4 {
        r.advance(600);
    }
    let submits = r.commands("submit");
    let last = submits.last().unwrap();
    assert_eq!(last.action, id(&format!("{action}~1")));
    assert_eq!(last.session, 2);
    assert!(last
        .verify(&SecretKey::for_transcript("bob").public())
        .unwrap());
    let receipt = r.s.state().receipt("bob", last.action.as_str()).unwrap();
    // The lease of session 1 was revoked by the new session: the late result is evidence.
    assert_eq!(receipt.disposition, Disposition::Evidence);
    assert!(r.s.state().receipt("bob", session.as_str()).is_some());
    assert!(r.agent.outbox().is_empty());
}

#[test]
fn cursor_too_old_leads_to_a_verified_snapshot_restore() {
    let mut s = group_with(&[("w1", &[]), ("w2", &[])]);
    s.claim_start("carol", "w1", 60_000);
    let bytes = Snapshot::build_cbor(s.state(), &SecretKey::for_transcript("@authority")).unwrap();
    let snap = Snapshot::from_cbor(&bytes).unwrap();
    let mut c = config(&s, "bob");
    c.capacity = 0;
    let mut agent = Agent::new(c, SecretKey::for_transcript("bob")).unwrap();
    agent.handle_connectivity(s.now, true);
    let e = snap.reference("/snap").cursor_too_old(0, snap.seq);
    agent.handle_fetch_error(s.now, &e);
    let mut asked = false;
    loop {
        if let Some(ws) = agent.poll_write_set() {
            agent.handle_committed(s.now, ws.serial);
            continue;
        }
        match agent.poll_transmit() {
            Some(Transmit::FetchSnapshot(r)) => asked |= r.seq == snap.seq,
            Some(_) => {}
            None => break,
        }
    }
    assert!(asked);
    // A tampered snapshot changes nothing.
    let mut bad = bytes.clone();
    bad[40] ^= 1;
    agent.handle_snapshot(s.now, &bad);
    assert_eq!(agent.replica().cursor(), 0);
    assert!(matches!(
        agent.poll_notice(),
        Some(Notice::Corrupt(Error {
            code: Code::SnapshotInvalid,
            ..
        }))
    ));
    agent.handle_fetch_error(s.now, &e);
    agent.handle_snapshot(s.now, &bytes);
    assert_eq!(agent.replica().cursor(), snap.seq);
    assert_eq!(
        agent.replica().state_hash().unwrap(),
        s.state().hash().unwrap()
    );
    let ws = agent.poll_write_set().unwrap();
    assert!(ws.reset);
    // Replay resumes strictly after the snapshot.
    let fetch = std::iter::from_fn(|| agent.poll_transmit()).find_map(|t| match t {
        Transmit::FetchEvents { after } => Some(after),
        _ => None,
    });
    assert_eq!(
        fetch, None,
        "nothing is sent before the restore is committed"
    );
    agent.handle_committed(s.now, ws.serial);
    let fetch = std::iter::from_fn(|| agent.poll_transmit()).find_map(|t| match t {
        Transmit::FetchEvents { after } => Some(after),
        _ => None,
    });
    assert_eq!(fetch, Some(snap.seq));
}

#[test]
fn a_lost_lease_is_reported_and_its_work_is_not_continued() {
    let mut r = Rig::new(group_with(&[("w1", &[])]), "bob");
    r.up = false; // renewals cannot get through
    r.agent.handle_connectivity(r.s.now, true); // …but the host does not know yet
    r.advance(10_500);
    assert!(r.notices.iter().any(|n| matches!(
        n,
        Notice::LeaseLost {
            reason: "expired_locally",
            ..
        }
    )));
    let now = r.s.now;
    assert_eq!(
        r.agent.charge(now, &id("w1"), 1, None).unwrap_err().code,
        Code::LeaseExpired
    );
}

// ----- the planner (SPEC §5 `expand`, §7 "Dynamic graphs") -----

fn plans(r: &Rig) -> Vec<u64> {
    r.notices
        .iter()
        .filter_map(|n| match n {
            Notice::Plan { trigger, .. } => Some(*trigger),
            _ => None,
        })
        .collect()
}

fn follow_up(work: &str) -> mwp_core::command::NewWork {
    serde_json::from_value(
        json!({"work": work, "contract": contract(3, "low"), "after": [], "spec": {}}),
    )
    .unwrap()
}

/// The planner runs `w1` to success; returns the trigger seq.
fn succeed_w1(r: &mut Rig) -> u64 {
    let now = r.s.now;
    assert_eq!(r.running(), vec![id("w1")]);
    r.agent
        .submit(now, &id("w1"), json!({"shards": 2}))
        .unwrap();
    r.pump();
    *r.s.state().terminal.keys().last().expect("w1 is terminal")
}

#[test]
fn a_terminal_event_reaches_the_planner_only_once_it_is_durable_here() {
    let mut s = group_with(&[("w1", &[])]);
    // Another worker finishes w1; the planner only watches (capacity 0).
    let lease = s.claim_start("carol", "w1", 10_000);
    s.ok(
        "carol",
        None,
        json!({"type": "submit", "work": "w1", "lease": lease, "result": {}}),
    );
    let mut c = config(&s, "bob");
    c.planner = true;
    c.capacity = 0;
    let mut agent = Agent::new(c, SecretKey::for_transcript("bob")).unwrap();
    let now = s.now;
    let events = s.auth.events(&s.group, 0, usize::MAX).unwrap();
    agent.handle_events(now, events);
    // Applied but not committed: the rule is not asked.
    assert!(agent.pending_dispositions().is_empty());
    while let Some(n) = agent.poll_notice() {
        assert!(
            !matches!(n, Notice::Plan { .. }),
            "{n:?} before the outcome is durable"
        );
    }
    let ws = agent.poll_write_set().unwrap();
    agent.handle_committed(now, ws.serial);
    let trigger = *s.state().terminal.keys().next().unwrap();
    assert_eq!(agent.pending_dispositions(), vec![trigger]);
    let mut asked = Vec::new();
    while let Some(n) = agent.poll_notice() {
        if let Notice::Plan { trigger, work } = n {
            asked.push((trigger, work));
        }
    }
    assert_eq!(asked, vec![(trigger, id("w1"))]);
}

#[test]
fn an_expansion_creates_the_follow_ups_and_the_empty_disposition_ends_the_asking() {
    let mut r = Rig::planner(group_with(&[("w1", &[])]), "bob");
    let trigger = succeed_w1(&mut r);
    assert_eq!(plans(&r), vec![trigger]);
    let now = r.s.now;
    let action = r
        .agent
        .dispose(now, trigger, vec![follow_up("s1"), follow_up("s2")])
        .unwrap();
    assert_eq!(action.as_str(), format!("expand-{trigger}"));
    r.pump();
    assert!(r.s.state().work.contains_key(&id("s1")));
    assert!(r.s.state().expansions.contains_key(&trigger));
    // The follow-ups run; each terminal gets the empty disposition.
    for _ in 0..2 {
        let now = r.s.now;
        let w = r.running().last().unwrap().clone();
        r.agent.submit(now, &w, json!({})).unwrap();
        r.pump();
        let t = *r.s.state().terminal.keys().last().unwrap();
        r.agent.dispose(r.s.now, t, vec![]).unwrap();
        r.pump();
        assert!(
            r.s.state().expansions.contains_key(&t),
            "empty disposition recorded"
        );
    }
    // Nothing is pending and nothing is asked again, even after a restart.
    assert!(r.agent.pending_dispositions().is_empty());
    r.crash_and_restore();
    r.advance(100);
    assert!(plans(&r).is_empty(), "{:?}", r.notices);
    // A trigger already disposed of cannot be disposed again.
    assert_eq!(
        r.agent.dispose(r.s.now, trigger, vec![]).unwrap_err().code,
        Code::NotFound
    );
}

#[test]
fn after_a_restart_pending_dispositions_go_before_any_claim_or_start() {
    let mut r = Rig::planner(group_with(&[("w1", &[]), ("w2", &[])]), "bob");
    let trigger = succeed_w1(&mut r);
    // The planner dies before its rule answers.
    r.crash_and_restore();
    let before = r.sent.len();
    r.advance(100);
    assert_eq!(plans(&r), vec![trigger], "asked again after the restart");
    let sent: Vec<&str> = r.sent[before..]
        .iter()
        .filter_map(|t| match t {
            Transmit::Command(c) => Some(c.body.type_name()),
            _ => None,
        })
        .collect();
    assert!(
        !sent.contains(&"claim_work"),
        "claimed before the disposition: {sent:?}"
    );
    let now = r.s.now;
    r.agent.dispose(now, trigger, vec![]).unwrap();
    r.pump();
    r.advance(100);
    let sent: Vec<&str> = r.sent[before..]
        .iter()
        .filter_map(|t| match t {
            Transmit::Command(c) => Some(c.body.type_name()),
            _ => None,
        })
        .collect();
    let expand = sent.iter().position(|t| *t == "expand").unwrap();
    let claim = sent
        .iter()
        .position(|t| *t == "claim_work")
        .unwrap_or_else(|| {
            panic!(
                "w2 is claimed after: {sent:?} {:?} {:?}",
                r.notices,
                r.s.state().work.get(&id("w2")).map(|w| w.state)
            )
        });
    assert!(expand < claim, "{sent:?}");
}

#[test]
fn a_crash_between_the_answer_and_its_acceptance_resends_the_same_expand_once() {
    let mut r = Rig::planner(group_with(&[("w1", &[])]), "bob");
    let trigger = succeed_w1(&mut r);
    // Answered and made durable, but the link is down: not sent yet.
    r.link(false);
    let now = r.s.now;
    r.agent
        .dispose(now, trigger, vec![follow_up("s1")])
        .unwrap();
    r.pump();
    let made = r.agent.outbox().values().next().unwrap().command.clone();
    r.crash_and_restore();
    assert!(
        plans(&r).is_empty(),
        "an expand in the outbox is not asked for again"
    );
    r.link(true);
    r.advance(100);
    let sent = r.commands("expand");
    assert_eq!(sent.last().unwrap().action, made.action);
    assert_eq!(sent.last().unwrap().body, made.body);
    // Answered but never made durable: asked again, the same answer lands once.
    let mut r2 = Rig::planner(group_with(&[("w1", &[])]), "bob");
    let t2 = succeed_w1(&mut r2);
    let now = r2.s.now;
    r2.agent.dispose(now, t2, vec![follow_up("s1")]).unwrap();
    r2.crash_and_restore(); // the write set holding the expand was never committed
    r2.advance(100);
    assert_eq!(plans(&r2), vec![t2]);
    r2.agent
        .dispose(r2.s.now, t2, vec![follow_up("s1")])
        .unwrap();
    r2.pump();
    let expanded =
        r2.s.events()
            .iter()
            .filter(|e| matches!(e.kind, mwp_core::EventKind::WorkExpanded(_)))
            .count();
    assert_eq!(expanded, 1);
}
