//! Crash consistency of the agent journal: the write sets an agent driver hands out while it
//! claims, checkpoints and submits work are appended in turn, and the run is crashed at every
//! mutating storage operation (creations, writes, syncs, renames, directory syncs) — once
//! with the operation failing once, once failing forever — and the power-loss images of
//! that moment (unsynced writes dropped, kept, reordered and torn) are reopened, as is the
//! live disk after a failure that happened once (a process crash). After each:
//! every write set whose append returned `Ok` is there, the image is the reference built
//! from exactly the committed write sets (or those and the one whose append was under way,
//! whole), and resuming the appends ends in the reference's final image.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use mwp_core::agent::{Agent, AgentImage, Config, Notice, Transmit};
use mwp_core::memory::MemoryAuthority;
use mwp_core::replica::WriteSet;
use mwp_core::transcript::Runner;
use mwp_core::{Decision, Id, SecretKey};
use mwp_host::agent_host::Journal;
use mwp_host::store::backend::{Backend, Fault, MemBackend, PowerLoss};
use serde_json::json;

const PATH: &str = "/agents/g1/bob.journal";

fn id(s: &str) -> Id {
    Id::new(s).expect("test ids are valid")
}

const CONTRACT: &str = r#"{"max_attempts": 3, "backoff_base_ms": 100, "backoff_max_ms": 1000, "cost_budget": 10, "risk": "low"}"#;

/// The write sets worker `bob`'s driver hands out while it takes, checkpoints and submits
/// three work items of a group on the memory authority, over a perfect link.
fn scripted_write_sets() -> Vec<WriteSet> {
    let mut auth = MemoryAuthority::new();
    let mut setup = vec![
        r#"{"at": 1000, "org": "acme", "group": "g1", "actor": "alice", "action": "open", "body": {"type": "open_group", "mission": "m1", "title": "Agent crash test", "members": [{"actor": "alice", "role": "owner"}, {"actor": "bob", "role": "worker"}]}}"#.to_owned(),
    ];
    for w in ["w1", "w2", "w3"] {
        setup.push(format!(
            r#"{{"actor": "alice", "action": "c-{w}", "body": {{"type": "create_work", "work": "{w}", "contract": {CONTRACT}, "after": [], "spec": {{"do": "{w}"}}}}}}"#
        ));
    }
    let mut runner = Runner::new(&mut auth);
    runner.run_all(&setup.join("\n"));
    assert!(!runner.failed(), "the set-up transcript runs");
    let group = id("g1");
    let config = Config::new(
        id("acme"),
        group.clone(),
        id("bob"),
        SecretKey::for_transcript("@authority").public(),
    );
    let mut agent = Agent::new(config, SecretKey::for_transcript("bob")).expect("an agent");
    let mut now = 2000;
    let mut out = Vec::new();
    let mut done = BTreeSet::new();
    agent.handle_connectivity(now, true);
    for _ in 0..10_000 {
        if let Some(ws) = agent.poll_write_set() {
            agent.handle_committed(now, ws.serial);
            out.push(ws);
            continue;
        }
        if let Some(t) = agent.poll_transmit() {
            match t {
                Transmit::Command(cmd) => {
                    let answer = match auth.submit(&cmd, now) {
                        Ok(Decision::Accepted(e)) => Ok(e.receipt()),
                        Ok(Decision::Duplicate(r)) => Ok(r),
                        Ok(Decision::Rejected(r)) => Err(r.into_error()),
                        Err(e) => Err(e),
                    };
                    // Events before the answer, as a live tail delivers them.
                    let after = agent.replica().cursor();
                    let events = auth
                        .group_mut(&group)
                        .and_then(|g| g.events(after, 1000))
                        .expect("events");
                    agent.handle_events(now, events);
                    agent.handle_answer(now, &cmd.action, answer);
                }
                Transmit::FetchEvents { after } => {
                    let events = auth
                        .group_mut(&group)
                        .and_then(|g| g.events(after, 1000))
                        .expect("events");
                    agent.handle_events(now, events);
                }
                Transmit::LookupReceipt { action } => agent.handle_lookup(now, &action, None),
                Transmit::FetchSnapshot(_) | Transmit::Ack { .. } => {}
            }
            continue;
        }
        if agent.poll_dispatch().is_some() {
            continue;
        }
        if let Some(n) = agent.poll_notice() {
            // A checkpoint releases the lease; the item is claimed again and then submitted.
            if let Notice::Run {
                work, checkpoint, ..
            } = n
            {
                if checkpoint.is_none() {
                    agent
                        .checkpoint(now, &work, json!({"step": 1}))
                        .expect("a checkpoint of running work");
                } else {
                    agent
                        .submit(now, &work, json!({"ok": true, "work": work.as_str()}))
                        .expect("a submit of running work");
                    done.insert(work);
                }
            }
            continue;
        }
        if done.len() == 3 && agent.outbox().is_empty() {
            break;
        }
        now += 100;
        agent.handle_timeout(now);
    }
    assert_eq!(done.len(), 3, "the worker ran every item");
    out
}

/// `refs[k]`: the image after exactly the first `k` write sets.
fn references(sets: &[WriteSet]) -> Vec<AgentImage> {
    let mut refs = vec![AgentImage::default()];
    for ws in sets {
        let mut next = refs.last().cloned().unwrap_or_default();
        next.commit(ws)
            .expect("the driver's write sets follow each other");
        refs.push(next);
    }
    refs
}

