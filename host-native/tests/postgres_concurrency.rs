//! Two `PostgresAuthority` instances (two pools: two "servers") on one database, with
//! concurrent clients on the same Group: the log stays gapless and unforked, nothing is
//! appended twice, every acknowledged receipt is in the log, and retries are Duplicates.
//!
//! (An end-to-end version with two `mwp serve --store postgres://…` processes belongs with
//! the CLI's tests once it opens PostgreSQL stores.)
#![cfg(feature = "postgres")]

mod postgres_common;

use std::collections::BTreeSet;
use std::sync::Barrier;

use mwp_core::{Code, Decision, Id, Receipt};
use mwp_host::postgres::PostgresAuthority;
use mwp_host::service::AuthorityService;
use postgres_common::{command, create_work, open_group, state_hash, Schema};
use serde_json::json;

fn id(s: &str) -> Id {
    Id::new(s).expect("valid id")
}

const CLIENTS: usize = 8;
const PER_CLIENT: usize = 12;

#[test]
fn two_servers_and_concurrent_clients_never_fork_a_group() {
    let server = require_server!();
    let schema = Schema::new(&server, "two_servers");
    let servers = [
        schema.open("pool_size=3&snapshot_every=10"),
        schema.open("pool_size=3&snapshot_every=10"),
    ];
    let g = id("g1");

    // Every client races to open the group with the same command, half on each server:
    // one is accepted, every other answer is the same receipt as a Duplicate.
    let barrier = Barrier::new(CLIENTS);
    let opens: Vec<Decision> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let (srv, barrier) = (&servers[c % 2], &barrier);
                s.spawn(move || {
                    barrier.wait();
                    srv.submit(&open_group("g1", CLIENTS), 1000)
                        .expect("open answered")
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("client thread"))
            .collect()
    });
    let accepted: Vec<Receipt> = opens
        .iter()
        .filter_map(|d| match d {
            Decision::Accepted(e) => Some(e.receipt()),
            Decision::Duplicate(_) | Decision::Rejected(_) => None,
        })
        .collect();
    assert_eq!(
        accepted.len(),
        1,
        "exactly one open_group is accepted: {opens:?}"
    );
    for d in &opens {
        if let Decision::Duplicate(r) = d {
            assert_eq!(r, &accepted[0]);
        }
    }

    // Each client creates work through both servers in turn, and sends every command twice
    // (a retry after a lost answer, to the other server): the retry is a Duplicate with the
    // byte-identical receipt.
    let barrier = Barrier::new(CLIENTS);
    let acknowledged: Vec<Receipt> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let (servers, barrier) = (&servers, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    let actor = format!("w{c}");
                    let mut receipts = Vec::new();
                    for i in 0..PER_CLIENT {
                        let cmd = create_work("g1", &actor, &format!("a{i}"), &format!("c{c}-{i}"));
                        let first = &servers[(c + i) % 2];
                        let other = &servers[(c + i + 1) % 2];
                        let Decision::Accepted(event) = first.submit(&cmd, 2000).expect("accepted")
                        else {
                            panic!("a fresh command must be accepted")
                        };
                        let receipt = event.receipt();
                        match other.submit(&cmd, 2001).expect("retry answered") {
                            Decision::Duplicate(r) => assert_eq!(r, receipt),
                            Decision::Accepted(_) => panic!("a retry was appended twice"),
                            Decision::Rejected(r) => panic!("a retry was rejected: {r}"),
                        }
                        receipts.push(receipt);
                    }
                    receipts
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("client thread"))
            .collect()
    });

    // The log: gapless from 1, chained, one event per (actor, action), and every
    // acknowledged receipt names the event at its seq.
    let log = servers[0].events(&g, 0, usize::MAX).expect("log");
    let total = 1 + CLIENTS * PER_CLIENT;
    assert_eq!(log.len(), total);
    let mut keys = BTreeSet::new();
    for (i, e) in log.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1, "gapless");
        if i > 0 {
            assert_eq!(e.prev, log[i - 1].id, "chained: no fork");
        }
        assert!(
            keys.insert((e.actor.clone(), e.action.clone())),
            "appended twice: {e:?}"
        );
    }
    for r in &acknowledged {
        let e = &log[(r.seq - 1) as usize];
        assert_eq!(&e.receipt(), r, "an acknowledged receipt is in the log");
        assert_eq!(
            servers[1]
                .receipt(&g, &r.actor, &r.action)
                .expect("lookup")
                .as_ref(),
            Some(r)
        );
    }
    // Both servers see the same state, and so does a third one starting cold.
    let third = schema.open("");
    let hashes: Vec<_> = [&servers[0], &servers[1], &third]
        .iter()
        .map(|s: &&PostgresAuthority| {
            s.state(&g)
                .expect("state")
                .expect("open")
                .hash()
                .expect("hash")
        })
        .collect();
    assert!(hashes.windows(2).all(|w| w[0] == w[1]), "{hashes:?}");
    assert_eq!(servers[1].head_seq(&g).expect("head"), total as u64);
}

