//! The PostgreSQL store passes the conformance suite of the memory host: every transcript of
//! tests/transcripts gives the same output lines, randomized command sequences give the same
//! receipts, logs and state hashes as `MemoryAuthority`, and replay, receipts, snapshots,
//! `CURSOR_TOO_OLD` and redaction behave as SPEC §6–§8 say.
//!
//! Needs `MWP_TEST_POSTGRES` (scripts/setup-postgres.sh); each test uses a schema of its own.
#![cfg(feature = "postgres")]

mod postgres_common;

use mwp_core::memory::MemoryAuthority;
use mwp_core::snapshot::Snapshot;
use mwp_core::transcript::{Host, Runner};
use mwp_core::work::WorkItem;
use mwp_core::{Code, Decision, Event, Id, SecretKey, WorkState};
use mwp_host::postgres::{KeySource, PostgresAuthority};
use mwp_host::service::AuthorityService;
use postgres_common::{claim_w0, command, create_work, open_group, state_hash, Schema};
use serde_json::{json, Value};

fn id(s: &str) -> Id {
    Id::new(s).expect("valid id")
}

/// Runs `text` on a fresh memory authority and on `pg`; returns both outputs.
fn both(text: &str, pg: &mut PostgresAuthority) -> (Vec<Value>, bool, Vec<Value>, bool) {
    let mut memory = MemoryAuthority::new();
    let mut runner = Runner::new(&mut memory);
    let want = runner.run_all(text);
    let want_failed = runner.failed();
    let mut runner = Runner::new(pg);
    let got = runner.run_all(text);
    let got_failed = runner.failed();
    (want, want_failed, got, got_failed)
}

#[test]
fn every_transcript_gives_the_memory_hosts_output() {
    let server = require_server!();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/transcripts");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("tests/transcripts")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no transcripts in {dir}");
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read transcript");
        let schema = Schema::new(&server, "transcript");
        let mut pg = schema.open("");
        let (want, want_failed, got, got_failed) = both(&text, &mut pg);
        let name = file.display();
        assert!(!want_failed, "{name} fails on the memory host: {want:#?}");
        assert!(!got_failed, "{name} fails on PostgreSQL: {got:#?}");
        assert_eq!(got.len(), want.len(), "{name}");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, w, "{name}: PostgreSQL and memory differ");
        }
    }
}

/// A small deterministic generator (xorshift64*), so failures reproduce from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

/// A random transcript over one group: every command kind that matters to storage, repeats
/// of earlier lines (duplicates), reused action IDs (collisions), restarts and snapshots.
/// A memory authority beside the generator shows the current revisions and lease epochs, so
/// most commands are valid and the sequences go deep into the work lifecycle.
fn random_transcript(seed: u64, group: &str, steps: usize) -> String {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut model = MemoryAuthority::new();
    let gid = id(group);
    let contract = json!({"max_attempts": 2, "backoff_base_ms": 100, "backoff_max_ms": 400,
                          "cost_budget": 5, "risk": "low"});
    let mut lines = vec![json!({
        "at": 1000, "org": "acme", "group": group, "actor": "alice", "action": "open",
        "body": {"type": "open_group", "mission": "m", "title": {"seed": seed}, "members": [
            {"actor": "alice", "role": "owner"}, {"actor": "bob", "role": "worker"},
            {"actor": "carol", "role": "worker"}, {"actor": "rita", "role": "reviewer"}]}
    })];
    Runner::new(&mut model).run_line(&lines[0].to_string());
    let mut at = 1000;
    for n in 0..steps {
        at += rng.below(700);
        let state = Host::state(&model, &gid);
        let mut kind = rng.below(20);
        // The work item the command suits (leased for start, running for results, queued
        // for claims), or now and then any item, to exercise the rejections.
        let wanted: &[WorkState] = match kind {
            3..=5 => &[WorkState::Queued],
            6 | 7 | 13 => &[WorkState::Leased, WorkState::Running],
            8..=12 => &[WorkState::Running],
            _ => &[],
        };
        let frontier: Vec<&Id> = state.as_ref().map(|s| s.frontier(at)).unwrap_or_default();
        let mut items: Vec<(String, &WorkItem)> = state
            .iter()
            .flat_map(|s| s.work.iter())
            .filter(|(id, w)| match kind {
                3..=5 => frontier.contains(id),
                _ => wanted.is_empty() || wanted.contains(&w.state),
            })
            .map(|(id, w)| (id.to_string(), w))
            .collect();
        if rng.below(10) == 0 {
            // Now and then any item, to exercise the rejections.
            items = state
                .iter()
                .flat_map(|s| s.work.iter())
                .map(|(id, w)| (id.to_string(), w))
                .collect();
        }
        let known: Vec<String> = state
            .iter()
            .flat_map(|s| s.work.keys().map(|w| w.to_string()))
            .collect();
        if items.is_empty() && !wanted.is_empty() && rng.below(4) != 0 {
            kind = 0; // nothing suits: create work instead
        }
        let (work, item) = if items.is_empty() || rng.below(12) == 0 {
            (format!("w{}", rng.below(5)), None)
        } else {
            let (w, i) = &items[rng.below(items.len() as u64) as usize];
            (w.clone(), Some(*i))
        };
        let revision = item.map_or(1, |w| w.revision);
        let epoch = item.map_or(1, |w| w.epoch.max(1));
        // Mostly the current lease and holder; sometimes a stale one (fencing, evidence).
        let stale = rng.below(8) == 0;
        let lease = format!(
            "{work}#{}",
            if stale {
                epoch.saturating_sub(1).max(1)
            } else {
                epoch
            }
        );
        let holder = item
            .and_then(|w| w.lease.as_ref())
            .map(|l| l.holder.to_string());
        let worker = match (&holder, stale) {
            (Some(h), false) => h.clone(),
            _ => rng.pick(&["bob", "carol"]).to_owned(),
        };
        let rev = if rng.below(10) == 0 {
            revision + 1
        } else {
            revision
        };
        let (actor, body, expect_rev): (&str, Value, Option<u64>) = match kind {
            0..=2 => {
                let after: Vec<&String> = known.iter().filter(|_| rng.below(4) == 0).collect();
                let fresh = if rng.below(6) == 0 {
                    rng.below(known.len() as u64 + 1)
                } else {
                    known.len() as u64
                };
                (
                    "alice",
                    json!({"type": "create_work", "work": format!("w{fresh}"),
                                  "contract": contract, "after": after, "spec": {"n": n}}),
                    None,
                )
            }
            3..=5 => (
                rng.pick(&["bob", "carol"]),
                json!({"type": "claim_work", "work": work,
                       "lease_ms": 2000 + rng.below(4000), "start_within_ms": 1500}),
                Some(rev),
            ),
            6 | 7 => (
                &worker,
                json!({"type": "start_work", "work": work, "lease": lease}),
                None,
            ),
            8 => (
                &worker,
                json!({"type": "checkpoint", "work": work, "lease": lease, "data": {"n": n}}),
                None,
            ),
            9 | 10 => (
                &worker,
                json!({"type": "submit", "work": work, "lease": lease, "result": {"ok": n}}),
                None,
            ),
            11 => (
                &worker,
                json!({"type": "fail", "work": work, "lease": lease, "error": "e",
                                   "retryable": rng.below(2) == 0}),
                None,
            ),
            12 => (
                &worker,
                json!({"type": "charge", "work": work, "lease": lease, "cost": rng.below(4),
                                   "data": {"c": n}}),
                None,
            ),
            13 => (
                &worker,
                json!({"type": "renew_lease", "work": work, "lease": lease, "lease_ms": 3000}),
                Some(rev),
            ),
            14 => (
                "rita",
                json!({"type": rng.pick(&["cancel", "reassign"]), "work": work, "reason": "r"}),
                None,
            ),
            15 => ("@authority", json!({"type": "tick"}), None),
            16 => {
                let head = state.as_ref().map_or(1, |s| s.seq);
                (
                    "alice",
                    json!({"type": "redact", "seq": 1 + rng.below(head), "reason": "gdpr"}),
                    None,
                )
            }
            17 => {
                // Repeat an earlier line: a duplicate, or a collision if `at` changed the content.
                let earlier = lines[rng.below(lines.len() as u64) as usize].clone();
                Runner::new(&mut model).run_line(&earlier.to_string());
                lines.push(earlier);
                continue;
            }
            18 => {
                lines.push(json!({"op": rng.pick(&["restart", "snapshot"])}));
                continue;
            }
            _ if n > steps * 3 / 4 && rng.below(4) == 0 => {
                ("alice", json!({"type": "archive", "reason": "done"}), None)
            }
            _ => ("@authority", json!({"type": "tick"}), None),
        };
        // Mostly fresh actions; sometimes an earlier action ID with new content (collision).
        let action = if rng.below(15) == 0 {
            format!("a{}", rng.below(n as u64 + 1))
        } else {
            format!("a{n}")
        };
        let mut line = json!({"at": at, "org": "acme", "group": group, "actor": actor,
                              "action": action, "body": body});
        if let Some(r) = expect_rev {
            line["expect_rev"] = json!(r);
        }
        Runner::new(&mut model).run_line(&line.to_string());
        lines.push(line);
    }
    lines.iter().map(|l| l.to_string() + "\n").collect()
}

