//! The file store as an authority: same answers as the memory reference, reopen, keys,
//! redaction, the online window, ticks, sticky storage errors.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::*;
use mwp_core::transcript::{run_in_memory, Runner};
use mwp_core::{Code, Decision};
use mwp_host::service::AuthorityService;
use mwp_host::store::backend::{Fault, MemBackend};
use mwp_host::store::FileStore;

#[test]
fn workload_answers_like_the_memory_reference() {
    let be = MemBackend::new();
    let mut rec = Recorder::open(&be, opts());
    let mut runner = Runner::new(&mut rec);
    let got = runner.run_all(&workload());
    let (want, _) = run_in_memory(&workload());
    assert_same_output(&got, &want, "workload");
    let outcomes: Vec<&str> = want
        .iter()
        .map(|v| v["outcome"].as_str().unwrap_or("op"))
        .collect();
    assert!(outcomes.contains(&"duplicate") && outcomes.contains(&"rejected"));
    assert_eq!(
        outcomes.iter().filter(|o| **o == "accepted").count(),
        26,
        "{want:#?}"
    );
    let store = rec.store.take().unwrap();
    let before = store.state_hash(&id("g1")).unwrap();
    let store = store.reopen().unwrap();
    assert_eq!(store.state_hash(&id("g1")).unwrap(), before);
    assert!(
        be.op_log()
            .iter()
            .any(|o| o.contains("00000000000000000008.seg")),
        "segments roll over"
    );
}

#[test]
fn every_transcript_runs_the_same_on_the_file_store() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/transcripts");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let mut store = FileStore::open(tmp.path(), opts()).unwrap();
        let mut runner = Runner::new(&mut store);
        let got = runner.run_all(&text);
        let (want, _) = run_in_memory(&text);
        assert_same_output(&got, &want, &path.display().to_string());
        n += 1;
    }
    assert!(n >= 1);
}