/// Commands of one group sent at once are decided together, fewer transactions than commands,
/// each answered as it would be alone: new ones accepted in one gapless log, a repeat a
/// Duplicate with the same receipt, an invalid one rejected without a trace.
#[test]
fn commands_sent_at_once_are_committed_together_and_answered_each() {
    let server = require_server!();
    let schema = Schema::new(&server, "batches");
    let store = schema.open("pool_size=2&snapshot_every=7");
    let g = id("g1");
    let senders = 24;
    store
        .submit(&open_group("g1", senders), 1000)
        .expect("open answered");
    let before = store.batches();

    // Each sender: a new work item; every third one sends it twice at once (a repeat, which
    // may land in the same batch); every fourth one also sends work that depends on an item
    // that does not exist (rejected). Every command from a thread of its own, all at once.
    let mut cmds = Vec::new();
    for c in 0..senders {
        let actor = format!("w{c}");
        let cmd = create_work("g1", &actor, "a", &format!("c{c}"));
        if c % 3 == 0 {
            cmds.push((c, "repeat", cmd.clone()));
        }
        cmds.push((c, "new", cmd));
        if c % 4 == 0 {
            let mut bad = create_work("g1", &actor, "b", &format!("d{c}"));
            if let mwp_core::Body::CreateWork(w) = &mut bad.body {
                w.after = vec![id("missing")];
            }
            bad.sign(&mwp_core::SecretKey::for_transcript(&actor))
                .expect("sign");
            cmds.push((c, "invalid", bad));
        }
    }
    let barrier = Barrier::new(cmds.len());
    let answers: Vec<(usize, &str, Decision)> = std::thread::scope(|s| {
        let handles: Vec<_> = cmds
            .iter()
            .map(|(c, what, cmd)| {
                let (store, barrier) = (&store, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    (*c, *what, store.submit(cmd, 2000).expect("answered"))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("sender"))
            .collect()
    });

    let log = store.events(&g, 0, usize::MAX).expect("log");
    assert_eq!(log.len(), 1 + senders, "one event per new work item");
    for (i, e) in log.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1, "gapless");
        if i > 0 {
            assert_eq!(e.prev, log[i - 1].id, "chained");
        }
    }
    for c in 0..senders {
        let mine: Vec<_> = answers.iter().filter(|(s, _, _)| *s == c).collect();
        // The work item's command (sent once or twice): one Accepted, the repeat a Duplicate
        // of the same receipt, whichever came first.
        let sent: Vec<&Decision> = mine
            .iter()
            .filter(|(_, what, _)| *what != "invalid")
            .map(|(_, _, d)| d)
            .collect();
        let accepted: Vec<_> = sent
            .iter()
            .filter_map(|d| match d {
                Decision::Accepted(e) => Some(e),
                _ => None,
            })
            .collect();
        assert_eq!(accepted.len(), 1, "sender {c}: accepted once: {sent:?}");
        let event = accepted[0];
        assert_eq!(log[(event.seq - 1) as usize].id, event.id, "sender {c}");
        for d in &sent {
            match d {
                Decision::Accepted(_) => {}
                Decision::Duplicate(r) => assert_eq!(r, &event.receipt(), "sender {c}"),
                Decision::Rejected(r) => panic!("sender {c}: a repeat was rejected: {r}"),
            }
        }
        for (_, what, d) in &mine {
            if *what == "invalid" {
                assert!(
                    matches!(d, Decision::Rejected(_)),
                    "sender {c}: work after a missing item is rejected: {d:?}"
                );
            }
        }
    }
    let transactions = store.batches() - before;
    let commands = answers.len();
    assert!(
        transactions < commands as u64,
        "{transactions} transactions for {commands} commands sent at once"
    );
    // What a store starting cold reads back is the state the batches left.
    let cold = schema.open("");
    assert_eq!(state_hash(&cold, &g), state_hash(&store, &g));
}