#[test]
fn random_sequences_match_the_memory_host_byte_for_byte() {
    let server = require_server!();
    let schema = Schema::new(&server, "differential");
    let mut pg = schema.open("snapshot_every=7");
    let runs: u64 = std::env::var("MWP_PG_DIFF_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let mut accepted = 0;
    let mut kinds = std::collections::BTreeMap::new();
    for seed in 1..=runs {
        let group = format!("g{seed}");
        let text = random_transcript(seed, &group, 60);
        let mut memory = MemoryAuthority::new();
        let want = Runner::new(&mut memory).run_all(&text);
        let got = Runner::new(&mut pg).run_all(&text);
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, w, "seed {seed}: PostgreSQL and memory differ\n{text}");
        }
        assert_eq!(got.len(), want.len());
        accepted += want.iter().filter(|l| l["outcome"] == "accepted").count();
        for l in &want {
            let k = l
                .pointer("/event/kind/type")
                .or_else(|| l.pointer("/error/code"))
                .or_else(|| l.get("outcome"));
            *kinds
                .entry(k.map(|k| k.to_string()).unwrap_or_default())
                .or_insert(0usize) += 1;
        }
        // The stored logs are the same bytes, redactions included, and so are the states.
        let gid = id(&group);
        let mem_log = memory.group(&gid).expect("group").log().to_vec();
        let pg_log: Vec<Vec<u8>> = pg
            .events(&gid, 0, usize::MAX)
            .expect("replay")
            .iter()
            .map(|e| e.to_cbor().expect("encode"))
            .collect();
        assert_eq!(pg_log, mem_log, "seed {seed}: logs differ");
        let mem_state = Host::state(&memory, &gid).expect("state");
        pg.restart();
        let pg_state = pg.state(&gid).expect("state").expect("open");
        assert_eq!(
            pg_state.hash().expect("hash"),
            mem_state.hash().expect("hash"),
            "seed {seed}"
        );
    }
    eprintln!("outcomes over {runs} runs: {kinds:?}");
    // The generator must go deep: most runs accept many commands.
    assert!(
        accepted > runs as usize * 20,
        "only {accepted} accepted commands"
    );
}

/// A group with `n` accepted create_work commands after genesis (seq 1..=n+1).
fn group_with(pg: &PostgresAuthority, group: &str, n: usize) {
    let open = pg.submit(&open_group(group, 1), 1000).expect("open");
    assert!(matches!(open, Decision::Accepted(_)));
    for i in 0..n {
        let cmd = create_work(group, "alice", &format!("c{i}"), &format!("w{i}"));
        assert!(matches!(
            pg.submit(&cmd, 1000 + i as u64).expect("create"),
            Decision::Accepted(_)
        ));
    }
}

/// Only a group's latest snapshot is kept: each one stored removes the older ones, so the
/// stored bytes grow with the state, not with the square of the log; a store starting cold
/// opens from the one kept, and a replica is served it.
#[test]
fn only_the_latest_snapshot_is_kept() {
    let server = require_server!();
    let schema = Schema::new(&server, "snapshots_kept");
    let pg = schema.open("snapshot_every=3");
    group_with(&pg, "g1", 10);
    group_with(&pg, "g2", 4);
    // Periodic snapshots are stored after their commits, on threads of their own, in any
    // order: an older one finishing last is not kept.
    pg.wait_for_snapshots();
    let mut client = schema.client();
    let kept: Vec<(String, i64)> = client
        .query(
            "SELECT group_id, seq FROM mwp_snapshots ORDER BY group_id, seq",
            &[],
        )
        .expect("snapshots")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(kept, [("g1".to_string(), 9), ("g2".to_string(), 3)]);
    assert!(pg.snapshot_threads() >= 2, "a thread per group at least");
    let g = id("g1");
    let snap = mwp_core::snapshot::Snapshot::from_cbor(&pg.latest_snapshot(&g).expect("latest"))
        .expect("a snapshot");
    assert_eq!(snap.seq, 9);
    // `stored_snapshot` (what `mwp verify` checks) reads the stored one and takes none.
    assert_eq!(
        AuthorityService::stored_snapshot(&pg, &g).expect("stored"),
        Some(pg.latest_snapshot(&g).expect("latest"))
    );
    group_with(&pg, "g3", 0);
    assert_eq!(
        AuthorityService::stored_snapshot(&pg, &id("g3")).expect("read"),
        None
    );
    let cold = schema.open("snapshot_every=3");
    assert_eq!(state_hash(&cold, &g), state_hash(&pg, &g));
    // The default cadence is the file store's.
    assert_eq!(schema.config("").snapshot_every, 100_000);
}

#[test]
fn replay_receipts_and_heads() {
    let server = require_server!();
    let schema = Schema::new(&server, "replay");
    let pg = schema.open("");
    let g = id("g1");
    assert_eq!(
        pg.events(&g, 0, 10).expect_err("unknown").code,
        Code::NotFound
    );
    assert_eq!(pg.head_seq(&g).expect("head"), 0);
    assert_eq!(
        pg.sign_head(&g, 1).expect_err("unknown").code,
        Code::NotFound
    );
    group_with(&pg, "g1", 9);
    assert_eq!(pg.head_seq(&g).expect("head"), 10);
    let page = pg.events(&g, 3, 4).expect("page");
    assert_eq!(
        page.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![4, 5, 6, 7]
    );
    assert!(pg.events(&g, 10, 5).expect("end").is_empty());
    assert!(pg.events(&g, 99, 5).expect("past end").is_empty());
    assert!(pg.events(&g, 0, 0).expect("limit 0").is_empty());
    let all = pg.events(&g, 0, usize::MAX).expect("all");
    assert_eq!(all.len(), 10);
    // The signed head names the last event, under the authority key (SPEC §8a).
    let head = pg.sign_head(&g, 77).expect("signs");
    assert_eq!((head.seq, head.id, head.at), (10, all[9].id, 77));
    head.verify(&pg.authority_key(), &g).expect("verifies");
    for (i, e) in all.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1);
        e.verify().expect("verifies");
        if i > 0 {
            assert_eq!(e.prev, all[i - 1].id, "chained");
        }
    }
    // The stored receipt is the event's receipt; a retried command gets it byte for byte.
    let r = pg
        .receipt(&g, &id("alice"), &id("c4"))
        .expect("lookup")
        .expect("exists");
    assert_eq!(r, all[5].receipt());
    assert!(pg
        .receipt(&g, &id("alice"), &id("nope"))
        .expect("lookup")
        .is_none());
    let again = pg
        .submit(&create_work("g1", "alice", "c4", "w4"), 5000)
        .expect("retry");
    assert_eq!(again, Decision::Duplicate(r));
    // Same action, different content: a collision, and nothing is written.
    let clash = pg
        .submit(&create_work("g1", "alice", "c4", "other"), 5000)
        .and_then(Decision::into_result)
        .expect_err("collision");
    assert_eq!(clash.code, Code::ActionIdCollision);
    assert_eq!(pg.head_seq(&g).expect("head"), 10);
    assert_eq!(pg.groups().expect("groups"), vec![g.clone()]);
    assert_eq!(
        pg.authority_key(),
        SecretKey::for_transcript("@authority").public()
    );
}

#[test]
fn rejections_write_nothing() {
    let server = require_server!();
    let schema = Schema::new(&server, "reject");
    let pg = schema.open("");
    group_with(&pg, "g1", 1);
    let mut c = schema.client();
    let count = |c: &mut postgres::Client, table: &str| -> i64 {
        c.query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .expect("count")
            .get(0)
    };
    let before = (count(&mut c, "mwp_events"), count(&mut c, "mwp_receipts"));
    let bad = command(
        "g1",
        "w0",
        "x",
        None,
        json!({"type": "claim_work", "work": "w0",
        "lease_ms": 1000, "start_within_ms": 1000}),
    );
    assert_eq!(
        pg.submit(&bad, 2000)
            .and_then(Decision::into_result)
            .expect_err("no expect")
            .code,
        Code::CasRequired
    );
    let mut tampered = create_work("g1", "alice", "y", "w9");
    tampered.sig.0[0] ^= 1;
    assert_eq!(
        pg.submit(&tampered, 2000)
            .and_then(Decision::into_result)
            .expect_err("bad sig")
            .code,
        Code::BadSignature
    );
    assert_eq!(
        (count(&mut c, "mwp_events"), count(&mut c, "mwp_receipts")),
        before
    );
}

/// The seqs of the snapshots stored for group `g1`, in order.
fn g1_snapshots(schema: &Schema) -> Vec<i64> {
    postgres_common::first_column(
        &mut schema.client(),
        "SELECT seq FROM mwp_snapshots WHERE group_id = 'g1' ORDER BY seq",
    )
}

/// However short the cadence, one thread at a time stores a group's periodic snapshots, and
/// the newest due is the one stored in the end: here 40 snapshots are due while the first of
/// them cannot be written (the older snapshot it removes is held by another transaction).
#[test]
fn a_short_cadence_does_not_pile_up_snapshot_threads() {
    let server = require_server!();
    let schema = Schema::new(&server, "snapshot_threads");
    let pg = schema.open("snapshot_every=1");
    group_with(&pg, "g1", 0); // seq 1: a snapshot
    pg.wait_for_snapshots();
    let before = pg.snapshot_threads();
    let mut blocker = schema.client();
    let mut held = blocker.transaction().expect("transaction");
    held.query(
        "SELECT 1 FROM mwp_snapshots WHERE group_id = 'g1' AND seq = 1 FOR UPDATE",
        &[],
    )
    .expect("hold the snapshot at seq 1: the next one cannot remove it");
    for i in 0..40 {
        let cmd = create_work("g1", "alice", &format!("c{i}"), &format!("w{i}"));
        let decision = pg.submit(&cmd, 2000).expect("decided"); // seq 2..=41
        assert!(matches!(decision, Decision::Accepted(_)));
    }
    held.rollback().expect("let go");
    pg.wait_for_snapshots();
    assert_eq!(
        pg.snapshot_threads() - before,
        1,
        "one thread for the group's 40 snapshots"
    );
    assert_eq!(g1_snapshots(&schema), [41]);
}

