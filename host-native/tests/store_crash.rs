//! Crash consistency: a scripted workload is crashed at every mutating storage operation
//! (writes, truncations, syncs, creations, renames, directory syncs) in turn — once with the
//! operation failing once, once failing forever — and the power-loss image is reopened; then
//! power cuts at every boundary leave images with unsynced writes dropped, kept, reordered
//! and torn. After each: the store reopens, every acknowledged receipt is there byte for
//! byte, the log replays on the memory reference to the same events and state hash, redacted
//! values are gone, fsck is clean, and resuming the workload ends in the reference's state.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use common::*;
use mwp_core::memory::MemoryAuthority;
use mwp_core::{Decision, Hash};
use mwp_host::service::AuthorityService;
use mwp_host::store::backend::{Fault, MemBackend, PowerLoss};
use mwp_host::store::FileStore;

/// Fault-free run: the number of crash points and the final state hash.
fn baseline() -> (u64, Hash) {
    let be = MemBackend::new();
    let mut rec = Recorder::open(&be, opts());
    run(&mut rec, &workload());
    assert!(rec.errors.iter().all(|e| e.code != mwp_core::Code::Storage));
    let hash = rec
        .store
        .as_ref()
        .unwrap()
        .state_hash(&id("g1"))
        .unwrap()
        .unwrap();
    (be.ops(), hash)
}

fn resume_and_check(store: FileStore, final_hash: Hash, context: &str) {
    let mut rec = Recorder {
        store: Some(store),
        ..Recorder::default()
    };
    run(&mut rec, &workload());
    let got = rec.store.as_ref().unwrap().state_hash(&id("g1")).unwrap();
    assert_eq!(
        got,
        Some(final_hash),
        "{context}: resumed workload ends elsewhere"
    );
}

/// Every crash point is visited (raise to sample while debugging).
fn stride() -> usize {
    1
}

#[test]
fn crash_at_every_write_and_sync_boundary() {
    let (boundaries, final_hash) = baseline();
    let mut covered = 0u64;
    for n in (0..boundaries).step_by(stride()) {
        for fault in [Fault::Once, Fault::Forever] {
            let be = MemBackend::new();
            be.fail_at(n, fault);
            let mut rec = Recorder::open(&be, opts());
            run(&mut rec, &workload());
            drop(rec.store.take());
            let context = format!(
                "fault {fault:?} at op {n} ({:?})",
                be.op_log().get(n as usize)
            );
            let image = be.crash_image(PowerLoss::DropAll);
            let store = check_reopened(&image, &rec, &context);
            resume_and_check(store, final_hash, &context);
            covered += 1;
        }
    }
    eprintln!("failure crash points covered: {covered} ({boundaries} boundaries x 2 fault kinds)");
    assert!(boundaries > 100);
}

#[test]
fn power_loss_images_at_every_boundary() {
    let (boundaries, final_hash) = baseline();
    let mut covered = 0u64;
    for n in (0..boundaries).step_by(stride()) {
        let be = MemBackend::new();
        be.fail_at(n, Fault::Forever);
        let mut rec = Recorder::open(&be, opts());
        run(&mut rec, &workload());
        drop(rec.store.take());
        for loss in [
            PowerLoss::DropAll,
            PowerLoss::KeepAll,
            PowerLoss::Scramble(n),
            PowerLoss::Scramble(n ^ 0xdead_beef),
        ] {
            let context = format!(
                "power loss {loss:?} at op {n} ({:?})",
                be.op_log().get(n as usize)
            );
            let image = be.crash_image(loss);
            let store = check_reopened(&image, &rec, &context);
            resume_and_check(store, final_hash, &context);
            covered += 1;
        }
    }
    eprintln!("power-loss images covered: {covered} ({boundaries} boundaries x 4 images)");
}