#[test]
fn racing_compare_and_set_claims_have_one_winner() {
    let server = require_server!();
    let schema = Schema::new(&server, "cas_race");
    let servers = [schema.open("pool_size=4"), schema.open("pool_size=4")];
    assert!(matches!(
        servers[0]
            .submit(&open_group("g1", CLIENTS), 1000)
            .expect("open"),
        Decision::Accepted(_)
    ));
    assert!(matches!(
        servers[1]
            .submit(&create_work("g1", "alice", "c", "job"), 1000)
            .expect("create"),
        Decision::Accepted(_)
    ));
    // Every worker claims the same item at revision 1 through alternating servers.
    let barrier = Barrier::new(CLIENTS);
    let answers: Vec<Result<Decision, mwp_core::Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let (srv, barrier) = (&servers[c % 2], &barrier);
                s.spawn(move || {
                    let cmd = command("g1", &format!("w{c}"), "claim", Some(1), json!({
                        "type": "claim_work", "work": "job", "lease_ms": 10_000, "start_within_ms": 5000}));
                    barrier.wait();
                    srv.submit(&cmd, 2000)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("client thread"))
            .collect()
    });
    let winners = answers
        .iter()
        .filter(|a| matches!(a, Ok(Decision::Accepted(_))))
        .count();
    assert_eq!(winners, 1, "{answers:?}");
    for a in &answers {
        if let Err(e) = a {
            assert_eq!(e.code, Code::RevisionMismatch, "{e}");
        }
    }
    assert_eq!(servers[0].head_seq(&id("g1")).expect("head"), 3);
}

#[test]
fn many_groups_on_two_servers_stay_independent() {
    let server = require_server!();
    let schema = Schema::new(&server, "many_groups");
    let servers = [schema.open("pool_size=4"), schema.open("pool_size=4")];
    std::thread::scope(|s| {
        for c in 0..CLIENTS {
            let servers = &servers;
            s.spawn(move || {
                let group = format!("g{c}");
                servers[c % 2]
                    .submit(&open_group(&group, 1), 1000)
                    .expect("open");
                for i in 0..6 {
                    let cmd = create_work(&group, "alice", &format!("a{i}"), &format!("w{i}"));
                    let d = servers[(c + i) % 2].submit(&cmd, 1000).expect("create");
                    assert!(matches!(d, Decision::Accepted(_)));
                }
            });
        }
    });
    let groups = servers[1].groups().expect("groups");
    assert_eq!(groups.len(), CLIENTS);
    for g in groups {
        let log = servers[0].events(&g, 0, 100).expect("log");
        assert_eq!(
            log.iter().map(|e| e.seq).collect::<Vec<_>>(),
            (1..=7).collect::<Vec<u64>>()
        );
    }
}

