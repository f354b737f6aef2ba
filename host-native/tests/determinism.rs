//! Cross-host determinism: one command stream on one virtual clock (tests/determinism/), with
//! lease expiries the authority ticks on by itself and past the snapshot cadence, gives the
//! same bytes on every authority host: the transcript's output lines (every seq's event id,
//! ticks included), the same snapshot seqs and snapshot bytes, and the same state hash.
//!
//! The memory host's run is checked in as `tests/determinism/stream.json`, with the signed
//! commands and `advance` points, so that the JS hosts (wasm in Node, the Node/Deno file
//! store, IndexedDB in Chromium: js/test/determinism-check.js) replay the very same stream.
//! After an intended change: `MWP_UPDATE_VECTORS=1 cargo test -p mwp-host --test determinism`.

mod postgres_common;

use std::path::PathBuf;

use mwp_core::authority::{Config, Policy};
use mwp_core::memory::MemoryAuthority;
use mwp_core::snapshot::Snapshot;
use mwp_core::state::GroupState;
use mwp_core::transcript::{Host, Runner};
use mwp_core::work::WorkState;
use mwp_core::{Command, Decision, Hash, Id, Result, SecretKey};
use mwp_host::service::AuthorityService;
use mwp_host::store::{FileStore, StoreOptions};
use serde_json::{json, Value};

/// The cadence every host runs the stream under: snapshots at seqs 4, 8 and 12.
const SNAPSHOT_EVERY: u64 = 4;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/determinism")
}

fn authority_key() -> SecretKey {
    SecretKey::for_transcript("@authority")
}

/// Wraps a host: records the stream it is given (each signed command and each `advance`,
/// with its time) and, after each step, the host's latest signed snapshot when it changed.
struct Recorder<H> {
    inner: H,
    latest: fn(&H, &Id) -> Option<Vec<u8>>,
    stream: Vec<Value>,
    snapshots: Vec<Value>,
}

impl<H: Host> Recorder<H> {
    fn new(inner: H, latest: fn(&H, &Id) -> Option<Vec<u8>>) -> Self {
        Recorder {
            inner,
            latest,
            stream: Vec::new(),
            snapshots: Vec::new(),
        }
    }

    fn observe(&mut self, group: &Id) {
        let seq = self.inner.state(group).map_or(0, |s| s.seq);
        // Before the first cadence snapshot, asking for the latest would make one.
        if seq < SNAPSHOT_EVERY {
            return;
        }
        let Some(bytes) = (self.latest)(&self.inner, group) else {
            return;
        };
        let snap = Snapshot::from_cbor(&bytes).expect("a stored snapshot decodes");
        let entry = json!({"seq": snap.seq, "sha256": Hash::of(&bytes).to_hex()});
        if self.snapshots.last() != Some(&entry) {
            self.snapshots.push(entry);
        }
    }
}

impl<H: Host> Host for Recorder<H> {
    fn submit(&mut self, cmd: &Command, now_ms: u64) -> Result<Decision> {
        self.stream.push(json!({"at": now_ms, "command": cmd}));
        let decision = self.inner.submit(cmd, now_ms);
        self.observe(&cmd.group);
        decision
    }
    fn restart(&mut self) -> Result<()> {
        self.inner.restart()
    }
    fn state(&self, group: &Id) -> Option<GroupState> {
        self.inner.state(group)
    }
    fn work_state(&self, group: &Id, work: &Id) -> Option<WorkState> {
        self.inner.work_state(group, work)
    }
    fn advance(&mut self, group: &Id, now_ms: u64) -> Result<Vec<Decision>> {
        self.stream
            .push(json!({"at": now_ms, "advance": group.as_str()}));
        let done = self.inner.advance(group, now_ms);
        self.observe(group);
        done
    }
}

/// What a host made of the scenario.
#[derive(Debug, PartialEq)]
struct Outcome {
    stream: Vec<Value>,
    transcript: Vec<Value>,
    events: Vec<Value>,
    snapshots: Vec<Value>,
    state_hash: String,
}

