//! Shared helpers of the store tests: a scripted workload, a recording transcript host and
//! the checks every reopened store must pass.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use mwp_core::memory::MemoryAuthority;
use mwp_core::transcript::{Host, Runner};
use mwp_core::{Command, Decision, GroupState, Id, Receipt, Result, SecretKey, WorkState};
use mwp_host::service::AuthorityService;
use mwp_host::store::backend::{Backend, MemBackend};
use mwp_host::store::{FileStore, StoreOptions};

/// The secret the workload puts in an opaque value that is later redacted.
pub const SECRET: &[u8] = b"s3cr3t-spec";

/// Store options for tests: the transcript authority key, small segments, frequent and
/// synchronous snapshots.
pub fn opts() -> StoreOptions {
    StoreOptions {
        authority_key: Some(SecretKey::for_transcript("@authority")),
        snapshot_every: Some(6),
        segment_bytes: 2048,
        background_snapshots: false,
        ..StoreOptions::default()
    }
}

pub fn id(s: &str) -> Id {
    Id::new(s).expect("test ids are valid")
}

const CONTRACT: &str = r#"{"max_attempts": 3, "backoff_base_ms": 100, "backoff_max_ms": 1000, "cost_budget": 10, "risk": "low"}"#;

/// A scripted workload touching every path of the store: creation, commits, rejections,
/// duplicates, a tick, a redaction, segment rollovers, snapshots and the archive.
pub fn workload() -> String {
    let mut l: Vec<String> = vec![
        r#"{"at": 1000, "org": "acme", "group": "g1", "actor": "alice", "action": "open", "body": {"type": "open_group", "mission": "m1", "title": "Crash test", "members": [{"actor": "alice", "role": "owner"}, {"actor": "bob", "role": "worker"}, {"actor": "carol", "role": "worker"}]}}"#.into(),
        format!(r#"{{"actor": "alice", "action": "c1", "body": {{"type": "create_work", "work": "w1", "contract": {CONTRACT}, "after": [], "spec": {{"do": "build", "note": "s3cr3t-spec"}}}}}}"#),
        format!(r#"{{"actor": "alice", "action": "c2", "body": {{"type": "create_work", "work": "w2", "contract": {CONTRACT}, "after": ["w1"], "spec": {{"do": "test"}}}}}}"#),
        format!(r#"{{"actor": "alice", "action": "c3", "body": {{"type": "create_work", "work": "w3", "contract": {CONTRACT}, "after": [], "spec": {{"do": "docs"}}}}}}"#),
        r#"{"actor": "bob", "action": "b1", "expect_rev": 1, "body": {"type": "claim_work", "work": "w1", "lease_ms": 30000, "start_within_ms": 5000}}"#.into(),
        r#"{"actor": "bob", "action": "b1", "expect_rev": 1, "body": {"type": "claim_work", "work": "w1", "lease_ms": 30000, "start_within_ms": 5000}}"#.into(),
        r#"{"at": 2000, "actor": "bob", "action": "b2", "body": {"type": "start_work", "work": "w1", "lease": "w1#1"}}"#.into(),
        r#"{"actor": "bob", "action": "b3", "body": {"type": "checkpoint", "work": "w1", "lease": "w1#1", "data": {"step": 1}}}"#.into(),
        r#"{"actor": "bob", "action": "b4", "expect_rev": 4, "body": {"type": "claim_work", "work": "w1", "lease_ms": 30000, "start_within_ms": 5000}}"#.into(),
        r#"{"actor": "bob", "action": "b5", "body": {"type": "start_work", "work": "w1", "lease": "w1#2"}}"#.into(),
        r#"{"actor": "carol", "action": "k0", "body": {"type": "start_work", "work": "w1", "lease": "w1#2"}}"#.into(),
        r#"{"actor": "bob", "action": "b6", "body": {"type": "submit", "work": "w1", "lease": "w1#2", "result": {"ok": true}}}"#.into(),
        r#"{"actor": "carol", "action": "k1", "expect_rev": 1, "body": {"type": "claim_work", "work": "w3", "lease_ms": 1000, "start_within_ms": 500}}"#.into(),
        r#"{"at": 10000, "actor": "@authority", "action": "t1", "body": {"type": "tick"}}"#.into(),
        r#"{"actor": "@authority", "action": "t2", "body": {"type": "tick"}}"#.into(),
        r#"{"actor": "alice", "action": "r1", "body": {"type": "redact", "seq": 2, "reason": "pii"}}"#.into(),
    ];
    for i in 10..22 {
        l.push(format!(
            r#"{{"actor": "alice", "action": "c{i}", "body": {{"type": "create_work", "work": "w{i}", "contract": {CONTRACT}, "after": ["w1"], "spec": {{"n": {i}, "pad": "{}"}}}}}}"#,
            "x".repeat(40)
        ));
    }
    l.push(
        r#"{"actor": "alice", "action": "arch", "body": {"type": "archive", "reason": "done"}}"#
            .into(),
    );
    l.push(r#"{"actor": "alice", "action": "late", "body": {"type": "cancel", "work": "w2", "reason": "late"}}"#.into());
    l.join("\n")
}

/// A transcript host over a file store that records every command and every answer that
/// reached the caller (what a client would have been told).
#[derive(Default)]
pub struct Recorder {
    pub store: Option<FileStore>,
    /// Receipts handed out: the acknowledged events.
    pub acked: Vec<Receipt>,
    /// Every command submitted, by (actor, action).
    pub cmds: BTreeMap<(Id, Id), Command>,
    /// Errors seen.
    pub errors: Vec<mwp_core::Error>,
}

impl Recorder {
    pub fn open(be: &MemBackend, opts: StoreOptions) -> Self {
        let store = FileStore::open_with(Arc::new(be.clone()), Path::new("/d"), opts);
        let mut r = Recorder::default();
        match store {
            Ok(s) => r.store = Some(s),
            Err(e) => r.errors.push(e),
        }
        r
    }
}

impl Host for Recorder {
    fn submit(&mut self, cmd: &Command, now_ms: u64) -> Result<Decision> {
        self.cmds
            .insert((cmd.actor.clone(), cmd.action.clone()), cmd.clone());
        let Some(store) = &self.store else {
            return Err(mwp_core::Error::new(
                mwp_core::Code::Storage,
                "store did not open",
            ));
        };
        let d = AuthorityService::submit(store, cmd, now_ms);
        match &d {
            Ok(Decision::Accepted(e)) => self.acked.push(e.receipt()),
            Ok(Decision::Duplicate(r)) => self.acked.push(r.clone()),
            Ok(Decision::Rejected(r)) => self.errors.push(r.clone().into_error()),
            Err(e) => self.errors.push(e.clone()),
        }
        d
    }
    fn restart(&mut self) -> Result<()> {
        match &mut self.store {
            Some(s) => Host::restart(s),
            None => Ok(()),
        }
    }
    fn state(&self, group: &Id) -> Option<GroupState> {
        self.store.as_ref().and_then(|s| Host::state(s, group))
    }
    fn work_state(&self, group: &Id, work: &Id) -> Option<WorkState> {
        self.store
            .as_ref()
            .and_then(|s| Host::work_state(s, group, work))
    }
}

/// Runs the workload on a recorder.
pub fn run(rec: &mut Recorder, text: &str) {
    let mut runner = Runner::new(rec);
    runner.run_all(text);
}

/// Every file of a memory file system, with its bytes.
pub fn all_files(be: &MemBackend, dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let Ok(names) = be.list(dir) else { return out };
    for n in names {
        let p = dir.join(&n);
        if be.is_dir(&p) {
            out.extend(all_files(be, &p));
        } else if let Ok(b) = be.read_file(&p) {
            out.push((p.display().to_string(), b));
        }
    }
    out
}

/// The checks after a crash: the store reopens, every acknowledged receipt is there byte for
/// byte, the log replays on the reference model to the same events and state hash, redacted
/// values are gone from every file, and fsck finds no damage. Returns the reopened store.
pub fn check_reopened(image: &MemBackend, rec: &Recorder, context: &str) -> FileStore {
    let store = FileStore::open_with(Arc::new(image.clone()), Path::new("/d"), opts())
        .unwrap_or_else(|e| panic!("{context}: reopen failed: {e}"));
    let g = id("g1");
    for r in &rec.acked {
        let got = store.receipt(&r.group, &r.actor, &r.action).unwrap();
        assert_eq!(
            got.as_ref(),
            Some(r),
            "{context}: acknowledged receipt lost or changed"
        );
    }
    let events = if store.groups().unwrap().contains(&g) {
        store.events(&g, 0, usize::MAX).unwrap()
    } else {
        Vec::new()
    };
    let max_acked = rec
        .acked
        .iter()
        .filter(|r| r.group == g)
        .map(|r| r.seq)
        .max()
        .unwrap_or(0);
    assert!(
        events.len() as u64 >= max_acked,
        "{context}: log shorter than acknowledged"
    );
    // Reference: the memory authority fed the same commands, in the log's order.
    let mut reference = MemoryAuthority::new();
    let mut redacted_log = false;
    for e in &events {
        let cmd = rec
            .cmds
            .get(&(e.actor.clone(), e.action.clone()))
            .unwrap_or_else(|| panic!("{context}: event {} has no command", e.seq));
        match reference.submit(cmd, e.at) {
            Ok(Decision::Accepted(r)) => {
                assert_eq!(
                    r.id, e.id,
                    "{context}: event {} differs from the reference",
                    e.seq
                )
            }
            other => panic!(
                "{context}: reference did not accept seq {}: {other:?}",
                e.seq
            ),
        }
        if matches!(e.kind, mwp_core::EventKind::EventRedacted(_)) {
            redacted_log = true;
        }
    }
    let want = reference
        .group(&g)
        .and_then(|m| m.state())
        .map(|s| s.hash().unwrap());
    assert_eq!(
        store.state_hash(&g).unwrap(),
        want,
        "{context}: state hash differs from the reference"
    );
    if redacted_log {
        let two = &events[1];
        let json = serde_json::to_string(&two.kind).unwrap();
        assert!(
            json.contains("$redacted"),
            "{context}: seq 2 is served unredacted"
        );
        for (name, bytes) in all_files(image, Path::new("/d")) {
            assert!(
                !bytes.windows(SECRET.len()).any(|w| w == SECRET),
                "{context}: redacted value still stored in {name}"
            );
        }
    }
    let report = mwp_host::store::fsck_with(Arc::new(image.clone()), Path::new("/d")).unwrap();
    assert!(
        report.is_clean(),
        "{context}: fsck found damage: {:?}",
        report.findings
    );
    store
}

/// Asserts two transcript outputs are equal, printing only the first differing line.
pub fn assert_same_output(got: &[serde_json::Value], want: &[serde_json::Value], context: &str) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g, w, "{context}: line {} differs", i + 1);
    }
    assert_eq!(got.len(), want.len(), "{context}: line counts differ");
}