/// Concurrent submitters: batches of several records are in flight when the power is cut,
/// and their pages land in any order.
#[test]
fn power_loss_during_group_commit_of_concurrent_submitters() {
    const THREADS: usize = 8;
    const EACH: usize = 6;
    let text = workload();
    let open_line: String = text.lines().take(1).collect();
    let contract = r#"{"max_attempts": 1, "backoff_base_ms": 1, "backoff_max_ms": 1, "cost_budget": 1, "risk": "low"}"#;
    let mut batched = false;
    let mut covered = 0u64;
    for cut in (0..48u64).step_by(stride().min(3)) {
        let be = MemBackend::new();
        let mut rec = Recorder::open(&be, opts());
        run(&mut rec, &open_line);
        let store = rec.store.take().unwrap();
        be.set_sync_delay(std::time::Duration::from_millis(1));
        be.fail_at(be.ops() + cut, Fault::Forever);
        // Pre-sign every command outside the threads.
        let cmds: Vec<Vec<mwp_core::Command>> = (0..THREADS)
            .map(|t| {
                (0..EACH)
                    .map(|i| {
                        let body = format!(r#"{{"type": "create_work", "work": "t{t}-{i}", "contract": {contract}, "after": [], "spec": {{"t": {t}, "i": {i}}}}}"#);
                        let json = format!(
                            r#"{{"org": "acme", "group": "g1", "actor": "alice", "action": "t{t}-{i}", "session": 1, "body": {body}, "sig": "{}"}}"#,
                            "00".repeat(64)
                        );
                        let mut c = mwp_core::Command::from_json(json.as_bytes(), &Default::default()).unwrap();
                        c.sign(&mwp_core::SecretKey::for_transcript("alice")).unwrap();
                        c
                    })
                    .collect()
            })
            .collect();
        for c in cmds.iter().flatten() {
            rec.cmds
                .insert((c.actor.clone(), c.action.clone()), c.clone());
        }
        let acked = Mutex::new(rec.acked.clone());
        std::thread::scope(|s| {
            for list in &cmds {
                let (store, acked) = (&store, &acked);
                s.spawn(move || {
                    for c in list {
                        match store.submit(c, 5000) {
                            Ok(Decision::Accepted(e)) => acked.lock().unwrap().push(e.receipt()),
                            Ok(Decision::Duplicate(r)) => acked.lock().unwrap().push(r),
                            Ok(Decision::Rejected(_)) | Err(_) => break,
                        }
                    }
                });
            }
        });
        drop(store);
        rec.acked = acked.into_inner().unwrap();
        let writes = be
            .op_log()
            .iter()
            .filter(|o| o.starts_with("write") && o.contains(".seg"))
            .count();
        batched |= writes < 1 + rec.acked.len();
        for loss in [
            PowerLoss::DropAll,
            PowerLoss::KeepAll,
            PowerLoss::Scramble(cut),
            PowerLoss::Scramble(cut + 99),
        ] {
            let context = format!("concurrent, power loss {loss:?} after {cut} ops");
            let image = be.crash_image(loss);
            check_reopened(&image, &rec, &context);
            covered += 1;
        }
    }
    assert!(
        batched,
        "group commit never batched two records into one write"
    );
    eprintln!("concurrent power-loss images covered: {covered}");
}

/// Several groups commit at once, so that one sync round covers several groups' segments
/// (docs/decisions.md, "One sync for many groups"): every operation of that phase, the
/// round's file-system sync included, fails in turn (once, or from then on) and the power is
/// cut. After each image every group holds a gap-free log that replays on the reference,
/// every acknowledged receipt is there, and fsck is clean.
#[test]
fn power_loss_during_a_sync_round_shared_by_several_groups() {
    power_loss_in_shared_rounds(false);
}

/// As [`power_loss_during_a_sync_round_shared_by_several_groups`], with the commands
/// submitted as `mwp serve` submits them (`submit_staged`): the store's one committer writes
/// the batches of every waiting group and makes them durable in one round.
#[test]
fn power_loss_during_a_committer_round_of_several_groups() {
    power_loss_in_shared_rounds(true);
}

/// A store on `be` with `n` groups opened, `g1` … `gn`, each by the workload's first line.
fn open_groups(be: &MemBackend, n: usize) -> Recorder {
    let open_line: String = workload().lines().take(1).collect();
    let mut rec = Recorder::open(be, opts());
    for g in 0..n {
        let line = open_line
            .replace(r#""group": "g1""#, &format!(r#""group": "g{}""#, g + 1))
            .replace(r#""action": "open""#, &format!(r#""action": "open-{g}""#));
        run(&mut rec, &line);
    }
    rec
}

/// The server's submitters (`submit_staged`) of many groups share the store's one committer:
/// with a single blocking thread and a slow sync, one command in each of eight groups is made
/// durable in at most two syncs (the committer's first round and one for the groups queued
/// meanwhile), where a committer per group would sync eight times, one after another.
#[test]
fn the_groups_of_staged_submits_share_one_committer() {
    const GROUPS: usize = 8;
    let contract = r#"{"max_attempts": 1, "backoff_base_ms": 1, "backoff_max_ms": 1, "cost_budget": 1, "risk": "low"}"#;
    let be = MemBackend::new();
    let mut rec = open_groups(&be, GROUPS);
    let store = rec.store.take().unwrap();
    let cmds: Vec<mwp_core::Command> = (0..GROUPS)
        .map(|g| {
            let body = format!(r#"{{"type": "create_work", "work": "w", "contract": {contract}, "after": [], "spec": {{"g": {g}}}}}"#);
            let json = format!(
                r#"{{"org": "acme", "group": "g{}", "actor": "alice", "action": "g{g}", "session": 1, "body": {body}, "sig": "{}"}}"#,
                g + 1,
                "00".repeat(64)
            );
            let mut c = mwp_core::Command::from_json(json.as_bytes(), &Default::default()).unwrap();
            c.sign(&mwp_core::SecretKey::for_transcript("alice")).unwrap();
            c
        })
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .max_blocking_threads(1)
        .build()
        .unwrap();
    // Long enough for the other seven commands to be decided while the first round syncs.
    be.set_sync_delay(std::time::Duration::from_millis(500));
    let start = be.ops() as usize;
    let answers: Vec<_> = {
        let _in_rt = rt.enter();
        cmds.iter()
            .map(|c| store.submit_staged(c, 5000).expect("a staged path"))
            .collect()
    };
    for answer in answers {
        assert!(matches!(rt.block_on(answer), Ok(Decision::Accepted(_))));
    }
    let syncs = be.op_log()[start..]
        .iter()
        .filter(|o| *o == "syncfs" || o.starts_with("sync "))
        .count();
    assert!(
        (1..=2).contains(&syncs),
        "{GROUPS} groups' commands took {syncs} syncs"
    );
}

/// A request waiting for its event to be durable that a flush handed the next flush to (it
/// was the first still waiting, and no committer was left) passes that on when its answer is
/// dropped before it ran (its client went away): the next request waiting is answered, not
/// left waiting for a flush nobody starts.
#[test]
fn a_dropped_answer_hands_the_next_flush_on() {
    let be = MemBackend::new();
    let mut rec = open_groups(&be, 1);
    let store = Arc::new(rec.store.take().unwrap());
    let contract = r#"{"max_attempts": 1, "backoff_base_ms": 1, "backoff_max_ms": 1, "cost_budget": 1, "risk": "low"}"#;
    let cmds: Vec<mwp_core::Command> = (0..3)
        .map(|i| {
            let body = format!(r#"{{"type": "create_work", "work": "w{i}", "contract": {contract}, "after": [], "spec": {{"i": {i}}}}}"#);
            let json = format!(
                r#"{{"org": "acme", "group": "g1", "actor": "alice", "action": "a{i}", "session": 1, "body": {body}, "sig": "{}"}}"#,
                "00".repeat(64)
            );
            let mut c = mwp_core::Command::from_json(json.as_bytes(), &Default::default()).unwrap();
            c.sign(&mwp_core::SecretKey::for_transcript("alice")).unwrap();
            c
        })
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    be.set_sync_delay(std::time::Duration::from_millis(300));
    // A submitter that leads its own flush (as an erase, a snapshot or a seal does).
    let leader = {
        let (store, c) = (Arc::clone(&store), cmds[0].clone());
        std::thread::spawn(move || store.submit(&c, 5000))
    };
    std::thread::sleep(std::time::Duration::from_millis(100));
    let _in_rt = rt.enter();
    // Decided while the leader syncs; polled once, it waits first in line.
    let mut first = store.submit_staged(&cmds[1], 5000).expect("a staged path");
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(first.as_mut().poll(&mut cx).is_pending());
    let second = rt.spawn(store.submit_staged(&cmds[2], 5000).expect("a staged path"));
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(matches!(leader.join().unwrap(), Ok(Decision::Accepted(_))));
    // The leader handed the next flush to `first`, which is dropped without running.
    drop(first);
    let answer = rt.block_on(tokio::time::timeout(
        std::time::Duration::from_secs(5),
        second,
    ));
    assert!(
        matches!(answer, Ok(Ok(Ok(Decision::Accepted(_))))),
        "the second request was not answered: {answer:?}"
    );
}

fn power_loss_in_shared_rounds(staged: bool) {
    const GROUPS: usize = 4;
    const EACH: usize = 5;
    let contract = r#"{"max_attempts": 1, "backoff_base_ms": 1, "backoff_max_ms": 1, "cost_budget": 1, "risk": "low"}"#;
    let group = |g: usize| id(&format!("g{}", g + 1));
    let mut shared = false;
    let mut covered = 0u64;
    for (cut, fault) in (0..60u64)
        .step_by(stride())
        .flat_map(|c| [(c, Fault::Once), (c, Fault::Forever)])
    {
        let be = MemBackend::new();
        let mut rec = open_groups(&be, GROUPS);
        assert_eq!(rec.acked.len(), GROUPS, "every group opened");
        let store = rec.store.take().unwrap();
        be.set_sync_delay(std::time::Duration::from_millis(1));
        let start = be.ops();
        be.fail_at(start + cut, fault);
        let cmds: Vec<Vec<mwp_core::Command>> = (0..GROUPS)
            .map(|g| {
                (0..EACH)
                    .map(|i| {
                        let body = format!(r#"{{"type": "create_work", "work": "w{i}", "contract": {contract}, "after": [], "spec": {{"g": {g}, "i": {i}}}}}"#);
                        let json = format!(
                            r#"{{"org": "acme", "group": "g{}", "actor": "alice", "action": "g{g}-{i}", "session": 1, "body": {body}, "sig": "{}"}}"#,
                            g + 1,
                            "00".repeat(64)
                        );
                        let mut c = mwp_core::Command::from_json(json.as_bytes(), &Default::default()).unwrap();
                        c.sign(&mwp_core::SecretKey::for_transcript("alice")).unwrap();
                        c
                    })
                    .collect()
            })
            .collect();
        for c in cmds.iter().flatten() {
            rec.cmds
                .insert((c.actor.clone(), c.action.clone()), c.clone());
        }
        let acked = Mutex::new(rec.acked.clone());
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        std::thread::scope(|s| {
            for list in &cmds {
                let (store, acked, rt) = (&store, &acked, &rt);
                s.spawn(move || {
                    let _in_rt = rt.enter();
                    for c in list {
                        // `None`: the store has no staged path for the command.
                        let answer = match staged.then(|| store.submit_staged(c, 5000)).flatten() {
                            Some(answer) => rt.block_on(answer),
                            None => store.submit(c, 5000),
                        };
                        match answer {
                            Ok(Decision::Accepted(e)) => acked.lock().unwrap().push(e.receipt()),
                            Ok(Decision::Duplicate(r)) => acked.lock().unwrap().push(r),
                            Ok(Decision::Rejected(_)) | Err(_) => break,
                        }
                    }
                });
            }
        });
        drop(store);
        rec.acked = acked.into_inner().unwrap();
        let log = be.op_log();
        shared |= log[start as usize..]
            .iter()
            .take(cut as usize)
            .any(|o| o == "syncfs");
        for loss in [
            PowerLoss::DropAll,
            PowerLoss::KeepAll,
            PowerLoss::Scramble(cut),
            PowerLoss::Scramble(cut + 77),
        ] {
            let context = format!(
                "{GROUPS} groups, fault {fault:?} and power loss {loss:?} at op {cut} of the concurrent phase ({:?})",
                log.get((start + cut) as usize)
            );
            let image = be.crash_image(loss);
            let reopened = check_reopened(&image, &rec, &context);
            for g in 0..GROUPS {
                let events = reopened.events(&group(g), 0, usize::MAX).unwrap();
                let acked_here = rec
                    .acked
                    .iter()
                    .filter(|r| r.group == group(g))
                    .map(|r| r.seq)
                    .max()
                    .unwrap();
                assert!(
                    events.len() as u64 >= acked_here,
                    "{context}: group {g} lost an acknowledged event"
                );
                let mut reference = MemoryAuthority::new();
                for (i, e) in events.iter().enumerate() {
                    assert_eq!(e.seq, i as u64 + 1, "{context}: group {g} has a gap");
                    let cmd = &rec.cmds[&(e.actor.clone(), e.action.clone())];
                    match reference.submit(cmd, e.at) {
                        Ok(Decision::Accepted(r)) => {
                            assert_eq!(r.id, e.id, "{context}: group {g} seq {}", e.seq)
                        }
                        other => panic!("{context}: group {g} seq {}: {other:?}", e.seq),
                    }
                }
                let want = reference
                    .group(&group(g))
                    .and_then(|m| m.state())
                    .map(|s| s.hash().unwrap());
                assert_eq!(
                    reopened.state_hash(&group(g)).unwrap(),
                    want,
                    "{context}: group {g} state hash differs from the reference"
                );
            }
            covered += 1;
        }
    }
    assert!(
        shared,
        "no sync round covered several groups with one file-system sync"
    );
    eprintln!("shared-sync power-loss images covered: {covered}");
}

#[test]
fn a_reopened_store_keeps_answering_duplicates_with_the_original_receipts() {
    let be = MemBackend::new();
    let mut rec = Recorder::open(&be, opts());
    run(&mut rec, &workload());
    let first = rec.acked.clone();
    let store = rec.store.take().unwrap().reopen().unwrap();
    let mut again = Recorder {
        store: Some(store),
        ..Recorder::default()
    };
    run(&mut again, &workload());
    for r in &first {
        assert!(
            again.acked.contains(r),
            "receipt {r:?} changed after reopen"
        );
    }
    let _ = Path::new("/d");
    let _ = Arc::new(());
}