fn run<H: Host>(host: H, latest: fn(&H, &Id) -> Option<Vec<u8>>) -> (Outcome, H) {
    let scenario = std::fs::read_to_string(dir().join("scenario.jsonl")).expect("scenario");
    let mut rec = Recorder::new(host, latest);
    let (transcript, failed) = {
        let mut runner = Runner::new(&mut rec);
        let out = runner.run_all(&scenario);
        (out, runner.failed())
    };
    assert!(!failed, "the scenario runs as written: {transcript:#?}");
    let group = Id::new("g1").expect("id");
    let state = rec.state(&group).expect("the group is open");
    // Every seq's event id, from the receipts of accepted steps (ticks included).
    let events = transcript
        .iter()
        .filter(|l| l["outcome"] == "accepted")
        .map(|l| json!([l["receipt"]["seq"], l["receipt"]["event_id"]]))
        .collect::<Vec<_>>();
    assert_eq!(
        events.len() as u64,
        state.seq,
        "one accepted line per event"
    );
    let outcome = Outcome {
        stream: rec.stream,
        transcript,
        events,
        snapshots: rec.snapshots,
        state_hash: state.hash().expect("hash").to_hex(),
    };
    (outcome, rec.inner)
}

fn policy() -> Policy {
    Policy {
        snapshot_every: Some(SNAPSHOT_EVERY),
        ..Policy::default()
    }
}

fn memory() -> Outcome {
    let host = MemoryAuthority::with_config(Config::new(authority_key(), policy()));
    run(host, |h, g| {
        h.group(g)?.latest_snapshot().map(|s| s.bytes.clone())
    })
    .0
}

fn stream_json(o: &Outcome) -> String {
    let v = json!({
        "about": "tests/determinism/README.md",
        "authority_secret_key": hex::encode(authority_key().to_bytes()),
        "snapshot_every": SNAPSHOT_EVERY,
        "steps": o.stream,
        "events": o.events,
        "snapshots": o.snapshots,
        "state_hash": o.state_hash,
    });
    serde_json::to_string_pretty(&v).expect("json") + "\n"
}

#[test]
fn the_checked_in_stream_is_the_memory_hosts_run() {
    let expected = stream_json(&memory());
    let path = dir().join("stream.json");
    if std::env::var_os("MWP_UPDATE_VECTORS").is_some() {
        std::fs::write(&path, &expected).expect("write stream.json");
    }
    let stored = std::fs::read_to_string(&path).expect("tests/determinism/stream.json");
    assert_eq!(
        stored, expected,
        "stream.json is stale: MWP_UPDATE_VECTORS=1 cargo test -p mwp-host --test determinism"
    );
    let o = memory();
    let ticks = o
        .transcript
        .iter()
        .filter(|l| l["source"] == "authority" && l["outcome"] == "accepted")
        .count();
    assert_eq!(
        ticks, 3,
        "the authority expired leases by itself three times"
    );
    let seqs: Vec<_> = o.snapshots.iter().map(|s| s["seq"].clone()).collect();
    assert_eq!(seqs, [json!(4), json!(8), json!(12)], "past the cadence");
}

#[test]
fn the_file_store_makes_the_same_bytes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let opts = StoreOptions {
        snapshot_every: Some(SNAPSHOT_EVERY),
        snapshots_kept: 100,
        authority_key: Some(authority_key()),
        background_snapshots: false,
        ..StoreOptions::default()
    };
    let store = FileStore::open(tmp.path(), opts).expect("open");
    let (file, store) = run(store, |s, g| AuthorityService::latest_snapshot(s, g).ok());
    assert_eq!(file, memory());
    // Every cadence snapshot is on disk: the same seqs and the same bytes.
    let on_disk: Vec<_> = [4u64, 8, 12]
        .iter()
        .map(|seq| {
            let path = tmp
                .path()
                .join("groups")
                .join(store_group_dir(&store))
                .join(format!("{seq:020}.snap"));
            std::fs::metadata(&path).map(|_| *seq).unwrap_or(0)
        })
        .collect();
    assert_eq!(on_disk, [4, 8, 12]);
}

/// The name of g1's directory under `groups/`, whatever its encoding.
fn store_group_dir(_store: &FileStore) -> String {
    let groups = std::fs::read_dir(_store.root().join("groups")).expect("groups dir");
    let mut names: Vec<String> = groups
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    names.sort();
    assert_eq!(names.len(), 1, "one group");
    names.remove(0)
}

#[test]
fn postgresql_makes_the_same_bytes() {
    let server = require_server!();
    let schema = postgres_common::Schema::new(&server, "determinism");
    let authority = schema.open(&format!("snapshot_every={SNAPSHOT_EVERY}"));
    let (pg, _) = run(authority, |a, g| {
        // Periodic snapshots are stored after their commits, on threads of their own.
        a.wait_for_snapshots();
        AuthorityService::latest_snapshot(a, g).ok()
    });
    assert_eq!(pg, memory());
}

#[test]
fn the_memory_host_is_deterministic_across_runs() {
    let a = memory();
    let b = memory();
    assert_eq!(a, b);
}