/// Appends the write sets in turn, stopping at the first failure (the host stops: a crash).
/// Returns how many appends returned `Ok`, and whether one failed.
fn run(be: &MemBackend, sets: &[WriteSet]) -> (usize, bool) {
    let Ok((mut journal, image)) = Journal::open_with(Arc::new(be.clone()), Path::new(PATH)) else {
        return (0, true);
    };
    assert_eq!(image, AgentImage::default());
    for (k, ws) in sets.iter().enumerate() {
        if journal.append(ws).is_err() {
            return (k, true);
        }
    }
    (sets.len(), false)
}

/// Reopens an image and checks it against the references; then appends the rest and checks
/// the final image. Returns the reopened image's count of write sets.
fn check(
    image: &MemBackend,
    sets: &[WriteSet],
    refs: &[AgentImage],
    acked: usize,
    failed: bool,
    context: &str,
) -> usize {
    let (mut journal, got) = Journal::open_with(Arc::new(image.clone()), Path::new(PATH))
        .unwrap_or_else(|e| panic!("{context}: the journal does not reopen: {e}"));
    let k = usize::try_from(got.serial).expect("a small serial");
    assert!(
        k >= acked,
        "{context}: {acked} write sets were committed, {k} came back"
    );
    assert!(
        k == acked || (failed && k == acked + 1),
        "{context}: {k} write sets came back, {acked} were committed and no append was under way"
    );
    assert_eq!(&got, &refs[k], "{context}: the image is not the reference");
    for ws in &sets[k..] {
        journal
            .append(ws)
            .unwrap_or_else(|e| panic!("{context}: resuming: {e}"));
    }
    drop(journal);
    let (_, last) = Journal::open_with(Arc::new(image.clone()), Path::new(PATH))
        .unwrap_or_else(|e| panic!("{context}: the resumed journal does not reopen: {e}"));
    assert_eq!(&last, &refs[sets.len()], "{context}: resumed elsewhere");
    k
}

#[test]
fn every_write_and_sync_boundary_of_the_journal_keeps_exactly_the_committed_write_sets() {
    let sets = scripted_write_sets();
    assert!(sets.len() >= 10, "a workload of {} write sets", sets.len());
    let refs = references(&sets);
    let clean = clean_dirs();
    let setup_ops = clean.ops();
    assert_eq!(run(&clean, &sets), (sets.len(), false));
    let boundaries = clean.ops();
    let mut points = 0u64;
    let mut partial = 0u64;
    let mut restarts = 0u64;
    for n in setup_ops..boundaries {
        for fault in [Fault::Once, Fault::Forever] {
            let be = clean_dirs();
            be.fail_at(n, fault);
            let (acked, failed) = run(&be, &sets);
            assert!(failed, "op {n}: the injected fault reached the journal");
            for loss in [
                PowerLoss::DropAll,
                PowerLoss::KeepAll,
                PowerLoss::Scramble(n),
                PowerLoss::Scramble(n ^ 0xdead_beef),
            ] {
                let context = format!(
                    "{fault:?} at op {n} ({:?}), {loss:?}",
                    be.op_log().get(n as usize)
                );
                let k = check(&be.crash_image(loss), &sets, &refs, acked, failed, &context);
                if loss == PowerLoss::DropAll {
                    // Only synced data survives: exactly the acknowledged write sets.
                    assert_eq!(k, acked, "{context}");
                }
                partial += u64::from(k < sets.len());
                points += 1;
            }
            if fault == Fault::Once {
                // A process crash without a power cut: the same disk, unsynced writes and all.
                let context = format!("process crash after a failure at op {n}");
                check(&be, &sets, &refs, acked, failed, &context);
                restarts += 1;
            }
        }
    }
    eprintln!(
        "journal crash points: {points} ({} boundaries x 2 fault kinds x 4 images; {} write sets, {partial} images short of the end), and {restarts} restarts without a power cut",
        boundaries - setup_ops,
        sets.len()
    );
    assert!(points > 200, "only {points} crash points");
}

/// A memory file system holding the journal's directory, durably.
fn clean_dirs() -> MemBackend {
    let be = MemBackend::new();
    be.create_dir(Path::new("/agents")).expect("mkdir");
    be.create_dir(Path::new("/agents/g1")).expect("mkdir");
    be.sync_dir(Path::new("/")).expect("sync");
    be.sync_dir(Path::new("/agents")).expect("sync");
    be
}

#[test]
fn a_crash_right_after_each_acknowledged_append_keeps_it() {
    let sets = scripted_write_sets();
    let refs = references(&sets);
    let be = clean_dirs();
    let (mut journal, _) =
        Journal::open_with(Arc::new(be.clone()), Path::new(PATH)).expect("a new journal");
    for (k, ws) in sets.iter().enumerate() {
        journal.append(ws).expect("an append");
        for loss in [PowerLoss::DropAll, PowerLoss::Scramble(k as u64)] {
            let image = be.crash_image(loss);
            let (_, got) = Journal::open_with(Arc::new(image), Path::new(PATH)).expect("reopens");
            assert_eq!(got, refs[k + 1], "write set {} lost by {loss:?}", k + 1);
        }
    }
}