#[test]
fn two_servers_ticking_together_expire_a_lease_once() {
    let server = require_server!();
    let schema = Schema::new(&server, "tick_race");
    let servers = [schema.open("pool_size=2"), schema.open("pool_size=2")];
    let g = id("g1");
    servers[0].submit(&open_group("g1", 1), 1000).expect("open");
    servers[1]
        .submit(&create_work("g1", "alice", "c", "job"), 1000)
        .expect("create");
    let claim = command(
        "g1",
        "w0",
        "k",
        Some(1),
        json!({"type": "claim_work", "work": "job",
        "lease_ms": 1000, "start_within_ms": 500}),
    );
    servers[0].submit(&claim, 2000).expect("claim");
    let barrier = Barrier::new(2);
    let ticks: Vec<Option<Decision>> = std::thread::scope(|s| {
        let handles: Vec<_> = servers
            .iter()
            .map(|srv| {
                let (barrier, g) = (&barrier, &g);
                s.spawn(move || {
                    barrier.wait();
                    srv.tick(g, 5000).expect("tick answered")
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("tick thread"))
            .collect()
    });
    let accepted = ticks
        .iter()
        .filter(|t| matches!(t, Some(Decision::Accepted(_))))
        .count();
    assert_eq!(accepted, 1, "{ticks:?}");
    assert!(
        ticks
            .iter()
            .all(|t| matches!(t, Some(Decision::Accepted(_)) | None)),
        "{ticks:?}"
    );
    assert_eq!(servers[1].head_seq(&g).expect("head"), 4);
}

#[test]
fn a_store_used_through_spawn_blocking_can_be_dropped_on_the_runtime() {
    // How `mwp serve` uses it: calls through spawn_blocking, the last reference dropped
    // inside the async runtime at shutdown. Dropping the driver's connections there must
    // not panic.
    let server = require_server!();
    let schema = Schema::new(&server, "async_drop");
    let store = std::sync::Arc::new(schema.open("pool_size=2"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let head = rt.block_on(async move {
        let s = store.clone();
        let d = tokio::task::spawn_blocking(move || s.submit(&open_group("g1", 1), 1000))
            .await
            .expect("join")
            .expect("open");
        assert!(matches!(d, Decision::Accepted(_)));
        let s = store.clone();
        let head = tokio::task::spawn_blocking(move || s.head_seq(&id("g1")))
            .await
            .expect("join")
            .expect("head");
        drop(store); // the last reference, on a runtime thread
        head
    });
    assert_eq!(head, 1);
}

#[test]
fn without_the_shared_lock_the_head_guard_still_prevents_forks() {
    // Two stores that do not share group locks (as a writer that skipped the lock would):
    // races now reach the database, where the conditional head update and the unique keys
    // turn them into retries. The log must stay gapless and chained, every acknowledged
    // receipt must be in it, and every other answer must be a clear STORAGE error.
    let server = require_server!();
    let schema = Schema::new(&server, "no_lock");
    let servers = [
        schema
            .open("pool_size=4")
            .with_unshared_locks_for_tests("a"),
        schema
            .open("pool_size=4")
            .with_unshared_locks_for_tests("b"),
    ];
    servers[0].submit(&open_group("g1", 6), 1000).expect("open");
    let barrier = Barrier::new(6);
    let (acknowledged, failures): (Vec<Receipt>, usize) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..6)
            .map(|c| {
                let (servers, barrier) = (&servers, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    let mut ok = Vec::new();
                    let mut failed = 0;
                    for i in 0..10 {
                        let cmd = create_work(
                            "g1",
                            &format!("w{c}"),
                            &format!("a{i}"),
                            &format!("c{c}-{i}"),
                        );
                        match servers[(c + i) % 2].submit(&cmd, 2000) {
                            Ok(Decision::Accepted(e)) => ok.push(e.receipt()),
                            Ok(Decision::Duplicate(r)) => {
                                panic!("a fresh command was a duplicate: {r:?}")
                            }
                            Ok(Decision::Rejected(r)) => panic!("rejected: {r}"),
                            Err(e) => {
                                assert_eq!(e.code, Code::Storage, "{e}");
                                failed += 1;
                            }
                        }
                    }
                    (ok, failed)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("client")).fold(
            (Vec::new(), 0),
            |(mut all, n), (ok, failed)| {
                all.extend(ok);
                (all, n + failed)
            },
        )
    });
    let log = servers[1].events(&id("g1"), 0, usize::MAX).expect("log");
    assert_eq!(log.len(), 1 + acknowledged.len(), "{failures} failed");
    for (i, e) in log.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1);
        if i > 0 {
            assert_eq!(e.prev, log[i - 1].id, "no fork");
        }
    }
    for r in &acknowledged {
        assert_eq!(&log[(r.seq - 1) as usize].receipt(), r);
    }
}

/// Makes the next commit that writes an event row fail with a serialization failure
/// (SQLSTATE 40001) raised by the server at `COMMIT`, once: a deferred constraint trigger
/// counts event rows with a sequence, which a rollback does not undo.
#[cfg(feature = "fault-injection")]
fn fail_the_next_commit(schema: &Schema) {
    schema
        .client()
        .batch_execute(
            "CREATE SEQUENCE fault_count;
             CREATE FUNCTION fault() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF nextval('fault_count') = 1 THEN
                     RAISE EXCEPTION 'a conflict injected at commit'
                         USING ERRCODE = 'serialization_failure';
                 END IF;
                 RETURN NULL;
             END $$;
             CREATE CONSTRAINT TRIGGER fault AFTER INSERT ON mwp_events
                 DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fault();",
        )
        .expect("the fault trigger");
}

/// Store `a` (snapshot every 4 events) with `between` run between the attempts of its
/// transactions, and store `b` (no periodic snapshots) on the same schema: the other writer.
#[cfg(feature = "fault-injection")]
fn writers_with(
    schema: &Schema,
    between: impl Fn(&PostgresAuthority) + Send + Sync + 'static,
) -> (
    PostgresAuthority,
    std::sync::Arc<PostgresAuthority>,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let b = Arc::new(schema.open("snapshot_every=0"));
    let calls = Arc::new(AtomicUsize::new(0));
    let (other, count) = (Arc::clone(&b), Arc::clone(&calls));
    let a = PostgresAuthority::open(schema.config("snapshot_every=4"))
        .expect("open")
        .with_between_attempts_for_tests(move |_, e| {
            assert_eq!(e.code, Code::Storage, "{e}");
            assert!(e.message.contains("40001"), "a serialization failure: {e}");
            if count.fetch_add(1, Ordering::SeqCst) == 0 {
                between(&other);
            }
        });
    (a, b, calls)
}

/// Checks the log of `g1`: seqs 1..=n, one receipt per event and each the event's, no
/// snapshot stored (no accept that committed was due one), and returns it.
#[cfg(feature = "fault-injection")]
fn checked_log(schema: &Schema, store: &PostgresAuthority, n: u64) -> Vec<mwp_core::Event> {
    let g = id("g1");
    let log = store.events(&g, 0, 100).expect("log");
    assert_eq!(
        log.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=n).collect::<Vec<_>>()
    );
    for e in &log {
        assert_eq!(
            store.receipt(&g, &e.actor, &e.action).expect("read"),
            Some(e.receipt()),
            "seq {}",
            e.seq
        );
    }
    let rows: i64 = schema
        .client()
        .query_one(
            "SELECT count(*) FROM mwp_receipts WHERE group_id = 'g1'",
            &[],
        )
        .expect("count")
        .get(0);
    assert_eq!(rows, n as i64, "one receipt row per event");
    store.wait_for_snapshots();
    let snapshots: Vec<i64> =
        postgres_common::first_column(&mut schema.client(), "SELECT seq FROM mwp_snapshots");
    assert_eq!(
        snapshots,
        Vec::<i64>::new(),
        "a snapshot made due by an attempt that did not commit was stored"
    );
    log
}

/// A tick whose commit fails (a serialization failure) and which another server's tick beats
/// before its next attempt: the next attempt finds nothing due, so the log holds exactly one
/// `leases_expired`, the other server's, with its receipt, and the periodic snapshot the
/// failed attempt made due (its event at seq 4, never committed) is not stored.
#[cfg(feature = "fault-injection")]
#[test]
fn a_tick_tried_again_after_a_conflict_keeps_nothing_of_the_failed_attempt() {
    let server = require_server!();
    let schema = Schema::new(&server, "tick_retry");
    let g = id("g1");
    let (a, _b, calls) = writers_with(&schema, |other| {
        let ticked = other
            .tick(&id("g1"), 10_800)
            .expect("the other server ticks");
        assert!(matches!(ticked, Some(Decision::Accepted(ref e)) if e.seq == 4));
    });
    a.submit(&open_group("g1", 1), 1000).expect("open");
    a.submit(&create_work("g1", "alice", "c0", "w0"), 1000)
        .expect("create");
    let claim = postgres_common::claim_w0("g1", 700);
    assert!(matches!(
        a.submit(&claim, 10_000).expect("claim"),
        Decision::Accepted(_)
    ));
    fail_the_next_commit(&schema);
    // Attempt 1 decides the tick at seq 4 (a snapshot due) and fails at COMMIT; the other
    // server's tick commits; attempt 2 finds nothing due.
    assert_eq!(a.tick(&g, 10_700).expect("answered"), None);
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "one failed attempt"
    );
    let log = checked_log(&schema, &a, 4);
    let ticks: Vec<_> = log.iter().filter(|e| e.actor == Id::authority()).collect();
    assert_eq!(ticks.len(), 1, "{ticks:?}");
    assert_eq!(ticks[0].at, 10_800, "the other server's tick");
    assert_eq!(a.next_deadline().expect("deadline"), None);
}