/// A snapshot is never stored beside a later one, nor does it remove it: a periodic snapshot
/// stored after its commit may finish after a later one (docs/postgres.md, "Snapshots").
/// Here the periodic snapshot due at seq 5 waits for the group's snapshot lock, held by this
/// test, while the group goes on to seq 9 and this test stores the group's snapshot at 9.
#[test]
fn a_snapshot_never_replaces_a_later_one() {
    let server = require_server!();
    let schema = Schema::new(&server, "snapshot_order");
    let pg = schema.open("snapshot_every=5");
    // The same commands elsewhere give the same log: its snapshot at seq 9 is this group's.
    let elsewhere = Schema::new(&server, "snapshot_order_later");
    let other = elsewhere.open("snapshot_every=0");
    group_with(&other, "g1", 8);
    let g = id("g1");
    other.take_snapshot(&g).expect("taken at 9");
    let (later_hash, later) = snapshot_row(&mut elsewhere.client(), "g1", 9);
    // The group's snapshot lock, as the store computes it.
    let digest =
        mwp_core::canonical::sha256(format!("mwp snapshot lock\0{}\0g1", schema.name).as_bytes());
    let key = i64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
    let mut client = schema.client();
    let mut held = client.transaction().expect("begin");
    held.execute("SELECT pg_advisory_xact_lock($1)", &[&key])
        .expect("the snapshot lock");
    group_with(&pg, "g1", 8); // the snapshot due at 5 waits for the lock
    held.execute(
        "INSERT INTO mwp_snapshots (group_id, seq, state_hash, bytes) VALUES ('g1', 9, $1, $2)",
        &[&later_hash, &later],
    )
    .expect("a later snapshot");
    held.commit().expect("release the lock");
    pg.wait_for_snapshots();
    assert_eq!(
        g1_snapshots(&schema),
        [9],
        "the earlier snapshot is not stored, the later one stays"
    );
    assert_eq!(pg.latest_snapshot(&g).expect("served"), later);
}

/// A periodic snapshot is stored after the commit of the accept that made it due, without
/// the group's lock: the group's commands go on while the snapshot cannot be written (the
/// older snapshot it removes is held by another transaction), and it is stored once it can.
#[test]
fn a_periodic_snapshot_does_not_hold_up_the_groups_commands() {
    let server = require_server!();
    let schema = Schema::new(&server, "snapshot_after_commit");
    let pg = schema.open("snapshot_every=2");
    group_with(&pg, "g1", 1); // seq 2: a snapshot
    pg.wait_for_snapshots();
    let mut blocker = schema.client();
    let mut held = blocker.transaction().expect("transaction");
    held.query(
        "SELECT 1 FROM mwp_snapshots WHERE group_id = 'g1' AND seq = 2 FOR UPDATE",
        &[],
    )
    .expect("hold the snapshot at seq 2: the next one cannot remove it");
    let decided = std::thread::scope(|scope| {
        let (done, answered) = std::sync::mpsc::channel();
        let pg = &pg;
        scope.spawn(move || {
            // seq 4 makes a snapshot due; seq 5 is the group's next command.
            for i in 0..3 {
                let cmd = create_work("g1", "alice", &format!("late{i}"), &format!("l{i}"));
                let decision = pg.submit(&cmd, 5_000 + i).expect("accepted");
                assert!(matches!(decision, Decision::Accepted(_)));
            }
            let _ = done.send(());
        });
        let decided = answered.recv_timeout(std::time::Duration::from_secs(60));
        // Let the snapshot (and, were it in the accepting transaction, the accepts) go on.
        held.rollback().expect("let go");
        decided
    });
    assert!(
        decided.is_ok(),
        "the accepts waited for the snapshot: it is written in their transaction"
    );
    pg.wait_for_snapshots();
    assert_eq!(g1_snapshots(&schema), [4]);
    let cold = schema.open("snapshot_every=2");
    assert_eq!(state_hash(&cold, &id("g1")), state_hash(&pg, &id("g1")));
}

#[test]
fn snapshots_are_signed_stored_and_used_on_reload() {
    let server = require_server!();
    let schema = Schema::new(&server, "snapshot");
    let pg = schema.open("snapshot_every=4");
    let g = id("g1");
    group_with(&pg, "g1", 9); // seq 1..=10: periodic snapshots at 4 and 8, the latest kept
    pg.wait_for_snapshots();
    let mut c = schema.client();
    assert_eq!(g1_snapshots(&schema), [8]);
    let key = pg.authority_key();
    let snap = Snapshot::verify_bytes(
        &pg.latest_snapshot(&g).expect("latest"),
        &key,
        &id("acme"),
        &g,
        0,
    )
    .expect("verifies");
    assert_eq!(snap.seq, 8);
    // A restarted store loads snapshot 8 plus events 9..10 and reaches the same state.
    let before = pg.state(&g).expect("state").expect("open");
    pg.restart();
    let after = pg.state(&g).expect("state").expect("open");
    assert_eq!(after.hash().expect("hash"), before.hash().expect("hash"));
    // A snapshot that does not verify is skipped: the log is the truth.
    c.execute(
        "UPDATE mwp_snapshots SET bytes = '\\x00' WHERE seq = 8",
        &[],
    )
    .expect("damage");
    pg.restart();
    let reloaded = pg.state(&g).expect("state").expect("open");
    assert_eq!(reloaded.hash().expect("hash"), before.hash().expect("hash"));
    // A group with no snapshot gets one on demand; an unknown group is NOT_FOUND.
    group_with(&pg, "g2", 0);
    let s2 = Snapshot::verify_bytes(
        &pg.latest_snapshot(&id("g2")).expect("taken"),
        &key,
        &id("acme"),
        &id("g2"),
        1,
    )
    .expect("verifies");
    assert_eq!(s2.seq, 1);
    assert_eq!(
        pg.latest_snapshot(&id("nope")).expect_err("unknown").code,
        Code::NotFound
    );
}

#[test]
fn archive_writes_a_final_snapshot() {
    let server = require_server!();
    let schema = Schema::new(&server, "archive");
    let pg = schema.open("snapshot_every=0");
    let g = id("g1");
    group_with(&pg, "g1", 1);
    let archive = command(
        "g1",
        "alice",
        "arch",
        None,
        json!({"type": "archive", "reason": "done"}),
    );
    assert!(matches!(
        pg.submit(&archive, 3000).expect("archive"),
        Decision::Accepted(_)
    ));
    let snap = Snapshot::verify_bytes(
        &pg.latest_snapshot(&g).expect("final"),
        &pg.authority_key(),
        &id("acme"),
        &g,
        3,
    )
    .expect("verifies");
    assert_eq!(snap.seq, 3);
    assert!(snap.state.archived);
    assert_eq!(pg.next_deadline().expect("deadline"), None);
}

#[test]
fn cursor_too_old_points_at_a_snapshot_that_resumes_replay() {
    let server = require_server!();
    let schema = Schema::new(&server, "window");
    let pg = schema.open("online_window=3&snapshot_every=0");
    let g = id("g1");
    group_with(&pg, "g1", 9); // head 10: events after 7 are served
    assert_eq!(pg.events(&g, 7, 10).expect("inside").len(), 3);
    for after in [0, 3, 6] {
        let e = pg.events(&g, after, 10).expect_err("too old");
        assert_eq!(e.code, Code::CursorTooOld, "after {after}");
        let r = &e.details["snapshot"];
        let seq = r["seq"].as_u64().expect("seq");
        assert!(seq >= 7, "the snapshot is inside the window: {r}");
        assert_eq!(r["location"], "/v1/groups/g1/snapshots/latest");
        // Restore it, then replay strictly after it.
        let snap = Snapshot::verify_bytes(
            &pg.latest_snapshot(&g).expect("snapshot"),
            &pg.authority_key(),
            &id("acme"),
            &g,
            after,
        )
        .expect("verifies");
        assert_eq!(snap.seq, seq);
        assert_eq!(r["hash"], json!(snap.state_hash.to_hex()));
        let rest = pg.events(&g, snap.seq, 100).expect("resume");
        assert_eq!(rest.last().map(|e| e.seq).unwrap_or(snap.seq), 10);
    }
}

#[test]
fn redaction_rewrites_stored_bytes_in_the_same_transaction() {
    let server = require_server!();
    let schema = Schema::new(&server, "redact");
    let pg = schema.open("");
    let g = id("g1");
    group_with(&pg, "g1", 2); // seq 2 and 3 carry spec {"n": "c0"} / {"n": "c1"}
    let original = pg.events(&g, 1, 1).expect("seq 2").remove(0);
    let redact = postgres_common::redact_g1(2);
    let Decision::Accepted(ev) = pg.submit(&redact, 4000).expect("redact") else {
        panic!("redact not accepted")
    };
    assert_eq!(ev.seq, 4);
    let stored = pg.events(&g, 1, 1).expect("seq 2").remove(0);
    assert_ne!(
        stored.to_cbor().expect("cbor"),
        original.to_cbor().expect("cbor")
    );
    let text = serde_json::to_string(&stored).expect("json");
    assert!(
        text.contains("$redacted") && !text.contains("\"n\":\"c0\""),
        "{text}"
    );
    assert_eq!(stored.id, original.id);
    stored.verify().expect("ids and payload hash still verify");
    let mut reference = original.clone();
    reference.redact().expect("redact");
    assert_eq!(stored, reference);
    // The other event keeps its values; a restart replays the redacted log to the same state.
    let other = serde_json::to_string(&pg.events(&g, 2, 1).expect("seq 3")[0]).expect("json");
    assert!(other.contains("\"n\":\"c1\""));
    let before = pg
        .state(&g)
        .expect("state")
        .expect("open")
        .hash()
        .expect("hash");
    pg.restart();
    assert_eq!(
        pg.state(&g)
            .expect("state")
            .expect("open")
            .hash()
            .expect("hash"),
        before
    );
    let mut c = schema.client();
    let flagged: bool = c
        .query_one(
            "SELECT redacted FROM mwp_events WHERE group_id = 'g1' AND seq = 2",
            &[],
        )
        .expect("row")
        .get(0);
    assert!(flagged);
}