#[test]
fn key_file_is_0600_and_binds_the_directory() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let store = FileStore::open(tmp.path(), Default::default()).unwrap();
    let key = store.authority_key();
    drop(store);
    let meta = std::fs::metadata(tmp.path().join("authority.key")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let again = FileStore::open(tmp.path(), Default::default()).unwrap();
    assert_eq!(again.authority_key(), key, "the key survives a restart");
    drop(again);
    let other = mwp_host::store::StoreOptions {
        authority_key: Some(mwp_core::SecretKey::for_transcript("@authority")),
        ..Default::default()
    };
    assert_eq!(
        FileStore::open(tmp.path(), other).unwrap_err().code,
        Code::Storage
    );
    std::fs::set_permissions(
        tmp.path().join("authority.key"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let e = FileStore::open(tmp.path(), Default::default()).unwrap_err();
    assert!(e.message.contains("0600"), "{e}");
}

#[test]
fn open_group_must_name_this_authority() {
    let tmp = tempfile::tempdir().unwrap();
    let store = FileStore::open(tmp.path(), Default::default()).unwrap();
    let mut rec_store = store;
    let mut runner = Runner::new(&mut rec_store);
    let out = runner.run_all(&workload());
    assert_eq!(out[0]["error"]["code"], "NOT_PERMITTED", "{}", out[0]);
    assert!(
        rec_store.groups().unwrap().is_empty(),
        "nothing was created"
    );
}

#[test]
fn storage_errors_are_sticky() {
    let be = MemBackend::new();
    let mut rec = Recorder::open(&be, opts());
    let text = workload();
    let mut runner = Runner::new(&mut rec);
    for (i, line) in text.lines().enumerate() {
        if i == 3 {
            be.fail_at(be.ops(), Fault::Once);
        }
        runner.run_line(line);
    }
    drop(runner);
    assert!(
        rec.errors.iter().all(|e| e.code == Code::Storage),
        "{:?}",
        rec.errors
    );
    assert!(
        rec.errors.len() > 10,
        "every later command is refused, not retried: {:?} {:?}",
        rec.errors,
        be.op_log()
    );
    assert_eq!(rec.acked.len(), 3);
}

#[test]
fn redaction_erases_stored_values_and_keeps_the_chain() {
    let be = MemBackend::new();
    let mut rec = Recorder::open(&be, opts());
    run(&mut rec, &workload());
    let store = rec.store.take().unwrap();
    let g = id("g1");
    let events = store.events(&g, 0, 100).unwrap();
    let e2 = &events[1];
    e2.verify().unwrap();
    assert!(serde_json::to_string(&e2.kind)
        .unwrap()
        .contains("$redacted"));
    for w in events.windows(2) {
        assert_eq!(w[1].prev, w[0].id);
    }
    for (name, bytes) in all_files(&be, Path::new("/d")) {
        assert!(
            !bytes.windows(SECRET.len()).any(|w| w == SECRET),
            "{name} still holds the value"
        );
    }
    let report = mwp_host::store::fsck_with(Arc::new(be.clone()), Path::new("/d")).unwrap();
    assert!(report.is_clean(), "{:?}", report.findings);
    assert_eq!(report.groups[0].events, events.len() as u64);
    let store = store.reopen().unwrap();
    assert_eq!(store.events(&g, 0, 100).unwrap(), events);
}

#[test]
fn archive_writes_a_final_signed_snapshot() {
    let be = MemBackend::new();
    let mut rec = Recorder::open(&be, opts());
    run(&mut rec, &workload());
    let store = rec.store.take().unwrap();
    let g = id("g1");
    let head = store.head_seq(&g).unwrap();
    let bytes = store.latest_snapshot(&g).unwrap();
    let snap = mwp_core::snapshot::Snapshot::verify_bytes(
        &bytes,
        &store.authority_key(),
        &id("acme"),
        &g,
        head,
    )
    .unwrap();
    assert_eq!(snap.seq, head);
    assert!(snap.state.archived);
}

#[test]
fn replay_older_than_the_window_answers_cursor_too_old() {
    let be = MemBackend::new();
    let mut o = opts();
    o.online_events = Some(5);
    o.snapshot_every = Some(1000);
    let store = FileStore::open_with(Arc::new(be.clone()), Path::new("/d"), o).unwrap();
    let mut store = store;
    let text: String = workload().lines().take(15).collect::<Vec<_>>().join("\n");
    Runner::new(&mut store).run_all(&text);
    let g = id("g1");
    let head = store.head_seq(&g).unwrap();
    assert!(head > 10);
    assert_eq!(store.events(&g, head - 5, 100).unwrap().len(), 5);
    let e = store.events(&g, 0, 100).unwrap_err();
    assert_eq!(e.code, Code::CursorTooOld);
    let snap = &e.details["snapshot"];
    let seq = snap["seq"].as_u64().unwrap();
    assert_eq!(seq, head, "a snapshot was taken for the answer");
    assert_eq!(snap["location"], "/v1/groups/g1/snapshots/latest");
    // Events after the snapshot are always served.
    assert!(store.events(&g, seq, 100).unwrap().is_empty());
}

#[test]
fn ticks_are_signed_by_the_store_and_follow_deadlines() {
    let be = MemBackend::new();
    let mut store = FileStore::open_with(Arc::new(be.clone()), Path::new("/d"), opts()).unwrap();
    let text: String = workload().lines().take(13).collect::<Vec<_>>().join("\n");
    Runner::new(&mut store).run_all(&text);
    let (g, at) = store
        .next_deadline()
        .unwrap()
        .expect("carol's lease has a deadline");
    assert_eq!(g, id("g1"));
    assert_eq!(store.tick(&g, at - 1).unwrap(), None, "nothing due yet");
    match store.tick(&g, at).unwrap() {
        Some(Decision::Accepted(e)) => assert!(e.actor.is_authority()),
        other => panic!("expected an accepted tick, got {other:?}"),
    }
    assert_eq!(store.next_deadline().unwrap(), None);
}

#[test]
fn the_signed_head_names_the_last_durable_event_under_the_store_key() {
    let be = MemBackend::new();
    let mut store = FileStore::open_with(Arc::new(be.clone()), Path::new("/d"), opts()).unwrap();
    let g = id("g1");
    assert_eq!(
        store.sign_head(&g, 5).expect_err("unknown").code,
        Code::NotFound
    );
    let text: String = workload().lines().take(13).collect::<Vec<_>>().join("\n");
    Runner::new(&mut store).run_all(&text);
    let seq = store.head_seq(&g).unwrap();
    let last = store.events(&g, seq - 1, 1).unwrap();
    let head = store.sign_head(&g, 5).unwrap();
    assert_eq!((head.seq, head.id, head.at), (seq, last[0].id, 5));
    head.verify(&store.authority_key(), &g).unwrap();
    // Reopened, the same key signs the same statement.
    let store = store.reopen().unwrap();
    assert_eq!(store.sign_head(&g, 5).unwrap(), head);
}

#[test]
fn preverified_accept_still_rejects_a_wrong_key() {
    use mwp_core::accept::accept_preverified;
    let (lines, _) = (workload(), ());
    let mut mem = mwp_core::memory::MemoryAuthority::new();
    let mut cmds = Vec::new();
    struct Cap<'a>(
        &'a mut mwp_core::memory::MemoryAuthority,
        &'a mut Vec<mwp_core::Command>,
    );
    impl mwp_core::transcript::Host for Cap<'_> {
        fn submit(&mut self, c: &mwp_core::Command, n: u64) -> mwp_core::Result<Decision> {
            self.1.push(c.clone());
            self.0.submit(c, n)
        }
        fn restart(&mut self) -> mwp_core::Result<()> {
            Ok(())
        }
        fn state(&self, g: &mwp_core::Id) -> Option<mwp_core::GroupState> {
            self.0.group(g)?.state().cloned()
        }
        fn work_state(&self, _: &mwp_core::Id, _: &mwp_core::Id) -> Option<mwp_core::WorkState> {
            None
        }
    }
    let one: String = lines.lines().take(1).collect();
    Runner::new(&mut Cap(&mut mem, &mut cmds)).run_all(&one);
    let state = mem.group(&id("g1")).unwrap().state().unwrap().clone();
    let mut cmd = cmds[0].clone();
    cmd.action = id("other");
    // Signature now wrong; a caller claiming it verified under another key is not trusted.
    let wrong = mwp_core::SecretKey::for_transcript("mallory").public();
    let e = accept_preverified(Some(&state), &cmd, 0, &Default::default(), &wrong)
        .and_then(Decision::into_result)
        .unwrap_err();
    assert_eq!(e.code, Code::BadSignature);
}