/// The same for a batch of commands: the command's first attempt (seq 4, a snapshot due)
/// fails at COMMIT, another server's command takes seq 4 meanwhile, and the second attempt
/// commits the command at seq 5: each command once, each receipt its event's, and no
/// snapshot of the failed attempt.
#[cfg(feature = "fault-injection")]
#[test]
fn a_batch_tried_again_after_a_conflict_keeps_nothing_of_the_failed_attempt() {
    let server = require_server!();
    let schema = Schema::new(&server, "batch_retry");
    let (a, _b, calls) = writers_with(&schema, |other| {
        let other_cmd = create_work("g1", "alice", "theirs", "w9");
        let decided = other
            .submit(&other_cmd, 2000)
            .expect("the other server decides");
        assert!(matches!(decided, Decision::Accepted(ref e) if e.seq == 4));
    });
    a.submit(&open_group("g1", 1), 1000).expect("open");
    for i in 0..2 {
        let cmd = create_work("g1", "alice", &format!("c{i}"), &format!("w{i}"));
        assert!(matches!(
            a.submit(&cmd, 1000).expect("create"),
            Decision::Accepted(_)
        ));
    }
    fail_the_next_commit(&schema);
    let mine = create_work("g1", "alice", "mine", "w8");
    let Decision::Accepted(event) = a.submit(&mine, 2000).expect("decided again") else {
        panic!("the command is accepted on its second attempt")
    };
    assert_eq!(event.seq, 5);
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "one failed attempt"
    );
    let log = checked_log(&schema, &a, 5);
    let actions: Vec<&str> = log.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(actions, ["open", "c0", "c1", "theirs", "mine"]);
    assert_eq!(log[4], *event);
    // A retry of the command is a Duplicate with the receipt of its one event.
    assert!(
        matches!(a.submit(&mine, 3000).expect("retry"), Decision::Duplicate(ref r) if r.seq == 5)
    );
}