#[test]
fn the_database_is_the_truth_when_it_moves_behind_the_cache() {
    // As after a failover that lost the last commits: the cached state is ahead of the
    // database. The next decision must follow the database, not the cache.
    let server = require_server!();
    let schema = Schema::new(&server, "failover");
    let pg = schema.open("snapshot_every=0");
    let g = id("g1");
    group_with(&pg, "g1", 3); // head 4
    let mut c = schema.client();
    c.batch_execute(
        "DELETE FROM mwp_receipts WHERE group_id = 'g1' AND seq = 4;
         DELETE FROM mwp_events WHERE group_id = 'g1' AND seq = 4;
         UPDATE mwp_groups SET seq = 3, head = (SELECT id FROM mwp_events WHERE group_id = 'g1' AND seq = 3)
         WHERE group_id = 'g1';",
    )
    .expect("lose the last commit");
    // The head follows the database too.
    let head = pg.sign_head(&g, 9000).expect("signs");
    assert_eq!(head.seq, 3, "the head the database holds, not the cache's");
    assert_eq!(head.id, pg.events(&g, 2, 1).expect("seq 3")[0].id);
    let cmd = create_work("g1", "alice", "after-failover", "wx");
    let Decision::Accepted(ev) = pg.submit(&cmd, 9000).expect("decide") else {
        panic!("not accepted")
    };
    assert_eq!(ev.seq, 4, "decided at the database's head, not the cache's");
    let log = pg.events(&g, 0, 100).expect("log");
    assert_eq!(log.len(), 4);
    assert_eq!(log[3].prev, log[2].id);
    // The lost command is no longer known, so resending it appends it again.
    let lost = create_work("g1", "alice", "c2", "w2");
    let Decision::Accepted(ev) = pg.submit(&lost, 9001).expect("resend") else {
        panic!("not accepted")
    };
    assert_eq!(ev.seq, 5);
}

#[test]
fn damage_in_the_log_is_log_corrupt_not_a_decision() {
    let server = require_server!();
    let schema = Schema::new(&server, "corrupt");
    let pg = schema.open("snapshot_every=0");
    let g = id("g1");
    group_with(&pg, "g1", 2);
    let mut c = schema.client();
    let row = c
        .query_one(
            "SELECT bytes FROM mwp_events WHERE group_id = 'g1' AND seq = 2",
            &[],
        )
        .expect("row");
    let mut event = Event::from_cbor(row.get(0)).expect("decode");
    event.at += 1; // the id no longer matches the header
    c.execute(
        "UPDATE mwp_events SET bytes = $1 WHERE group_id = 'g1' AND seq = 2",
        &[&event.to_cbor().expect("cbor")],
    )
    .expect("damage");
    pg.restart();
    let e = pg
        .submit(&create_work("g1", "alice", "later", "wz"), 9000)
        .expect_err("corrupt");
    assert_eq!(e.code, Code::LogCorrupt, "{e}");
    assert_eq!(pg.head_seq(&g).expect("head"), 3, "nothing appended");
}

/// Reads of rows another process changed: each page is checked row by row, and what does
/// not hold is `LOG_CORRUPT` naming the group and the seq, never a page with a hole in it.
#[test]
fn events_read_from_changed_rows_are_log_corrupt_naming_group_and_seq() {
    let server = require_server!();
    let schema = Schema::new(&server, "readcorrupt");
    let pg = schema.open("snapshot_every=0");
    let g = id("g1");
    group_with(&pg, "g1", 5); // seq 1..=6
    let good = pg.events(&g, 0, 100).expect("log");
    assert_eq!(good.len(), 6);
    let mut c = schema.client();
    let set = |c: &mut postgres::Client, seq: i64, bytes: &[u8]| {
        c.execute(
            "UPDATE mwp_events SET bytes = $1 WHERE group_id = 'g1' AND seq = $2",
            &[&bytes, &seq],
        )
        .expect("change a row");
    };
    let check = |after: u64, limit: usize, needle: &str, seq: u64| {
        let e = pg.events(&g, after, limit).expect_err("refused");
        assert_eq!(e.code, Code::LogCorrupt, "{e}");
        assert!(e.message.contains("group g1"), "{e}");
        assert!(e.message.contains(needle), "{needle}: {e}");
        assert_eq!(e.details.get("seq"), Some(&serde_json::json!(seq)), "{e}");
    };
    let cbor = |e: &Event| e.to_cbor().expect("cbor");
    // Bytes that do not decode: damage, not MALFORMED input.
    set(&mut c, 3, b"\x00garbage");
    check(0, 100, "at seq 3 does not verify", 3);
    // Bytes of another seq (swapped rows): each decodes and verifies on its own.
    set(&mut c, 3, &cbor(&good[3]));
    check(0, 100, "holds seq 4", 3);
    check(2, 1, "holds seq 4", 3);
    // An event whose id no longer matches its bytes.
    let mut tampered = good[2].clone();
    tampered.at += 1;
    set(&mut c, 3, &cbor(&tampered));
    check(1, 100, "at seq 3 does not verify", 3);
    set(&mut c, 3, &cbor(&good[2]));
    assert_eq!(pg.events(&g, 0, 100).expect("restored"), good);
    // A row removed: a gap, within a page and at its end.
    c.batch_execute(
        "DELETE FROM mwp_receipts WHERE group_id = 'g1' AND seq = 5;
         DELETE FROM mwp_events WHERE group_id = 'g1' AND seq = 5;",
    )
    .expect("remove a row");
    check(0, 100, "skip from seq 4 to seq 6", 5);
    check(4, 1, "skip from seq 4 to seq 6", 5);
    // A head row that claims more than the rows hold.
    c.execute(
        "DELETE FROM mwp_events WHERE group_id = 'g1' AND seq = 6",
        &[],
    )
    .expect("remove the last row");
    check(4, 10, "end at seq 4, but its head row is at seq 6", 5);
    // The first event of a page chains to the row at the cursor.
    c.execute("UPDATE mwp_groups SET seq = 4 WHERE group_id = 'g1'", &[])
        .expect("move the head row");
    let mut forked = good[1].clone();
    forked.prev = good[2].id;
    forked.id = forked.compute_id().expect("id");
    set(&mut c, 2, &cbor(&forked));
    check(1, 1, "does not chain to the one at seq 1", 2);
    check(2, 10, "does not chain to the one at seq 2", 3);
    // Rows past the head row: the head row is behind its events, and nothing is served.
    set(&mut c, 2, &cbor(&good[1]));
    c.execute("UPDATE mwp_groups SET seq = 3 WHERE group_id = 'g1'", &[])
        .expect("move the head row back");
    check(
        0,
        100,
        "its head row is at seq 3, but its event rows go on to seq 4",
        4,
    );
}

/// The head a group is listed with (`head_seq`: `GET /v1/groups`, the signed head's cadence,
/// whether a group exists) is checked as every other read of a row is: a head row another
/// process rewrote is `LOG_CORRUPT` naming the group, never answered as the group's head.
#[test]
fn a_head_row_another_process_rewrote_is_not_answered() {
    let server = require_server!();
    let schema = Schema::new(&server, "headrow");
    let pg = schema.open("snapshot_every=0");
    let g = id("g1");
    group_with(&pg, "g1", 3); // seq 1..=4
    assert_eq!(pg.head_seq(&g).expect("head"), 4);
    let mut c = schema.client();
    let refused = |needle: &str| {
        let e = pg.head_seq(&g).expect_err("not answered");
        assert_eq!(e.code, Code::LogCorrupt, "{e}");
        assert!(e.message.contains("group g1 in PostgreSQL"), "{e}");
        assert!(e.message.contains(needle), "{needle}: {e}");
        let listed = pg
            .groups()
            .expect("listed")
            .iter()
            .map(|g| pg.head_seq(g))
            .collect::<Result<Vec<_>, _>>()
            .expect_err("the listing names the damage");
        assert_eq!(listed.message, e.message);
    };
    // Another id at the head row's seq.
    c.execute(
        "UPDATE mwp_groups SET head = (SELECT id FROM mwp_events WHERE group_id = 'g1' AND seq = 3)
         WHERE group_id = 'g1'",
        &[],
    )
    .expect("rewrite the head id");
    refused("its head row says event");
    // A seq past the log, with the id of its last event.
    c.execute(
        "UPDATE mwp_groups SET seq = 9, head = (SELECT id FROM mwp_events WHERE group_id = 'g1' AND seq = 4)
         WHERE group_id = 'g1'",
        &[],
    )
    .expect("move the head row on");
    refused("its head row is at seq 9, but there is no event row at that seq");
    // The event row at the head row's seq holds another event.
    let row4: Vec<u8> = c
        .query_one(
            "SELECT bytes FROM mwp_events WHERE group_id = 'g1' AND seq = 4",
            &[],
        )
        .expect("row")
        .get(0);
    c.batch_execute(
        "UPDATE mwp_groups SET seq = 4 WHERE group_id = 'g1';
         UPDATE mwp_events SET bytes = (SELECT bytes FROM mwp_events WHERE group_id = 'g1' AND seq = 3)
         WHERE group_id = 'g1' AND seq = 4;",
    )
    .expect("swap the event row at the head");
    refused("the event row at seq 4 holds seq 3");
    // Put back, the head is answered again.
    c.execute(
        "UPDATE mwp_events SET bytes = $1 WHERE group_id = 'g1' AND seq = 4",
        &[&row4],
    )
    .expect("put the event back");
    assert_eq!(pg.head_seq(&g).expect("head"), 4);
}