#[test]
fn fsck_checks_a_real_data_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = FileStore::open(tmp.path(), opts()).unwrap();
    Runner::new(&mut store).run_all(&workload());
    drop(store);
    let report = mwp_host::store::fsck(tmp.path()).unwrap();
    assert!(report.is_clean(), "{:?}", report.findings);
    assert_eq!(report.groups.len(), 1);
    assert!(report.groups[0].snapshots_ok >= 1);
    let seg = tmp.path().join("groups/g1/00000000000000000001.seg");
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[300] ^= 0x10;
    std::fs::write(&seg, &bytes).unwrap();
    let report = mwp_host::store::fsck(tmp.path()).unwrap();
    assert!(!report.is_clean());
    let f = &report.findings[0];
    assert_eq!(
        (f.code, f.file.as_str(), f.offset),
        (Code::LogCorrupt, seg.to_str().unwrap(), Some(192))
    );
    assert_eq!(std::fs::read(&seg).unwrap(), bytes, "fsck changes nothing");
}

/// The zeros reserved after a segment's records double from 64 KiB up to `reserve_bytes`
/// instead of taking `reserve_bytes` at a group's first accept (docs/format.md, "Reserved
/// space").
#[test]
fn reserved_space_doubles_from_64_kib() {
    let be = MemBackend::new();
    let options = mwp_host::store::StoreOptions {
        segment_bytes: 64 << 20,
        reserve_bytes: 4 << 20,
        ..opts()
    };
    let mut rec = Recorder::open(&be, options);
    let text: Vec<String> = workload().lines().take(4).map(str::to_owned).collect();
    run(&mut rec, &text.join("\n"));
    assert!(rec.errors.is_empty(), "{:?}", rec.errors);
    let seg = Path::new("/d/groups/g1/00000000000000000001.seg");
    let len = be.read_file(seg).unwrap().len() as u64;
    assert!(
        (64 << 10..128 << 10).contains(&len),
        "one reservation of 64 KiB after the first records, not 4 MiB: {len} bytes"
    );
}

/// The file store answering through `submit_staged` (decided on the caller's thread, the
/// answer awaited while a committer flushes), as `mwp serve` submits; with `outside`, the
/// command is decided outside any runtime (a library caller's thread) and only the answer is
/// awaited on one.
struct Staged {
    store: FileStore,
    rt: tokio::runtime::Runtime,
    outside: bool,
}

impl mwp_core::transcript::Host for Staged {
    fn submit(&mut self, cmd: &mwp_core::Command, now_ms: u64) -> mwp_core::Result<Decision> {
        let _in_rt = (!self.outside).then(|| self.rt.enter());
        match self.store.submit_staged(cmd, now_ms) {
            Some(answer) => self.rt.block_on(answer),
            // Opening a group goes through `submit`.
            None => AuthorityService::submit(&self.store, cmd, now_ms),
        }
    }

    fn restart(&mut self) -> mwp_core::Result<()> {
        mwp_core::transcript::Host::restart(&mut self.store)
    }

    fn state(&self, group: &mwp_core::Id) -> Option<mwp_core::GroupState> {
        mwp_core::transcript::Host::state(&self.store, group)
    }

    fn work_state(&self, group: &mwp_core::Id, work: &mwp_core::Id) -> Option<mwp_core::WorkState> {
        mwp_core::transcript::Host::work_state(&self.store, group, work)
    }