/// A head row moved behind its events is damage, not a race: `LOG_CORRUPT` naming the group
/// and both seqs, answered at once (no attempt again, which could only collide with the event
/// row already at the next seq), to decisions and reads alike.
#[test]
fn a_head_row_behind_its_events_is_log_corrupt_at_once() {
    let server = require_server!();
    let schema = Schema::new(&server, "headbehind");
    let pg = schema.open("snapshot_every=0");
    let g = id("g1");
    group_with(&pg, "g1", 3); // seq 1..=4
    let mut c = schema.client();
    c.execute(
        "UPDATE mwp_groups SET seq = 3, head = (SELECT id FROM mwp_events WHERE group_id = 'g1' AND seq = 3)
         WHERE group_id = 'g1'",
        &[],
    )
    .expect("move the head row back");
    let behind = |e: mwp_core::Error| {
        assert_eq!(e.code, Code::LogCorrupt, "{e}");
        assert_eq!(
            e.message,
            "group g1 in PostgreSQL: its head row is at seq 3, but its event rows go on to seq 4"
        );
        assert_eq!(e.details.get("seq"), Some(&json!(4)), "{e}");
    };
    behind(
        pg.submit(&create_work("g1", "alice", "later", "wz"), 9000)
            .expect_err("not decided"),
    );
    pg.restart();
    behind(
        pg.submit(&create_work("g1", "alice", "later", "wz"), 9000)
            .expect_err("not decided"),
    );
    behind(
        pg.receipt(&g, &id("alice"), &id("c0"))
            .expect_err("not read"),
    );
    behind(pg.head_seq(&g).expect_err("not listed"));
    // No head row at all, with event rows left (the foreign key dropped): an open_group is
    // not decided over them.
    c.batch_execute(
        "ALTER TABLE mwp_events DROP CONSTRAINT mwp_events_group_id_fkey;
         DELETE FROM mwp_receipts WHERE group_id = 'g1';
         DELETE FROM mwp_groups WHERE group_id = 'g1';",
    )
    .expect("remove the head row");
    let e = pg
        .submit(&open_group("g1", 1), 9000)
        .expect_err("not decided");
    assert_eq!(e.code, Code::LogCorrupt, "{e}");
    assert_eq!(
        e.message,
        "group g1 in PostgreSQL: it has no head row, but its event rows go on to seq 4"
    );
    assert_eq!(pg.head_seq(&g).expect_err("not listed").message, e.message);
}

/// An event row longer than the largest event any store holds
/// (`log_format::MAX_RECORD_LEN`, the record limit the file store writes and reads with) is
/// `LOG_CORRUPT` naming the group and the seq, its bytes neither fetched nor decoded; and the
/// store never writes an event that long.
#[test]
fn an_event_row_longer_than_any_event_is_log_corrupt() {
    let server = require_server!();
    let schema = Schema::new(&server, "longrow");
    let pg = schema.open("snapshot_every=0");
    let g = id("g1");
    group_with(&pg, "g1", 2); // seq 1..=3
    let mut c = schema.client();
    let limit = mwp_core::log_format::MAX_RECORD_LEN;
    let grow = |c: &mut postgres::Client, seq: i64| {
        c.execute(
            "UPDATE mwp_events SET bytes = bytes || convert_to(repeat('x', $2), 'UTF8')
             WHERE group_id = 'g1' AND seq = $1",
            &[&seq, &i32::try_from(limit).expect("fits")],
        )
        .expect("grow a row");
    };
    let long = |e: mwp_core::Error, seq: u64| {
        assert_eq!(e.code, Code::LogCorrupt, "{e}");
        assert!(
            e.message.contains(&format!(
                "group g1 in PostgreSQL: the event row at seq {seq} is "
            )),
            "{e}"
        );
        assert!(
            e.message
                .contains(&format!("longer than the largest event ({limit} bytes)")),
            "{e}"
        );
        assert_eq!(e.details.get("seq"), Some(&json!(seq)), "{e}");
    };
    grow(&mut c, 2);
    long(pg.events(&g, 0, 10).expect_err("not served"), 2);
    pg.restart();
    long(
        pg.submit(&create_work("g1", "alice", "later", "wz"), 9000)
            .expect_err("not decided"),
        2,
    );
    assert_eq!(pg.head_seq(&g).expect("the head's row is whole"), 3);
    grow(&mut c, 3);
    long(pg.head_seq(&g).expect_err("not listed"), 3);

    // A command the limits let through whose event would be longer is not written.
    let big = Schema::new(&server, "longrow_write");
    let mut config = big.config("snapshot_every=0");
    config.limits.max_command_bytes = 2 * limit as usize;
    config.limits.max_payload_bytes = 2 * limit as usize;
    let limits = config.limits.clone();
    let pg = PostgresAuthority::open(config).expect("open");
    assert!(matches!(
        pg.submit(&open_group("g1", 1), 1000).expect("open"),
        Decision::Accepted(_)
    ));
    let envelope = json!({
        "org": "acme", "group": "g1", "actor": "alice", "action": "big", "session": 1,
        "body": {"type": "create_work", "work": "big", "after": [],
                 "spec": {"text": "x".repeat(limit as usize)},
                 "contract": {"max_attempts": 3, "backoff_base_ms": 10, "backoff_max_ms": 100,
                              "cost_budget": 100, "risk": "low"}},
        "sig": "00".repeat(64),
    });
    let mut cmd =
        mwp_core::Command::from_json(&serde_json::to_vec(&envelope).expect("json"), &limits)
            .expect("within the limits");
    cmd.sign(&SecretKey::for_transcript("alice")).expect("sign");
    // (Matched, not `expect_err`: an accepted event of 16 MiB is not printed.)
    let Err(e) = pg.submit(&cmd, 2000) else {
        panic!("an event longer than the record limit was written")
    };
    assert_eq!(e.code, Code::Storage, "{e}");
    assert!(e.message.contains("the store's record limit"), "{e}");
    assert_eq!(pg.head_seq(&g).expect("head"), 1, "nothing written");
}

/// A column another process altered (another type, NULLs let in) is an error naming the
/// group and the column, never a panic of the reading thread.
#[test]
fn columns_altered_by_another_process_are_errors_not_panics() {
    let server = require_server!();
    let schema = Schema::new(&server, "altered");
    let pg = schema.open("snapshot_every=0");
    let g = id("g1");
    group_with(&pg, "g1", 2);
    drop(pg);
    let mut c = schema.client();
    c.batch_execute(
        "ALTER TABLE mwp_events ALTER COLUMN bytes DROP NOT NULL;
         UPDATE mwp_events SET bytes = NULL WHERE group_id = 'g1' AND seq = 2;",
    )
    .expect("let a NULL in");
    let pg = schema.open("snapshot_every=0");
    let e = pg.events(&g, 0, 10).expect_err("a NULL");
    assert_eq!(e.code, Code::LogCorrupt, "{e}");
    assert!(
        e.message.contains("group g1") && e.message.contains("seq 2"),
        "{e}"
    );
    let e = pg
        .submit(&create_work("g1", "alice", "later", "wz"), 9000)
        .expect_err("a NULL");
    assert_eq!(e.code, Code::LogCorrupt, "{e}");
    assert!(e.message.contains("mwp_events.bytes"), "{e}");
    drop(pg);
    c.batch_execute("ALTER TABLE mwp_groups ALTER COLUMN seq TYPE integer")
        .expect("another type");
    let pg = schema.open("snapshot_every=0");
    let e = pg.head_seq(&g).expect_err("another type");
    assert_eq!(e.code, Code::LogCorrupt, "{e}");
    assert!(e.message.contains("mwp_groups.seq"), "{e}");
}

#[test]
fn the_authority_key_is_pinned_by_the_database() {
    let server = require_server!();
    let schema = Schema::new(&server, "key");
    // Generated and stored on first open, the same on every later open.
    let first = PostgresAuthority::connect(&schema.url("")).expect("open");
    let again = PostgresAuthority::connect(&schema.url("")).expect("reopen");
    assert_eq!(first.authority_key(), again.authority_key());
    // A different configured key is refused, naming the stored one.
    let mut config = schema.config("");
    config.key = KeySource::Given(Box::new(SecretKey::for_transcript("someone")));
    let e = PostgresAuthority::open(config).expect_err("other key");
    assert_eq!(e.code, Code::Storage);
    assert!(
        e.message.contains(&first.authority_key().to_hex()),
        "{}",
        e.message
    );
    // A configured key is kept out of the database: only its public half is stored.
    let other = Schema::new(&server, "keygiven");
    let pg = other.open("");
    let secret: Option<Vec<u8>> = other
        .client()
        .query_one("SELECT secret_key FROM mwp_authority", &[])
        .expect("row")
        .get(0);
    assert!(secret.is_none());
    assert_eq!(
        pg.authority_key(),
        SecretKey::for_transcript("@authority").public()
    );
    let e = PostgresAuthority::connect(&other.url("")).expect_err("needs the key");
    assert!(
        e.message.contains("give the secret key by configuration"),
        "{}",
        e.message
    );
}

#[test]
fn next_deadline_follows_leases() {
    let server = require_server!();
    let schema = Schema::new(&server, "deadline");
    let pg = schema.open("");
    assert_eq!(pg.next_deadline().expect("none"), None);
    group_with(&pg, "g1", 1);
    let claim = claim_w0("g1", 700);
    assert!(matches!(
        pg.submit(&claim, 10_000).expect("claim"),
        Decision::Accepted(_)
    ));
    assert_eq!(
        pg.next_deadline().expect("deadline"),
        Some((id("g1"), 10_700))
    );
    // The tick loop skips a backed-off group and sees the next one's deadline.
    group_with(&pg, "g2", 1);
    let claim2 = claim_w0("g2", 900);
    assert!(matches!(
        pg.submit(&claim2, 10_000).expect("claim"),
        Decision::Accepted(_)
    ));
    assert_eq!(
        pg.next_deadline_except(&[]).expect("deadline"),
        Some((id("g1"), 10_700))
    );
    assert_eq!(
        pg.next_deadline_except(&[id("g1")]).expect("deadline"),
        Some((id("g2"), 10_900))
    );
    assert_eq!(
        pg.next_deadline_except(&[id("g1"), id("g2")])
            .expect("none"),
        None
    );
}