    fn advance(&mut self, group: &mwp_core::Id, now_ms: u64) -> mwp_core::Result<Vec<Decision>> {
        mwp_core::transcript::Host::advance(&mut self.store, group, now_ms)
    }
}

#[test]
fn staged_submits_answer_like_the_memory_reference_and_survive_a_reopen() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/transcripts");
    let mut texts: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("jsonl"))
        .map(|p| {
            (
                p.display().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    texts.push(("workload".into(), workload()));
    for ((name, text), outside) in texts
        .iter()
        .flat_map(|t| [(t.clone(), false), (t.clone(), true)])
    {
        let name = format!("{name} (decided outside a runtime: {outside})");
        let tmp = tempfile::tempdir().unwrap();
        let mut host = Staged {
            store: FileStore::open(tmp.path(), opts()).unwrap(),
            rt: tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .build()
                .unwrap(),
            outside,
        };
        let got = Runner::new(&mut host).run_all(&text);
        let (want, _) = run_in_memory(&text);
        assert_same_output(&got, &want, &name);
        let groups = host.store.groups().unwrap();
        let heads: Vec<u64> = groups
            .iter()
            .map(|g| host.store.head_seq(g).unwrap())
            .collect();
        let store = host.store.reopen().unwrap();
        let again: Vec<u64> = groups.iter().map(|g| store.head_seq(g).unwrap()).collect();
        assert_eq!(again, heads, "{name}: every answered event is durable");
    }
}

/// A page of events counts each event as it serves it: a redacted event by its redacted form
/// (a few bytes), not by the length its erased record keeps, as PostgreSQL counts its
/// redacted row (`mwp_core::authority::page_takes`).
#[test]
fn a_redacted_event_counts_toward_a_page_as_served() {
    use mwp_core::authority::{page_takes, MAX_PAGE_BYTES};
    use mwp_core::log_format::MAX_RECORD_LEN;
    use serde_json::json;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = mwp_host::store::StoreOptions {
        authority_key: Some(mwp_core::SecretKey::for_transcript("@authority")),
        ..Default::default()
    };
    options.limits.max_command_bytes = MAX_RECORD_LEN as usize;
    options.limits.max_payload_bytes = MAX_RECORD_LEN as usize;
    let limits = options.limits.clone();
    let store = FileStore::open(dir.path(), options).expect("a file store");
    let signed = |actor: &str, action: &str, body: serde_json::Value| {
        let envelope = json!({
            "org": "acme", "group": "g1", "actor": actor, "action": action, "session": 1,
            "body": body, "sig": "00".repeat(64),
        });
        let bytes = serde_json::to_vec(&envelope).expect("json");
        let mut cmd = mwp_core::Command::from_json(&bytes, &limits).expect("a command");
        cmd.sign(&mwp_core::SecretKey::for_transcript(actor))
            .expect("sign");
        cmd
    };
    let key = |actor: &str| mwp_core::SecretKey::for_transcript(actor).public().to_hex();
    let mut commands = vec![signed(
        "alice",
        "open",
        json!({"type": "open_group", "mission": "m", "title": "t",
               "authority_key": key("@authority"),
               "members": [{"actor": "alice", "role": "owner", "key": key("alice")}]}),
    )];
    // Seqs 2..=6 of 3 MiB each, then seq 7 redacts seq 2.
    for n in 0..5 {
        commands.push(signed(
            "alice",
            &format!("big{n}"),
            json!({"type": "create_work", "work": format!("w{n}"), "after": [],
                   "spec": {"text": "x".repeat(3 << 20)},
                   "contract": {"max_attempts": 3, "backoff_base_ms": 10,
                                "backoff_max_ms": 100, "cost_budget": 100, "risk": "low"}}),
        ));
    }
    commands.push(signed(
        "alice",
        "r1",
        json!({"type": "redact", "seq": 2, "reason": "gdpr"}),
    ));
    for (i, cmd) in commands.iter().enumerate() {
        let decided = store.submit(cmd, 1000 + i as u64);
        assert!(matches!(decided, Ok(Decision::Accepted(_))), "{decided:?}");
    }
    let g = id("g1");
    let check = |store: &FileStore| {
        let page = store.events(&g, 0, 1000).expect("a page");
        let mut taken = 0u64;
        for e in &page {
            assert!(
                page_takes(taken),
                "seq {} taken past the page's bytes",
                e.seq
            );
            taken += e.to_cbor().expect("cbor").len() as u64;
        }
        assert!(
            taken >= MAX_PAGE_BYTES,
            "a page cut with {taken} bytes served"
        );
        // Seq 2 served as a few bytes: seqs 1..=4 hold about 6 MiB, so seq 5 is taken too.
        assert_eq!(
            page.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5]
        );
    };
    check(&store);
    check(&store.reopen().expect("reopen"));
}