#[test]
fn tick_expires_leases_and_is_quiet_otherwise() {
    let server = require_server!();
    let schema = Schema::new(&server, "tick");
    let pg = schema.open("");
    let g = id("g1");
    assert_eq!(pg.tick(&g, 5).expect_err("unknown").code, Code::NotFound);
    group_with(&pg, "g1", 1);
    assert_eq!(pg.tick(&g, 5000).expect("quiet"), None, "nothing is due");
    assert_eq!(
        pg.head_seq(&g).expect("head"),
        2,
        "a quiet tick appends nothing"
    );
    let claim = claim_w0("g1", 700);
    assert!(matches!(
        pg.submit(&claim, 10_000).expect("claim"),
        Decision::Accepted(_)
    ));
    let Some(Decision::Accepted(ev)) = pg.tick(&g, 10_700).expect("due") else {
        panic!("the due tick is accepted")
    };
    assert_eq!(ev.actor, Id::authority());
    assert!(
        matches!(ev.kind, mwp_core::EventKind::LeasesExpired(_)),
        "{ev:?}"
    );
    assert_eq!(pg.next_deadline().expect("deadline"), None);
}

/// The stored snapshot row of `g1` at `seq`: (state_hash, bytes).
fn snapshot_row(c: &mut postgres::Client, group: &str, seq: i64) -> (String, Vec<u8>) {
    let row = c
        .query_one(
            "SELECT state_hash, bytes FROM mwp_snapshots WHERE group_id = $1 AND seq = $2",
            &[&group, &seq],
        )
        .expect("a snapshot row");
    (row.get(0), row.get(1))
}

/// Puts a snapshot row of `g1` in place of every other: (seq, state_hash, bytes).
fn put_snapshot(c: &mut postgres::Client, seq: i64, hash: &str, bytes: &[u8]) {
    c.execute("DELETE FROM mwp_snapshots WHERE group_id = 'g1'", &[])
        .expect("remove the snapshot rows");
    c.execute(
        "INSERT INTO mwp_snapshots (group_id, seq, state_hash, bytes) VALUES ('g1', $1, $2, $3)",
        &[&seq, &hash, &bytes],
    )
    .expect("put a snapshot row");
}

/// Snapshot rows another process wrote are checked on every read that serves or refers to
/// one (`latest_snapshot`, `stored_snapshot`, the `CURSOR_TOO_OLD` reference): one that is not
/// the group's own at its seq is `SNAPSHOT_INVALID` naming the group and the row's seq, never
/// served; a reload skips it for the log. A row past the head row is not read, and does not
/// keep a new snapshot out.
#[test]
fn snapshot_rows_are_checked_on_every_read() {
    let server = require_server!();
    let schema = Schema::new(&server, "snaprows");
    let pg = schema.open("snapshot_every=0&online_window=2");
    let g = id("g1");
    group_with(&pg, "g1", 3); // seq 1..=4
    group_with(&pg, "g2", 3);
    pg.take_snapshot(&g).expect("a snapshot at seq 4");
    pg.take_snapshot(&id("g2")).expect("g2's at seq 4");
    for i in 3..5 {
        let cmd = create_work("g1", "alice", &format!("c{i}"), &format!("w{i}"));
        assert!(matches!(
            pg.submit(&cmd, 1000 + i).expect("create"),
            Decision::Accepted(_)
        ));
    } // head 6, the snapshot at 4
    let truth = state_hash(&pg, &g);
    let mut c = schema.client();
    let (hash, good) = snapshot_row(&mut c, "g1", 4);
    assert_eq!(pg.latest_snapshot(&g).expect("served"), good);
    let too_old = pg.events(&g, 0, 10).expect_err("older than the window");
    assert_eq!(too_old.code, Code::CursorTooOld, "{too_old}");
    assert_eq!(too_old.details["snapshot"]["seq"], json!(4));

    // Every read refuses the row, naming group and seq; a reload reads the log instead.
    let refused = |pg: &PostgresAuthority, seq: u64, needle: &str| {
        let e = pg.latest_snapshot(&g).expect_err("not served");
        assert_eq!(e.code, Code::SnapshotInvalid, "{e}");
        assert!(
            e.message.contains(&format!(
                "group g1 in PostgreSQL: the snapshot row at seq {seq} "
            )),
            "{e}"
        );
        assert!(e.message.contains(needle), "{needle}: {e}");
        assert_eq!(e.details.get("seq"), Some(&json!(seq)), "{e}");
        let stored = AuthorityService::stored_snapshot(pg, &g).expect_err("not served");
        assert_eq!(stored.message, e.message);
        let referred = pg.events(&g, 0, 10).expect_err("not referred to");
        assert_eq!(referred.message, e.message);
        pg.restart();
        assert_eq!(state_hash(pg, &g), truth, "the log is the truth");
    };
    // Bytes flipped.
    let mut flipped = good.clone();
    let at = flipped.len() / 2;
    flipped[at] ^= 0x01;
    put_snapshot(&mut c, 4, &hash, &flipped);
    refused(&pg, 4, "does not verify");
    // Another group's snapshot, at the same seq.
    let (g2_hash, g2_bytes) = snapshot_row(&mut c, "g2", 4);
    put_snapshot(&mut c, 4, &g2_hash, &g2_bytes);
    refused(&pg, 4, "does not verify");
    // A seq column that disagrees with the bytes, below and above theirs.
    put_snapshot(&mut c, 3, &hash, &good);
    refused(&pg, 3, "holds seq 4");
    put_snapshot(&mut c, 5, &hash, &good);
    refused(&pg, 5, "holds seq 4");
    // A state_hash column that is not the bytes' (what a `CURSOR_TOO_OLD` refers to).
    put_snapshot(&mut c, 4, &"0".repeat(64), &good);
    refused(&pg, 4, "says state hash");

    // The group's own snapshot of another history: signed, bound, but not this log's.
    let other = Schema::new(&server, "snaprows_other");
    let forked = other.open("snapshot_every=0");
    assert!(matches!(
        forked.submit(&open_group("g1", 1), 1000).expect("open"),
        Decision::Accepted(_)
    ));
    for i in 0..3 {
        let cmd = create_work("g1", "alice", &format!("x{i}"), &format!("x{i}"));
        assert!(matches!(
            forked.submit(&cmd, 1000).expect("create"),
            Decision::Accepted(_)
        ));
    }
    forked.take_snapshot(&g).expect("seq 4 of another history");
    let (forked_hash, forked_bytes) = snapshot_row(&mut other.client(), "g1", 4);
    put_snapshot(&mut c, 4, &forked_hash, &forked_bytes);
    refused(&pg, 4, "the event at its seq is");

    // The group's own snapshot past the head row (of a longer run of the same commands): not
    // read, and no bar to a new snapshot at the head.
    let longer = Schema::new(&server, "snaprows_longer");
    let ahead = longer.open("snapshot_every=0");
    group_with(&ahead, "g1", 3);
    for i in 3..7 {
        let cmd = create_work("g1", "alice", &format!("c{i}"), &format!("w{i}"));
        assert!(matches!(
            ahead.submit(&cmd, 1000 + i).expect("create"),
            Decision::Accepted(_)
        ));
    }
    ahead.take_snapshot(&g).expect("a snapshot at seq 8");
    let (ahead_hash, ahead_bytes) = snapshot_row(&mut longer.client(), "g1", 8);
    put_snapshot(&mut c, 8, &ahead_hash, &ahead_bytes);
    assert_eq!(
        AuthorityService::stored_snapshot(&pg, &g).expect("none read"),
        None
    );
    let taken = Snapshot::from_cbor(&pg.latest_snapshot(&g).expect("one taken")).expect("cbor");
    assert_eq!(taken.seq, 6);
    assert_eq!(g1_snapshots(&schema), [6, 8], "the new one is stored");
    // The same bytes under a seq column at the head row: they hold seq 8.
    put_snapshot(&mut c, 6, &ahead_hash, &ahead_bytes);
    refused(&pg, 6, "holds seq 8");

    // Put back, the group's own row is served again.
    put_snapshot(&mut c, 4, &hash, &good);
    assert_eq!(pg.latest_snapshot(&g).expect("served"), good);
}

/// The verdict on a snapshot row's bytes is kept for that version of the row: served again,
/// or referred to by `CURSOR_TOO_OLD`, it is not verified again; rewritten by another process
/// (any `UPDATE`, or a `DELETE` and `INSERT`, even of the same bytes), it is verified again,
/// and refused when it does not hold. The rest (columns, chain head against the event and head
/// rows) is checked on every read.
#[test]
fn a_snapshot_verdict_holds_for_its_version_of_the_row_only() {
    let server = require_server!();
    let schema = Schema::new(&server, "verdicts");
    let pg = schema.open("snapshot_every=0&online_window=2");
    let g = id("g1");
    group_with(&pg, "g1", 3); // seq 1..=4
    pg.take_snapshot(&g).expect("a snapshot at seq 4");
    for i in 3..5 {
        let cmd = create_work("g1", "alice", &format!("c{i}"), &format!("w{i}"));
        assert!(matches!(
            pg.submit(&cmd, 1000 + i).expect("create"),
            Decision::Accepted(_)
        ));
    } // head 6, the snapshot at 4
    let mut c = schema.client();
    let (hash, good) = snapshot_row(&mut c, "g1", 4);
    let before = pg.snapshot_verifications();
    assert_eq!(pg.latest_snapshot(&g).expect("served"), good);
    assert_eq!(pg.snapshot_verifications(), before + 1, "verified once");
    for _ in 0..3 {
        assert_eq!(pg.latest_snapshot(&g).expect("served"), good);
        let too_old = pg.events(&g, 0, 10).expect_err("older than the window");
        assert_eq!(too_old.code, Code::CursorTooOld, "{too_old}");
        assert_eq!(too_old.details["snapshot"]["seq"], json!(4));
    }
    assert_eq!(
        pg.snapshot_verifications(),
        before + 1,
        "not verified again"
    );

    let refused = |needle: &str| {
        let e = pg.latest_snapshot(&g).expect_err("not served");
        assert_eq!(e.code, Code::SnapshotInvalid, "{e}");
        assert!(e.message.contains(needle), "{needle}: {e}");
        let referred = pg.events(&g, 0, 10).expect_err("not referred to");
        assert_eq!(referred.message, e.message);
    };
    // Rewritten in place after the verdict: verified again, refused.
    let mut flipped = good.clone();
    let at = flipped.len() / 2;
    flipped[at] ^= 0x01;
    c.execute(
        "UPDATE mwp_snapshots SET bytes = $1 WHERE group_id = 'g1' AND seq = 4",
        &[&flipped],
    )
    .expect("rewrite the row");
    refused("does not verify");
    // Its columns and the rows around it are checked on every read.
    c.execute(
        "UPDATE mwp_snapshots SET bytes = $1 WHERE group_id = 'g1' AND seq = 4",
        &[&good],
    )
    .expect("put the bytes back");
    assert_eq!(pg.latest_snapshot(&g).expect("served again"), good);
    let verified = pg.snapshot_verifications();
    let row4: Vec<u8> = c
        .query_one(
            "SELECT bytes FROM mwp_events WHERE group_id = 'g1' AND seq = 4",
            &[],
        )
        .expect("row")
        .get(0);
    c.execute(
        "UPDATE mwp_events SET bytes = (SELECT bytes FROM mwp_events
           WHERE group_id = 'g1' AND seq = 3) WHERE group_id = 'g1' AND seq = 4",
        &[],
    )
    .expect("swap the event row at its seq");
    let e = pg.latest_snapshot(&g).expect_err("not served");
    assert_eq!(e.code, Code::LogCorrupt, "{e}");
    assert!(
        e.message.contains("the event row at seq 4 holds seq 3"),
        "{e}"
    );
    c.execute(
        "UPDATE mwp_events SET bytes = $1 WHERE group_id = 'g1' AND seq = 4",
        &[&row4],
    )
    .expect("put the event row back");
    assert_eq!(pg.latest_snapshot(&g).expect("served again"), good);
    // The same bytes under another state hash column, from another transaction.
    c.execute(
        "UPDATE mwp_snapshots SET state_hash = $1 WHERE group_id = 'g1' AND seq = 4",
        &[&"0".repeat(64)],
    )
    .expect("rewrite the column");
    refused("says state hash");
    c.execute(
        "UPDATE mwp_snapshots SET state_hash = $1 WHERE group_id = 'g1' AND seq = 4",
        &[&hash],
    )
    .expect("put the column back");
    assert_eq!(pg.latest_snapshot(&g).expect("served again"), good);
    assert!(
        pg.snapshot_verifications() > verified,
        "new versions verified"
    );
}

/// A receipt is answered from the group's verified state, as the file store answers it: a
/// `mwp_receipts` row another process swapped or removed does not change the answer.
#[test]
fn receipts_are_answered_from_the_verified_log_not_the_receipt_rows() {
    let server = require_server!();
    let schema = Schema::new(&server, "receiptrows");
    let pg = schema.open("snapshot_every=0");
    let g = id("g1");
    group_with(&pg, "g1", 2); // alice's c0 at seq 2, c1 at seq 3
    let (alice, c0, c1) = (id("alice"), id("c0"), id("c1"));
    let first = pg.receipt(&g, &alice, &c0).expect("read").expect("c0");
    let second = pg.receipt(&g, &alice, &c1).expect("read").expect("c1");
    assert_eq!((first.seq, second.seq), (2, 3));
    let mut c = schema.client();
    c.batch_execute(
        "UPDATE mwp_receipts SET bytes = (SELECT bytes FROM mwp_receipts
                                          WHERE group_id = 'g1' AND action = 'c1')
         WHERE group_id = 'g1' AND action = 'c0';
         DELETE FROM mwp_receipts WHERE group_id = 'g1' AND action = 'c1';",
    )
    .expect("swap and remove receipt rows");
    pg.restart();
    assert_eq!(pg.receipt(&g, &alice, &c0).expect("read"), Some(first));
    assert_eq!(pg.receipt(&g, &alice, &c1).expect("read"), Some(second));
    assert_eq!(pg.receipt(&g, &alice, &id("c9")).expect("read"), None);
}

/// The event a redaction erases is checked before its redacted form is written: a row that
/// holds another event is `LOG_CORRUPT` naming group and seq, and nothing is written.
#[test]
fn a_redaction_never_rewrites_a_row_it_cannot_verify() {
    let server = require_server!();
    let schema = Schema::new(&server, "redactrow");
    let pg = schema.open("snapshot_every=0");
    let g = id("g1");
    group_with(&pg, "g1", 2); // seq 1..=3
    let mut c = schema.client();
    c.execute(
        "UPDATE mwp_events SET bytes = (SELECT bytes FROM mwp_events
                                        WHERE group_id = 'g1' AND seq = 3)
         WHERE group_id = 'g1' AND seq = 2",
        &[],
    )
    .expect("put seq 3's bytes at seq 2");
    let before: Vec<u8> = c
        .query_one(
            "SELECT bytes FROM mwp_events WHERE group_id = 'g1' AND seq = 2",
            &[],
        )
        .expect("row")
        .get(0);
    let redact = postgres_common::redact_g1(2);
    let e = pg.submit(&redact, 4000).expect_err("refused");
    assert_eq!(e.code, Code::LogCorrupt, "{e}");
    assert!(
        e.message.contains("group g1") && e.message.contains("seq 2"),
        "{e}"
    );
    assert_eq!(pg.head_seq(&g).expect("head"), 3, "nothing appended");
    let after: Vec<u8> = c
        .query_one(
            "SELECT bytes FROM mwp_events WHERE group_id = 'g1' AND seq = 2",
            &[],
        )
        .expect("row")
        .get(0);
    assert_eq!(after, before, "the row is left as it was found");
}

/// `mwp_groups` rows another process wrote cannot stop the tick loop: a row whose group_id is
/// no ID is passed over by the group list and the deadline query, and a deadline row earlier
/// than the group's state says is put back by the tick that finds nothing due.
#[test]
fn deadline_and_group_rows_of_another_process_do_not_stop_the_ticks() {
    let server = require_server!();
    let schema = Schema::new(&server, "deadlinerows");
    let pg = schema.open("snapshot_every=0");
    group_with(&pg, "g1", 1);
    let claim = claim_w0("g1", 700);
    assert!(matches!(
        pg.submit(&claim, 10_000).expect("claim"),
        Decision::Accepted(_)
    ));
    group_with(&pg, "g2", 1); // no lease: no deadline
    let mut c = schema.client();
    c.execute(
        "INSERT INTO mwp_groups (group_id, org, seq, head, next_deadline)
         VALUES ('', 'acme', 1, $1, 5)",
        &[&"0".repeat(64)],
    )
    .expect("a row that names no group");
    assert_eq!(
        pg.groups().expect("listed"),
        [id("g1"), id("g2")],
        "the row is passed over"
    );
    assert_eq!(
        pg.next_deadline().expect("looked past"),
        Some((id("g1"), 10_700))
    );
    // g2's deadline row says a lease is due long ago (and one below zero).
    for early in [1i64, -5] {
        c.execute(
            "UPDATE mwp_groups SET next_deadline = $1 WHERE group_id = 'g2'",
            &[&early],
        )
        .expect("an early deadline");
        let (group, at) = pg.next_deadline().expect("deadline").expect("some");
        assert_eq!(group, id("g2"));
        assert_eq!(
            pg.tick(&group, at.max(1)).expect("quiet"),
            None,
            "nothing due"
        );
        assert_eq!(pg.head_seq(&group).expect("head"), 2, "nothing appended");
        assert_eq!(
            pg.next_deadline().expect("deadline"),
            Some((id("g1"), 10_700)),
            "the tick put g2's deadline back"
        );
    }
}

/// The versions recorded in `mwp_migrations`, in order.
fn migrations(c: &mut postgres::Client) -> Vec<String> {
    postgres_common::first_column(c, "SELECT version::text FROM mwp_migrations ORDER BY 1")
}

/// A migration table another process wrote is never taken for a schema this program may
/// write: a version from the future, one recorded as not applied, or a column of another
/// type is refused on open with `STORAGE` saying what, and nothing is changed.
#[test]
fn a_migration_table_from_the_future_or_garbage_is_refused_and_left_alone() {
    let server = require_server!();
    let schema = Schema::new(&server, "migrations");
    drop(schema.open(""));
    let mut c = schema.client();
    let refused = |c: &mut postgres::Client, needle: &str| {
        let before = migrations(c);
        let e = PostgresAuthority::open(schema.config("")).expect_err("refused");
        assert_eq!(e.code, Code::Storage, "{e}");
        assert!(e.message.contains(needle), "{needle}: {e}");
        assert_eq!(migrations(c), before, "nothing recorded");
    };
    c.execute(
        "INSERT INTO mwp_migrations (version, name) VALUES (3, 'future')",
        &[],
    )
    .expect("a version from the future");
    refused(
        &mut c,
        "the database schema is at version 3, newer than this program's 2; run a newer mwp",
    );
    c.execute("DELETE FROM mwp_migrations WHERE version >= 2", &[])
        .expect("a version recorded as not applied");
    refused(&mut c, "applying migration 2 (audit)");
    c.batch_execute(
        "ALTER TABLE mwp_migrations ALTER COLUMN version TYPE text;
         INSERT INTO mwp_migrations (version, name) VALUES ('two', 'garbage');",
    )
    .expect("a column of another type");
    refused(&mut c, "reading the schema version");
}

/// A page of events holds at most `authority::MAX_PAGE_BYTES` of events plus one, whatever its
/// `limit`: a page of the largest events is cut where its bytes are full, by the same rule
/// the file store's page is (the same commands give the same pages on both), and the next
/// page reads on from there. A cold store catches up through such pages too.
/// `create_work` of `w{n}` in `g1` by alice, its spec 3 MiB of text: a page of events takes
/// three of them before its bytes are full, whatever its limit.
fn big_create_work(n: usize, limits: &mwp_core::Limits) -> mwp_core::Command {
    let envelope = json!({
        "org": "acme", "group": "g1", "actor": "alice", "action": format!("big{n}"),
        "session": 1,
        "body": {"type": "create_work", "work": format!("w{n}"), "after": [],
                 "spec": {"text": "x".repeat(3 << 20)},
                 "contract": {"max_attempts": 3, "backoff_base_ms": 10,
                              "backoff_max_ms": 100, "cost_budget": 100, "risk": "low"}},
        "sig": "00".repeat(64),
    });
    let mut cmd =
        mwp_core::Command::from_json(&serde_json::to_vec(&envelope).expect("json"), limits)
            .expect("within the limits");
    cmd.sign(&SecretKey::for_transcript("alice")).expect("sign");
    cmd
}

#[test]
fn a_page_of_large_events_is_bounded_by_bytes_as_the_file_stores_is() {
    use mwp_core::authority::{page_takes, MAX_PAGE_BYTES};
    use mwp_core::log_format::MAX_RECORD_LEN;
    let server = require_server!();
    let schema = Schema::new(&server, "pagebytes");
    let mut config = schema.config("snapshot_every=0");
    config.limits.max_command_bytes = MAX_RECORD_LEN as usize;
    config.limits.max_payload_bytes = MAX_RECORD_LEN as usize;
    let limits = config.limits.clone();
    let pg = PostgresAuthority::open(config).expect("open");
    let files = tempfile::tempdir().expect("tempdir");
    let store = mwp_host::store::FileStore::open(
        files.path(),
        mwp_host::store::StoreOptions {
            limits: limits.clone(),
            authority_key: Some(SecretKey::for_transcript("@authority")),
            // Segments of 4 MiB: a page spans several, and still reads no further.
            segment_bytes: 4 << 20,
            reserve_bytes: 0,
            ..Default::default()
        },
    )
    .expect("a file store");
    // Events of 3 MiB: a page takes three of them (and the small genesis) before its bytes
    // are full, whatever its limit.
    let big = |n: usize| big_create_work(n, &limits);
    let mut commands = vec![open_group("g1", 1)];
    commands.extend((0..7).map(big)); // seq 2..=8
    for (i, cmd) in commands.iter().enumerate() {
        let now = 1000 + i as u64;
        for decided in [pg.submit(cmd, now), store.submit(cmd, now)] {
            match decided {
                Ok(Decision::Accepted(_)) => {}
                Ok(_) => panic!("not accepted"),
                Err(e) => panic!("not accepted: {e}"),
            }
        }
    }
    let g = id("g1");
    let seqs = |events: Vec<Event>| events.iter().map(|e| e.seq).collect::<Vec<_>>();
    for (after, limit, want) in [
        (0, 1000, vec![1, 2, 3, 4]),
        (4, 1000, vec![5, 6, 7]),
        (7, 1000, vec![8]),
        (1, 2, vec![2, 3]),
        (1, 1000, vec![2, 3, 4]),
    ] {
        let page = pg.events(&g, after, limit).expect("a page");
        // Each event was taken while the ones before it held fewer than the page's bytes.
        let mut taken = 0u64;
        for e in &page {
            assert!(
                page_takes(taken),
                "after {after}: seq {} past the bytes",
                e.seq
            );
            taken += e.to_cbor().expect("cbor").len() as u64;
        }
        assert!(taken < MAX_PAGE_BYTES + u64::from(MAX_RECORD_LEN));
        assert_eq!(
            seqs(page.clone()),
            want,
            "PostgreSQL, after {after} limit {limit}"
        );
        let from_files = store.events(&g, after, limit).expect("a page");
        assert_eq!(
            from_files, page,
            "the file store's page, after {after} limit {limit}"
        );
    }
    // A cold store catches up with the log through pages of bounded bytes, and decides on it.
    pg.restart();
    assert!(matches!(
        pg.submit(&create_work("g1", "alice", "later", "wz"), 9000),
        Ok(Decision::Accepted(_))
    ));
    assert_eq!(pg.head_seq(&g).expect("head"), 9);
}

/// A page of events is checked against the head row it is read up to, as every head read
/// is: event rows past the head row (a head row moved back by another process) are
/// `LOG_CORRUPT` naming the group and the seq, never a page that stops short of them; and
/// a page that reaches the head row ends at the event the head row names.
#[test]
fn a_page_is_checked_against_its_head_row() {
    let server = require_server!();
    let schema = Schema::new(&server, "pagehead");
    let pg = schema.open("snapshot_every=0");
    let g = id("g1");
    group_with(&pg, "g1", 3); // seq 1..=4
    let good = pg.events(&g, 0, 100).expect("log");
    let mut c = schema.client();
    c.execute(
        "UPDATE mwp_groups SET seq = 3, head = (SELECT id FROM mwp_events WHERE group_id = 'g1' AND seq = 3)
         WHERE group_id = 'g1'",
        &[],
    )
    .expect("move the head row back");
    for (after, limit) in [(0, 100), (1, 1), (3, 10)] {
        let e = pg.events(&g, after, limit).expect_err("not served");
        assert_eq!(e.code, Code::LogCorrupt, "{e}");
        assert_eq!(
            e.message,
            "group g1 in PostgreSQL: its head row is at seq 3, but its event rows go on to seq 4"
        );
        assert_eq!(e.details.get("seq"), Some(&json!(4)), "{e}");
    }
    // At its seq again, but naming another event.
    c.execute("UPDATE mwp_groups SET seq = 4 WHERE group_id = 'g1'", &[])
        .expect("move the head row on");
    let e = pg.events(&g, 2, 10).expect_err("not served");
    assert_eq!(e.code, Code::LogCorrupt, "{e}");
    assert!(
        e.message
            .contains("group g1 in PostgreSQL: its head row says event"),
        "{e}"
    );
    assert_eq!(e.details.get("seq"), Some(&json!(4)), "{e}");
    // A page short of the head row is not refused for it.
    assert_eq!(pg.events(&g, 0, 2).expect("below the head"), good[..2]);
    c.execute(
        "UPDATE mwp_groups SET head = (SELECT id FROM mwp_events WHERE group_id = 'g1' AND seq = 4)
         WHERE group_id = 'g1'",
        &[],
    )
    .expect("put the head row back");
    assert_eq!(pg.events(&g, 0, 100).expect("served again"), good);
}

/// A redacted event counts toward a page's bytes as the page serves it (its redacted form),
/// on the file store as in PostgreSQL (which holds only that form): a log with a large event
/// redacted gives the same pages on both.
#[test]
fn a_redacted_event_counts_toward_a_page_as_served_on_every_store() {
    use mwp_core::log_format::MAX_RECORD_LEN;
    let server = require_server!();
    let schema = Schema::new(&server, "pageredact");
    let mut config = schema.config("snapshot_every=0");
    config.limits.max_command_bytes = MAX_RECORD_LEN as usize;
    config.limits.max_payload_bytes = MAX_RECORD_LEN as usize;
    let limits = config.limits.clone();
    let pg = PostgresAuthority::open(config).expect("open");
    let files = tempfile::tempdir().expect("tempdir");
    let store = mwp_host::store::FileStore::open(
        files.path(),
        mwp_host::store::StoreOptions {
            limits: limits.clone(),
            authority_key: Some(SecretKey::for_transcript("@authority")),
            ..Default::default()
        },
    )
    .expect("a file store");
    let big = |n: usize| big_create_work(n, &limits);
    let mut commands = vec![open_group("g1", 1)];
    commands.extend((0..7).map(big));
    commands.push(postgres_common::redact_g1(2));
    for (i, cmd) in commands.iter().enumerate() {
        let now = 1000 + i as u64;
        for decided in [pg.submit(cmd, now), store.submit(cmd, now)] {
            assert!(matches!(decided, Ok(Decision::Accepted(_))), "{decided:?}");
        }
    }
    let g = id("g1");
    let seqs = |events: &[Event]| events.iter().map(|e| e.seq).collect::<Vec<_>>();
    // Seq 2 is redacted: 3 MiB stored once, a few bytes served. Seqs 1 to 4 hold about
    // 6 MiB as served, so the page takes seq 5 too.
    for (after, want) in [(0, vec![1, 2, 3, 4, 5]), (5, vec![6, 7, 8]), (8, vec![9])] {
        let page = pg.events(&g, after, 1000).expect("a page");
        assert_eq!(seqs(&page), want, "PostgreSQL, after {after}");
        let from_files = store.events(&g, after, 1000).expect("a page");
        assert_eq!(from_files, page, "the file store's page, after {after}");
    }
}
